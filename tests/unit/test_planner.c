/* The deadline-budget drain planner: waves, EDF across nodes, tiers, verdicts and the values that fit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cJSON.h>
#include <cmocka.h>

#include "spotdrain/drain.h"

#define S(x)  ((uint64_t)((x)*1000000.0))
#define NOW   S(1000)
#define MAXP  64
#define AT(x) (NOW + S(x))

struct fx {
        struct drain_node_in nodes[4];
        struct drain_pdb_in pdbs[4];
        struct drain_pod_in pods[MAXP];
        size_t pod_pdbs[MAXP][2];
        char names[MAXP][32];
        struct drain_startup startups[4];
        struct drain_input in;
};

static void fx_init(struct fx *f)
{
        memset(f, 0, sizeof(*f));
        f->in = (struct drain_input){ .now_usec = NOW,
                                      .nodes = f->nodes,
                                      .pdbs = f->pdbs,
                                      .pods = f->pods,
                                      .startups = f->startups,
                                      .default_startup_usec = S(10),
                                      .policy = DRAIN_POLICY_FORCE };
}

static size_t add_node(struct fx *f, const char *name, double budget, double margin)
{
        size_t i = f->in.n_nodes++;
        f->nodes[i] =
            (struct drain_node_in){ .name = name, .deadline_usec = AT(budget), .margin_usec = S(margin) };
        return i;
}

/* A PDB over `replicas` pods of which `healthy` are Ready, with the status the disruption controller
 * would compute. */
static size_t add_pdb(struct fx *f, const char *name, const char *min, const char *max, int replicas,
                      int healthy)
{
        size_t i = f->in.n_pdbs++;
        struct drain_pdb_in *p = &f->pdbs[i];
        *p = (struct drain_pdb_in){ .namespace = "shop", .name = name, .covered_pods = replicas };
        if (min)
                assert_int_equal(intorstr_parse(min, &p->spec.min_available), 0);
        if (max)
                assert_int_equal(intorstr_parse(max, &p->spec.max_unavailable), 0);
        pdb_expected(&p->spec, replicas, replicas, &p->expected_pods, &p->desired_healthy);
        p->current_healthy = healthy;
        p->disruptions_allowed = pdb_disruptions_allowed(healthy, p->desired_healthy, p->expected_pods);
        return i;
}

static void set_startup(struct fx *f, const char *key, double secs)
{
        f->startups[f->in.n_startups++] =
            (struct drain_startup){ .owner_key = key, .startup_usec = S(secs) };
}

/* count Ready pods of owner `key` on node, shutdown observed, under pdb (or -1). Returns the first index. */
static size_t add_pods(struct fx *f, int count, size_t node, enum drain_owner owner, const char *key,
                       double shutdown, double grace, int pdb)
{
        size_t first = f->in.n_pods;
        for (int k = 0; k < count; k++) {
                size_t i = f->in.n_pods++;
                assert_true(i < MAXP);
                const char *base = strrchr(key, '/') ? strrchr(key, '/') + 1 : key;
                snprintf(f->names[i], sizeof(f->names[i]), "%s-%zu", base, i);
                f->pods[i] = (struct drain_pod_in){ .namespace = "shop",
                                                    .name = f->names[i],
                                                    .node = node,
                                                    .owner = owner,
                                                    .owner_key = key,
                                                    .grace_usec = S(grace),
                                                    .shutdown_usec = S(shutdown),
                                                    .ready = true };
                if (pdb >= 0) {
                        f->pod_pdbs[i][0] = (size_t)pdb;
                        f->pods[i].pdbs = f->pod_pdbs[i];
                        f->pods[i].n_pdbs = 1;
                }
        }
        return first;
}

static struct drain_plan *plan_of(struct fx *f)
{
        struct drain_plan *p = NULL;
        assert_int_equal(drain_plan_make(&f->in, &p), 0);
        assert_non_null(p);
        assert_int_equal(p->n_pods, f->in.n_pods);
        return p;
}

/* seed-504: 10 pods of shop/api (30 replicas) on spot-a under maxUnavailable 1, startup 15 s, shutdown 10 s,
 * 120 s budget with a 5 s margin. */
static void seed504(struct fx *f, const char *max, int replicas)
{
        fx_init(f);
        add_node(f, "spot-a", 120, 5);
        int b = (int)add_pdb(f, "api", NULL, max, replicas, replicas);
        set_startup(f, "shop/api", 15);
        add_pods(f, 10, 0, DRAIN_OWNER_REPLICASET, "shop/api", 10, 30, b);
}

static void test_seed504_infeasible_forced(void **state)
{
        struct fx f;
        seed504(&f, "1", 30);
        _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
        const struct drain_plan_pdb *pdb = &p->pdbs[0];
        assert_int_equal(pdb->n, 10);
        assert_int_equal(pdb->k, 1);
        assert_int_equal(pdb->waves, 10);
        assert_false(pdb->feasible);
        /* The 10th pod can start only after 9 replacements, 15 s each, then needs 10 s. */
        assert_int_equal(pdb->unforced_finish_usec, AT(145));
        /* Two at a time: 5 waves, the last starting at 60 s and gone at 70 s < 115 s. */
        assert_int_equal(pdb->fit_k, 2);
        assert_int_equal(pdb->fit_max_unavailable, 2);
        /* 2 of 30 is 6.7%: 7% of 30 = 2.1, rounded up by Kubernetes to 3 >= 2. */
        assert_int_equal(pdb->fit_max_unavailable_pct, 7);
        assert_int_equal(pdb->fit_min_available, 28);
        /* 93% of 30 = 27.9 → 28 desired; 94% → 29. */
        assert_int_equal(pdb->fit_min_available_pct, 93);

        /* Eight waves fit before the last safe moment (105 s); the last two pods are forced there. */
        for (int i = 0; i < 8; i++) {
                assert_int_equal(p->pods[i].action, DRAIN_ACTION_EVICT);
                assert_int_equal(p->pods[i].evict_usec, AT(15 * i));
                assert_int_equal(p->pods[i].gone_usec, AT(15 * i + 10));
        }
        for (int i = 8; i < 10; i++) {
                assert_int_equal(p->pods[i].action, DRAIN_ACTION_FORCE);
                assert_true(p->pods[i].forced);
                assert_false(p->pods[i].killed);
                assert_int_equal(p->pods[i].evict_usec, AT(105));
                assert_int_equal(p->pods[i].gone_usec, AT(115));
        }
        const struct drain_plan_node *n = &p->nodes[0];
        assert_int_equal(n->verdict, DRAIN_INFEASIBLE_FORCED);
        assert_int_equal(n->n_forced, 2);
        assert_int_equal(n->n_killed, 0);
        assert_int_equal(n->finish_usec, AT(115));
        assert_int_equal(n->limiting_pdb, 0);
        assert_non_null(strstr(n->reason, "PDB shop/api allows 1 disruption at a time"));
        assert_non_null(strstr(n->reason, "10 pods on spot-a need 10 waves of 15 s"));
        assert_non_null(strstr(n->reason, "145 s > 115 s left"));
        assert_non_null(strstr(n->reason, "maxUnavailable 2 (7%) or minAvailable 28 (93%) would fit"));
        assert_non_null(strstr(n->reason, "2 pods forced"));

        assert_int_equal(drain_lower_bound_usec(&f.in, DRAIN_ALL_NODES), S(145));
        assert_int_equal(drain_lower_bound_usec(&f.in, 0), S(145));
}

static void test_seed504_respect_kills(void **state)
{
        struct fx f;
        seed504(&f, "1", 30);
        f.in.policy = DRAIN_POLICY_RESPECT;
        _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
        assert_int_equal(p->nodes[0].verdict, DRAIN_INFEASIBLE_KILLED);
        assert_int_equal(p->nodes[0].n_forced, 0);
        assert_int_equal(p->nodes[0].n_killed, 2);
        /* Its slot comes back at 120 s, with the instance already gone: killed with it. */
        assert_int_equal(p->pods[8].action, DRAIN_ACTION_STUCK);
        assert_int_equal(p->pods[8].evict_usec, DRAIN_NEVER);
        assert_true(p->pods[8].killed);
        assert_int_equal(p->pods[8].gone_usec, AT(120));
        assert_false(p->pods[7].killed);
        assert_int_equal(p->pdbs[0].fit_k, 2);
}

