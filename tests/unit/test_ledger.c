/* The drain ledger: several executors of one process draining nodes that share a PDB, against the
 * in-process simulator on a scaled engine clock. Every wait runs the loop until a condition holds, with a
 * bound in real time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "drain/engine_internal.h"
#include "relay.h"
#include "sim/model.h"
#include "sim/server.h"
#include "sim_fixture.h"
#include "spotdrain/alert.h"
#include "spotdrain/core.h"
#include "spotdrain/engine.h"
#include "spotdrain/kube.h"
#include "spotdrain/kubeconfig.h"
#include "spotdrain/yaml.h"
#include "timescale.h"

#define SEC        UINT64_C(1000000)
#define REAL_BOUND test_real_bound(30 * SEC) /* no test comes near this in real time */
#define MAX_DRAINS 3

struct fx;

struct drain {
        struct fx *f;
        const char *node;
        struct drain_exec *x;
        bool done;
        struct drain_exec_result result;
        unsigned infeasible_alerts;
        unsigned evicted_alerts;
        unsigned across_alerts; /* of those, the ones for a PDB's pods across the draining nodes */
};

struct fx {
        struct sim_fixture sf;
        struct loop *loop;
        struct kube_client *client;
        struct alert_bus *bus;
        struct drain_ledger *ledger;
        bool peers; /* without a shared ledger: each drain follows the others through the API (agents) */
        struct relay relay; /* between the client and the simulator, with fx_new_lagging() */
        bool relayed;
        char lag_field[96];
        struct drain drains[MAX_DRAINS];
        size_t n_drains;
        bool all_done;
};

static void record_alert(const struct alert *a, void *userdata)
{
        struct fx *f = userdata;
        for (size_t i = 0; i < f->n_drains; i++) {
                if (a->kind == ALERT_DRAIN_INFEASIBLE && streq_ptr(a->node, f->drains[i].node)) {
                        f->drains[i].infeasible_alerts++;
                        f->drains[i].across_alerts += strstr(a->message, "on the draining nodes") != NULL;
                }
                if (a->kind == ALERT_POD_EVICTED && streq_ptr(a->node, f->drains[i].node))
                        f->drains[i].evicted_alerts++;
        }
}

/* shared: one ledger for every drain; otherwise each drain has its own (as before the ledger). lag (or
 * NULL): the client talks to the simulator through a relay (relay.h) whose answers to the requests of node
 * lag's pods whose request line starts with lag_request lag while f->relay.lagging is set. */
static struct fx *fx_new_lagging(const char *scenario, double scale, bool shared, const char *lag_request,
                                 const char *lag)
{
        struct fx *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        scale = test_time_scale(scale);
        sim_fixture_start(
            &f->sf, scenario,
            &(struct sim_fixture_options){ .scale = scale, .scale_engine = true, .no_kubeconfig = true });
        _cleanup_free_ char *url = NULL;
        if (lag) {
                relay_start(&f->relay, sim_server_port(f->sf.srv), NULL);
                snprintf(f->lag_field, sizeof(f->lag_field), "fieldSelector=spec.nodeName%%3D%s", lag);
                relay_set_lag(&f->relay, lag_request, f->lag_field);
                f->relayed = true;
                url = strprintf("http://127.0.0.1:%u", f->relay.port);
        }
        sim_fixture_kubeconfig(&f->sf, url);
        assert_int_equal(loop_new(&f->loop), 0);
        assert_int_equal(
            kube_client_new(f->loop, f->sf.kcfg, &(struct kube_client_options){ .qps = -1 }, &f->client), 0);
        assert_int_equal(alert_bus_new(&f->bus), 0);
        assert_int_equal(alert_bus_add_sink(f->bus, record_alert, f), 0);
        if (shared)
                assert_int_equal(drain_ledger_new(f->client, 0, &f->ledger), 0);
        return f;
}

static struct fx *fx_new(const char *scenario, double scale, bool shared)
{
        return fx_new_lagging(scenario, scale, shared, NULL, NULL);
}

static void fx_free(struct fx *f)
{
        for (size_t i = 0; i < f->n_drains; i++)
                drain_exec_free(f->drains[i].x);
        drain_ledger_free(f->ledger);
        kube_client_free(f->client);
        loop_free(f->loop);
        alert_bus_free(f->bus);
        if (f->relayed)
                relay_stop(&f->relay);
        sim_fixture_stop(&f->sf);
        free(f);
}

/* The order in which the drained nodes' pods were deleted (evicted or forced), from the simulator's change
 * log: one node index per pod, in the order their deletionTimestamp appeared. */
struct deletions {
        const struct fx *f;
        char names[32][64];
        size_t order[32];
        size_t n;
};

static void deletion_seen(const struct sim_change *c, void *userdata)
{
        struct deletions *d = userdata;
        const char *name = kube_object_str(c->object, "metadata.name");
        const char *node = kube_object_str(c->object, "spec.nodeName");
        if (!name || !node || !kube_object_str(c->object, "metadata.deletionTimestamp") || d->n >= 32)
                return;
        for (size_t i = 0; i < d->n; i++)
                if (streq(d->names[i], name))
                        return;
        for (size_t i = 0; i < d->f->n_drains; i++)
                if (streq(d->f->drains[i].node, node)) {
                        snprintf(d->names[d->n], sizeof(d->names[d->n]), "%s", name);
                        d->order[d->n++] = i;
                }
}

