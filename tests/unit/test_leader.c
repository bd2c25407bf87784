/* Leader election between two controllers in one process, against the simulator's Kubernetes API and SQS
 * surface on a scaled clock: exactly one acts; when the leader goes (stopped, or killed without a word) the
 * other takes over within the lease, resumes the drain from the node annotation and finishes it. */
#include "controller_fixture.h"

static void only_one_leader(struct cfx *f)
{
        bool a = f->ctl[0] && controller_is_leader(f->ctl[0]);
        bool b = f->ctl[1] && controller_is_leader(f->ctl[1]);
        assert_false(a && b);
}

static bool is_leader(struct cfx *f, void *ud)
{
        unsigned i = *(unsigned *)ud;
        return f->ctl[i] && controller_is_leader(f->ctl[i]);
}

static bool draining_annotated(struct cfx *f, void *ud)
{
        struct controller_stats st;
        controller_stats(f->ctl[0], &st);
        return st.dispatch.draining == 1 && cfx_node_annotated(f, "spot-a");
}

static bool finished(struct cfx *f, void *ud)
{
        struct controller_stats st;
        controller_stats(f->ctl[1], &st);
        return st.deleted >= 1 && st.dispatch.draining == 0 &&
               cfx_result_node(f, "spot-a", "drained_at") > 0;
}

static bool stopped_flag;
static void on_stopped(void *userdata)
{
        stopped_flag = true;
}

static bool stop_done(struct cfx *f, void *ud)
{
        return stopped_flag;
}

static void handover(bool kill)
{
        struct cfx *f = cfx_new(CFX_SCENARIO("3"), 20, NULL);
        struct controller_options a = cfx_options(f, "ctl-a", true), b = cfx_options(f, "ctl-b", true);
        struct controller_stats st;
        unsigned zero = 0, one = 1;
        uint64_t gone;

        cfx_controller(f, 0, &a);
        assert_true(cfx_run_until(f, is_leader, &zero, only_one_leader));
        cfx_controller(f, 1, &b);
        /* The leader takes the interruption and starts the drain (recorded on the node); the other only
         * watches. */
        assert_true(cfx_run_until(f, draining_annotated, NULL, only_one_leader));
        assert_false(controller_is_leader(f->ctl[1]));
        controller_stats(f->ctl[1], &st);
        assert_int_equal(st.messages, 0);
        assert_int_equal(st.dispatch.drains, 0);
        assert_string_equal(leader_observed_holder(controller_leader(f->ctl[1])), "ctl-a");

        gone = clk_now();
        if (kill)
                cfx_kill(f, 0);
        else {
                stopped_flag = false;
                controller_stop(f->ctl[0], on_stopped, NULL);
                assert_true(cfx_run_until(f, stop_done, NULL, only_one_leader));
                assert_false(controller_is_leader(f->ctl[0]));
        }
        assert_true(cfx_run_until(f, is_leader, &one, only_one_leader));
        /* Within the lease (15 s) plus one retry period when killed; at the next retry when released. */
        assert_true(clk_now() - gone <= (kill ? 20 : 15) * SEC);
        /* A killed leader's lease is waited out: the follower saw its last renewal at most a renew period
         * before the kill. */
        if (kill)
                assert_true(clk_now() - gone >= 9 * SEC);

        /* The new leader carries the drain on from the annotation, takes the redelivered message into it and
         * deletes it when the drain is done. */
        assert_true(cfx_run_until(f, finished, NULL, only_one_leader));
        controller_stats(f->ctl[1], &st);
        assert_int_equal(st.dispatch.resumed, 1);
        assert_int_equal(st.dispatch.drains, 1);
        assert_int_equal(cfx_sqs_stats(f).messages, 0);
        assert_int_equal(cfx_result_node(f, "spot-a", "pods_killed"), 0);
        cfx_free(f);
}

static void test_handover_on_stop(void **state)
{
        handover(false);
}

static void test_handover_on_kill(void **state)
{
        handover(true);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_handover_on_stop),
                cmocka_unit_test(test_handover_on_kill),
        };
        log_setup(LOG_FORMAT_TEXT, LOG_WARNING);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
