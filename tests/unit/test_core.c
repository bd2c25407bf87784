/* Engine clock, timers, signals, backoff and logging. */
#include <cjson/cJSON.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "spotdrain/core.h"

#define WAIT_BOUND_USEC (10ULL * 1000000ULL)
#define SEC             1000000ULL

static void set_flag(void *userdata)
{
        *(bool *)userdata = true;
}

/* ---- clock ---- */

static void test_clock_scale(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        bool fired = false;

        assert_true(clk_scale() == 1.0);
        uint64_t real = now_realtime_usec();
        uint64_t before = clk_now();
        /* Unscaled, the engine clock is the wall clock. */
        assert_true(before >= real && before - real < 60 * SEC);

        clk_set_scale(1000.0);
        assert_true(clk_scale() == 1000.0);
        uint64_t after = clk_now();
        /* Continuous at the switch: no jump backwards, no jump beyond the scaled elapsed time. */
        assert_true(after >= before);
        assert_true(after - before < 60 * SEC);

        /* An engine instant 100 s away is 0.1 s of monotonic time away, less what elapsed meanwhile. */
        uint64_t mono = now_monotonic_usec();
        uint64_t at = clk_to_monotonic(clk_now() + 100 * SEC);
        uint64_t mono_after = now_monotonic_usec();
        assert_true(at <= mono_after + 100000ULL);
        assert_true(at + (mono_after - mono) >= mono + 100000ULL);
        /* Instants already passed are due now. */
        assert_true(clk_to_monotonic(0) <= now_monotonic_usec());

        /* A timer 30 engine-seconds away fires within real milliseconds, and engine time moved that far. */
        assert_int_equal(loop_new(&l), 0);
        uint64_t start = clk_now();
        assert_int_equal(timer_start_in(l, 30 * SEC, set_flag, &fired, NULL), 0);
        assert_int_equal(loop_run_until(l, &fired, WAIT_BOUND_USEC), 0);
        assert_true(clk_now() - start >= 30 * SEC);

        /* Back to real speed: still monotonic. */
        uint64_t fast = clk_now();
        clk_set_scale(1.0);
        assert_true(clk_now() >= fast);
}

/* ---- timers ---- */

struct order {
        int seen[8];
        int n;
        struct timer *self; /* forgotten in its own callback */
        struct loop *loop;
        bool restarted;
        bool done;
};

struct tick {
        struct order *o;
        int id;
};

static void record(void *userdata)
{
        struct tick *t = userdata;
        t->o->seen[t->o->n++] = t->id;
        if (t->id == 3)
                t->o->done = true;
}

/* Forgets its handle, and starts another timer from the callback. */
static void record_and_restart(void *userdata)
{
        struct tick *t = userdata;
        t->o->seen[t->o->n++] = t->id;
        t->o->self = NULL;
        assert_int_equal(timer_start_in(t->o->loop, 0, set_flag, &t->o->restarted, NULL), 0);
}

static void test_timers(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct order o = { 0 };
        struct tick t1 = { &o, 1 }, t2 = { &o, 2 }, t3 = { &o, 3 }, t4 = { &o, 4 }, t0 = { &o, 0 };
        struct timer *h4 = NULL;
        uint64_t now = clk_now();

        assert_int_equal(loop_new(&l), 0);
        /* Started out of order; spaced so that they come due in separate loop iterations. */
        assert_int_equal(timer_start(l, now + 150000, record, &t3, NULL), 0);
        assert_int_equal(timer_start(l, now + 50000, record, &t1, NULL), 0);
        assert_int_equal(timer_start(l, now + 100000, record, &t2, NULL), 0);
        assert_int_equal(timer_start(l, now + 75000, record, &t4, &h4), 0);
        o.loop = l;
        assert_int_equal(timer_start(l, now, record_and_restart, &t0, &o.self), 0);
        h4 = timer_cancel(h4);
        assert_null(h4);
        assert_null(timer_cancel(NULL));

        assert_int_equal(loop_run_until(l, &o.done, WAIT_BOUND_USEC), 0);
        assert_int_equal(o.n, 4);
        assert_int_equal(o.seen[0], 0);
        assert_int_equal(o.seen[1], 1);
        assert_int_equal(o.seen[2], 2);
        assert_int_equal(o.seen[3], 3);
        assert_null(o.self);
        assert_int_equal(loop_run_until(l, &o.restarted, WAIT_BOUND_USEC), 0);
}

