/* Shutdown estimates: the stops observed per owner, and what the planner's input takes a pod's shutdown to
 * be for acting (safe) and for the verdict (expected). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cJSON.h>
#include <cmocka.h>

#include "drain/engine_internal.h"
#include "spotdrain/engine.h"
#include "spotdrain/kube.h"
#include "spotdrain/util.h"

#define S(x) ((uint64_t)((x)*1000000.0))
/* 2026-11-30T10:00:00Z, the engine clock of these inputs. */
#define NOW   S(1796032800)
#define OWNER "shop/ReplicaSet/api-7d4b9"

static void test_observations_median_and_longest(void **state)
{
        _cleanup_(drain_shutdowns_freep) struct drain_shutdowns *s = NULL;
        uint64_t median = 0, longest = 0;
        assert_int_equal(drain_shutdowns_new(&s), 0);
        assert_false(drain_shutdowns_get(s, OWNER, &median, &longest));
        assert_int_equal(drain_shutdowns_generation(s), 0);
        assert_int_equal(drain_shutdowns_observe(s, OWNER, S(20), S(30)), 0);
        /* Quicker than expected: nobody needs judging again. */
        assert_int_equal(drain_shutdowns_generation(s), 0);
        assert_int_equal(drain_shutdowns_observe(s, OWNER, S(8), S(30)), 0);
        assert_int_equal(drain_shutdowns_observe(s, "shop/ReplicaSet/other", S(1), 0), 0);
        assert_int_equal(drain_shutdowns_generation(s), 1);
        assert_int_equal(drain_shutdowns_observe(s, OWNER, S(12), S(30)), 0);
        assert_true(drain_shutdowns_get(s, OWNER, &median, &longest));
        assert_int_equal(median, S(12));
        assert_int_equal(longest, S(20));
        /* The median rose from 8 to 12 s. */
        assert_int_equal(drain_shutdowns_generation(s), 2);
        /* An even count gives the lower middle, a value that was seen. */
        assert_int_equal(drain_shutdowns_observe(s, OWNER, S(30), S(30)), 0);
        assert_true(drain_shutdowns_get(s, OWNER, &median, NULL));
        assert_int_equal(median, S(12));
        assert_int_equal(drain_shutdowns_generation(s), 2);
        /* Only the latest stops count: an old long one is forgotten. */
        for (int i = 0; i < 16; i++)
                assert_int_equal(drain_shutdowns_observe(s, OWNER, S(3), S(30)), 0);
        assert_true(drain_shutdowns_get(s, OWNER, &median, &longest));
        assert_int_equal(median, S(3));
        assert_int_equal(longest, S(3));
        assert_int_equal(drain_shutdowns_observe(NULL, OWNER, 1, 0), -EINVAL);
        assert_false(drain_shutdowns_get(NULL, OWNER, &median, &longest));
}

/* A Ready pod of OWNER with a 60 s grace period; stopping_for > 0: deleted that long ago. */
static cJSON *pod(const char *name, double stopping_for)
{
        char deletion[160] = "";
        if (stopping_for > 0) {
                /* deletionTimestamp is when the grace period ends. */
                uint64_t ends = NOW - S(stopping_for) + S(60);
                char ts[64];
                assert_int_equal(format_rfc3339(ends, ts, sizeof(ts)), 0);
                snprintf(deletion, sizeof(deletion),
                         "\"deletionTimestamp\": \"%s\", \"deletionGracePeriodSeconds\": 60,", ts);
        }
        char text[1024];
        snprintf(text, sizeof(text),
                 "{\"metadata\": {\"name\": \"%s\", \"namespace\": \"shop\", \"uid\": \"u-%s\", %s"
                 " \"ownerReferences\": [{\"kind\": \"ReplicaSet\", \"name\": \"api-7d4b9\", "
                 "\"controller\": true}]},"
                 " \"spec\": {\"nodeName\": \"spot-a\", \"terminationGracePeriodSeconds\": 60},"
                 " \"status\": {\"phase\": \"Running\", \"conditions\": [{\"type\": \"Ready\", \"status\": "
                 "\"True\"}]}}",
                 name, name, deletion);
        cJSON *o = cJSON_Parse(text);
        assert_non_null(o);
        return o;
}