/* A plan copies its pods' names, unless the input lends them (the ledger's joint inputs): then they are
 * the input's own strings, and freeing the plan leaves them (ASan and valgrind see a double free). The plan
 * is the same either way. */
static void test_borrowed_names(void **state)
{
        struct fx f;
        seed504(&f, "1", 30);
        _cleanup_(drain_plan_freep) struct drain_plan *copied = plan_of(&f);
        f.in.plans_borrow_names = true;
        _cleanup_(drain_plan_freep) struct drain_plan *borrowed = plan_of(&f);
        assert_false(copied->names_borrowed);
        assert_true(borrowed->names_borrowed);
        assert_int_equal(borrowed->n_pods, copied->n_pods);
        for (size_t i = 0; i < borrowed->n_pods; i++) {
                assert_ptr_equal(borrowed->pods[i].name, f.in.pods[i].name);
                assert_ptr_equal(borrowed->pods[i].namespace, f.in.pods[i].namespace);
                assert_ptr_equal(borrowed->pods[i].uid, f.in.pods[i].uid);
                assert_ptr_not_equal(copied->pods[i].name, f.in.pods[i].name);
                assert_string_equal(copied->pods[i].name, borrowed->pods[i].name);
                assert_int_equal(copied->pods[i].action, borrowed->pods[i].action);
                assert_int_equal(copied->pods[i].evict_usec, borrowed->pods[i].evict_usec);
        }
}

static void test_seed504_tuned_feasible(void **state)
{
        struct fx f;
        /* 25% of 12 replicas = 3: four waves, the last at 45 s, gone at 55 s. */
        seed504(&f, "25%", 12);
        _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
        assert_int_equal(p->pdbs[0].k, 3);
        assert_int_equal(p->pdbs[0].waves, 4);
        assert_true(p->pdbs[0].feasible);
        assert_int_equal(p->pdbs[0].fit_k, -1);
        assert_int_equal(p->nodes[0].verdict, DRAIN_FEASIBLE);
        assert_int_equal(p->nodes[0].finish_usec, AT(55));
        assert_int_equal(p->nodes[0].n_forced, 0);
        assert_non_null(strstr(p->nodes[0].reason, "10 pods gone 55 s after now"));
        assert_int_equal(drain_lower_bound_usec(&f.in, DRAIN_ALL_NODES), S(55));
}

static int k_of(const char *min, const char *max, int replicas, int healthy)
{
        struct fx f;
        fx_init(&f);
        add_node(&f, "spot-a", 120, 5);
        int b = (int)add_pdb(&f, "api", min, max, replicas, healthy);
        add_pods(&f, 10, 0, DRAIN_OWNER_REPLICASET, "shop/api", 1, 30, b);
        _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
        assert_int_equal(p->pdbs[0].waves, p->pdbs[0].k > 0 ? (10 + p->pdbs[0].k - 1) / p->pdbs[0].k : 0);
        return p->pdbs[0].k;
}

static void test_kubernetes_rounding(void **state)
{
        assert_int_equal(k_of(NULL, "25%", 30, 30), 8); /* 7.5 rounds up */
        assert_int_equal(k_of(NULL, "3", 30, 30), 3);
        assert_int_equal(k_of(NULL, "10%", 5, 5), 1);   /* 0.5 rounds up */
        assert_int_equal(k_of("80%", NULL, 30, 30), 6); /* desired 24 */
        assert_int_equal(k_of("27", NULL, 30, 30), 3);
        assert_int_equal(k_of("90%", NULL, 15, 15), 1); /* desired 13.5 → 14 */
        assert_int_equal(k_of(NULL, "25%", 30, 27), 5); /* three already unhealthy */
        assert_int_equal(k_of("100%", NULL, 30, 30), 0);
}

/* A do-not-disrupt pod is planned to go at its last safe moment, not with the others; it still fits, and
 * under a PDB its slot is taken then, not at the notice. */
static void test_do_not_disrupt_at_last_safe_moment(void **state)
{
        struct fx f;
        fx_init(&f);
        add_node(&f, "spot-a", 120, 5);
        int b = (int)add_pdb(&f, "api", NULL, "1", 4, 4);
        add_pods(&f, 2, 0, DRAIN_OWNER_REPLICASET, "shop/api", 5, 30, b);
        size_t job = add_pods(&f, 1, 0, DRAIN_OWNER_JOB, "shop/job", 10, 20, -1);
        size_t held = add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "shop/api", 5, 30, b);
        f.pods[job].do_not_disrupt = true;
        f.pods[held].do_not_disrupt = true;
        struct drain_plan *p = plan_of(&f);
        /* last safe = 120 - 5 - shutdown */
        assert_int_equal(p->pods[job].last_safe_usec, AT(105));
        assert_int_equal(p->pods[job].evict_usec, AT(105));
        assert_int_equal(p->pods[job].gone_usec, AT(115));
        assert_false(p->pods[job].forced);
        assert_false(p->pods[job].killed);
        assert_true(p->pods[job].warnings & DRAIN_WARN_DO_NOT_DISRUPT);
        assert_int_equal(p->pods[held].evict_usec, AT(110));
        assert_int_equal(p->pods[0].evict_usec, NOW);
        assert_int_equal(p->nodes[0].verdict, DRAIN_FEASIBLE);
        assert_int_equal(p->nodes[0].finish_usec, AT(115));
        drain_plan_free(p);
}

/* drain.lb_deregistration_seconds: pods behind a Service are planned to go once the node's lb hold is
 * over, the others at once; the plan says how many it holds and until when. A pod whose last safe moment
 * comes before the hold goes then. */
static void test_lb_hold(void **state)
{
        struct fx f;
        fx_init(&f);
        add_node(&f, "spot-a", 60, 5);
        f.nodes[0].lb_hold_usec = AT(30);
        size_t web = add_pods(&f, 2, 0, DRAIN_OWNER_REPLICASET, "shop/web", 5, 10, -1);
        size_t worker = add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "shop/worker", 5, 10, -1);
        size_t slow = add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "shop/slow", 30, 30, -1);
        f.pods[web].behind_service = f.pods[web + 1].behind_service = true;
        f.pods[slow].behind_service = true;
        struct drain_plan *p = plan_of(&f);
        assert_int_equal(p->pods[web].evict_usec, AT(30));
        assert_int_equal(p->pods[web + 1].evict_usec, AT(30));
        assert_int_equal(p->pods[worker].evict_usec, NOW);
        /* last safe = 60 - 5 - 30 = 25 < 30 */
        assert_int_equal(p->pods[slow].evict_usec, AT(25));
        assert_false(p->pods[slow].killed);
        assert_int_equal(p->nodes[0].n_lb_held, 3);
        assert_int_equal(p->nodes[0].lb_hold_usec, AT(30));
        assert_int_equal(p->nodes[0].finish_usec, AT(55));
        assert_int_equal(p->nodes[0].verdict, DRAIN_FEASIBLE);
        drain_plan_free(p);
}

