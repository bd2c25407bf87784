/* The engine's PDB arithmetic (src/kube/pdb.c) and the simulator's own (src/sim/disruption.c) over one table
 * of cases with the answers the disruption controller gives: a mistake in either shows as a disagreement
 * with the table, and the two never silently share it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "sim/disruption.h"
#include "spotdrain/pdb.h"
#include "spotdrain/util.h"

struct pdb_case {
        const char *min_available, *max_unavailable; /* NULL: unset */
        int matching, scale, healthy;
        int expected, desired, allowed; /* the controller's answer */
};

static const struct pdb_case cases[] = {
        /* maxUnavailable: expected is the scale, desired = scale - maxUnavailable (rounded up when %) */
        { NULL, "1", 8, 8, 8, 8, 7, 1 },
        { NULL, "1", 8, 8, 7, 8, 7, 0 },
        { NULL, "0", 3, 3, 3, 3, 3, 0 },
        { NULL, "25%", 10, 10, 10, 10, 7, 3 }, /* ceil(2.5) = 3 unavailable */
        { NULL, "10%", 3, 3, 3, 3, 2, 1 },     /* ceil(0.3) = 1 */
        { NULL, "100%", 4, 4, 4, 4, 0, 4 },
        { NULL, "5", 3, 3, 3, 3, 0, 3 },     /* desired never below 0 */
        { NULL, "1", 12, 10, 12, 10, 9, 3 }, /* surge pods count as healthy */
        { NULL, "1", 0, 0, 0, 0, 0, 0 },     /* nothing expected: nothing allowed */
        /* minAvailable integer: expected is the matching pods */
        { "2", NULL, 3, 3, 3, 3, 2, 1 },
        { "3", NULL, 3, 3, 3, 3, 3, 0 },
        { "5", NULL, 3, 3, 3, 3, 5, 0 },
        { "0", NULL, 2, 0, 2, 2, 0, 2 },
        { "1", NULL, 0, 0, 0, 0, 1, 0 },
        /* minAvailable percentage: expected is the scale, desired rounds up */
        { "50%", NULL, 3, 3, 3, 3, 2, 1 }, /* ceil(1.5) = 2 */
        { "80%", NULL, 10, 10, 9, 10, 8, 1 },
        { "100%", NULL, 4, 4, 4, 4, 4, 0 },
        { "1%", NULL, 7, 7, 7, 7, 1, 6 },
        { "0%", NULL, 5, 5, 5, 5, 0, 5 },
};

static void parse(const char *s, struct intorstr *engine, struct intorstr *sim)
{
        *engine = *sim = (struct intorstr){ 0 };
        if (!s)
                return;
        assert_int_equal(intorstr_parse(s, engine), 0);
        assert_int_equal(sim_budget_parse(s, sim), 0);
        assert_true(engine->set == sim->set && engine->percent == sim->percent &&
                    engine->value == sim->value);
}

static void test_table(void **state)
{
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                const struct pdb_case *c = &cases[i];
                struct pdb_spec es, ss;
                struct sim_budget_status st;
                int expected, desired, allowed;

                parse(c->min_available, &es.min_available, &ss.min_available);
                parse(c->max_unavailable, &es.max_unavailable, &ss.max_unavailable);
                pdb_expected(&es, c->matching, c->scale, &expected, &desired);
                allowed = pdb_disruptions_allowed(c->healthy, desired, expected);
                sim_budget_compute(&ss,
                                   &(struct sim_budget_pods){ .matching = c->matching,
                                                              .scale = c->scale,
                                                              .scale_known = true,
                                                              .healthy = c->healthy },
                                   &st);
                printf("# case %zu: min %s max %s matching %d scale %d healthy %d -> engine %d/%d/%d sim "
                       "%d/%d/%d\n",
                       i, c->min_available ? c->min_available : "-",
                       c->max_unavailable ? c->max_unavailable : "-", c->matching, c->scale, c->healthy,
                       expected, desired, allowed, st.expected, st.desired, st.allowed);
                assert_int_equal(expected, c->expected);
                assert_int_equal(desired, c->desired);
                assert_int_equal(allowed, c->allowed);
                assert_int_equal(st.expected, c->expected);
                assert_int_equal(st.desired, c->desired);
                assert_int_equal(st.allowed, c->allowed);
                assert_int_equal(st.current, c->healthy);
        }
}

/* The same strings are valid or invalid for both. */
static void test_parse(void **state)
{
        static const char *const inputs[] = { "0",   "1",    "25%",  "100%",       "",    "%", "-1",
                                              "abc", "1.5%", "10%%", "1234567890", "12a", " 1" };
        for (size_t i = 0; i < ARRAY_SIZE(inputs); i++) {
                struct intorstr a = { 0 }, b = { 0 };
                int ra = intorstr_parse(inputs[i], &a), rb = sim_budget_parse(inputs[i], &b);
                assert_int_equal(ra < 0, rb < 0);
                if (ra == 0)
                        assert_true(a.percent == b.percent && a.value == b.value);
        }
}

/* What only the simulator models: the controller's fail-safe without a scale, and unhealthy pods. */
static void test_sim_only(void **state)
{
        struct pdb_spec spec = { 0 };
        struct sim_budget_status st;

        assert_int_equal(sim_budget_parse("1", &spec.max_unavailable), 0);
        sim_budget_compute(
            &spec,
            &(struct sim_budget_pods){ .matching = 3, .scale = 0, .scale_known = false, .healthy = 3 }, &st);
        assert_int_equal(st.allowed, 0);
        spec = (struct pdb_spec){ 0 };
        assert_int_equal(sim_budget_parse("1", &spec.min_available), 0);
        sim_budget_compute(
            &spec,
            &(struct sim_budget_pods){ .matching = 3, .scale = 0, .scale_known = false, .healthy = 3 }, &st);
        assert_int_equal(st.allowed, 2); /* an integer minAvailable needs no scale */

        assert_true(
            sim_budget_allows_unhealthy(&(struct sim_budget_status){ .current = 2, .desired = 2 }, false));
        assert_false(
            sim_budget_allows_unhealthy(&(struct sim_budget_status){ .current = 1, .desired = 2 }, false));
        assert_false(
            sim_budget_allows_unhealthy(&(struct sim_budget_status){ .current = 0, .desired = 0 }, false));
        assert_true(
            sim_budget_allows_unhealthy(&(struct sim_budget_status){ .current = 0, .desired = 2 }, true));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_table),
                cmocka_unit_test(test_parse),
                cmocka_unit_test(test_sim_only),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