/* The shutdown estimate of each pod ("a", "b" stopping for `stopping` s when > 0, "c" gone) on basis. */
static void estimates(const struct drain_shutdowns *seen, enum drain_shutdown_basis basis, double stopping,
                      uint64_t ret[3])
{
        struct drain_inputs_options o = { .now_usec = NOW,
                                          .default_startup_usec = S(10),
                                          .shutdowns = seen,
                                          .shutdown_basis = basis,
                                          .expected_shutdown_fraction = 0.5 };
        _cleanup_(drain_inputs_freep) struct drain_inputs *di = NULL;
        size_t idx[3];
        assert_int_equal(drain_inputs_new(&o, &di), 0);
        assert_int_equal(drain_inputs_add_node(di, "spot-a", NOW + S(120), S(5), NULL), 0);
        const char *names[] = { "a", "b", "c" };
        double stop[] = { 0, stopping, 100 };
        for (size_t i = 0; i < 3; i++) {
                cJSON *p = pod(names[i], stop[i]);
                assert_int_equal(drain_inputs_add_pod(di, 0, p, &idx[i]), 0);
                cJSON_Delete(p);
        }
        /* "c" was deleted 100 s ago and is gone: it says nothing of how long a stop takes now. */
        assert_int_equal(drain_inputs_set_gone(di, idx[2], NOW - S(50)), 0);
        assert_int_equal(drain_inputs_set_gone(di, idx[0], NOW), -EINVAL); /* not deleting */
        const struct drain_input *in = drain_inputs_get(di);
        for (size_t i = 0; i < 3; i++)
                ret[i] = in->pods[idx[i]].shutdown_usec;
}

static void test_estimates_safe_and_expected(void **state)
{
        _cleanup_(drain_shutdowns_freep) struct drain_shutdowns *seen = NULL;
        uint64_t e[3];
        assert_int_equal(drain_shutdowns_new(&seen), 0);

        /* Nothing seen: acting allows the whole grace period (0 = the planner takes the grace period), the
         * verdict expects half of it. */
        estimates(NULL, DRAIN_SHUTDOWN_SAFE, 0, e);
        assert_int_equal(e[0], 0);
        estimates(seen, DRAIN_SHUTDOWN_SAFE, 0, e);
        assert_int_equal(e[0], 0);
        estimates(seen, DRAIN_SHUTDOWN_EXPECTED, 0, e);
        assert_int_equal(e[0], S(30));
        assert_int_equal(e[2], S(30));

        /* Siblings stopped in 20 s and 16 s: the verdict takes the median, acting the longest and a
         * quarter on top. */
        assert_int_equal(drain_shutdowns_observe(seen, OWNER, S(20), S(30)), 0);
        assert_int_equal(drain_shutdowns_observe(seen, OWNER, S(16), S(30)), 0);
        estimates(seen, DRAIN_SHUTDOWN_EXPECTED, 0, e);
        assert_int_equal(e[0], S(16));
        estimates(seen, DRAIN_SHUTDOWN_SAFE, 0, e);
        assert_int_equal(e[0], S(25));

        /* A sibling has been stopping for 40 s already: longer than anything seen, so both grow to it. */
        estimates(seen, DRAIN_SHUTDOWN_EXPECTED, 40, e);
        assert_int_equal(e[0], S(40));
        assert_int_equal(e[1], S(40));
        estimates(seen, DRAIN_SHUTDOWN_SAFE, 40, e);
        assert_int_equal(e[0], S(50));
        /* One stopping for less than the median changes nothing. */
        estimates(seen, DRAIN_SHUTDOWN_EXPECTED, 5, e);
        assert_int_equal(e[0], S(16));

        /* A quick stop still takes a moment: never 0, which would mean unknown. */
        _cleanup_(drain_shutdowns_freep) struct drain_shutdowns *quick = NULL;
        assert_int_equal(drain_shutdowns_new(&quick), 0);
        assert_int_equal(drain_shutdowns_observe(quick, OWNER, 0, S(30)), 0);
        estimates(quick, DRAIN_SHUTDOWN_EXPECTED, 0, e);
        assert_int_equal(e[0], 1);
        estimates(quick, DRAIN_SHUTDOWN_SAFE, 0, e);
        assert_int_equal(e[0], S(1));
}