static void test_zero_allowed(void **state)
{
        struct fx f;
        fx_init(&f);
        add_node(&f, "spot-a", 120, 5);
        int b = (int)add_pdb(&f, "api", NULL, "0", 10, 10);
        add_pods(&f, 3, 0, DRAIN_OWNER_REPLICASET, "shop/api", 5, 30, b);
        {
                _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
                assert_int_equal(p->pdbs[0].k, 0);
                assert_int_equal(p->pdbs[0].waves, 0);
                assert_false(p->pdbs[0].feasible);
                assert_int_equal(p->pdbs[0].unforced_finish_usec, DRAIN_NEVER);
                /* One at a time would do: 3 waves of 10 s, gone at 25 s. */
                assert_int_equal(p->pdbs[0].fit_k, 1);
                assert_int_equal(p->pdbs[0].fit_max_unavailable, 1);
                assert_int_equal(p->pdbs[0].fit_max_unavailable_pct, 10);
                assert_int_equal(p->pdbs[0].fit_min_available, 9);
                assert_int_equal(p->pdbs[0].fit_min_available_pct, 90);
                for (int i = 0; i < 3; i++) {
                        assert_int_equal(p->pods[i].action, DRAIN_ACTION_FORCE);
                        assert_int_equal(p->pods[i].evict_usec, AT(110));
                        assert_int_equal(p->pods[i].last_safe_usec, AT(110));
                }
                assert_int_equal(p->nodes[0].verdict, DRAIN_INFEASIBLE_FORCED);
                assert_non_null(strstr(p->nodes[0].reason, "allows no disruption"));
                assert_non_null(strstr(p->nodes[0].reason, "maxUnavailable 1 (10%)"));
        }
        f.in.policy = DRAIN_POLICY_RESPECT;
        {
                _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
                assert_int_equal(p->nodes[0].verdict, DRAIN_INFEASIBLE_KILLED);
                assert_int_equal(p->pods[0].action, DRAIN_ACTION_STUCK);
                assert_int_equal(p->pods[0].evict_usec, DRAIN_NEVER);
                assert_int_equal(p->pods[0].gone_usec, AT(120));
                assert_int_equal(p->nodes[0].n_killed, 3);
        }
        assert_int_equal(drain_lower_bound_usec(&f.in, DRAIN_ALL_NODES), DRAIN_NEVER);
}

static void test_unhealthy_pdb_blocks(void **state)
{
        struct fx f;
        fx_init(&f);
        add_node(&f, "spot-a", 120, 5);
        /* maxUnavailable 1 of 10 with two unready elsewhere: currentHealthy 8 < desiredHealthy 9. */
        int b = (int)add_pdb(&f, "api", NULL, "1", 10, 8);
        add_pods(&f, 2, 0, DRAIN_OWNER_REPLICASET, "shop/api", 5, 30, b);
        size_t unready = add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "shop/api", 5, 30, b);
        f.pods[unready].ready = false;
        _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
        assert_int_equal(p->pdbs[0].k, 0);
        assert_false(p->pdbs[0].feasible);
        /* IfHealthyBudget: an unready pod needs the budget met too. */
        assert_int_equal(p->pods[unready].action, DRAIN_ACTION_FORCE);
        assert_int_equal(p->pods[0].action, DRAIN_ACTION_FORCE);
        assert_non_null(strstr(p->nodes[0].reason, "currentHealthy 8, desiredHealthy 9"));
        assert_int_equal(p->nodes[0].verdict, DRAIN_INFEASIBLE_FORCED);
        /* One disruption would do, but the values must also cover the two pods already missing. */
        assert_int_equal(p->pdbs[0].fit_k, 1);
        assert_int_equal(p->pdbs[0].fit_max_unavailable, 3);
        assert_int_equal(p->pdbs[0].fit_max_unavailable_pct, 30);
        assert_int_equal(p->pdbs[0].fit_min_available, 7);
        assert_int_equal(p->pdbs[0].fit_min_available_pct, 70);
}

static void test_unhealthy_pods_evicted_for_free(void **state)
{
        struct fx f;
        fx_init(&f);
        add_node(&f, "spot-a", 120, 5);
        /* Budget met (11 of 12 Ready, desired 10): one disruption; the unready pod costs none. */
        int b = (int)add_pdb(&f, "api", NULL, "2", 12, 11);
        add_pods(&f, 2, 0, DRAIN_OWNER_REPLICASET, "shop/api", 5, 30, b);
        size_t unready = add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "shop/api", 5, 30, b);
        f.pods[unready].ready = false;
        {
                _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
                assert_int_equal(p->pdbs[0].n, 3);
                assert_int_equal(p->pdbs[0].n_ready, 2);
                assert_int_equal(p->pods[unready].evict_usec, NOW);
                assert_int_equal(p->pods[0].evict_usec, NOW);
                /* The unready pod's replacement turning Ready at 10 s gives a slot too. */
                assert_int_equal(p->pods[1].evict_usec, AT(10));
                assert_int_equal(p->nodes[0].verdict, DRAIN_FEASIBLE);
        }
        /* Unhealthy budget, but AlwaysAllow lets unready pods go; a Pending pod goes whatever the PDB says.
         */
        f.pdbs[0].current_healthy = 9;
        f.pdbs[0].disruptions_allowed = 0;
        f.pdbs[0].always_allow_unhealthy = true;
        f.pods[1].ready = false;
        f.pods[1].pending = true;
        {
                _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
                assert_int_equal(p->pods[unready].evict_usec, NOW);
                assert_int_equal(p->pods[1].evict_usec, NOW);
                /* Deficit 1 paid back by the first replacement, the second frees a slot at 10 s. */
                assert_int_equal(p->pods[0].action, DRAIN_ACTION_EVICT);
                assert_int_equal(p->pods[0].evict_usec, AT(10));
        }
}

static void test_pod_under_two_pdbs(void **state)
{
        struct fx f;
        fx_init(&f);
        add_node(&f, "spot-a", 120, 5);
        int a = (int)add_pdb(&f, "api", NULL, "1", 10, 10);
        int c = (int)add_pdb(&f, "all", NULL, "50%", 20, 20);
        add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "shop/api", 5, 30, a);
        size_t both = add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "shop/api", 5, 30, a);
        f.pod_pdbs[both][1] = (size_t)c;
        f.pods[both].n_pdbs = 2;
        {
                _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
                assert_true(p->pods[both].warnings & DRAIN_WARN_MULTI_PDB);
                assert_int_equal(p->pods[both].n_pdbs, 2);
                /* Never through the eviction API: straight to the force path at its last safe moment. */
                assert_int_equal(p->pods[both].action, DRAIN_ACTION_FORCE);
                assert_int_equal(p->pods[both].evict_usec, AT(110));
                assert_int_equal(p->pods[0].action, DRAIN_ACTION_EVICT);
                assert_int_equal(p->pods[0].evict_usec, NOW);
                assert_true(p->pdbs[0].overlap);
                assert_true(p->pdbs[1].overlap);
                assert_false(p->pdbs[0].feasible);
                assert_int_equal(p->pdbs[0].fit_k, -1);
                assert_int_equal(p->pdbs[0].fit_max_unavailable, -1);
                assert_int_equal(p->nodes[0].verdict, DRAIN_INFEASIBLE_FORCED);
                assert_non_null(strstr(p->nodes[0].reason, "is selected by 2 PDBs"));
        }
        f.in.policy = DRAIN_POLICY_RESPECT;
        {
                _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
                assert_int_equal(p->pods[both].action, DRAIN_ACTION_STUCK);
                assert_int_equal(p->nodes[0].verdict, DRAIN_INFEASIBLE_KILLED);
        }
        /* A Pending pod is let go before the API server looks at PDBs. */
        f.pods[both].pending = true;
        f.pods[both].ready = false;
        {
                _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
                assert_int_equal(p->pods[both].action, DRAIN_ACTION_EVICT);
                assert_int_equal(p->pods[both].evict_usec, NOW);
                assert_false(p->pdbs[0].overlap);
                assert_int_equal(p->nodes[0].verdict, DRAIN_FEASIBLE);
        }
}