/* An urgent timer goes before ordinary ones already due, even those due earlier (the API client's pump
 * before a burst of drains' turns). */
static void test_timer_urgent(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct order o = { 0 };
        struct tick t1 = { &o, 1 }, t2 = { &o, 2 }, t3 = { &o, 3 };
        struct timer *u = NULL;
        uint64_t now = clk_now();

        assert_int_equal(loop_new(&l), 0);
        /* All three in the past: due together at the loop's first look. */
        assert_int_equal(timer_start(l, now - 3000, record, &t1, NULL), 0);
        assert_int_equal(timer_start(l, now - 2000, record, &t2, NULL), 0);
        assert_int_equal(timer_start(l, now - 1000, record, &t3, &u), 0);
        timer_urgent(u);
        timer_urgent(NULL);
        o.done = false;
        assert_int_equal(loop_run_until(l, &o.done, WAIT_BOUND_USEC), 0);
        assert_int_equal(o.n, 1);
        assert_int_equal(o.seen[0], 3);
}

static void test_timer_outlives_loop(void **state)
{
        struct loop *l = NULL;
        struct timer *t = NULL;
        bool fired = false;

        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(timer_start_in(l, 3600 * SEC, set_flag, &fired, &t), 0);
        /* A loop-owned timer still armed at loop_free is released with it. */
        assert_int_equal(timer_start_in(l, 3600 * SEC, set_flag, &fired, NULL), 0);
        l = loop_free(l);
        t = timer_cancel(t);
        assert_false(fired);
}

static void test_run_until_timeout_and_exit(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        bool never = false;

        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(loop_run_until(l, &never, 20000), -ETIMEDOUT);
        loop_exit(l, 3);
        assert_int_equal(loop_run_until(l, &never, WAIT_BOUND_USEC), -ECANCELED);
        assert_int_equal(loop_run(l), 3);
}

/* ---- signals ---- */

static void test_sigterm_ends_loop(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;

        assert_int_equal(loop_new(&l), 0);
        assert_false(loop_stopping(l));
        /* Blocked by loop_new, so it stays pending until the loop reads it. */
        assert_int_equal(raise(SIGTERM), 0);
        assert_int_equal(loop_run(l), 0);
        assert_true(loop_stopping(l));
}

struct stop_state {
        unsigned calls;
};

static void on_stop(struct loop *l, void *userdata)
{
        struct stop_state *s = userdata;
        s->calls++;
        assert_true(loop_stopping(l));
        loop_exit(l, 7);
}

static void test_stop_handler(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct stop_state s = { 0 };

        assert_int_equal(loop_new(&l), 0);
        loop_set_stop_handler(l, on_stop, &s);
        assert_int_equal(raise(SIGINT), 0);
        assert_int_equal(loop_run(l), 7);
        assert_int_equal(s.calls, 1);
}

/* ---- backoff ---- */

static void test_backoff(void **state)
{
        struct backoff b = BACKOFF_INIT(100 * 1000, 10 * SEC);
        uint64_t sum_early = 0, sum_late = 0;

        for (unsigned i = 0; i < 40; i++) {
                uint64_t cap = 100 * 1000ULL << (i < 20 ? i : 20);
                if (cap > 10 * SEC)
                        cap = 10 * SEC;
                uint64_t d = backoff_next(&b);
                assert_true(d >= 25 * 1000);
                assert_true(d <= cap);
        }
        assert_int_equal(b.attempt, 40);

        /* Grows: the mean of the first tries is well below the mean at the cap. Over 200 samples each the
         * chance of this failing by jitter alone is negligible. */
        for (int round = 0; round < 200; round++) {
                backoff_reset(&b);
                assert_int_equal(b.attempt, 0);
                sum_early += backoff_next(&b);
                for (int i = 0; i < 10; i++)
                        (void)backoff_next(&b);
                sum_late += backoff_next(&b);
        }
        assert_true(sum_early * 4 < sum_late);

        /* Jitter: not all equal. */
        backoff_reset(&b);
        b.attempt = 10;
        uint64_t first = backoff_next(&b);
        bool differs = false;
        for (int i = 0; i < 50 && !differs; i++)
                differs = backoff_next(&b) != first;
        assert_true(differs);

        /* Never 0 for a non-zero base, even a tiny one; huge attempts do not overflow. */
        struct backoff tiny = BACKOFF_INIT(1, 0);
        for (int i = 0; i < 100; i++)
                assert_true(backoff_next(&tiny) >= 1);
        struct backoff zero = BACKOFF_INIT(0, SEC);
        assert_int_equal(backoff_next(&zero), 0);
}