static void sim_deletions(struct fx *f, struct deletions *d)
{
        *d = (struct deletions){ .f = f };
        sim_lock(f->sf.sim);
        assert_int_equal(sim_changes_since(f->sf.sim, SIM_POD, "shop", 0, deletion_seen, d), 0);
        sim_unlock(f->sf.sim);
}

/* Every deletion of drain a's pods came before any of drain b's, from the from-th deletion on. */
static bool deleted_before_from(const struct deletions *d, size_t a, size_t b, size_t from)
{
        bool seen_b = false;
        for (size_t i = from; i < d->n; i++) {
                if (d->order[i] == b)
                        seen_b = true;
                else if (d->order[i] == a && seen_b)
                        return false;
        }
        return true;
}

static int sim_breaches(struct fx *f)
{
        sim_lock(f->sf.sim);
        cJSON *res = sim_result(f->sf.sim);
        sim_unlock(f->sf.sim);
        assert_non_null(res);
        int n = cJSON_GetObjectItem(res, "pdb_breaches")->valueint;
        cJSON_Delete(res);
        return n;
}

static void on_done(struct drain_exec *x, const struct drain_exec_result *r, void *userdata)
{
        struct drain *d = userdata;
        struct fx *f = d->f;

        d->result = *r;
        d->done = true;
        f->all_done = true;
        for (size_t i = 0; i < f->n_drains; i++)
                f->all_done = f->all_done && f->drains[i].done;
}

/* deadline: engine clock. */
static void fx_drain_by(struct fx *f, const char *node, uint64_t deadline)
{
        struct drain *d = &f->drains[f->n_drains++];
        struct drain_exec_options o = {
                .node = node,
                .kind = "spot-interruption",
                .deadline_usec = deadline,
                .margin_usec = 2 * SEC,
                .policy = DRAIN_POLICY_FORCE,
                .default_startup_usec = 2 * SEC,
                /* Judged once, at the start (pods stop within their whole grace period, so no stop seen
                 * raises the expectation): what the drains see of each other then is the point here. */
                .expected_shutdown_fraction = 1.0,
                .self_namespace = "",
                .self_name = "",
                .ledger = f->ledger,
                .follow_peers = f->peers,
        };
        d->f = f;
        d->node = node;
        assert_int_equal(drain_exec_start(f->client, f->bus, &o, on_done, d, &d->x), 0);
}

static void fx_drain(struct fx *f, const char *node, uint64_t budget)
{
        fx_drain_by(f, node, clk_now() + budget);
}

static void fx_run(struct fx *f)
{
        assert_int_equal(loop_run_until(f->loop, &f->all_done, REAL_BOUND), 0);
}

static unsigned fx_blocked(const struct fx *f)
{
        unsigned n = 0;
        for (size_t i = 0; i < f->n_drains; i++)
                n += f->drains[i].result.blocked;
        return n;
}

#define NODES                                                                       \
        "nodes:\n"                                                                  \
        "  - {name: spot-a, allocatable: {cpu: \"16\", memory: 64Gi, pods: 110}}\n" \
        "  - {name: spot-b, allocatable: {cpu: \"16\", memory: 64Gi, pods: 110}}\n" \
        "  - {name: spot-c, allocatable: {cpu: \"16\", memory: 64Gi, pods: 110}}\n" \
        "  - {name: od-1, capacity_type: on-demand, allocatable: {cpu: \"16\", memory: 64Gi, pods: 110}}\n"

/* Three pods on each of two nodes under one maxUnavailable 1: one wave at a time across both nodes. */
#define TWO_NODES                                                                                         \
        "name: two\n" NODES "workloads:\n"                                                                \
        "  - {name: api, namespace: shop, kind: Deployment, replicas: 8, placement: {spot-a: 3, spot-b: " \
        "3},\n"                                                                                           \
        "     termination_grace_seconds: 3, shutdown_seconds: 1, startup_seconds: 2,\n"                   \
        "     pdb: {max_unavailable: 1}}\n"                                                               \
        "events: []\n"

static void cordoned(struct kube_client *c, struct kube_result *r, void *userdata)
{
        *(int *)userdata = r->error;
}

static void fx_cordon(struct fx *f, const char *node)
{
        bool never = false;
        int error = 1;
        assert_int_equal(kube_node_cordon(f->client, node, true, cordoned, &error, NULL), 0);
        for (int i = 0; i < 3000 && error > 0; i++)
                loop_run_until(f->loop, &never, 10 * 1000);
        assert_int_equal(error, 0);
}

/* Run once with a shared ledger and once with one per drain: the shared one sends no eviction the PDB
 * has no room for, gives every slot to the earlier deadline first, and the earlier node finishes first;
 * both drain everything without a breach. */