static void test_statefulset_vs_deployment(void **state)
{
        struct fx f;
        fx_init(&f);
        add_node(&f, "spot-a", 120, 5);
        int d = (int)add_pdb(&f, "web", NULL, "1", 5, 5);
        int s = (int)add_pdb(&f, "db", NULL, "1", 5, 5);
        size_t d0 = add_pods(&f, 3, 0, DRAIN_OWNER_REPLICASET, "shop/web", 5, 30, d);
        size_t s0 = add_pods(&f, 3, 0, DRAIN_OWNER_STATEFULSET, "shop/db", 5, 30, s);
        _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
        /* Deployment: the replacement starts at the eviction, the slot is back after startup. */
        assert_int_equal(p->pods[d0 + 1].evict_usec, AT(10));
        assert_int_equal(p->pods[d0 + 2].evict_usec, AT(20));
        assert_int_equal(p->pdbs[d].finish_usec, AT(25));
        assert_int_equal(p->pdbs[d].slot_return_usec, S(10));
        /* StatefulSet: only once the old pod has exited, so shutdown + startup. */
        assert_int_equal(p->pods[s0 + 1].evict_usec, AT(15));
        assert_int_equal(p->pods[s0 + 2].evict_usec, AT(30));
        assert_int_equal(p->pdbs[s].finish_usec, AT(35));
        assert_int_equal(p->pdbs[s].slot_return_usec, S(15));
        assert_int_equal(p->nodes[0].limiting_pdb, s);
        assert_int_equal(drain_lower_bound_usec(&f.in, DRAIN_ALL_NODES), S(35));
}

static void test_shared_pdb_earliest_deadline_first(void **state)
{
        struct fx f;
        fx_init(&f);
        size_t late = add_node(&f, "spot-b", 120, 5);
        size_t early = add_node(&f, "spot-a", 40, 5);
        int b = (int)add_pdb(&f, "api", NULL, "1", 10, 10);
        /* spot-b's pods come first in the input; spot-a's deadline is earlier. */
        size_t lb = add_pods(&f, 2, late, DRAIN_OWNER_REPLICASET, "shop/api", 5, 30, b);
        size_t ea = add_pods(&f, 2, early, DRAIN_OWNER_REPLICASET, "shop/api", 5, 30, b);
        _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
        assert_int_equal(p->pods[ea].evict_usec, NOW);
        assert_int_equal(p->pods[ea + 1].evict_usec, AT(10));
        assert_int_equal(p->pods[lb].evict_usec, AT(20));
        assert_int_equal(p->pods[lb + 1].evict_usec, AT(30));
        assert_int_equal(p->pdbs[0].n, 4);
        assert_int_equal(p->pdbs[0].waves, 4);
        assert_true(p->pdbs[0].feasible);
        assert_int_equal(p->nodes[early].verdict, DRAIN_FEASIBLE);
        assert_int_equal(p->nodes[early].finish_usec, AT(15));
        assert_int_equal(p->nodes[late].finish_usec, AT(35));

        /* Tighter: spot-a has 25 s; it still gets both of its waves, spot-b waits. */
        f.nodes[early].deadline_usec = AT(25);
        _cleanup_(drain_plan_freep) struct drain_plan *q = plan_of(&f);
        assert_int_equal(q->nodes[early].verdict, DRAIN_FEASIBLE);
        assert_int_equal(q->pods[ea + 1].evict_usec, AT(10));
        assert_int_equal(q->nodes[late].verdict, DRAIN_FEASIBLE);
        /* The lower bound of one node alone counts only its pods. */
        assert_int_equal(drain_lower_bound_usec(&f.in, early), S(15));
        assert_int_equal(drain_lower_bound_usec(&f.in, DRAIN_ALL_NODES), S(35));
}

/* Two nodes with one deadline: the slots go to the name first in byte order whichever comes first in the
 * input, so that an agent (its own node first) and a controller (the nodes as they joined) plan alike. */
static void test_shared_pdb_tie_by_node_name(void **state)
{
        struct fx f;
        fx_init(&f);
        size_t b_node = add_node(&f, "spot-b", 40, 5);
        size_t a_node = add_node(&f, "spot-a", 40, 5);
        int b = (int)add_pdb(&f, "api", NULL, "1", 10, 10);
        size_t on_b = add_pods(&f, 1, b_node, DRAIN_OWNER_REPLICASET, "shop/api", 5, 30, b);
        size_t on_a = add_pods(&f, 1, a_node, DRAIN_OWNER_REPLICASET, "shop/api", 5, 30, b);
        _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
        assert_int_equal(p->pods[on_a].evict_usec, NOW);
        assert_int_equal(p->pods[on_b].evict_usec, AT(10));
}

static void test_shared_pdb_infeasible_on_one_node(void **state)
{
        struct fx f;
        fx_init(&f);
        size_t a = add_node(&f, "spot-a", 30, 5);
        size_t c = add_node(&f, "spot-b", 120, 5);
        int b = (int)add_pdb(&f, "api", NULL, "1", 20, 20);
        size_t pa = add_pods(&f, 4, a, DRAIN_OWNER_REPLICASET, "shop/api", 5, 30, b);
        add_pods(&f, 2, c, DRAIN_OWNER_REPLICASET, "shop/api", 5, 30, b);
        _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
        /* spot-a: last safe moment 20 s; waves at 0, 10, 20 then the fourth is forced at 20 s. */
        assert_int_equal(p->pods[pa + 2].evict_usec, AT(20));
        assert_int_equal(p->pods[pa + 3].action, DRAIN_ACTION_FORCE);
        assert_int_equal(p->nodes[a].verdict, DRAIN_INFEASIBLE_FORCED);
        assert_false(p->pdbs[0].feasible);
        assert_int_equal(p->pdbs[0].fit_k, 2);
        assert_non_null(strstr(p->nodes[a].reason, "4 pods on spot-a (6 on the draining nodes)"));
        assert_int_equal(p->nodes[c].verdict, DRAIN_FEASIBLE);
}

static void test_critical_pods_last(void **state)
{
        struct fx f;
        fx_init(&f);
        add_node(&f, "spot-a", 120, 5);
        add_pods(&f, 2, 0, DRAIN_OWNER_REPLICASET, "shop/web", 5, 30, -1);
        size_t dns = add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "kube-system/coredns", 3, 30, -1);
        f.pods[dns].priority_class = "system-cluster-critical";
        size_t prio = add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "kube-system/cni", 3, 30, -1);
        f.pods[prio].priority = 2000001000;
        _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
        assert_int_equal(p->pods[0].tier, 0);
        assert_int_equal(p->pods[0].evict_usec, NOW);
        assert_int_equal(p->pods[dns].tier, 1);
        assert_int_equal(p->pods[prio].tier, 1);
        /* After the normal pods are gone. */
        assert_int_equal(p->pods[dns].evict_usec, AT(5));
        assert_int_equal(p->pods[prio].evict_usec, AT(5));
        assert_int_equal(p->nodes[0].finish_usec, AT(8));
        assert_int_equal(p->nodes[0].verdict, DRAIN_FEASIBLE);
}

static void test_critical_pods_never_past_last_safe(void **state)
{
        struct fx f;
        fx_init(&f);
        add_node(&f, "spot-a", 120, 5);
        add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "shop/slow", 100, 110, -1);
        size_t crit = add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "infra/agent", 30, 30, -1);
        f.pods[crit].priority_class = "infra-critical";
        static const char *const classes[] = { "infra-critical" };
        f.in.critical_classes = classes;
        f.in.n_critical_classes = 1;
        _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
        assert_int_equal(p->pods[crit].tier, 1);
        /* The normal pod is gone at 100 s, but 115 - 30 = 85 s is the latest start. */
        assert_int_equal(p->pods[crit].evict_usec, AT(85));
        assert_int_equal(p->pods[crit].action, DRAIN_ACTION_EVICT);
        assert_false(p->pods[crit].killed);
        assert_int_equal(p->nodes[0].verdict, DRAIN_FEASIBLE);
        /* With a configured list, the system classes are no longer special. */
        f.pods[crit].priority_class = "system-node-critical";
        assert_false(drain_pod_is_critical(&f.in, &f.pods[crit]));
        f.in.critical_classes = NULL;
        assert_true(drain_pod_is_critical(&f.in, &f.pods[crit]));
}

