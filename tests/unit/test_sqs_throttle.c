/* The controller under SQS throttling (the surface's throttle_rate, as a scenario's faults.sqs_throttle_rate
 * sets it): a throttle is retried after the backoff and never makes the queue unreadable, and a drain under
 * heavy throttling still finishes with its notice delivered. In-process simulator on a scaled clock. */
#include "controller_fixture.h"

static bool throttled_often(struct cfx *f, void *ud)
{
        return cfx_sqs_stats(f).throttled >= *(uint64_t *)ud;
}

static bool drained_and_deleted(struct cfx *f, void *ud)
{
        struct controller_stats st;
        controller_stats(f->ctl[0], &st);
        return st.deleted >= 1 && st.in_flight == 0 && st.dispatch.draining == 0 &&
               cfx_result_node(f, "spot-a", "drained_at") > 0;
}

static void never_unreadable(struct cfx *f)
{
        struct controller_stats st;
        controller_stats(f->ctl[0], &st);
        assert_int_equal(st.unreadable, 0);
        assert_int_equal(f->alerts[ALERT_QUEUE_UNREADABLE], 0);
}

/* Every call throttled for a while: retried (more calls than the 3 failures that make a queue unreadable),
 * no queue-unreadable alert. Then half the calls throttled: the notice comes through and the drain ends. */
static void test_throttled_queue(void **state)
{
        struct cfx *f =
            cfx_new(CFX_SCENARIO("30"), 20, &(struct sim_sqs_fault){ .throttle_rate = 1, .seed = 5 });
        struct controller_options o = cfx_options(f, "ctl-0", false);
        struct controller_stats st;
        uint64_t calls = 6;

        cfx_controller(f, 0, &o);
        assert_true(cfx_run_until(f, throttled_often, &calls, never_unreadable));
        assert_false(controller_ready(f->ctl[0])); /* never proven readable yet */

        assert_int_equal(
            sim_sqs_set_fault(f->sqs, &(struct sim_sqs_fault){ .throttle_rate = 0.5, .seed = 5 }), 0);
        assert_true(cfx_run_until(f, drained_and_deleted, NULL, never_unreadable));
        controller_stats(f->ctl[0], &st);
        assert_int_equal(st.notice_counts[NOTICE_SPOT_INTERRUPTION], 1);
        assert_int_equal(st.dispatch.drains, 1);
        assert_true(st.receive_failures > 0);
        assert_int_equal(st.unreadable_failures, 0);
        assert_int_equal(cfx_result_node(f, "spot-a", "pods_killed"), 0);
        assert_true(cfx_result_node(f, "spot-a", "drained_at") <=
                    cfx_result_node(f, "spot-a", "deadline_at"));
        cfx_free(f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_throttled_queue),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