static void test_two_nodes_edf(void **state)
{
        for (int shared = 1; shared >= 0; shared--) {
                struct fx *f = fx_new(TWO_NODES, 5, shared);
                /* Both cordoned already: a replacement scheduled onto a node whose drain has just started
                 * and whose cordon is still on its way (the simulator takes the first node with room) is a
                 * fourth pod to evict there, the likely cause (not traced) of the one run in 23 of this
                 * binary on a loaded machine where a drain here evicted 4. The order of the slots is the
                 * point here. */
                fx_cordon(f, "spot-a");
                fx_cordon(f, "spot-b");
                /* spot-b's instance goes first. */
                fx_drain(f, "spot-a", 60 * SEC);
                fx_drain(f, "spot-b", 40 * SEC);
                fx_run(f);
                for (size_t i = 0; i < 2; i++) {
                        assert_int_equal(f->drains[i].result.outcome, DRAIN_EXEC_DRAINED);
                        assert_int_equal(f->drains[i].result.forced, 0);
                        assert_int_equal(f->drains[i].result.evicted, 3);
                        assert_int_equal(f->drains[i].infeasible_alerts, 0);
                }
                assert_int_equal(sim_breaches(f), 0);
                if (shared) {
                        /* An eviction goes only with a slot: at most one 429, when a status older than an
                         * accepted eviction reaches the watch after its answer. (Without the ledger both
                         * drains take the PDB's one slot whenever it frees; how often the loser's eviction
                         * lands first is up to timing.) */
                        assert_true(fx_blocked(f) <= 1);
                        struct drain_ledger_stats st;
                        drain_ledger_stats(f->ledger, &st);
                        assert_int_equal(st.granted, 6 + st.refused);
                        assert_int_equal(st.refused, fx_blocked(f));
                        /* EDF: every slot went to spot-b first. A drain asks for no slot before its
                         * cordon is answered: when spot-b's plan came before that answer (6 of 420 runs
                         * on a loaded machine), its first statement named none of its pods and the first
                         * slot went to spot-a, which could use it; the next ones go by deadline. */
                        const struct drain_exec_result *b = &f->drains[1].result;
                        struct deletions d;
                        sim_deletions(f, &d);
                        assert_int_equal(d.n, 6);
                        assert_true(deleted_before_from(&d, 1, 0, b->cordoned_usec > b->planned_usec));
                        assert_true(f->drains[1].result.finished_usec < f->drains[0].result.finished_usec);
                }
                fx_free(f);
        }
}

/* Two nodes with one deadline: the slots go to the node whose name comes first, spot-a, though spot-b's
 * drain started first (so its pods asked first). Other processes can reproduce that order; arrival they
 * cannot see.
 * - At time scale 1: the tie holds only when spot-a states its wants within the ledger's settle time
 *   (SETTLE_USEC, 3 s of the engine's clock), which is what it is for; at 5 that was 0.6 real s, and on a
 *   loaded machine (stress -c 2) spot-a's first lists took longer and spot-b, started first, took the slot.
 * - Both nodes are cordoned first, as in test_two_nodes_edf: otherwise a pod evicted from spot-b can be
 *   replaced onto spot-a before spot-a's own drain has cordoned it, and spot-a has a fourth pod to evict
 *   (seen once in a make check beside stress -c 2: evicted 4, not 3). Who gets the slots is the point. */
static void test_tie_by_node_name(void **state)
{
        struct fx *f = fx_new(TWO_NODES, 1, true);
        fx_cordon(f, "spot-a");
        fx_cordon(f, "spot-b");
        uint64_t deadline = clk_now() + 40 * SEC;
        fx_drain_by(f, "spot-b", deadline);
        fx_drain_by(f, "spot-a", deadline);
        fx_run(f);
        for (size_t i = 0; i < 2; i++) {
                assert_int_equal(f->drains[i].result.outcome, DRAIN_EXEC_DRAINED);
                assert_int_equal(f->drains[i].result.evicted, 3);
        }
        struct deletions d;
        sim_deletions(f, &d);
        assert_int_equal(d.n, 6);
        /* spot-b, started first, may take the first slot when spot-a's first lists came after the settle
         * time (seen at time scale 1 with stress -c 2 and a real cluster beside it): as for the EDF order
         * above, every later slot goes by name. So the first deletion is skipped when it is spot-b's
         * (drain 0); it used to be skipped when it was spot-a's, which failed exactly that case. */
        assert_true(deleted_before_from(&d, 1, 0, d.order[0] == 0));
        assert_int_equal(sim_breaches(f), 0);
        fx_free(f);
}

#define THREE_NODES                                                                     \
        "name: three\n" NODES "workloads:\n"                                            \
        "  - {name: api, namespace: shop, kind: Deployment, replicas: 8,\n"             \
        "     placement: {spot-a: 2, spot-b: 2, spot-c: 2},\n"                          \
        "     termination_grace_seconds: 3, shutdown_seconds: 1, startup_seconds: 2,\n" \
        "     pdb: {max_unavailable: 1}}\n"                                             \
        "events: []\n"

/* Three nodes, deadlines c < a < b: the slots go in that order, with one ledger for the three drains
 * (a controller), and with a ledger each (agents: one process each in a cluster, only the API between
 * them), which follow each other's drain records and pods. Started at one instant, an agent cannot know
 * of a drain whose record is not written yet, so the first slot may go to whichever asks first; every
 * later one goes by deadline. (Agents not following each other give every slot to whoever asks first.) */