/* The verdict follows the estimates: a pod that waits 60 s for its PDB slot fits a 120 s budget if it
 * stops in 30 s, not if it needs its whole 60 s grace period. */
static void test_expected_basis_changes_the_verdict(void **state)
{
        for (int basis = DRAIN_SHUTDOWN_SAFE; basis <= DRAIN_SHUTDOWN_EXPECTED; basis++) {
                struct drain_inputs_options o = { .now_usec = NOW,
                                                  .default_startup_usec = S(30),
                                                  .shutdown_basis = (enum drain_shutdown_basis)basis,
                                                  .expected_shutdown_fraction = 0.5 };
                _cleanup_(drain_inputs_freep) struct drain_inputs *di = NULL;
                _cleanup_(drain_plan_freep) struct drain_plan *plan = NULL;
                assert_int_equal(drain_inputs_new(&o, &di), 0);
                assert_int_equal(drain_inputs_add_node(di, "spot-a", NOW + S(120), S(5), NULL), 0);
                cJSON *pdb = cJSON_Parse(
                    "{\"metadata\": {\"name\": \"api\", \"namespace\": \"shop\"}, \"spec\": "
                    "{\"maxUnavailable\": 1,"
                    " \"selector\": {}}, \"status\": {\"currentHealthy\": 10, \"desiredHealthy\": 9,"
                    " \"expectedPods\": 10, \"disruptionsAllowed\": 1}}");
                assert_non_null(pdb);
                assert_int_equal(drain_inputs_add_pdb(di, pdb), 0);
                cJSON_Delete(pdb);
                const char *names[] = { "a", "b", "c" };
                for (size_t i = 0; i < 3; i++) {
                        cJSON *p = pod(names[i], 0);
                        assert_int_equal(drain_inputs_add_pod(di, 0, p, NULL), 0);
                        cJSON_Delete(p);
                }
                assert_int_equal(drain_plan_make(drain_inputs_get(di), &plan), 0);
                /* Three waves 30 s apart: the last starts at 60 s. */
                assert_int_equal(plan->pdbs[0].waves, 3);
                assert_int_equal(plan->nodes[0].verdict,
                                 basis == DRAIN_SHUTDOWN_SAFE ? DRAIN_INFEASIBLE_FORCED : DRAIN_FEASIBLE);
        }
}

/* Pod "a" on spot-a was evicted 2 s ago: the PDB's status (maxUnavailable 1) shows its slot spent, but its
 * own watch event is still on the way, so its object says nothing of it. Planned as it stands, spot-b's pod
 * waits for a slot nothing gives back; known to be deleting since the eviction's answer, its replacement is
 * foreseen a startup (10 s) after that, and spot-b's pod goes then. */
