/* A controller killed between receiving a notice and recording its drain on the node costs that notice only
 * the first visibility (controller.first_visibility_seconds, 10 s), not the full one (60 s). In-process
 * simulator on a scaled clock; a test binary of its own because the engine clock of a process keeps running
 * scaled from one fixture to the next, which would put the notice's deadline off. */
#include "controller_fixture.h"

static bool held(struct cfx *f, void *ud)
{
        struct controller *ctl = ud;
        struct controller_stats st;
        controller_stats(ctl, &st);
        return st.in_flight == 1;
}

static bool drained_and_deleted(struct cfx *f, void *ud)
{
        struct controller *ctl = ud;
        struct controller_stats st;
        controller_stats(ctl, &st);
        return st.deleted >= 1 && st.in_flight == 0 && st.dispatch.draining == 0 &&
               cfx_result_node(f, "spot-a", "drained_at") > 0;
}

/* A controller that received the notice but could not record its drain (its Kubernetes API is unreachable)
 * is killed; its successor gets the notice back within the first visibility (10 s), not the 60 s of the full
 * one, and drains the node in time. */
static void test_crash_before_recorded(void **state)
{
        struct cfx *f = cfx_new(CFX_SCENARIO("20"), 20, NULL);
        struct controller_options o = cfx_options(f, "ctl-0", false);
        _cleanup_free_ char *kc = sim_server_kubeconfig("http://127.0.0.1:9", "t"), *error = NULL;
        char kc_path[64] = "/tmp/test-controller-dead-XXXXXX";
        struct kube_config *dead_cfg = NULL;
        struct kube_client *dead = NULL;
        struct controller *ctl0 = NULL;
        double notice, cordoned;

        o.visibility_usec = 60 * SEC;
        assert_non_null(kc);
        cfx_write(kc_path, kc);
        assert_int_equal(kube_config_load_file(kc_path, NULL, &dead_cfg, &error), 0);
        assert_int_equal(
            kube_client_new(f->loop, dead_cfg, &(struct kube_client_options){ .qps = -1 }, &dead), 0);
        assert_int_equal(controller_new(f->loop, dead, f->bus, &o, &ctl0), 0);
        assert_int_equal(controller_start(ctl0), 0);
        /* Held: the instance is unknown without nodes, so nothing is recorded; renewed on the short time. */
        assert_true(cfx_run_until(f, held, ctl0, NULL));
        assert_int_equal(cfx_sqs_stats(f).receive_visibility, 10);
        controller_free(ctl0); /* a crash: no hand-over */
        kube_client_free(dead);
        kube_config_free(dead_cfg);
        unlink(kc_path);

        o.identity = "ctl-1";
        cfx_controller(f, 1, &o);
        assert_true(cfx_run_until(f, drained_and_deleted, f->ctl[1], NULL));
        notice = cfx_result_node(f, "spot-a", "notice_at");
        cordoned = cfx_result_node(f, "spot-a", "cordoned_at");
        assert_true(notice >= 0 && cordoned >= notice);
        /* Back within the first visibility (plus a poll and a renewal's slack), far from the full 60 s. */
        assert_true(cordoned - notice < 25);
        assert_true(cfx_result_node(f, "spot-a", "drained_at") <=
                    cfx_result_node(f, "spot-a", "deadline_at"));
        assert_int_equal(cfx_result_node(f, "spot-a", "pods_killed"), 0);
        assert_true(cfx_sqs_stats(f).delivered >= 2); /* the successor got it from the queue again */
        cfx_free(f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_crash_before_recorded),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