static void test_three_nodes_edf(void **state)
{
        for (int agents = 0; agents <= 1; agents++) {
                /* Agents at time scale 1: each follows the others' drain records through a watch, and
                 * their settle time (3 s) is what lets a later agent's record reach an earlier one before
                 * it takes a slot. Scaled, that time shrank to 0.6 real s (at 5: a clean-clone CI run on
                 * an idle machine, 2026-12-06, saw spot-a take the second slot ahead of spot-c) or 1.5 s
                 * (at 2: the binary had to run alone, after the others). At 1 it runs beside them. */
                struct fx *f = fx_new(THREE_NODES, agents ? 1 : 5, !agents);
                f->peers = agents;
                fx_drain(f, "spot-a", 50 * SEC);
                fx_drain(f, "spot-b", 60 * SEC);
                fx_drain(f, "spot-c", 40 * SEC);
                fx_run(f);
                for (size_t i = 0; i < 3; i++) {
                        assert_int_equal(f->drains[i].result.outcome, DRAIN_EXEC_DRAINED);
                        assert_int_equal(f->drains[i].result.evicted, 2);
                        assert_int_equal(f->drains[i].result.forced, 0);
                }
                assert_true(f->drains[2].result.finished_usec < f->drains[0].result.finished_usec);
                assert_true(f->drains[0].result.finished_usec < f->drains[1].result.finished_usec);
                struct deletions d;
                sim_deletions(f, &d);
                assert_int_equal(d.n, 6);
                assert_true(deleted_before_from(&d, 2, 0, agents ? 1 : 0));
                assert_true(deleted_before_from(&d, 0, 1, agents ? 1 : 0));
                /* One ledger sends no eviction the PDB has no room for (but a status older than an
                 * answer); agents see each other's evictions a watch event late, and may be refused. */
                if (!agents)
                        assert_true(fx_blocked(f) <= 1);
                assert_int_equal(sim_breaches(f), 0);
                fx_free(f);
        }
}

/* maxUnavailable 1 and 5 s to replace a pod: three pods fit a node's 20 s budget (2 × 5 + 1 s), six do
 * not. Planned across the nodes (shared ledger), the PDB is reported infeasible; planned node by node
 * (one ledger each), neither drain sees it. */
#define ACROSS                                                                                            \
        "name: across\n" NODES "workloads:\n"                                                             \
        "  - {name: api, namespace: shop, kind: Deployment, replicas: 8, placement: {spot-a: 3, spot-b: " \
        "3},\n"                                                                                           \
        "     termination_grace_seconds: 2, shutdown_seconds: 1, startup_seconds: 5,\n"                   \
        "     pdb: {max_unavailable: 1}}\n"                                                               \
        "events: []\n"

static void test_infeasible_across_nodes(void **state)
{
        for (int shared = 1; shared >= 0; shared--) {
                struct fx *f = fx_new(ACROSS, 5, shared);
                fx_drain(f, "spot-a", 20 * SEC);
                fx_drain(f, "spot-b", 21 * SEC);
                fx_run(f);
                unsigned across = f->drains[0].across_alerts + f->drains[1].across_alerts;
                if (shared) {
                        /* spot-a goes first (EDF); spot-b is the node the PDB limits. */
                        assert_int_equal(f->drains[0].infeasible_alerts, 0);
                        assert_int_equal(f->drains[1].infeasible_alerts, 1);
                        assert_int_equal(f->drains[1].across_alerts, 1);
                        assert_true(f->drains[1].result.infeasible);
                        assert_int_equal(f->drains[0].result.forced, 0);
                } else
                        /* Each sees only its own node. (Either may still be judged infeasible from a PDB the
                         * other's eviction left short, whose replacement its plan cannot see coming: that
                         * depends on which judgement comes first, and is not what this test is about.) */
                        assert_int_equal(across, 0);
                fx_free(f);
        }
}

/* One pod on each of two nodes with room for no other, two more on od-1, under maxUnavailable 1; 10 s to
 * replace one (on od-1). */
#define LAGGING                                                                                             \
        "name: lagging\n"                                                                                   \
        "nodes:\n"                                                                                          \
        "  - {name: spot-a, allocatable: {cpu: \"16\", memory: 64Gi, pods: 1}}\n"                           \
        "  - {name: spot-b, allocatable: {cpu: \"16\", memory: 64Gi, pods: 1}}\n"                           \
        "  - {name: od-1, capacity_type: on-demand, allocatable: {cpu: \"16\", memory: 64Gi, pods: 110}}\n" \
        "workloads:\n"                                                                                      \
        "  - {name: api, namespace: shop, kind: Deployment, replicas: 4,\n"                                 \
        "     placement: {spot-a: 1, spot-b: 1, od-1: 2},\n"                                                \
        "     termination_grace_seconds: 3, shutdown_seconds: 1, startup_seconds: 10,\n"                    \
        "     pdb: {max_unavailable: 1}}\n"                                                                 \
        "events: []\n"

/* disruptionsAllowed of the PDB as the ledger's informer has it (-1: none yet). */
static int pdb_allows(const struct fx *f)
{
        const struct kube_informer *inf = drain_ledger_pdbs(f->ledger);
        if (kube_informer_size(inf) != 1)
                return -1;
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(kube_informer_at(inf, 0), "status");
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(st, "disruptionsAllowed");
        return cJSON_IsNumber(a) ? a->valueint : -1;
}