/* ---- logging ---- */

struct capture {
        char *data;
        size_t len;
        FILE *f;
};

static void capture_start(struct capture *c)
{
        *c = (struct capture){ 0 };
        c->f = open_memstream(&c->data, &c->len);
        assert_non_null(c->f);
        log_set_output(c->f);
}

static char *capture_end(struct capture *c)
{
        log_set_output(NULL);
        fclose(c->f);
        return c->data;
}

static void test_log_json(void **state)
{
        struct capture c;
        const char *tricky = "ip-10-0-0-1 \"quoted\"\n\ttab \\ back \x01 ctl";

        log_setup(LOG_FORMAT_JSON, LOG_DEBUG);
        capture_start(&c);
        int r = log_full(LOG_WARNING, -ENOENT, (const char *const[]){ "node", tricky, "pod", "ns/p", NULL },
                         "draining \"%s\"", "x\ny");
        _cleanup_free_ char *out = capture_end(&c);
        assert_int_equal(r, -ENOENT);

        /* Exactly one line. */
        char *nl = strchr(out, '\n');
        assert_non_null(nl);
        assert_string_equal(nl + 1, "");

        cJSON *j = cJSON_Parse(out);
        assert_non_null(j);
        assert_string_equal(cJSON_GetObjectItem(j, "level")->valuestring, "warning");
        assert_string_equal(cJSON_GetObjectItem(j, "msg")->valuestring,
                            "draining \"x\ny\": No such file or directory");
        assert_string_equal(cJSON_GetObjectItem(j, "node")->valuestring, tricky);
        assert_string_equal(cJSON_GetObjectItem(j, "pod")->valuestring, "ns/p");
        const char *ts = cJSON_GetObjectItem(j, "time")->valuestring;
        assert_int_equal(strlen(ts), strlen("2026-11-30T06:00:00.123Z"));
        assert_int_equal(ts[10], 'T');
        assert_int_equal(ts[19], '.');
        assert_int_equal(ts[23], 'Z');
        cJSON_Delete(j);
}

static void test_log_text_and_levels(void **state)
{
        struct capture c;

        log_setup(LOG_FORMAT_TEXT, LOG_INFO);
        capture_start(&c);
        assert_int_equal(log_debug("hidden"), 0);
        assert_int_equal(log_full(LOG_DEBUG, EIO, NULL, "hidden too"), -EIO);
        assert_int_equal(log_full(LOG_INFO, 0,
                                  (const char *const[]){ "node", "n1", "reason", "spot itn", NULL },
                                  "line\none"),
                         0);
        assert_int_equal(log_error_errno(EACCES, "denied"), -EACCES);
        _cleanup_free_ char *out = capture_end(&c);

        char *second = strchr(out, '\n');
        assert_non_null(second);
        *second++ = 0;
        /* "2026-11-30T06:00:00.123Z info line\none node=n1 reason=\"spot itn\"" */
        assert_int_equal(out[23], 'Z');
        assert_string_equal(out + 24, " info line\\none node=n1 reason=\"spot itn\"");
        assert_string_equal(second + 24, " error denied: Permission denied\n");
        log_setup(LOG_FORMAT_TEXT, LOG_INFO);
}

/* A reason of the caller's ends the sentence instead of the errno text, never beside it; the errno text is
 * the fallback when the reason is missing or empty. */
