/* The watch stream's decoding without a network: the line framer (chunk boundaries, the line limit, the
 * last line without its newline) and the event decoder (src/kube/watch_decode.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/kube.h"

/* Takes every complete line into out ("line|line|"), returns how many, or the error. */
static int take_lines(struct kube_line_framer *f, char *out, size_t cap)
{
        const char *line;
        size_t len;
        int r, n = 0;
        while ((r = kube_line_framer_next(f, &line, &len)) > 0) {
                size_t used = strlen(out);
                assert_true(used + len + 2 <= cap);
                memcpy(out + used, line, len);
                out[used + len] = '|';
                out[used + len + 1] = 0;
                n++;
        }
        return r < 0 ? r : n;
}

static void test_chunk_boundaries(void **state)
{
        struct kube_line_framer f;
        kube_line_framer_init(&f, 0);
        char out[256] = "";
        const char *rest;
        /* A line in three chunks, a chunk holding the end of one line, an empty line and a start. */
        assert_int_equal(kube_line_framer_feed(&f, "ab", 2), 0);
        assert_int_equal(take_lines(&f, out, sizeof(out)), 0);
        assert_int_equal(kube_line_framer_feed(&f, "c", 1), 0);
        assert_int_equal(take_lines(&f, out, sizeof(out)), 0);
        assert_int_equal(kube_line_framer_feed(&f, "d\nef\n\ng", 7), 0);
        assert_int_equal(take_lines(&f, out, sizeof(out)), 3);
        assert_string_equal(out, "abcd|ef||");
        assert_int_equal(kube_line_framer_rest(&f, &rest), 1);
        assert_memory_equal(rest, "g", 1);
        /* The rest goes on; a newline alone completes it. */
        assert_int_equal(kube_line_framer_feed(&f, "h", 1), 0);
        assert_int_equal(kube_line_framer_feed(&f, "\n", 1), 0);
        assert_int_equal(take_lines(&f, out, sizeof(out)), 1);
        assert_string_equal(out, "abcd|ef||gh|");
        assert_int_equal(kube_line_framer_rest(&f, &rest), 0);
        /* An empty chunk changes nothing; reset drops what is buffered. */
        assert_int_equal(kube_line_framer_feed(&f, "", 0), 0);
        assert_int_equal(kube_line_framer_feed(&f, "x\ny", 3), 0);
        kube_line_framer_reset(&f);
        assert_int_equal(take_lines(&f, out, sizeof(out)), 0);
        assert_int_equal(kube_line_framer_rest(&f, &rest), 0);
        kube_line_framer_free(&f);
        /* A framer never fed has no rest, and frees. */
        struct kube_line_framer empty = { 0 };
        assert_int_equal(kube_line_framer_rest(&empty, &rest), 0);
        assert_string_equal(rest, "");
        kube_line_framer_free(&empty);
}

/* A 4 MiB line in 64-byte chunks: the search resumes where it stopped (rescanning the line from its start
 * on every chunk, as the watch once did, is 65,536 scans of 2 MiB on average). */
static void test_large_line_resumes(void **state)
{
        enum {
                LINE = 4 * 1024 * 1024,
                CHUNK = 64
        };
        struct kube_line_framer f = { 0 };
        char chunk[CHUNK];
        memset(chunk, 'x', sizeof(chunk));
        const char *line;
        size_t len;
        for (size_t fed = 0; fed < LINE; fed += CHUNK) {
                assert_int_equal(kube_line_framer_feed(&f, chunk, CHUNK), 0);
                assert_int_equal(kube_line_framer_next(&f, &line, &len), 0);
                assert_int_equal(f.scanned, fed + CHUNK);
        }
        assert_int_equal(kube_line_framer_feed(&f, "\nnext", 5), 0);
        assert_int_equal(kube_line_framer_next(&f, &line, &len), 1);
        assert_int_equal(len, LINE);
        assert_int_equal(line[0], 'x');
        assert_int_equal(line[LINE - 1], 'x');
        assert_int_equal(kube_line_framer_next(&f, &line, &len), 0);
        /* What followed moves to the front once, with the next chunk. */
        assert_int_equal(kube_line_framer_feed(&f, "\n", 1), 0);
        assert_int_equal(f.start, 0);
        assert_int_equal(kube_line_framer_next(&f, &line, &len), 1);
        assert_int_equal(len, 4);
        assert_memory_equal(line, "next", 4);
        kube_line_framer_free(&f);
}

static void test_max_line(void **state)
{
        struct kube_line_framer f;
        kube_line_framer_init(&f, 8);
        char out[64] = "";
        /* Exactly the limit passes, its newline not counted. */
        assert_int_equal(kube_line_framer_feed(&f, "12345678\n12345678", 17), 0);
        assert_int_equal(take_lines(&f, out, sizeof(out)), 1);
        assert_string_equal(out, "12345678|");
        /* One more byte, its newline not come yet: too long, and it stays so. */
        assert_int_equal(kube_line_framer_feed(&f, "9", 1), 0);
        assert_int_equal(take_lines(&f, out, sizeof(out)), -EFBIG);
        assert_int_equal(kube_line_framer_feed(&f, "\nok\n", 4), 0);
        assert_int_equal(take_lines(&f, out, sizeof(out)), -EFBIG);
        kube_line_framer_reset(&f);
        /* A complete line too long, in one chunk after a good one: the good one first. */
        out[0] = 0;
        assert_int_equal(kube_line_framer_feed(&f, "ok\n123456789\nok\n", 16), 0);
        assert_int_equal(take_lines(&f, out, sizeof(out)), -EFBIG);
        assert_string_equal(out, "ok|");
        assert_int_equal(take_lines(&f, out, sizeof(out)), -EFBIG);
        kube_line_framer_free(&f);
}