/* spot-a's pod is evicted, and the watch of spot-a's pods falls behind (the relay holds what the server
 * sends on it, as a loaded API server's watch lags) while the PDB's status, another watch, shows the slot
 * spent. spot-b's drain starts then, due first. Its plan takes spot-a's accepted eviction as a pod deleting
 * since the answer, whose replacement gives the slot back a startup later: spot-b fits, is not judged
 * infeasible, and its pod goes then. (Taken as waiting, spot-a's pod would hold the one slot with no return
 * in sight: "allows no disruption".) */
static void test_accepted_eviction_before_its_watch_event(void **state)
{
        struct fx *f = fx_new_lagging(LAGGING, 5, true, "GET /api/v1/pods?watch=true", "spot-a");
        bool never = false;
        atomic_store(&f->relay.lagging, true);
        fx_drain(f, "spot-a", 60 * SEC);
        for (int i = 0; i < 2000 && (f->drains[0].evicted_alerts == 0 || pdb_allows(f) != 0); i++)
                loop_run_until(f->loop, &never, 10 * 1000);
        assert_int_equal(f->drains[0].evicted_alerts, 1);
        assert_int_equal(pdb_allows(f), 0);
        assert_true(atomic_load(&f->relay.lagged) >= 1);
        fx_drain(f, "spot-b", 40 * SEC);
        /* The watch lags until spot-b's pod is deleted: spot-a's drain has not seen its pod go by then. */
        struct deletions d;
        for (int i = 0; i < 3000; i++) {
                sim_deletions(f, &d);
                if (d.n >= 2 || f->drains[1].infeasible_alerts > 0)
                        break;
                loop_run_until(f->loop, &never, 10 * 1000);
        }
        assert_int_equal(f->drains[1].infeasible_alerts, 0);
        assert_int_equal(d.n, 2);
        assert_false(f->drains[0].done);
        atomic_store(&f->relay.lagging, false);
        fx_run(f);
        for (size_t i = 0; i < 2; i++) {
                assert_int_equal(f->drains[i].result.evicted, 1);
                assert_int_equal(f->drains[i].result.outcome, DRAIN_EXEC_DRAINED);
                assert_int_equal(f->drains[i].result.forced, 0);
                assert_int_equal(f->drains[i].infeasible_alerts, 0);
        }
        assert_int_equal(sim_breaches(f), 0);
        fx_free(f);
}

/* The ledger on its own: grants follow the PDB status and the waiting pods' last safe moments. Members are
 * identified by their userdata; these two never join, so nobody is woken. */
static void test_ledger_grants(void **state)
{
        struct fx *f = fx_new(TWO_NODES, 1, true);
        struct drain_ledger_stats st;
        bool never = false;
        int a = 0, b = 0, got = 0;

        for (int i = 0; i < 2000 && !drain_ledger_synced(f->ledger); i++)
                loop_run_until(f->loop, &never, 10 * 1000);
        assert_true(drain_ledger_synced(f->ledger));
        drain_ledger_begin(f->ledger, &a);
        assert_int_equal(drain_ledger_want(f->ledger, &a, "shop/api", "shop/late", 50 * SEC), 1);
        drain_ledger_end(f->ledger, &a);
        /* The one slot is taken (granted, not yet reflected): nobody else gets one. */
        drain_ledger_begin(f->ledger, &b);
        assert_int_equal(drain_ledger_want(f->ledger, &b, "shop/api", "shop/early", 10 * SEC), 0);
        drain_ledger_end(f->ledger, &b);
        /* A refused eviction gives it back but distrusts the status for the floor. */
        drain_ledger_answer(f->ledger, &a, "shop/api", "shop/late", DRAIN_LEDGER_REFUSED);
        assert_int_equal(drain_ledger_want(f->ledger, &a, "shop/api", "shop/late", 50 * SEC), 0);
        drain_ledger_stats(f->ledger, &st);
        assert_int_equal(st.granted, 1);
        assert_int_equal(st.refused, 1);
        assert_int_equal(st.waiting, 2);
        /* After the floor the slot is back; the earlier last safe moment gets it, though the later one
         * keeps asking first. */
        for (int i = 0; i < 200 && !got; i++) {
                assert_int_equal(drain_ledger_want(f->ledger, &a, "shop/api", "shop/late", 50 * SEC), 0);
                got = drain_ledger_want(f->ledger, &b, "shop/api", "shop/early", 10 * SEC);
                if (!got)
                        loop_run_until(f->loop, &never, 20 * 1000);
        }
        assert_int_equal(got, 1);
        drain_ledger_stats(f->ledger, &st);
        assert_int_equal(st.granted, 2);
        assert_int_equal(st.waiting, 1);
        /* A pod its member no longer states stops waiting. */
        drain_ledger_begin(f->ledger, &a);
        drain_ledger_end(f->ledger, &a);
        drain_ledger_stats(f->ledger, &st);
        assert_int_equal(st.waiting, 0);
        fx_free(f);
}

/* A member's pods waiting for a slot, whose last safe moments all moved later (a stop was observed, the
 * shutdown estimate fell): stated again one by one, the first must not rank behind its siblings' stale
 * moments, or nobody on the node ever gets the slot. */