static void test_daemonsets_and_mirror_pods_left(void **state)
{
        struct fx f;
        fx_init(&f);
        add_node(&f, "spot-a", 120, 5);
        add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "shop/web", 5, 30, -1);
        size_t ds = add_pods(&f, 1, 0, DRAIN_OWNER_DAEMONSET, "kube-system/node-exporter", 60, 60, -1);
        size_t mirror = add_pods(&f, 1, 0, DRAIN_OWNER_NONE, "kube-system/kube-proxy", 60, 60, -1);
        f.pods[mirror].mirror = true;
        {
                _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
                assert_int_equal(p->pods[ds].action, DRAIN_ACTION_LEAVE);
                assert_int_equal(p->pods[mirror].action, DRAIN_ACTION_LEAVE);
                assert_int_equal(p->nodes[0].n_left, 2);
                assert_int_equal(p->nodes[0].n_to_go, 1);
                assert_int_equal(p->nodes[0].finish_usec, AT(5));
                assert_int_equal(drain_lower_bound_usec(&f.in, DRAIN_ALL_NODES), S(5));
        }
        f.in.evict_daemonsets = true;
        {
                _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
                assert_int_equal(p->pods[ds].action, DRAIN_ACTION_EVICT);
                assert_int_equal(p->pods[mirror].action, DRAIN_ACTION_LEAVE);
                assert_int_equal(p->nodes[0].finish_usec, AT(60));
        }
}

static void test_last_safe_moment(void **state)
{
        struct fx f;
        fx_init(&f);
        add_node(&f, "spot-a", 120, 5);
        size_t observed = add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "shop/a", 8, 30, -1);
        size_t unknown = add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "shop/b", 0, 30, -1);
        size_t beyond = add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "shop/c", 50, 30, -1);
        _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
        /* deadline - margin - shutdown */
        assert_int_equal(p->pods[observed].last_safe_usec, AT(107));
        assert_int_equal(p->pods[observed].shutdown_usec, S(8));
        /* Unknown shutdown: the grace period. */
        assert_int_equal(p->pods[unknown].last_safe_usec, AT(85));
        /* The kubelet kills at the grace period: an observed shutdown longer than it is capped. */
        assert_int_equal(p->pods[beyond].shutdown_usec, S(30));
        assert_int_equal(p->pods[beyond].last_safe_usec, AT(85));
}

static void test_pod_that_cannot_stop_in_time(void **state)
{
        struct fx f;
        fx_init(&f);
        add_node(&f, "spot-a", 120, 5);
        size_t slow = add_pods(&f, 1, 0, DRAIN_OWNER_STATEFULSET, "shop/kafka", 0, 200, -1);
        add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "shop/web", 5, 30, -1);
        _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
        assert_true(p->pods[slow].warnings & DRAIN_WARN_NO_TIME);
        assert_true(p->pods[slow].killed);
        assert_int_equal(p->pods[slow].evict_usec, NOW);
        assert_int_equal(p->pods[slow].gone_usec, AT(120));
        assert_false(p->pods[1].killed);
        assert_int_equal(p->nodes[0].verdict, DRAIN_INFEASIBLE_KILLED);
        assert_non_null(
            strstr(p->nodes[0].reason, "pod shop/kafka-0 needs 200 s to shut down, only 115 s left"));
}

static void test_warnings_and_bare_pods(void **state)
{
        struct fx f;
        fx_init(&f);
        add_node(&f, "spot-a", 120, 5);
        size_t bare = add_pods(&f, 1, 0, DRAIN_OWNER_NONE, "shop/debug", 2, 30, -1);
        size_t dnd = add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "shop/batch", 2, 30, -1);
        f.pods[dnd].do_not_disrupt = true;
        f.pods[dnd].emptydir = true;
        _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
        /* The node is going away: both are evicted, with warnings. */
        assert_int_equal(p->pods[bare].action, DRAIN_ACTION_EVICT);
        assert_true(p->pods[bare].warnings & DRAIN_WARN_BARE);
        assert_int_equal(p->pods[dnd].action, DRAIN_ACTION_EVICT);
        assert_int_equal(p->pods[dnd].warnings, DRAIN_WARN_DO_NOT_DISRUPT | DRAIN_WARN_EMPTYDIR);
        assert_int_equal(p->nodes[0].verdict, DRAIN_FEASIBLE);
}

static void test_bare_pods_never_return_a_slot(void **state)
{
        struct fx f;
        fx_init(&f);
        add_node(&f, "spot-a", 120, 5);
        int b = (int)add_pdb(&f, "solo", "1", NULL, 3, 3);
        add_pods(&f, 3, 0, DRAIN_OWNER_NONE, "shop/solo", 2, 30, b);
        _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
        assert_int_equal(p->pdbs[0].k, 2);
        assert_int_equal(p->pods[0].action, DRAIN_ACTION_EVICT);
        assert_int_equal(p->pods[1].action, DRAIN_ACTION_EVICT);
        assert_int_equal(p->pods[2].action, DRAIN_ACTION_FORCE);
        assert_int_equal(p->pdbs[0].fit_k, 3);
        assert_int_equal(p->pdbs[0].fit_min_available, 0);
        assert_int_equal(drain_lower_bound_usec(&f.in, DRAIN_ALL_NODES), DRAIN_NEVER);
}

static void test_deleting_pods_replan(void **state)
{
        struct fx f;
        fx_init(&f);
        add_node(&f, "spot-a", 120, 5);
        /* A re-plan mid-drain: one pod was evicted 4 s ago, its replacement turns Ready at 6 s. */
        int b = (int)add_pdb(&f, "api", NULL, "1", 10, 9);
        size_t gone = add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "shop/api", 5, 30, b);
        f.pods[gone].deleting = true;
        f.pods[gone].ready = false;
        f.pods[gone].deleted_at_usec = NOW - S(4);
        add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "shop/api", 5, 30, b);
        _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
        assert_int_equal(p->pods[gone].action, DRAIN_ACTION_DELETING);
        assert_int_equal(p->pods[gone].gone_usec, AT(1));
        assert_int_equal(p->pods[1].evict_usec, AT(6));
        assert_int_equal(p->pdbs[0].n, 1);
        assert_int_equal(p->nodes[0].verdict, DRAIN_FEASIBLE);
        assert_int_equal(p->nodes[0].finish_usec, AT(11));
}

static void test_lower_bound(void **state)
{
        struct fx f;
        fx_init(&f);
        add_node(&f, "spot-a", 120, 5);
        assert_int_equal(drain_lower_bound_usec(&f.in, DRAIN_ALL_NODES), 0);
        add_pods(&f, 3, 0, DRAIN_OWNER_REPLICASET, "shop/free", 7, 30, -1);
        assert_int_equal(drain_lower_bound_usec(&f.in, DRAIN_ALL_NODES), S(7));
        /* 5 pods, 2 at a time, 20 s startup: 3 waves, the last after 2 returns, then 4 s. */
        int b = (int)add_pdb(&f, "api", NULL, "2", 10, 10);
        set_startup(&f, "shop/api", 20);
        add_pods(&f, 5, 0, DRAIN_OWNER_REPLICASET, "shop/api", 4, 30, b);
        assert_int_equal(drain_lower_bound_usec(&f.in, DRAIN_ALL_NODES), S(44));
        _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
        assert_int_equal(p->nodes[0].finish_usec - NOW, drain_lower_bound_usec(&f.in, DRAIN_ALL_NODES));
}