static void test_log_reason(void **state)
{
        struct capture c;

        log_setup(LOG_FORMAT_TEXT, LOG_INFO);
        capture_start(&c);
        assert_int_equal(log_error_reason(-ENOENT, "no such node", "cannot drain %s", "n1"), -ENOENT);
        assert_int_equal(log_error_reason(-ENOENT, NULL, "cannot drain %s", "n2"), -ENOENT);
        assert_int_equal(log_warning_reason(-EIO, "", "cannot taint %s", "n3"), -EIO);
        assert_int_equal(log_warning_reason(0, "no answer", "cannot cordon %s", "n4"), 0);
        _cleanup_free_ char *out = capture_end(&c);

        const char *want[] = {
                " error cannot drain n1: no such node\n",
                " error cannot drain n2: No such file or directory\n",
                " warning cannot taint n3: Input/output error\n",
                " warning cannot cordon n4: no answer\n",
        };
        char *line = out;
        for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
                assert_non_null(line);
                char *next = strchr(line, '\n');
                assert_non_null(next);
                next++;
                _cleanup_free_ char *got = strndup(line + 24, (size_t)(next - line - 24));
                assert_string_equal(got, want[i]);
                line = next;
        }
        assert_string_equal(line, "");
        assert_string_equal(error_reason(-ENOENT, "gone"), "gone");
        assert_string_equal(error_reason(-ENOENT, NULL), "No such file or directory");

        /* JSON keeps the errno beside the reason. */
        log_setup(LOG_FORMAT_JSON, LOG_INFO);
        capture_start(&c);
        log_error_reason(-ENOENT, "no such node", "cannot drain %s", "n1");
        _cleanup_free_ char *js = capture_end(&c);
        cJSON *j = cJSON_Parse(js);
        assert_non_null(j);
        assert_string_equal(cJSON_GetObjectItem(j, "msg")->valuestring, "cannot drain n1: no such node");
        assert_int_equal(cJSON_GetObjectItem(j, "errno")->valueint, ENOENT);
        cJSON_Delete(j);
        log_setup(LOG_FORMAT_TEXT, LOG_INFO);
}

static void test_log_auto_journal(void **state)
{
        struct capture c;
        struct stat st;

        /* stderr is the journal stream: records go to the journal, not to the text output. */
        assert_int_equal(fstat(STDERR_FILENO, &st), 0);
        _cleanup_free_ char *stream =
            strprintf("%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
        assert_int_equal(setenv("JOURNAL_STREAM", stream, 1), 0);
        log_setup(LOG_FORMAT_AUTO, LOG_INFO);
        capture_start(&c);
        assert_int_equal(log_info("to the journal"), 0);
        _cleanup_free_ char *out = capture_end(&c);
        assert_int_equal(c.len, 0);
        assert_string_equal(out, "");

        /* An inherited variable that names another stream: text. */
        assert_int_equal(setenv("JOURNAL_STREAM", "1:2", 1), 0);
        log_setup(LOG_FORMAT_AUTO, LOG_INFO);
        capture_start(&c);
        assert_int_equal(log_info("to stderr"), 0);
        _cleanup_free_ char *out2 = capture_end(&c);
        assert_non_null(strstr(out2, " info to stderr\n"));
        assert_int_equal(unsetenv("JOURNAL_STREAM"), 0);
        log_setup(LOG_FORMAT_TEXT, LOG_INFO);
}

static void test_log_parse(void **state)
{
        assert_int_equal(log_parse_level("debug"), LOG_DEBUG);
        assert_int_equal(log_parse_level("info"), LOG_INFO);
        assert_int_equal(log_parse_level("warning"), LOG_WARNING);
        assert_int_equal(log_parse_level("error"), LOG_ERR);
        assert_int_equal(log_parse_level("loud"), -EINVAL);
        assert_int_equal(log_parse_level(NULL), -EINVAL);
        assert_int_equal(log_parse_format("text"), LOG_FORMAT_TEXT);
        assert_int_equal(log_parse_format("json"), LOG_FORMAT_JSON);
        assert_int_equal(log_parse_format("journal"), LOG_FORMAT_JOURNAL);
        assert_int_equal(log_parse_format("auto"), LOG_FORMAT_AUTO);
        assert_int_equal(log_parse_format("xml"), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_clock_scale),
                cmocka_unit_test(test_timers),
                cmocka_unit_test(test_timer_urgent),
                cmocka_unit_test(test_timer_outlives_loop),
                cmocka_unit_test(test_run_until_timeout_and_exit),
                cmocka_unit_test(test_sigterm_ends_loop),
                cmocka_unit_test(test_stop_handler),
                cmocka_unit_test(test_backoff),
                cmocka_unit_test(test_log_json),
                cmocka_unit_test(test_log_text_and_levels),
                cmocka_unit_test(test_log_reason),
                cmocka_unit_test(test_log_auto_journal),
                cmocka_unit_test(test_log_parse),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