static void test_ledger_moved_estimates(void **state)
{
        struct fx *f = fx_new(TWO_NODES, 1, true);
        bool never = false;
        int a = 0, b = 0;

        for (int i = 0; i < 2000 && !drain_ledger_synced(f->ledger); i++)
                loop_run_until(f->loop, &never, 10 * 1000);
        assert_true(drain_ledger_synced(f->ledger));
        /* b holds the PDB's one slot while a's three pods state their wants. */
        drain_ledger_begin(f->ledger, &b);
        assert_int_equal(drain_ledger_want(f->ledger, &b, "shop/api", "shop/other", 5 * SEC), 1);
        drain_ledger_end(f->ledger, &b);
        drain_ledger_begin(f->ledger, &a);
        assert_int_equal(drain_ledger_want(f->ledger, &a, "shop/api", "shop/p1", 20 * SEC), 0);
        assert_int_equal(drain_ledger_want(f->ledger, &a, "shop/api", "shop/p2", 20 * SEC), 0);
        assert_int_equal(drain_ledger_want(f->ledger, &a, "shop/api", "shop/p3", 20 * SEC), 0);
        drain_ledger_end(f->ledger, &a);
        /* b's eviction failed: the slot is back, and a's next pass has every moment 10 s later. */
        drain_ledger_answer(f->ledger, &b, "shop/api", "shop/other", DRAIN_LEDGER_FAILED);
        drain_ledger_begin(f->ledger, &a);
        assert_int_equal(drain_ledger_want(f->ledger, &a, "shop/api", "shop/p1", 30 * SEC), 1);
        assert_int_equal(drain_ledger_want(f->ledger, &a, "shop/api", "shop/p2", 30 * SEC), 0);
        drain_ledger_end(f->ledger, &a);
        fx_free(f);
}

static void silent_wake(void *userdata)
{
        unsigned *n = userdata;
        (*n)++;
}

/* A member that joins and never states its wants holds the others up for the settle time, then no longer:
 * the ledger looks again once at that moment, not over and over until the member speaks. */
static void test_ledger_silent_member(void **state)
{
        static const struct drain_ledger_member_ops ops = { .wake = silent_wake };
        struct fx *f = fx_new(TWO_NODES, 5, true);
        struct drain_ledger_stats st;
        unsigned wakes = 0;
        bool never = false;

        for (int i = 0; i < 2000 && !drain_ledger_synced(f->ledger); i++)
                loop_run_until(f->loop, &never, 10 * 1000);
        assert_true(drain_ledger_synced(f->ledger));
        assert_int_equal(drain_ledger_join(f->ledger, &ops, &wakes, "probe", clk_now() + 60 * SEC), 0);
        /* Past the 3 s settle time, and 2 s more. */
        uint64_t until = clk_now() + 5 * SEC;
        while (clk_now() < until)
                loop_run_until(f->loop, &never, 50 * 1000);
        drain_ledger_stats(f->ledger, &st);
        assert_true(st.rechecks >= 1);
        assert_true(st.rechecks <= 3);
        drain_ledger_leave(f->ledger, &wakes);
        fx_free(f);
}

/* One sibling list per owner under way for all the drains of a ledger: a second drain of the same owner
 * waits for the first one's answer and is woken by it; one that left is not; after the answer the next asks.
 */
static void test_ledger_shared_startup_list(void **state)
{
        static const struct drain_ledger_member_ops ops = { .wake = silent_wake };
        struct fx *f = fx_new(TWO_NODES, 5, true);
        unsigned asker = 0, waiter = 0, gone = 0;
        const char *key = "shop/Deployment/api";

        assert_int_equal(drain_ledger_join(f->ledger, &ops, &asker, "spot-a", clk_now() + 60 * SEC), 0);
        assert_int_equal(drain_ledger_join(f->ledger, &ops, &waiter, "spot-b", clk_now() + 60 * SEC), 0);
        assert_int_equal(drain_ledger_join(f->ledger, &ops, &gone, "spot-c", clk_now() + 60 * SEC), 0);
        /* Nobody asked yet: the first asks itself. */
        assert_false(drain_ledger_startup_wait(f->ledger, &asker, key));
        assert_false(drain_ledger_startup_awaited(f->ledger, &asker));
        assert_int_equal(drain_ledger_startup_asking(f->ledger, key), 0);
        assert_int_equal(drain_ledger_startup_asking(f->ledger, key), 0);
        assert_true(drain_ledger_startup_wait(f->ledger, &waiter, key));
        assert_true(drain_ledger_startup_wait(f->ledger, &waiter, key)); /* once */
        assert_true(drain_ledger_startup_wait(f->ledger, &gone, key));
        assert_false(drain_ledger_startup_wait(f->ledger, &waiter, "shop/Deployment/other"));
        assert_true(drain_ledger_startup_awaited(f->ledger, &waiter));
        assert_false(drain_ledger_startup_awaited(f->ledger, &asker));
        drain_ledger_leave(f->ledger, &gone);
        assert_false(drain_ledger_startup_awaited(f->ledger, &gone));
        unsigned before_waiter = waiter, before_asker = asker;
        drain_ledger_startup_answered(f->ledger, key);
        assert_int_equal(waiter, before_waiter + 1);
        assert_int_equal(asker, before_asker);
        assert_int_equal(gone, 0);
        assert_false(drain_ledger_startup_awaited(f->ledger, &waiter));
        /* Answered: not under way any more; the next drain that needs it asks again. */
        assert_false(drain_ledger_startup_wait(f->ledger, &waiter, key));
        drain_ledger_startup_answered(f->ledger, key); /* no list under way: nothing */
        drain_ledger_leave(f->ledger, &asker);
        drain_ledger_leave(f->ledger, &waiter);
        fx_free(f);
}