static void test_format_text_and_json(void **state)
{
        struct fx f;
        seed504(&f, "1", 30);
        size_t ds = add_pods(&f, 1, 0, DRAIN_OWNER_DAEMONSET, "kube-system/agent", 1, 30, -1);
        _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
        _cleanup_free_ char *text = NULL;
        assert_int_equal(drain_plan_format(p, &text), 0);
        assert_non_null(strstr(text, "INFEASIBLE_FORCED"));
        assert_non_null(strstr(text, "shop/api"));
        assert_non_null(strstr(text, "maxUnavailable 2 (7%) / minAvailable 28 (93%)"));
        assert_non_null(strstr(text, "force"));
        assert_non_null(strstr(text, "shop/agent-10"));
        assert_non_null(strstr(text, "leave"));

        cJSON *j = NULL;
        assert_int_equal(drain_plan_to_json(p, &j), 0);
        const cJSON *node = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "nodes"), 0);
        assert_string_equal(cJSON_GetObjectItem(node, "verdict")->valuestring, "INFEASIBLE_FORCED");
        assert_string_equal(cJSON_GetObjectItem(node, "limiting_pdb")->valuestring, "shop/api");
        assert_int_equal(cJSON_GetObjectItem(node, "finish")->valuedouble, 115);
        const cJSON *pdb = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "pdbs"), 0);
        assert_int_equal(cJSON_GetObjectItem(pdb, "waves")->valueint, 10);
        assert_false(cJSON_IsTrue(cJSON_GetObjectItem(pdb, "feasible")));
        const cJSON *fit = cJSON_GetObjectItem(pdb, "fit");
        assert_int_equal(cJSON_GetObjectItem(fit, "max_unavailable")->valueint, 2);
        assert_int_equal(cJSON_GetObjectItem(fit, "max_unavailable_percent")->valueint, 7);
        const cJSON *pods = cJSON_GetObjectItem(j, "pods");
        assert_int_equal(cJSON_GetArraySize(pods), 11);
        const cJSON *forced = cJSON_GetArrayItem(pods, 9);
        assert_string_equal(cJSON_GetObjectItem(forced, "action")->valuestring, "force");
        assert_int_equal(cJSON_GetObjectItem(forced, "last_safe")->valuedouble, 105);
        assert_true(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(pods, (int)ds), "evict")));
        cJSON_Delete(j);
}

static void test_invalid_input(void **state)
{
        struct fx f;
        seed504(&f, "1", 30);
        struct drain_plan *p = NULL;
        f.pods[3].node = 1;
        assert_int_equal(drain_plan_make(&f.in, &p), -EINVAL);
        f.pods[3].node = 0;
        f.pod_pdbs[4][0] = 7;
        assert_int_equal(drain_plan_make(&f.in, &p), -EINVAL);
        f.pod_pdbs[4][0] = 0;
        f.pods[5].name = NULL;
        assert_int_equal(drain_plan_make(&f.in, &p), -EINVAL);
        assert_null(p);
        assert_null(drain_plan_free(NULL));
}

static void test_empty_node(void **state)
{
        struct fx f;
        fx_init(&f);
        add_node(&f, "spot-a", 120, 5);
        _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
        assert_int_equal(p->nodes[0].verdict, DRAIN_FEASIBLE);
        assert_int_equal(p->nodes[0].finish_usec, NOW);
        assert_int_equal(p->nodes[0].limiting_pdb, -1);
        _cleanup_free_ char *text = NULL;
        assert_int_equal(drain_plan_format(p, &text), 0);
        assert_non_null(strstr(text, "FEASIBLE"));
}

/* Deterministic pseudo-random numbers for the invariant sweep. */
static unsigned lcg_next(unsigned *seed, unsigned n)
{
        *seed = *seed * 1103515245u + 12345u;
        return (*seed >> 16) % n;
}

/* Random clusters: whatever the input, the plan keeps its own promises, and the lower bound never exceeds
 * a drain that went through the PDBs alone. */
static void test_invariants_on_random_clusters(void **state)
{
        unsigned seed = 504;
        for (int iter = 0; iter < 400; iter++) {
                struct fx f;
                fx_init(&f);
                size_t nn = 1 + lcg_next(&seed, 3), nb = lcg_next(&seed, 4);
                for (size_t n = 0; n < nn; n++)
                        add_node(&f, "n", 20 + lcg_next(&seed, 150), lcg_next(&seed, 10));
                for (size_t b = 0; b < nb; b++) {
                        int replicas = 1 + (int)lcg_next(&seed, 20);
                        char v[8];
                        snprintf(v, sizeof(v), "%u%s", lcg_next(&seed, 4), lcg_next(&seed, 2) ? "%" : "");
                        bool max = lcg_next(&seed, 2);
                        add_pdb(&f, "p", max ? NULL : v, max ? v : NULL, replicas,
                                replicas - (int)lcg_next(&seed, 2));
                        f.pdbs[b].always_allow_unhealthy = lcg_next(&seed, 4) == 0;
                }
                size_t np = lcg_next(&seed, 30);
                for (size_t i = 0; i < np; i++) {
                        int pdb = nb && lcg_next(&seed, 4) ? (int)lcg_next(&seed, (unsigned)nb) : -1;
                        add_pods(&f, 1, lcg_next(&seed, (unsigned)nn), (enum drain_owner)lcg_next(&seed, 5),
                                 "o/w", lcg_next(&seed, 40), lcg_next(&seed, 60), pdb);
                        f.pods[i].ready = lcg_next(&seed, 5) != 0;
                        f.pods[i].pending = lcg_next(&seed, 10) == 0;
                        f.pods[i].mirror = lcg_next(&seed, 20) == 0;
                        if (lcg_next(&seed, 6) == 0)
                                f.pods[i].priority_class = "system-node-critical";
                        if (pdb >= 0 && nb > 1 && lcg_next(&seed, 8) == 0) {
                                f.pod_pdbs[i][1] = (size_t)(pdb + 1) % nb;
                                f.pods[i].n_pdbs = 2;
                        }
                        if (lcg_next(&seed, 10) == 0) {
                                f.pods[i].deleting = true;
                                f.pods[i].deleted_at_usec =
                                    lcg_next(&seed, 2) ? NOW - S(lcg_next(&seed, 20)) : 0;
                        }
                }
                f.in.default_startup_usec = S(1 + lcg_next(&seed, 20));
                f.in.policy = lcg_next(&seed, 2) ? DRAIN_POLICY_RESPECT : DRAIN_POLICY_FORCE;
                f.in.evict_daemonsets = lcg_next(&seed, 2);

                _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
                bool forced = false, all_feasible = true;
                uint64_t finish = NOW;
                for (size_t i = 0; i < np; i++) {
                        const struct drain_plan_pod *d = &p->pods[i];
                        if (d->action == DRAIN_ACTION_EVICT || d->action == DRAIN_ACTION_FORCE) {
                                assert_true(d->evict_usec >= NOW);
                                assert_true(d->gone_usec >= d->evict_usec);
                        }
                        if (d->action == DRAIN_ACTION_FORCE && !(d->warnings & DRAIN_WARN_NO_TIME))
                                assert_int_equal(d->evict_usec, d->last_safe_usec);
                        forced = forced || d->forced;
                }
                if (forced)
                        assert_int_equal(f.in.policy, DRAIN_POLICY_FORCE);
                for (size_t n = 0; n < nn; n++) {
                        const struct drain_plan_node *d = &p->nodes[n];
                        assert_non_null(d->reason);
                        if (d->verdict == DRAIN_FEASIBLE)
                                assert_true(d->n_forced == 0 && d->n_killed == 0);
                        else
                                all_feasible = false;
                        if (d->finish_usec > finish)
                                finish = d->finish_usec;
                }
                for (size_t b = 0; b < nb; b++)
                        if (!p->pdbs[b].feasible && p->pdbs[b].fit_k > 0)
                                assert_true(p->pdbs[b].fit_k > p->pdbs[b].k);
                uint64_t lb = drain_lower_bound_usec(&f.in, DRAIN_ALL_NODES);
                if (all_feasible && lb != DRAIN_NEVER)
                        assert_true(lb <= finish - NOW);
                _cleanup_free_ char *text = NULL;
                assert_int_equal(drain_plan_format(p, &text), 0);
                cJSON *j = NULL;
                assert_int_equal(drain_plan_to_json(p, &j), 0);
                cJSON_Delete(j);
        }
}

/* A wave's replacement is Ready by its startup estimate, but the PDB status does not count it yet: the slot
 * it gives back is a moment away, not never. Once the status counts it, it is not counted twice. */
