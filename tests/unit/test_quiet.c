/* controller/quiet.h: at most one line per (reason, sender) a minute, the rest counted and told once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "controller/quiet.h"

#define SEC UINT64_C(1000000)

struct told {
        unsigned calls;
        uint64_t held;
        char last[64];
};

static void on_told(const char *reason, const char *sender, uint64_t held, void *userdata)
{
        struct told *t = userdata;
        t->calls++;
        t->held += held;
        snprintf(t->last, sizeof(t->last), "%s/%s", reason, sender);
}

static void test_once_a_minute(void **state)
{
        static struct quiet q;
        struct told t = {};
        uint64_t now = 1000 * SEC;

        memset(&q, 0, sizeof(q));
        assert_true(quiet_allow(&q, "malformed", "AIDA1", now));
        /* Another reason, another sender: each its own line. */
        assert_true(quiet_allow(&q, "unrecognized", "AIDA1", now));
        assert_true(quiet_allow(&q, "malformed", "AIDA2", now));
        for (int i = 0; i < 1999; i++)
                assert_false(quiet_allow(&q, "malformed", "AIDA1", now + (uint64_t)i * 1000));
        /* Before the minute ends nothing is told; the next due time is the minute's end. */
        assert_int_equal(quiet_flush(&q, now + 30 * SEC, false, on_told, &t), now + QUIET_INTERVAL_USEC);
        assert_int_equal(t.calls, 0);
        /* After the minute, still held until told. */
        assert_false(quiet_allow(&q, "malformed", "AIDA1", now + 61 * SEC));
        assert_int_equal(quiet_flush(&q, now + 61 * SEC, false, on_told, &t), 0);
        assert_int_equal(t.calls, 1);
        assert_int_equal(t.held, 2000);
        assert_string_equal(t.last, "malformed/AIDA1");
        /* The summary started a new minute: the next one is held, and told at the stop (all). */
        assert_false(quiet_allow(&q, "malformed", "AIDA1", now + 62 * SEC));
        assert_int_equal(quiet_flush(&q, now + 63 * SEC, true, on_told, &t), 0);
        assert_int_equal(t.calls, 2);
        assert_int_equal(t.held, 2001);
        /* A quiet minute later, a line again. */
        assert_true(quiet_allow(&q, "malformed", "AIDA1", now + 200 * SEC));
}

static void test_oldest_forgotten(void **state)
{
        static struct quiet q;
        char sender[16];
        uint64_t now = 1000 * SEC;

        memset(&q, 0, sizeof(q));
        for (int i = 0; i <= QUIET_SLOTS; i++) {
                snprintf(sender, sizeof(sender), "s%d", i);
                assert_true(quiet_allow(&q, "no-node", sender, now + (uint64_t)i));
        }
        /* s0, the oldest, was forgotten for s64: it gets a line again; s2, still remembered, does not. */
        assert_true(quiet_allow(&q, "no-node", "s0", now + 100));
        assert_false(quiet_allow(&q, "no-node", "s2", now + 100));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_once_a_minute),
                cmocka_unit_test(test_oldest_forgotten),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
