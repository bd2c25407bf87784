/* Shared helpers: RFC 3339 times, Kubernetes quantities, base64, buffers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "spotdrain/util.h"

static void test_rfc3339(void **state)
{
        uint64_t t;
        assert_int_equal(parse_rfc3339("2026-11-30T06:00:00Z", &t), 0);
        assert_int_equal(t, 1796018400ULL * 1000000ULL);
        uint64_t u;
        assert_int_equal(parse_rfc3339("2026-11-30T07:30:00+01:30", &u), 0);
        assert_int_equal(u, t);
        assert_int_equal(parse_rfc3339("2026-11-30T06:00:00.25Z", &u), 0);
        assert_int_equal(u - t, 250000);
        char buf[32];
        assert_int_equal(format_rfc3339(t + 999999, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "2026-11-30T06:00:00Z");
        /* Milliseconds, truncated, and read back to the millisecond. */
        assert_int_equal(format_rfc3339_msec(t + 999999, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "2026-11-30T06:00:00.999Z");
        assert_int_equal(parse_rfc3339(buf, &u), 0);
        assert_int_equal(u, t + 999000);
        assert_int_equal(format_rfc3339_msec(t + 5000, buf, sizeof(buf)), 0);
        assert_string_equal(buf, "2026-11-30T06:00:00.005Z");
        assert_int_equal(format_rfc3339_msec(t, buf, 24), -ENOBUFS);
        /* Short or malformed offsets are refused without reading past the string. */
        const char *bad[] = { "2026-11-30T06:00:00+1:2",   "2026-11-30T06:00:00+01",
                              "2026-11-30T06:00:00",       "2026-11-30T06:00:00Zx",
                              "2026-11-30 06:00:00Z",      "2026-11-30T06:00:00.Z",
                              "2026-11-30T06:00:00+24:00", "" };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                char *copy = strdup(bad[i]);
                assert_int_equal(parse_rfc3339(copy, &u), -EINVAL);
                free(copy);
        }
}

static void test_quantities(void **state)
{
        int64_t v;
        assert_int_equal(parse_cpu_millis("250m", &v), 0);
        assert_int_equal(v, 250);
        assert_int_equal(parse_cpu_millis("2", &v), 0);
        assert_int_equal(v, 2000);
        assert_int_equal(parse_cpu_millis("1.5", &v), 0);
        assert_int_equal(v, 1500);
        assert_int_equal(parse_cpu_millis("2Gi", &v), -EINVAL);
        assert_int_equal(parse_cpu_millis("-1", &v), -EINVAL);
        assert_int_equal(parse_bytes("64Gi", &v), 0);
        assert_int_equal(v, 64LL << 30);
        assert_int_equal(parse_bytes("512M", &v), 0);
        assert_int_equal(v, 512000000LL);
        assert_int_equal(parse_bytes("1024", &v), 0);
        assert_int_equal(v, 1024);
        assert_int_equal(parse_bytes("12Qi", &v), -EINVAL);
        assert_int_equal(parse_bytes("", &v), -EINVAL);
}

/* Written back the way Kubernetes writes them, so that a message reads as the manifest does. */
static void test_quantities_format(void **state)
{
        char b[32];
        format_cpu_millis(2000, b, sizeof(b));
        assert_string_equal(b, "2");
        format_cpu_millis(500, b, sizeof(b));
        assert_string_equal(b, "500m");
        format_cpu_millis(1500, b, sizeof(b));
        assert_string_equal(b, "1500m");
        format_bytes(512LL << 20, b, sizeof(b));
        assert_string_equal(b, "512Mi");
        format_bytes(3LL << 30, b, sizeof(b));
        assert_string_equal(b, "3Gi");
        format_bytes(1536LL << 10, b, sizeof(b));
        assert_string_equal(b, "1536Ki");
        format_bytes(1000, b, sizeof(b));
        assert_string_equal(b, "1000");
}

static void test_base64(void **state)
{
        const char *plain = "spot\x01\xff notice";
        _cleanup_free_ char *enc = base64_encode((const unsigned char *)plain, strlen(plain));
        assert_non_null(enc);
        unsigned char *dec = NULL;
        size_t n;
        assert_int_equal(base64_decode(enc, strlen(enc), &dec, &n), 0);
        assert_int_equal(n, strlen(plain));
        assert_memory_equal(dec, plain, n);
        free(dec);
        assert_int_equal(base64_decode("ab$c", 4, &dec, &n), -EINVAL);
        _cleanup_free_ char *one = base64_encode((const unsigned char *)"a", 1);
        assert_string_equal(one, "YQ==");
}

static void test_buf(void **state)
{
        struct buf b = { 0 };
        for (int i = 0; i < 1000; i++)
                assert_int_equal(buf_printf(&b, "%d,", i), 0);
        assert_int_equal(b.len, strlen(b.data));
        assert_true(startswith(b.data, "0,1,2,"));
        buf_free(&b);
        assert_null(b.data);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_rfc3339),
                cmocka_unit_test(test_quantities),
                cmocka_unit_test(test_quantities_format),
                cmocka_unit_test(test_base64),
                cmocka_unit_test(test_buf),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