static void test_accepted_eviction_seen_late(void **state)
{
        for (int told = 0; told <= 1; told++) {
                struct drain_inputs_options o = { .now_usec = NOW,
                                                  .default_startup_usec = S(10),
                                                  .shutdown_basis = DRAIN_SHUTDOWN_EXPECTED,
                                                  .expected_shutdown_fraction = 0.5 };
                _cleanup_(drain_inputs_freep) struct drain_inputs *di = NULL;
                _cleanup_(drain_plan_freep) struct drain_plan *plan = NULL;
                size_t a, b, ia, ib;
                assert_int_equal(drain_inputs_new(&o, &di), 0);
                assert_int_equal(drain_inputs_add_node(di, "spot-a", NOW + S(118), S(5), &a), 0);
                assert_int_equal(drain_inputs_add_node(di, "spot-b", NOW + S(120), S(5), &b), 0);
                cJSON *pdb = cJSON_Parse(
                    "{\"metadata\": {\"name\": \"api\", \"namespace\": \"shop\"}, \"spec\": "
                    "{\"maxUnavailable\": 1, \"selector\": {}}, \"status\": {\"currentHealthy\": 9,"
                    " \"desiredHealthy\": 9, \"expectedPods\": 10, \"disruptionsAllowed\": 0}}");
                assert_non_null(pdb);
                assert_int_equal(drain_inputs_add_pdb(di, pdb), 0);
                cJSON_Delete(pdb);
                cJSON *pa = pod("a", 0), *pb = pod("b", 0);
                assert_int_equal(drain_inputs_add_pod(di, a, pa, &ia), 0);
                assert_int_equal(drain_inputs_add_pod(di, b, pb, &ib), 0);
                cJSON_Delete(pa);
                cJSON_Delete(pb);
                if (told)
                        assert_int_equal(drain_inputs_set_deleting(di, ia, NOW - S(2)), 0);
                const struct drain_input *in = drain_inputs_get(di);
                assert_int_equal(in->pods[ia].deleting, (bool)told);
                assert_int_equal(drain_plan_make(in, &plan), 0);
                if (told) {
                        assert_int_equal(plan->nodes[b].verdict, DRAIN_FEASIBLE);
                        assert_int_equal(plan->pods[ib].action, DRAIN_ACTION_EVICT);
                        assert_int_equal(plan->pods[ib].evict_usec, NOW + S(8));
                } else
                        assert_int_not_equal(plan->nodes[b].verdict, DRAIN_FEASIBLE);
        }

        /* A pod whose object says it is deleting keeps the object's times; an index beyond the pods or no
         * time is refused. */
        struct drain_inputs_options o = { .now_usec = NOW, .default_startup_usec = S(10) };
        _cleanup_(drain_inputs_freep) struct drain_inputs *di = NULL;
        size_t idx;
        assert_int_equal(drain_inputs_new(&o, &di), 0);
        assert_int_equal(drain_inputs_add_node(di, "spot-a", NOW + S(120), S(5), NULL), 0);
        cJSON *p = pod("a", 20);
        assert_int_equal(drain_inputs_add_pod(di, 0, p, &idx), 0);
        cJSON_Delete(p);
        assert_int_equal(drain_inputs_set_deleting(di, idx, NOW - S(2)), 0);
        assert_int_equal(drain_inputs_get(di)->pods[idx].deleted_at_usec, NOW - S(20));
        assert_int_equal(drain_inputs_set_deleting(di, idx + 1, NOW), -EINVAL);
        assert_int_equal(drain_inputs_set_deleting(di, idx, 0), -EINVAL);
}

/* On the safe basis, a pod never seen stopping is given its whole grace period when that fits in its node's
 * drain (from its start); when it does not, the share of it expected, capped at the time left, so that a
 * grace longer than the budget does not force it (and all its PDB's pods) at the notice. */
static uint64_t safe_estimate(uint64_t deadline, int64_t started_ago, double fraction, bool *ret_seen)
{
        struct drain_inputs_options o = { .now_usec = NOW,
                                          .default_startup_usec = S(10),
                                          .shutdown_basis = DRAIN_SHUTDOWN_SAFE,
                                          .expected_shutdown_fraction = fraction };
        _cleanup_(drain_inputs_freep) struct drain_inputs *di = NULL;
        size_t node, idx;
        assert_int_equal(drain_inputs_new(&o, &di), 0);
        assert_int_equal(drain_inputs_add_node(di, "spot-a", deadline, S(5), &node), 0);
        if (started_ago >= 0)
                assert_int_equal(drain_inputs_set_node_start(di, node, NOW - S(started_ago)), 0);
        cJSON *p = pod("a", 0);
        assert_int_equal(drain_inputs_add_pod(di, node, p, &idx), 0);
        cJSON_Delete(p);
        const struct drain_pod_in *in = &drain_inputs_get(di)->pods[idx];
        *ret_seen = in->shutdown_seen;
        return in->shutdown_usec;
}

static void test_safe_estimate_of_a_long_grace(void **state)
{
        bool seen = true;
        /* 60 s grace, 115 s to go: the whole grace (0). */
        assert_int_equal(safe_estimate(NOW + S(120), -1, 0.5, &seen), 0);
        assert_false(seen);
        /* 45 s to go: half of it. */
        assert_int_equal(safe_estimate(NOW + S(50), -1, 0.5, &seen), S(30));
        /* 54 s expected, 45 s left: capped. */
        assert_int_equal(safe_estimate(NOW + S(50), -1, 0.9, &seen), S(45));
        /* The drain started 30 s ago with 75 s to go: the grace fitted then, and the pod is forced at
         * deadline - margin - grace as ever (not moved later as time passes). */
        assert_int_equal(safe_estimate(NOW + S(50), 30, 0.5, &seen), 0);
        struct drain_inputs_options o = { .now_usec = NOW };
        _cleanup_(drain_inputs_freep) struct drain_inputs *di = NULL;
        assert_int_equal(drain_inputs_new(&o, &di), 0);
        assert_int_equal(drain_inputs_set_node_start(di, 0, NOW), -EINVAL);
}