/* ---- losses: healthy pods a PDB lost to something outside the ledger ---- */

struct node_pods {
        const char *node;
        char names[8][64];
        size_t n;
};

static void pod_on_node(const struct sim_change *c, void *userdata)
{
        struct node_pods *np = userdata;
        const char *name = kube_object_str(c->object, "metadata.name");
        if (!name || !streq_ptr(kube_object_str(c->object, "spec.nodeName"), np->node) || np->n >= 8)
                return;
        for (size_t i = 0; i < np->n; i++)
                if (streq(np->names[i], name))
                        return;
        snprintf(np->names[np->n++], sizeof(np->names[0]), "%s", name);
}

static void pods_on(struct fx *f, const char *node, struct node_pods *np)
{
        *np = (struct node_pods){ .node = node };
        sim_lock(f->sf.sim);
        assert_int_equal(sim_changes_since(f->sf.sim, SIM_POD, "shop", 0, pod_on_node, np), 0);
        sim_unlock(f->sf.sim);
}

/* currentHealthy of shop/api in the ledger's informer; -1 before it has the PDB. */
static int api_healthy(struct fx *f)
{
        const struct kube_informer *inf = drain_ledger_pdbs(f->ledger);
        for (size_t i = 0; i < kube_informer_size(inf); i++) {
                const cJSON *o = kube_informer_at(inf, i);
                if (streq_ptr(kube_object_str(o, "metadata.name"), "api"))
                        return cJSON_GetObjectItem(cJSON_GetObjectItem(o, "status"), "currentHealthy")
                            ->valueint;
        }
        return -1;
}

static unsigned ledger_losses(struct fx *f)
{
        struct drain_ledger_stats st;
        drain_ledger_stats(f->ledger, &st);
        return st.losses;
}

struct evict_call {
        struct fx *f;
        void *member;
        const char *pod; /* "shop/NAME" for the ledger's answer; NULL: not evicted through the ledger */
        int outcome;     /* -1 until answered */
};

static void evict_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct evict_call *e = userdata;
        e->outcome = kube_evict_outcome(r);
        if (e->pod)
                drain_ledger_answer(e->f->ledger, e->member, "shop/api", e->pod,
                                    e->outcome == KUBE_EVICT_EVICTED ? DRAIN_LEDGER_ACCEPTED
                                                                     : DRAIN_LEDGER_FAILED);
}

/* Runs the loop in slices until healthy (and, unless -1, losses) are what is asked and the eviction e (if
 * any) was answered (the watch may bring its effect first), within the bound. */
static void wait_for(struct fx *f, int healthy, int losses, const struct evict_call *e)
{
        bool never = false;
        for (int i = 0; i < 3000; i++) {
                if (api_healthy(f) == healthy && (losses < 0 || ledger_losses(f) == (unsigned)losses) &&
                    (!e || e->outcome >= 0))
                        return;
                loop_run_until(f->loop, &never, 10 * 1000);
        }
        assert_int_equal(api_healthy(f), healthy);
        if (losses >= 0)
                assert_int_equal(ledger_losses(f), losses);
        if (e)
                assert_true(e->outcome >= 0);
}

/* An eviction someone else made is a loss until its replacement is Ready; one through the ledger's own
 * grant never is, though its drop of currentHealthy comes after the grant was released. */
static void test_ledger_losses(void **state)
{
        struct fx *f = fx_new(TWO_NODES, 5, true);
        struct node_pods np;
        int a = 0;

        wait_for(f, 8, 0, NULL);
        pods_on(f, "spot-a", &np);
        assert_true(np.n >= 2);

        struct evict_call other = { .f = f, .outcome = -1 };
        assert_int_equal(kube_evict(f->client, "shop", np.names[0], NULL, -1, evict_done, &other, NULL), 0);
        wait_for(f, 7, 1, &other);
        assert_int_equal(other.outcome, KUBE_EVICT_EVICTED);
        /* Its replacement turns Ready: nothing is missing any more. */
        wait_for(f, 8, 0, NULL);

        _cleanup_free_ char *pod = strprintf("shop/%s", np.names[1]);
        drain_ledger_begin(f->ledger, &a);
        assert_int_equal(drain_ledger_want(f->ledger, &a, "shop/api", pod, 50 * SEC), 1);
        drain_ledger_end(f->ledger, &a);
        struct evict_call own = { .f = f, .member = &a, .pod = pod, .outcome = -1 };
        assert_int_equal(kube_evict(f->client, "shop", np.names[1], NULL, -1, evict_done, &own, NULL), 0);
        wait_for(f, 7, -1, &own);
        assert_int_equal(own.outcome, KUBE_EVICT_EVICTED);
        assert_int_equal(ledger_losses(f), 0);
        wait_for(f, 8, 0, NULL);
        fx_free(f);
}

/* Each node's agent drains with its own view: spot-b's drain starts after spot-a's has evicted a pod, so the
 * PDB it first sees is short. The replacement starting elsewhere (its sibling list shows it) is on its way,
 * not a pod down for good: no infeasible verdict. */