static void test_overdue_return_counted_once(void **state)
{
        struct fx f;
        fx_init(&f);
        add_node(&f, "spot-a", 120, 5);
        int b = (int)add_pdb(&f, "api", NULL, "1", 10, 9);
        /* Its shutdown estimate (50 s) would have it still stopping; it is gone. */
        size_t gone = add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "shop/api", 50, 60, b);
        f.pods[gone].deleting = true;
        f.pods[gone].ready = false;
        f.pods[gone].deleted_at_usec = NOW - S(25);
        f.pods[gone].gone_usec = NOW - S(20);
        size_t next = add_pods(&f, 2, 0, DRAIN_OWNER_REPLICASET, "shop/api", 5, 30, b);
        _cleanup_(drain_plan_freep) struct drain_plan *lag = plan_of(&f);
        /* Gone 20 s ago, not when its shutdown estimate says. */
        assert_int_equal(lag->pods[gone].gone_usec, NOW - S(20));
        assert_int_equal(lag->pods[next].evict_usec, AT(1));
        assert_int_equal(lag->pods[next].action, DRAIN_ACTION_EVICT);
        assert_int_equal(lag->pods[next + 1].evict_usec, AT(11));
        assert_int_equal(lag->nodes[0].verdict, DRAIN_FEASIBLE);

        /* The status caught up: one slot now, the next one a startup after the first eviction. */
        f.pdbs[b].current_healthy = 10;
        f.pdbs[b].disruptions_allowed = 1;
        _cleanup_(drain_plan_freep) struct drain_plan *caught_up = plan_of(&f);
        assert_int_equal(caught_up->pods[next].evict_usec, NOW);
        assert_int_equal(caught_up->pods[next + 1].evict_usec, AT(10));
        /* A gone pod needs no time of its own: the bound is the waiting pods' shutdown. */
        assert_int_equal(drain_lower_bound_usec(&f.in, 0), S(5));
}

/* A PDB short of a pod that no drain here deleted: seen going (lost_usec), it is expected back a startup
 * later; never seen going, or overdue by more than DRAIN_LOSS_OVERDUE_USEC (a crashloop), it stays
 * missing. Only the shortfall the plan's own deleting pods leave unexplained counts. */
static void test_lost_pods_return(void **state)
{
        struct fx f;
        fx_init(&f);
        add_node(&f, "spot-a", 120, 5);
        /* maxUnavailable 1 of 10, one missing: no disruption now. */
        int b = (int)add_pdb(&f, "api", NULL, "1", 10, 9);
        set_startup(&f, "shop/api", 10);
        add_pods(&f, 3, 0, DRAIN_OWNER_REPLICASET, "shop/api", 5, 30, b);
        {
                _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
                assert_int_equal(p->nodes[0].verdict, DRAIN_INFEASIBLE_FORCED);
                assert_int_equal(p->pods[0].action, DRAIN_ACTION_FORCE);
        }
        uint64_t lost[2] = { NOW - S(4) };
        f.pdbs[b].lost_usec = lost;
        f.pdbs[b].n_lost = 1;
        {
                /* Back at 6 s: a wave a startup apart from there. */
                _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
                assert_int_equal(p->nodes[0].verdict, DRAIN_FEASIBLE);
                assert_int_equal(p->pods[0].action, DRAIN_ACTION_EVICT);
                assert_int_equal(p->pods[0].evict_usec, AT(6));
                assert_int_equal(p->pods[1].evict_usec, AT(16));
                assert_int_equal(p->pods[2].evict_usec, AT(26));
        }
        lost[0] = NOW - S(35);
        {
                /* 25 s overdue: a moment from now. */
                _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
                assert_int_equal(p->nodes[0].verdict, DRAIN_FEASIBLE);
                assert_int_equal(p->pods[0].evict_usec, AT(1));
        }
        lost[0] = NOW - S(45);
        {
                /* 35 s overdue: down for good. */
                _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
                assert_int_equal(p->nodes[0].verdict, DRAIN_INFEASIBLE_FORCED);
        }
        /* Two seen going, one missing: only the earliest comes back. */
        lost[0] = NOW - S(8);
        lost[1] = NOW - S(4);
        f.pdbs[b].n_lost = 2;
        {
                _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
                assert_int_equal(p->pods[0].evict_usec, AT(2));
                assert_int_equal(p->pods[1].evict_usec, AT(12));
        }
        /* The missing pod is this drain's own, deleting: its return explains the shortfall, and the losses
         * seen (the same pod, in the watch) add nothing. */
        size_t own = add_pods(&f, 1, 0, DRAIN_OWNER_REPLICASET, "shop/api", 5, 30, b);
        f.pods[own].deleting = true;
        f.pods[own].ready = false;
        f.pods[own].deleted_at_usec = NOW - S(1);
        {
                _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
                assert_int_equal(p->pods[0].evict_usec, AT(9));
                assert_int_equal(p->pods[1].evict_usec, AT(19));
        }
        f.pdbs[b].lost_usec = NULL;
        assert_int_equal(drain_plan_make(&f.in, &(struct drain_plan *){ NULL }), -EINVAL);
}

/* ---- the API budget ---- */

/* 10 pods on spot-a (115 s to act) need at least 10 evictions and the node's 3 requests: 13. At 0.1 a second
 * and a burst of 1 the client lets 12 through in time; at 0.2, 24. A drain due later does not count against
 * spot-a, one due earlier does; an unlimited client is never short. */
static void test_api_budget(void **state)
{
        struct fx f;
        fx_init(&f);
        size_t a = add_node(&f, "spot-a", 120, 5);
        add_pods(&f, 10, a, DRAIN_OWNER_REPLICASET, "shop/ReplicaSet/web-1", 1, 5, -1);
        struct drain_api_budget b = { 0 };
        {
                _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
                assert_int_equal(drain_api_budget_short(&f.in, p, a, 0.1, 1, &b), 1);
                assert_int_equal(b.needed, 10 + DRAIN_API_PER_NODE);
                assert_int_equal(b.allowed, 12);
                assert_true(b.qps == 0.1);
                assert_int_equal(drain_api_budget_short(&f.in, p, a, 0.2, 1, &b), 0);
                assert_int_equal(drain_api_budget_short(&f.in, p, a, -1, 1, &b), 0);
        }
        size_t later = add_node(&f, "spot-b", 600, 5);
        add_pods(&f, 20, later, DRAIN_OWNER_REPLICASET, "shop/ReplicaSet/web-1", 1, 5, -1);
        {
                _cleanup_(drain_plan_freep) struct drain_plan *p = plan_of(&f);
                assert_int_equal(drain_api_budget_short(&f.in, p, a, 0.2, 1, &b), 0);
                /* spot-b's own drain must get spot-a's requests out too: 36 needed, 30 allowed in 595 s at
                 * 0.05 a second. */
                assert_int_equal(drain_api_budget_short(&f.in, p, later, 0.05, 1, &b), 1);
                assert_int_equal(b.needed, 30 + 2 * DRAIN_API_PER_NODE);
                assert_int_equal(b.allowed, 30);
        }
}

/* ---- the graded verdict ---- */

/* Pods never seen stopping: their shutdown is a guess (shutdown_seen false, as drain_inputs leaves it). */
static void unseen(struct fx *f, size_t first, size_t n, double guess)
{
        for (size_t i = first; i < first + n; i++) {
                f->pods[i].shutdown_seen = false;
                f->pods[i].shutdown_usec = S(guess);
        }
}

static void seen(struct fx *f, size_t first, size_t n, double shutdown)
{
        for (size_t i = first; i < first + n; i++) {
                f->pods[i].shutdown_seen = true;
                f->pods[i].shutdown_usec = S(shutdown);
        }
}

/* spot-a (120 s budget, 5 s margin) with count Ready pods of key under a maxUnavailable 1 PDB over replicas,
 * never seen stopping (guessed at guess s): the index of the first. */
static size_t one_pdb(struct fx *f, int count, int replicas, enum drain_owner owner, const char *key,
                      double startup, double grace, double guess)
{
        fx_init(f);
        size_t n = add_node(f, "spot-a", 120, 5);
        int pdb = (int)add_pdb(f, strrchr(key, '/') + 1, NULL, "1", replicas, replicas);
        set_startup(f, key, startup);
        size_t first = add_pods(f, count, n, owner, key, 0, grace, pdb);
        unseen(f, first, (size_t)count, guess);
        return first;
}