/* What is kept across restarts and shared: the latest samples, how many were seen, when; a reload takes
 * them, an older view does not undo a newer one, and a pod counted twice (a drain and the learner) once. */
static void test_kept_and_shared(void **state)
{
        _cleanup_(drain_shutdowns_freep) struct drain_shutdowns *a = NULL, *b = NULL;
        uint64_t median = 0;
        assert_int_equal(drain_shutdowns_new(&a), 0);
        assert_int_equal(drain_shutdowns_observe_pod(a, OWNER, "u-1", S(3), S(30)), 0);
        assert_int_equal(drain_shutdowns_observe_pod(a, OWNER, "u-1", S(9), S(30)), 0); /* counted once */
        assert_int_equal(drain_shutdowns_observe_pod(a, OWNER, "u-2", S(5), S(30)), 0);
        assert_int_equal(drain_shutdowns_observe_startup(a, OWNER, "u-1", S(2)), 0);
        assert_int_equal(drain_shutdowns_observe_startup(a, OWNER, "u-1", S(7)), 0);
        assert_true(drain_shutdowns_startup(a, OWNER, &median));
        assert_int_equal(median, S(2));
        assert_int_equal(drain_shutdowns_changes(a), 3);

        cJSON *doc = NULL;
        assert_int_equal(drain_shutdowns_to_json(a, &doc), 0);
        const cJSON *o = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "owners"), OWNER);
        assert_non_null(o);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "stops_ms")), 2);
        assert_int_equal(cJSON_GetObjectItem(o, "stops_seen")->valueint, 2);
        assert_non_null(cJSON_GetStringValue(cJSON_GetObjectItem(o, "updated")));

        /* A restarted process that saw the owner's pods start before it read the kept stops takes them. */
        size_t taken = 0;
        assert_int_equal(drain_shutdowns_new(&b), 0);
        assert_int_equal(drain_shutdowns_observe_startup(b, OWNER, "u-9", S(4)), 0);
        unsigned g = drain_shutdowns_generation(b);
        assert_int_equal(drain_shutdowns_merge_json(b, doc, &taken), 0);
        assert_int_equal(taken, 1);
        assert_true(drain_shutdowns_get(b, OWNER, &median, NULL));
        assert_int_equal(median, S(3));
        assert_int_not_equal(drain_shutdowns_generation(b), g);
        /* Its own startup stays beside the kept one: the union (the lower middle of 2 and 4 s). */
        assert_true(drain_shutdowns_startup(b, OWNER, &median));
        assert_int_equal(median, S(2));
        /* Read again: nothing new. */
        assert_int_equal(drain_shutdowns_merge_json(b, doc, &taken), 0);
        assert_int_equal(taken, 0);
        cJSON_Delete(doc);

        /* Not a document of this version, or a bad entry among good ones. */
        doc = cJSON_Parse("{\"version\": 2, \"owners\": {}}");
        assert_int_equal(drain_shutdowns_merge_json(b, doc, NULL), -EINVAL);
        cJSON_Delete(doc);
        doc = cJSON_Parse(
            "{\"version\": 1, \"owners\": {\"x/StatefulSet/bad\": {\"stops_ms\": [\"soon\"]},"
            " \"x/StatefulSet/good\": {\"stops_ms\": [1500], \"updated\": \"2026-11-30T10:00:00Z\"}}}");
        assert_int_equal(drain_shutdowns_merge_json(b, doc, &taken), 0);
        cJSON_Delete(doc);
        assert_int_equal(taken, 1);
        assert_false(drain_shutdowns_get(b, "x/StatefulSet/bad", NULL, NULL));
        assert_true(drain_shutdowns_get(b, "x/StatefulSet/good", &median, NULL));
        assert_int_equal(median, S(1.5));
}

static size_t stops_held(const cJSON *doc, const char *owner)
{
        const cJSON *o = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "owners"), owner);
        return (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(o, "stops_ms"));
}

