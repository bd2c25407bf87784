/* A backlog of bad messages ahead of a real notice, against the in-process simulator: the controller reads
 * with its parallel long polls, leaves every bad message in the queue (hidden for the redrive policy, in
 * visibility batches), counts them by reason, logs one line per reason and sender and one summary of the
 * rest, and still drains the interrupted node. Timing is bench/backlog's; here only what must hold. */
#include "controller_fixture.h"
#include "sqs_sync.h"

#define POISON 400

static bool polls_waiting(struct cfx *f, void *ud)
{
        return cfx_sqs_stats(f).waiting >= *(unsigned *)ud;
}

static bool backlog_read_and_cordoned(struct cfx *f, void *ud)
{
        struct controller_stats st;
        controller_stats(f->ctl[0], &st);
        return cfx_left_unread(&st) >= POISON && cfx_result_node(f, "spot-a", "cordoned_at") >= 0;
}

static size_t count_lines(FILE *log, const char *needle, uint64_t *ret_count)
{
        char line[4096];
        size_t n = 0;

        rewind(log);
        while (fgets(line, sizeof(line), log))
                if (strstr(line, needle)) {
                        const char *c = strstr(line, "count=");
                        n++;
                        if (ret_count && c)
                                *ret_count += strtoull(c + strlen("count="), NULL, 10);
                }
        return n;
}

static void on_stopped(void *userdata)
{
        *(bool *)userdata = true;
}

static void test_backlog(void **state)
{
        struct cfx *f = cfx_new(CFX_SCENARIO("20"), 5, NULL);
        struct controller_options o = cfx_options(f, "ctl-0", false);
        const char *bodies[POISON];
        struct controller_stats st;
        struct sim_sqs_stats q;
        FILE *log = tmpfile();
        unsigned receivers = 10;
        uint64_t held_malformed = 0, held_unrecognized = 0;
        bool stopped = false;

        assert_non_null(log);
        log_set_output(log);
        /* Half not JSON, half JSON that is no notice. */
        for (size_t i = 0; i < POISON; i++)
                bodies[i] =
                    i % 2 ? "this is not json"
                          : "{\"id\": \"e-1\", \"time\": \"2026-11-30T06:00:00Z\", \"source\": \"aws.s3\", "
                            "\"detail-type\": \"Object Created\", \"detail\": {}}";
        cfx_controller(f, 0, &o);
        /* controller.receivers' default: ten long polls wait at once. */
        assert_true(cfx_run_until(f, polls_waiting, &receivers, NULL));
        assert_int_equal(sqs_send_sync(f->loop, sim_sqs_queue_url(f->sqs), &f->creds, bodies, POISON, 0), 0);
        assert_true(cfx_run_until(f, backlog_read_and_cordoned, NULL, NULL));

        controller_stats(f->ctl[0], &st);
        q = cfx_sqs_stats(f);
        assert_true(st.malformed[CONTROLLER_MALFORMED_BODY] >= POISON / 2);
        assert_true(st.malformed[CONTROLLER_MALFORMED_UNRECOGNIZED] >= POISON / 2);
        /* Never deleted: every one is still in the queue, hidden for the redrive policy's long timeout. */
        assert_true(q.messages >= POISON);
        assert_int_equal(q.change_visibility, 600);
        /* Ten messages a receive at most, and most receives full. */
        assert_true(st.receives >= POISON / 10);

        /* One line per reason and sender (the sim's SenderId), then, at the stop, one summary each. */
        assert_int_equal(count_lines(log, "is malformed, left in the queue", NULL), 1);
        assert_int_equal(count_lines(log, "is not a notice spotdrain knows, left in the queue", NULL), 1);
        controller_stop(f->ctl[0], on_stopped, &stopped);
        assert_int_equal(
            count_lines(log, "left in the queue (malformed) in the last minute", &held_malformed), 1);
        assert_int_equal(
            count_lines(log, "left in the queue (unrecognized) in the last minute", &held_unrecognized), 1);
        assert_int_equal(held_malformed + 1, st.malformed[CONTROLLER_MALFORMED_BODY]);
        assert_int_equal(held_unrecognized + 1, st.malformed[CONTROLLER_MALFORMED_UNRECOGNIZED]);
        assert_int_equal(loop_run_until(f->loop, &stopped, REAL_BOUND), 0);
        log_set_output(NULL);
        fclose(log);
        cfx_free(f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_backlog),
        };
        log_setup(LOG_FORMAT_TEXT, LOG_WARNING);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
