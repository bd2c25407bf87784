/* The controller's first visibility (controller.first_visibility_seconds): a received notice is hidden only
 * briefly until its drain is recorded on the node, then for the full visibility; so a controller killed in
 * between costs the notice that short time, not the full visibility. In-process simulator (Kubernetes API
 * and SQS surface) on a scaled clock. */
#include "controller_fixture.h"

#include "spotdrain/config.h"
#include "spotdrain/service.h"

static bool held(struct cfx *f, void *ud)
{
        struct controller *ctl = ud;
        struct controller_stats st;
        controller_stats(ctl, &st);
        return st.in_flight == 1;
}

static bool recorded_and_extended(struct cfx *f, void *ud)
{
        return cfx_node_annotated(f, "spot-a") && cfx_sqs_stats(f).change_visibility == 60;
}

static bool drained_and_deleted(struct cfx *f, void *ud)
{
        struct controller *ctl = ud;
        struct controller_stats st;
        controller_stats(ctl, &st);
        return st.deleted >= 1 && st.in_flight == 0 && st.dispatch.draining == 0 &&
               cfx_result_node(f, "spot-a", "drained_at") > 0;
}

/* The receive asks for the configured first visibility; once the drain is recorded on the node the hold is
 * renewed with the full one, and the message is never delivered twice. */
static void test_short_until_recorded(void **state)
{
        struct cfx *f = cfx_new(CFX_SCENARIO("20"), 10, NULL);
        struct controller_options o = cfx_options(f, "ctl-0", false);
        struct spotdrain_config *cfg = NULL;
        struct sim_sqs_stats q;

        assert_int_equal(config_new(&cfg), 0);
        assert_int_equal(cfg->controller.first_visibility_usec, 10 * SEC); /* the default */
        cfg->controller.first_visibility_usec = 6 * SEC;
        o.cfg = cfg;
        o.visibility_usec = 60 * SEC;
        cfx_controller(f, 0, &o);
        assert_true(cfx_run_until(f, held, f->ctl[0], NULL));
        assert_int_equal(cfx_sqs_stats(f).receive_visibility, 6);
        assert_true(cfx_run_until(f, recorded_and_extended, NULL, NULL));
        assert_true(cfx_run_until(f, drained_and_deleted, f->ctl[0], NULL));
        q = cfx_sqs_stats(f);
        assert_int_equal(q.delivered, 1);
        assert_int_equal(q.deleted, 1);
        cfx_free(f);
        config_free(cfg);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_short_until_recorded),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