/* What s takes of doc: how many owners gained samples. */
static size_t merged(struct drain_shutdowns *s, const cJSON *doc)
{
        size_t taken = 0;
        assert_int_equal(drain_shutdowns_merge_json(s, doc, &taken), 0);
        return taken;
}

/* *doc becomes what s would write now. */
static void rewrite(const struct drain_shutdowns *s, cJSON **doc)
{
        cJSON_Delete(*doc);
        *doc = NULL;
        assert_int_equal(drain_shutdowns_to_json(s, doc), 0);
}

static int stops_seen(const cJSON *doc)
{
        const cJSON *o = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "owners"), OWNER);
        return cJSON_GetObjectItem(o, "stops_seen")->valueint;
}

/* Two agents that saw pods of one owner stop, each on its node, share the ConfigMap: what each writes after
 * reading the other's is the union, and a sample that goes back and forth counts once. */
static void test_two_writers_merge(void **state)
{
        _cleanup_(drain_shutdowns_freep) struct drain_shutdowns *a = NULL, *b = NULL;
        cJSON *doc_a = NULL, *doc_b = NULL, *doc = NULL;
        uint64_t median = 0, longest = 0;
        assert_int_equal(drain_shutdowns_new(&a), 0);
        assert_int_equal(drain_shutdowns_new(&b), 0);
        assert_int_equal(drain_shutdowns_observe_pod(a, OWNER, "u-a1", S(2), S(30)), 0);
        assert_int_equal(drain_shutdowns_observe_pod(a, OWNER, "u-a2", S(3), S(30)), 0);
        assert_int_equal(drain_shutdowns_observe_pod(b, OWNER, "u-b1", S(8), S(30)), 0);
        assert_int_equal(drain_shutdowns_observe_pod(b, "x/StatefulSet/other", "u-b2", S(1), S(30)), 0);
        /* Two pods of one owner that stopped alike in the same second, one on each node: two samples. */
        assert_int_equal(drain_shutdowns_observe_pod(a, "x/Deployment/web", "u-w1", S(1), S(5)), 0);
        assert_int_equal(drain_shutdowns_observe_pod(b, "x/Deployment/web", "u-w2", S(1), S(5)), 0);

        /* a writes first; b's write is refused (409), b reads a's, merges and writes the union. */
        assert_int_equal(drain_shutdowns_to_json(a, &doc_a), 0);
        assert_int_equal(merged(b, doc_a), 2);
        assert_int_equal(drain_shutdowns_to_json(b, &doc_b), 0);
        assert_int_equal(stops_held(doc_b, OWNER), 3);
        assert_int_equal(stops_held(doc_b, "x/Deployment/web"), 2);
        assert_int_equal(stops_seen(doc_b), 3);
        assert_true(drain_shutdowns_get(b, OWNER, &median, &longest));
        assert_int_equal(median, S(3));
        assert_int_equal(longest, S(8));

        /* a reads b's: its own two come back and count once; b's sample and b's other owner come in. */
        assert_int_equal(merged(a, doc_b), 3);
        rewrite(a, &doc_a);
        assert_int_equal(stops_held(doc_a, OWNER), 3);
        assert_int_equal(stops_seen(doc_a), 3);
        assert_int_equal(stops_held(doc_a, "x/StatefulSet/other"), 1);
        /* Again: nothing new either way. */
        assert_int_equal(merged(a, doc_b), 0);
        assert_int_equal(merged(b, doc_a), 0);

        /* What a saw only in the ConfigMap goes when it is written: read again when needed. */
        assert_int_equal(drain_shutdowns_owners(a), 3);
        drain_shutdowns_forget_foreign(a);
        assert_int_equal(drain_shutdowns_owners(a), 2);
        assert_false(drain_shutdowns_get(a, "x/StatefulSet/other", NULL, NULL));
        assert_true(drain_shutdowns_get(a, OWNER, NULL, NULL));
        assert_true(drain_shutdowns_get(a, "x/Deployment/web", NULL, NULL));
        /* The owners' index follows: owners learnt after it are found, before and after those kept. */
        assert_int_equal(drain_shutdowns_observe_pod(a, "a/Deployment/first", "u-f1", S(1), S(2)), 0);
        assert_int_equal(drain_shutdowns_observe_pod(a, "z/Deployment/last", "u-l1", S(1), S(2)), 0);
        assert_int_equal(drain_shutdowns_owners(a), 4);
        assert_true(drain_shutdowns_get(a, "a/Deployment/first", NULL, NULL));
        assert_true(drain_shutdowns_get(a, "z/Deployment/last", NULL, NULL));
        assert_true(drain_shutdowns_get(a, OWNER, NULL, NULL));
        assert_true(drain_shutdowns_get(a, "x/Deployment/web", NULL, NULL));
        assert_false(drain_shutdowns_get(a, "x/StatefulSet/other", NULL, NULL));
        /* A foreign owner between local ones: forgetting it renumbers the index of those after it. */
        assert_int_equal(merged(a, doc_b), 1);
        assert_int_equal(drain_shutdowns_observe_pod(a, "b/Deployment/mid", "u-m1", S(1), S(2)), 0);
        drain_shutdowns_forget_foreign(a);
        assert_int_equal(drain_shutdowns_owners(a), 5);
        static const char *const kept[] = { "a/Deployment/first", "b/Deployment/mid", OWNER,
                                            "x/Deployment/web", "z/Deployment/last" };
        for (size_t i = 0; i < ARRAY_SIZE(kept); i++)
                assert_true(drain_shutdowns_get(a, kept[i], NULL, NULL));
        assert_false(drain_shutdowns_get(a, "x/StatefulSet/other", NULL, NULL));

        /* A document of an earlier version (no times): its samples are taken with the entry's time. */
        doc = cJSON_Parse("{\"version\": 1, \"owners\": {\"" OWNER "\": {\"stops_ms\": [2000, 9000],"
                          " \"stops_seen\": 7, \"updated\": \"2026-11-30T10:00:00Z\"}}}");
        assert_non_null(doc);
        assert_int_equal(merged(a, doc), 1);
        assert_int_equal(merged(a, doc), 0);
        rewrite(a, &doc_a);
        assert_int_equal(stops_held(doc_a, OWNER), 5);
        assert_int_equal(stops_seen(doc_a), 10);
        cJSON_Delete(doc);
        cJSON_Delete(doc_a);
        cJSON_Delete(doc_b);
}