/* Issue 18: a StatefulSet's 3 pods under maxUnavailable 1 with a 120 s grace period, longer than the 115 s
 * to the deadline less the margin, startup 5 s. One at a time they fit if each stops within 35 s (3 stops
 * and 2 startups in 115 s): at risk, naming that, not infeasible. */
static void test_grade_long_grace_at_risk(void **state)
{
        struct fx f;
        size_t n = 0,
               first = one_pdb(&f, 3, 3, DRAIN_OWNER_STATEFULSET, "shop/StatefulSet/quorum", 5, 120, 60);
        struct drain_grade_result g = { 0 };
        assert_int_equal(drain_grade_node(&f.in, n, &g), 0);
        assert_int_equal(g.grade, DRAIN_GRADE_AT_RISK);
        assert_true(g.unseen);
        assert_int_equal(g.stop_within_usec, S(35));
        assert_int_equal(g.grace_usec, S(120));
        assert_null(g.plan);
        assert_non_null(strstr(g.reason,
                               "fits if shop/quorum pods stop within 35 s of SIGTERM; their grace is "
                               "120 s; none seen stopping yet"));
        assert_string_equal(drain_grade_to_string(g.grade), "at-risk");
        drain_grade_result_clear(&g);

        /* Seen stopping in 24 s: certain, and it fits. */
        seen(&f, first, 3, 24);
        assert_int_equal(drain_grade_node(&f.in, n, &g), 0);
        assert_int_equal(g.grade, DRAIN_GRADE_FITS);
        assert_false(g.unseen);
        assert_null(g.reason);
        /* Seen taking 50 s: the stops seen say it cannot fit. */
        seen(&f, first, 3, 50);
        assert_int_equal(drain_grade_node(&f.in, n, &g), 0);
        assert_int_equal(g.grade, DRAIN_GRADE_INFEASIBLE);
        assert_non_null(g.plan);
        assert_int_not_equal(g.plan->nodes[n].verdict, DRAIN_FEASIBLE);
        assert_null(strstr(g.reason, "never seen"));
        drain_grade_result_clear(&g);
}

/* Grades from a cache of the input's plans agree with grades made afresh, and a second node graded on the
 * same input reuses them: the infeasible plan handed out is the cache's own, borrowed. */
static void test_grade_cached_agrees(void **state)
{
        struct fx f;
        one_pdb(&f, 3, 3, DRAIN_OWNER_STATEFULSET, "shop/StatefulSet/quorum", 5, 120, 60);
        struct drain_grade_cache *cache = NULL;
        struct drain_grade_result a = { 0 }, b = { 0 };
        assert_int_equal(drain_grade_node(&f.in, 0, &a), 0);
        assert_int_equal(drain_grade_node_cached(&f.in, 0, &cache, &b), 0);
        assert_non_null(cache);
        assert_int_equal(b.grade, a.grade);
        assert_int_equal(b.stop_within_usec, a.stop_within_usec);
        assert_string_equal(b.reason, a.reason);
        drain_grade_result_clear(&a);
        drain_grade_result_clear(&b);
        drain_grade_cache_free(cache);

        /* 10 pods at 15 s startups: infeasible at once; two grades share the instant plan. */
        cache = NULL;
        one_pdb(&f, 10, 30, DRAIN_OWNER_REPLICASET, "shop/ReplicaSet/api-7d4b9", 15, 300, 150);
        assert_int_equal(drain_grade_node_cached(&f.in, 0, &cache, &a), 0);
        assert_int_equal(drain_grade_node_cached(&f.in, 0, &cache, &b), 0);
        assert_int_equal(a.grade, DRAIN_GRADE_INFEASIBLE);
        assert_true(a.plan_borrowed);
        assert_ptr_equal(a.plan, b.plan);
        drain_grade_result_clear(&a);
        drain_grade_result_clear(&b);
        drain_grade_cache_free(cache);
}

/* seed-504's api: 10 pods one at a time at 15 s startups cannot go in 115 s even if they stopped at once,
 * whatever their grace: infeasible, with the PDB's phrase. Short grace periods that fit whole: fits. */
static void test_grade_infeasible_and_fits(void **state)
{
        struct fx f;
        size_t n = 0;
        one_pdb(&f, 10, 30, DRAIN_OWNER_REPLICASET, "shop/ReplicaSet/api-7d4b9", 15, 300, 150);
        struct drain_grade_result g = { 0 };
        assert_int_equal(drain_grade_node(&f.in, n, &g), 0);
        assert_int_equal(g.grade, DRAIN_GRADE_INFEASIBLE);
        assert_non_null(
            strstr(g.reason, "even if the pods never seen stopping stopped at once: PDB shop/api"));
        drain_grade_result_clear(&g);

        one_pdb(&f, 4, 30, DRAIN_OWNER_REPLICASET, "shop/ReplicaSet/api-7d4b9", 5, 30, 0);
        assert_int_equal(drain_grade_node(&f.in, n, &g), 0);
        assert_int_equal(g.grade, DRAIN_GRADE_FITS);
        assert_true(g.unseen);
        assert_false(drain_input_guesses(&f.in));
        /* One bare pod whose 600 s grace cannot fit, given the time left to act on: a guess. At risk up to
         * the time left, its own name given. */
        size_t bare = add_pods(&f, 1, n, DRAIN_OWNER_NONE, "job", 0, 600, -1);
        f.pods[bare].owner_key = NULL;
        unseen(&f, bare, 1, 115);
        assert_true(drain_input_guesses(&f.in));
        assert_int_equal(drain_grade_node(&f.in, n, &g), 0);
        assert_int_equal(g.grade, DRAIN_GRADE_AT_RISK);
        assert_int_equal(g.stop_within_usec, S(115));
        assert_non_null(strstr(g.reason,
                               "fits if shop/job-4 pods stop within 115 s of SIGTERM; their grace is "
                               "600 s"));
        drain_grade_result_clear(&g);
        assert_int_equal(drain_grade_node(&f.in, 7, &g), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_seed504_infeasible_forced),
                cmocka_unit_test(test_seed504_respect_kills),
                cmocka_unit_test(test_borrowed_names),
                cmocka_unit_test(test_seed504_tuned_feasible),
                cmocka_unit_test(test_kubernetes_rounding),
                cmocka_unit_test(test_zero_allowed),
                cmocka_unit_test(test_do_not_disrupt_at_last_safe_moment),
                cmocka_unit_test(test_lb_hold),
                cmocka_unit_test(test_unhealthy_pdb_blocks),
                cmocka_unit_test(test_unhealthy_pods_evicted_for_free),
                cmocka_unit_test(test_pod_under_two_pdbs),
                cmocka_unit_test(test_statefulset_vs_deployment),
                cmocka_unit_test(test_shared_pdb_earliest_deadline_first),
                cmocka_unit_test(test_shared_pdb_tie_by_node_name),
                cmocka_unit_test(test_shared_pdb_infeasible_on_one_node),
                cmocka_unit_test(test_critical_pods_last),
                cmocka_unit_test(test_critical_pods_never_past_last_safe),
                cmocka_unit_test(test_daemonsets_and_mirror_pods_left),
                cmocka_unit_test(test_last_safe_moment),
                cmocka_unit_test(test_pod_that_cannot_stop_in_time),
                cmocka_unit_test(test_warnings_and_bare_pods),
                cmocka_unit_test(test_bare_pods_never_return_a_slot),
                cmocka_unit_test(test_deleting_pods_replan),
                cmocka_unit_test(test_overdue_return_counted_once),
                cmocka_unit_test(test_lost_pods_return),
                cmocka_unit_test(test_lower_bound),
                cmocka_unit_test(test_format_text_and_json),
                cmocka_unit_test(test_invalid_input),
                cmocka_unit_test(test_empty_node),
                cmocka_unit_test(test_invariants_on_random_clusters),
                cmocka_unit_test(test_api_budget),
                cmocka_unit_test(test_grade_long_grace_at_risk),
                cmocka_unit_test(test_grade_cached_agrees),
                cmocka_unit_test(test_grade_infeasible_and_fits),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