static void test_crlf_and_last_line(void **state)
{
        struct kube_line_framer f = { 0 };
        const char *stream =
            "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":"
            "\"5\"}}}\r\n \r\n{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\","
            "\"resourceVersion\":\"6\"}}}  ";
        assert_int_equal(kube_line_framer_feed(&f, stream, strlen(stream)), 0);
        const char *line;
        size_t len;
        struct kube_watch_decoded d;
        /* The framer keeps the '\r'; the decoder trims it. */
        assert_int_equal(kube_line_framer_next(&f, &line, &len), 1);
        assert_int_equal(line[len - 1], '\r');
        assert_int_equal(kube_watch_decode(line, len, &d), KUBE_WATCH_LINE_EVENT);
        assert_int_equal(d.type, KUBE_EVENT_ADDED);
        assert_string_equal(d.rv, "5");
        assert_string_equal(kube_object_str(d.object, "metadata.name"), "a");
        kube_watch_decoded_clear(&d);
        assert_int_equal(kube_line_framer_next(&f, &line, &len), 1);
        assert_int_equal(kube_watch_decode(line, len, &d), KUBE_WATCH_LINE_EMPTY);
        assert_null(d.json);
        assert_int_equal(kube_line_framer_next(&f, &line, &len), 0);
        /* The stream ended without a newline: its last line is the rest, trailing spaces trimmed. */
        len = kube_line_framer_rest(&f, &line);
        assert_int_equal(kube_watch_decode(line, len, &d), KUBE_WATCH_LINE_EVENT);
        assert_int_equal(d.type, KUBE_EVENT_DELETED);
        assert_string_equal(d.rv, "6");
        kube_watch_decoded_clear(&d);
        kube_line_framer_free(&f);
}

static void test_decode_kinds(void **state)
{
        static const struct {
                const char *line;
                enum kube_watch_line kind;
                int type; /* -1: not an event */
                const char *rv;
                int code;
        } cases[] = {
                { "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"resourceVersion\":\"7\"}}}",
                  KUBE_WATCH_LINE_EVENT, KUBE_EVENT_MODIFIED, "7", 0 },
                { "{\"type\":\"ADDED\"}", KUBE_WATCH_LINE_EVENT, KUBE_EVENT_ADDED, NULL, 0 },
                { "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"resourceVersion\":"
                  "\"9\"}}}",
                  KUBE_WATCH_LINE_BOOKMARK, -1, "9", 0 },
                { "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"reason\":\"Expired\",\"code\":410}"
                  "}",
                  KUBE_WATCH_LINE_ERROR, -1, NULL, 410 },
                { "{\"type\":\"ERROR\",\"object\":{\"code\":\"410\"}}", KUBE_WATCH_LINE_ERROR, -1, NULL, 0 },
                { "{\"type\":\"ERROR\"}", KUBE_WATCH_LINE_ERROR, -1, NULL, 0 },
                { "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Gone\",\"code\":410}",
                  KUBE_WATCH_LINE_STATUS, -1, NULL, 410 },
                { "{\"kind\":\"Status\",\"reason\":\"Forbidden\",\"code\":403}", KUBE_WATCH_LINE_STATUS, -1,
                  NULL, 403 },
                { "{\"type\":410,\"code\":410}", KUBE_WATCH_LINE_STATUS, -1, NULL, 410 },
                { "[1,2]", KUBE_WATCH_LINE_STATUS, -1, NULL, 0 },
                { "{\"type\":\"PATCHED\",\"object\":{}}", KUBE_WATCH_LINE_UNKNOWN, -1, NULL, 0 },
                { "{\"type\":\"added\",\"object\":{}}", KUBE_WATCH_LINE_UNKNOWN, -1, NULL, 0 },
                { "{\"type\":\"ADDED\",\"obj", KUBE_WATCH_LINE_UNPARSABLE, -1, NULL, 0 },
                { "\r \r", KUBE_WATCH_LINE_EMPTY, -1, NULL, 0 },
                { "", KUBE_WATCH_LINE_EMPTY, -1, NULL, 0 },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct kube_watch_decoded d;
                enum kube_watch_line kind = kube_watch_decode(cases[i].line, strlen(cases[i].line), &d);
                if (kind != cases[i].kind)
                        fail_msg("case %zu (%s): kind %d, want %d", i, cases[i].line, kind, cases[i].kind);
                assert_int_equal(d.kind, kind);
                if (cases[i].type >= 0)
                        assert_int_equal(d.type, cases[i].type);
                if (cases[i].rv)
                        assert_string_equal(d.rv, cases[i].rv);
                else
                        assert_null(d.rv);
                assert_int_equal(d.code, cases[i].code);
                assert_int_equal(d.json != NULL,
                                 kind != KUBE_WATCH_LINE_EMPTY && kind != KUBE_WATCH_LINE_UNPARSABLE);
                kube_watch_decoded_clear(&d);
                assert_null(d.json);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_chunk_boundaries), cmocka_unit_test(test_large_line_resumes),
                cmocka_unit_test(test_max_line),         cmocka_unit_test(test_crlf_and_last_line),
                cmocka_unit_test(test_decode_kinds),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