/* A ring keeps the latest: of 20 samples read, the 16 seen last. */
static void test_merge_keeps_the_latest(void **state)
{
        _cleanup_(drain_shutdowns_freep) struct drain_shutdowns *a = NULL;
        char text[2048];
        int len =
            snprintf(text, sizeof(text), "{\"version\": 1, \"owners\": {\"%s\": {\"stops_ms\": [", OWNER);
        for (int k = 0; k < 20; k++)
                len +=
                    snprintf(text + len, sizeof(text) - (size_t)len, "%s%d", k ? ", " : "", 1000 * (k + 1));
        len += snprintf(text + len, sizeof(text) - (size_t)len, "], \"stops_at\": [");
        for (int k = 0; k < 20; k++)
                len += snprintf(text + len, sizeof(text) - (size_t)len, "%s%d", k ? ", " : "", 100 + k);
        snprintf(text + len, sizeof(text) - (size_t)len, "]}}}");
        cJSON *doc = cJSON_Parse(text);
        uint64_t median = 0, longest = 0;
        assert_non_null(doc);
        assert_int_equal(drain_shutdowns_new(&a), 0);
        assert_int_equal(drain_shutdowns_merge_json(a, doc, NULL), 0);
        cJSON_Delete(doc);
        /* 5..20 s held: the lower middle of 16 is the 8th, 12 s. */
        assert_true(drain_shutdowns_get(a, OWNER, &median, &longest));
        assert_int_equal(median, S(12));
        assert_int_equal(longest, S(20));
        /* Times that do not match their values' count are refused, the entry passed over. */
        doc = cJSON_Parse("{\"version\": 1, \"owners\": {\"y/StatefulSet/z\": {\"stops_ms\": [1000, 2000],"
                          " \"stops_at\": [5]}}}");
        assert_int_equal(drain_shutdowns_merge_json(a, doc, NULL), 0);
        cJSON_Delete(doc);
        assert_false(drain_shutdowns_get(a, "y/StatefulSet/z", NULL, NULL));
}