static void test_drain_after_another(void **state)
{
        struct fx *f = fx_new(TWO_NODES, 5, false);
        bool never = false;

        /* The replacements go to other nodes than spot-b, whose own drain would see them starting. */
        fx_cordon(f, "spot-b");
        fx_drain(f, "spot-a", 60 * SEC);
        struct deletions d = { 0 };
        for (int i = 0; i < 3000 && d.n == 0; i++) {
                loop_run_until(f->loop, &never, 10 * 1000);
                sim_deletions(f, &d);
        }
        assert_true(d.n >= 1);
        fx_drain(f, "spot-b", 40 * SEC);
        fx_run(f);
        for (size_t i = 0; i < 2; i++) {
                assert_int_equal(f->drains[i].result.outcome, DRAIN_EXEC_DRAINED);
                assert_int_equal(f->drains[i].result.forced, 0);
        }
        assert_int_equal(f->drains[0].result.evicted, 3);
        assert_int_equal(f->drains[1].result.evicted, 3);
        assert_int_equal(f->drains[1].infeasible_alerts, 0);
        assert_int_equal(sim_breaches(f), 0);
        fx_free(f);
}

/* spot-a's pods in one namespace, spot-b's in another, under a PDB: spot-a's drain leaves nothing of
 * spot-b's namespace in the ledger (no ghost of its pods there). */
#define TWO_NAMESPACES                                                                                  \
        "name: two-namespaces\n" NODES "workloads:\n"                                                   \
        "  - {name: front, namespace: web, kind: Deployment, replicas: 2, placement: {spot-a: 2},\n"    \
        "     termination_grace_seconds: 3, shutdown_seconds: 1, startup_seconds: 2}\n"                 \
        "  - {name: api, namespace: shop, kind: Deployment, replicas: 4, placement: {spot-b: 3, od-1: " \
        "1},\n"                                                                                         \
        "     termination_grace_seconds: 3, shutdown_seconds: 1, startup_seconds: 2,\n"                 \
        "     pdb: {max_unavailable: 1}}\n"                                                             \
        "events: []\n"

/* One process, one ledger (the controller's): a drain that starts after another has ended joins a ledger
 * that plans on its own (a timer, once anything changed), so the joint plan may be made between the new
 * drain's pod list arriving and the drain's own look at it. Its pods must come with their PDBs in that plan:
 * without them every pod looked free to go, all three evictions went at once and the PDB refused two. */
static void test_drain_joins_a_planning_ledger(void **state)
{
        /* The list of spot-b's pods (and their watch) lag: the ledger plans without them, and on its own
         * again as they come. */
        struct fx *f = fx_new_lagging(TWO_NAMESPACES, 5, true, "GET /api/v1/pods?", "spot-b");
        bool never = false;

        /* spot-a's replacements go to other nodes than spot-b: its three pods to drain. */
        fx_cordon(f, "spot-b");
        fx_drain(f, "spot-a", 60 * SEC);
        fx_run(f);
        assert_int_equal(f->drains[0].result.outcome, DRAIN_EXEC_DRAINED);
        assert_int_equal(pdb_allows(f), 1);
        f->all_done = false;
        struct drain_ledger_stats st;
        drain_ledger_stats(f->ledger, &st);
        unsigned plans = st.plans;
        atomic_store(&f->relay.lagging, true);
        fx_drain(f, "spot-b", 60 * SEC);
        /* spot-b's pod list held, the ledger plans on its own for spot-b's joining. */
        for (int i = 0; i < 2000 && (atomic_load(&f->relay.lagged) == 0 || st.plans == plans); i++) {
                loop_run_until(f->loop, &never, 10 * 1000);
                drain_ledger_stats(f->ledger, &st);
        }
        assert_int_equal(atomic_load(&f->relay.lagged), 1);
        assert_true(st.plans > plans);
        /* Past the gap the ledger keeps after a plan (500 ms of engine time at most): the list's arrival
         * makes it plan again at once, before the drain looks at the pods. */
        uint64_t gap_end = clk_now() + SEC / 2;
        while (clk_now() < gap_end)
                loop_run_until(f->loop, &never, 10 * 1000);
        atomic_store(&f->relay.lagging, false);
        fx_run(f);
        assert_int_equal(f->drains[1].result.outcome, DRAIN_EXEC_DRAINED);
        assert_int_equal(f->drains[1].result.evicted, 3);
        assert_int_equal(f->drains[1].result.forced, 0);
        assert_int_equal(f->drains[1].result.blocked, 0);
        assert_int_equal(sim_breaches(f), 0);
        fx_free(f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ledger_grants),
                cmocka_unit_test(test_ledger_moved_estimates),
                cmocka_unit_test(test_ledger_silent_member),
                cmocka_unit_test(test_ledger_shared_startup_list),
                cmocka_unit_test(test_two_nodes_edf),
                cmocka_unit_test(test_tie_by_node_name),
                cmocka_unit_test(test_three_nodes_edf),
                cmocka_unit_test(test_infeasible_across_nodes),
                cmocka_unit_test(test_accepted_eviction_before_its_watch_event),
                cmocka_unit_test(test_ledger_losses),
                cmocka_unit_test(test_drain_after_another),
                cmocka_unit_test(test_drain_joins_a_planning_ledger),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