/* A Deployment's ReplicaSet changes with each rollout: the owner whose estimates last is the Deployment. */
/* A pod gone after its kubelet confirmed the stop, as kube-apiserver 1.36 hands it to a watch:
 * deletionTimestamp is the confirmation's time (never moved into the past), deletionGracePeriodSeconds 0,
 * the containers' ends reported (kube_pod_stop_grace()). The stop it took since the eviction that started
 * it (12 s) is learnt; the same object without the containers' ends is a forced delete, not learnt, and so
 * is a pod whose containers had ended before it was evicted. */
static void test_stop_confirmed_by_the_kubelet(void **state)
{
        _cleanup_(drain_shutdowns_freep) struct drain_shutdowns *s = NULL;
        assert_int_equal(drain_shutdowns_new(&s), 0);
        uint64_t now = clk_now();
        char ts[64], ended[64], text[768];
        assert_int_equal(format_rfc3339(now, ts, sizeof(ts)), 0);
        for (int k = 0; k < 3; k++) {
                /* 0: confirmed; 1: forced (no container's end); 2: ended before the eviction. */
                assert_int_equal(format_rfc3339(k == 2 ? now - S(20) : now, ended, sizeof(ended)), 0);
                snprintf(text, sizeof(text),
                         "{\"metadata\": {\"name\": \"p%d\", \"namespace\": \"shop\", \"uid\": \"u%d\","
                         " \"deletionTimestamp\": \"%s\", \"deletionGracePeriodSeconds\": 0,"
                         " \"ownerReferences\": [{\"kind\": \"ReplicaSet\", \"name\": \"api-7d4b9\","
                         " \"controller\": true}]}, \"spec\": {\"terminationGracePeriodSeconds\": 60},"
                         " \"status\": {\"containerStatuses\": [{\"name\": \"app\", \"state\": %s%s%s}]}}",
                         k, k, ts,
                         k == 1 ? "{\"running\": {}"
                                : "{\"terminated\": {\"exitCode\": 0, \"finishedAt\": \"",
                         k == 1 ? "" : ended, k == 1 ? "}" : "\"}}");
                cJSON *o = cJSON_Parse(text);
                assert_non_null(o);
                _cleanup_(kube_pod_clear) struct kube_pod kp = { 0 };
                assert_int_equal(kube_pod_parse(o, &kp), 0);
                cJSON_Delete(o);
                /* Evicted 12, 40, 15 s ago (the drain's own record: the object no longer tells it). */
                uint64_t evicted = now - (k == 0 ? S(12) : k == 1 ? S(40) : S(15));
                assert_int_equal(drain_shutdowns_observe_stop(s, &kp, OWNER, evicted, 0, now + S(600), 0.5),
                                 0);
        }
        /* Only the confirmed stop: 12 s (to clk_now() a little later), none of 40 or 15 s. */
        uint64_t median = 0, longest = 0;
        assert_true(drain_shutdowns_get(s, OWNER, &median, &longest));
        assert_true(median >= S(12) && median < S(13));
        assert_int_equal(longest, median);
}

static void test_owner_key_of_a_deployment(void **state)
{
        cJSON *o =
            cJSON_Parse("{\"metadata\": {\"name\": \"api-7d4b9-x\", \"namespace\": \"shop\", \"labels\":"
                        " {\"pod-template-hash\": \"7d4b9\"}, \"ownerReferences\": [{\"kind\": "
                        "\"ReplicaSet\", \"name\": \"api-7d4b9\", \"controller\": true}]}}");
        _cleanup_(kube_pod_clear) struct kube_pod p = { 0 };
        assert_int_equal(kube_pod_parse(o, &p), 0);
        cJSON_Delete(o);
        _cleanup_free_ char *key = drain_owner_key(&p);
        assert_string_equal(key, "shop/Deployment/api");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_observations_median_and_longest),
                cmocka_unit_test(test_estimates_safe_and_expected),
                cmocka_unit_test(test_expected_basis_changes_the_verdict),
                cmocka_unit_test(test_safe_estimate_of_a_long_grace),
                cmocka_unit_test(test_accepted_eviction_seen_late),
                cmocka_unit_test(test_kept_and_shared),
                cmocka_unit_test(test_two_writers_merge),
                cmocka_unit_test(test_merge_keeps_the_latest),
                cmocka_unit_test(test_stop_confirmed_by_the_kubelet),
                cmocka_unit_test(test_owner_key_of_a_deployment),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
