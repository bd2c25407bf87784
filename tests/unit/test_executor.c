/* The drain executor against the in-process simulator, on a scaled engine clock (the simulator and the
 * engine run the same number of times faster than real time, so nothing sleeps). Every wait runs the loop
 * until a condition holds, with a bound in real time. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "controller/volumes.h"
#include "drain/engine_internal.h"
#include "relay.h"
#include "sim/model.h"
#include "sim/server.h"
#include "sim_fixture.h"
#include "spotdrain/alert.h"
#include "spotdrain/core.h"
#include "spotdrain/engine.h"
#include "spotdrain/keys.h"
#include "spotdrain/kube.h"
#include "spotdrain/kubeconfig.h"
#include "spotdrain/yaml.h"
#include "timescale.h"

#define SEC        UINT64_C(1000000)
#define REAL_BOUND test_real_bound(20 * SEC) /* no test comes near this in real time */
#define MAX_ALERTS 16

struct seen_alert {
        enum alert_kind kind;
        uint64_t at;
        char *message;
};

struct fx {
        struct sim_fixture sf;
        struct loop *loop;
        struct kube_client *client;
        struct alert_bus *bus;
        struct drain_exec *x;
        struct seen_alert alerts[MAX_ALERTS];
        size_t n_alerts;
        bool done;
        struct drain_exec_result result;
        uint64_t started;
        struct relay relay; /* between the client and the simulator, with fx_new_held() */
        bool relayed;
        /* With try_event: what kube_event_create() said of an Event at the first pod-evicted alert (where
         * the kube sink makes the pod's). */
        bool try_event, event_tried;
        int event_created;
};

static void record_alert(const struct alert *a, void *userdata)
{
        struct fx *f = userdata;
        if (f->n_alerts < MAX_ALERTS)
                f->alerts[f->n_alerts++] =
                    (struct seen_alert){ .kind = a->kind, .at = a->at_usec, .message = strdup(a->message) };
}

/* The index of the first alert of kind k, or -1. */
static long alert_index(const struct fx *f, enum alert_kind k)
{
        for (size_t i = 0; i < f->n_alerts; i++)
                if (f->alerts[i].kind == k)
                        return (long)i;
        return -1;
}

static const struct seen_alert *find_alert(const struct fx *f, enum alert_kind k)
{
        for (size_t i = 0; i < f->n_alerts; i++)
                if (f->alerts[i].kind == k)
                        return &f->alerts[i];
        return NULL;
}

/* hold: a request-line prefix; such requests of the client never reach the simulator, nor get an answer
 * (relay.h). NULL: the client talks to the simulator directly. */
static struct fx *fx_new_held(const char *scenario, double scale, const char *hold)
{
        struct fx *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        scale = test_time_scale(scale);
        sim_fixture_start(&f->sf, scenario,
                          &(struct sim_fixture_options){
                              .scale = scale, .scale_engine = true, .faults = true, .no_kubeconfig = true });
        if (hold) {
                _cleanup_free_ char *url = NULL;
                relay_start(&f->relay, sim_server_port(f->sf.srv), hold);
                f->relayed = true;
                url = strprintf("http://127.0.0.1:%u", f->relay.port);
                assert_non_null(url);
                sim_fixture_kubeconfig(&f->sf, url);
        } else
                sim_fixture_kubeconfig(&f->sf, NULL);
        assert_int_equal(loop_new(&f->loop), 0);
        assert_int_equal(
            kube_client_new(f->loop, f->sf.kcfg, &(struct kube_client_options){ .qps = -1 }, &f->client), 0);
        assert_int_equal(alert_bus_new(&f->bus), 0);
        assert_int_equal(alert_bus_add_sink(f->bus, record_alert, f), 0);
        return f;
}

static struct fx *fx_new(const char *scenario, double scale)
{
        return fx_new_held(scenario, scale, NULL);
}

static void fx_free(struct fx *f)
{
        drain_exec_free(f->x);
        kube_client_free(f->client);
        loop_free(f->loop);
        alert_bus_free(f->bus);
        if (f->relayed)
                relay_stop(&f->relay);
        sim_fixture_stop(&f->sf);
        for (size_t i = 0; i < f->n_alerts; i++)
                free(f->alerts[i].message);
        free(f);
}

static void on_done(struct drain_exec *x, const struct drain_exec_result *r, void *userdata)
{
        struct fx *f = userdata;
        f->result = *r;
        f->done = true;
}

static struct drain_exec_options options(uint64_t budget, uint64_t margin, enum drain_policy policy)
{
        return (struct drain_exec_options){
                .node = "spot-a",
                .kind = "spot-interruption",
                .deadline_usec = clk_now() + budget,
                .margin_usec = margin,
                .policy = policy,
                .default_startup_usec = 2 * SEC,
                .self_namespace = "",
                .self_name = "",
        };
}

static void fx_start(struct fx *f, const struct drain_exec_options *o)
{
        f->started = clk_now();
        assert_int_equal(drain_exec_start(f->client, f->bus, o, on_done, f, &f->x), 0);
}

static void fx_run(struct fx *f)
{
        assert_int_equal(loop_run_until(f->loop, &f->done, REAL_BOUND), 0);
}

/* Runs the loop until an alert of kind k came (bounded). */
static const struct seen_alert *fx_wait_alert(struct fx *f, enum alert_kind k)
{
        bool never = false;
        for (int i = 0; i < 2000 && !find_alert(f, k) && !f->done; i++)
                loop_run_until(f->loop, &never, 10 * 1000);
        return find_alert(f, k);
}

static cJSON *sim_obj(struct fx *f, enum sim_kind k, const char *ns, const char *name)
{
        cJSON *o = NULL;
        sim_lock(f->sf.sim);
        int r = sim_get(f->sf.sim, k, ns, name, &o);
        sim_unlock(f->sf.sim);
        return r < 0 ? NULL : o;
}

static int sim_pods_on(struct fx *f, const char *node, const char *ns)
{
        cJSON *items = NULL;
        const cJSON *p;
        int n = 0;
        sim_lock(f->sf.sim);
        assert_int_equal(sim_list(f->sf.sim, SIM_POD, ns, &items), 0);
        sim_unlock(f->sf.sim);
        cJSON_ArrayForEach (p, items)
                n += streq_ptr(kube_object_str(p, "spec.nodeName"), node);
        cJSON_Delete(items);
        return n;
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

#define NODES                                                                       \
        "nodes:\n"                                                                  \
        "  - {name: spot-a, allocatable: {cpu: \"16\", memory: 64Gi, pods: 110}}\n" \
        "  - {name: od-1, capacity_type: on-demand, allocatable: {cpu: \"16\", memory: 64Gi, pods: 110}}\n"

/* A feasible drain: cordoned, tainted, annotated, every pod but the DaemonSet's gone, no PDB breached. */
static void test_feasible_drain(void **state)
{
        struct fx *f = fx_new(
            "name: feasible\n" NODES "workloads:\n"
            "  - {name: api, namespace: shop, kind: Deployment, replicas: 6, placement: {spot-a: 4},\n"
            "     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 2,\n"
            "     pdb: {max_unavailable: 1}}\n"
            "  - {name: worker, namespace: batch, kind: Deployment, replicas: 2, placement: {spot-a: 2},\n"
            "     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1}\n"
            "  - {name: agent, namespace: monitoring, kind: DaemonSet, priority_class: "
            "system-node-critical,\n"
            "     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1}\n"
            "events: []\n",
            10);
        struct drain_exec_options o = options(40 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);

        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_int_equal(f->result.evicted, 6);
        assert_int_equal(f->result.forced, 0);
        assert_int_equal(f->result.left, 0);
        assert_false(f->result.infeasible);
        assert_null(find_alert(f, ALERT_DRAIN_INFEASIBLE));
        assert_non_null(find_alert(f, ALERT_DRAIN_COMPLETED));
        assert_null(find_alert(f, ALERT_PODS_FORCED));
        assert_int_equal(sim_breaches(f), 0);
        assert_int_equal(sim_pods_on(f, "spot-a", "shop"), 0);
        assert_int_equal(sim_pods_on(f, "spot-a", "batch"), 0);
        assert_int_equal(sim_pods_on(f, "spot-a", "monitoring"), 1);

        cJSON *node = sim_obj(f, SIM_NODE, NULL, "spot-a");
        assert_non_null(node);
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(node, "spec"), "unschedulable")));
        const cJSON *t =
            cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(node, "spec"), "taints"), 0);
        assert_string_equal(kube_object_str(t, "key"), SPOTDRAIN_TAINT_INTERRUPTION);
        assert_string_equal(kube_object_str(t, "value"), "spot-interruption");
        assert_string_equal(kube_object_str(t, "effect"), "NoSchedule");
        const cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(node, "metadata"), "annotations");
        const char *rec = cJSON_GetStringValue(cJSON_GetObjectItem(ann, SPOTDRAIN_ANNOTATION_DRAIN));
        assert_non_null(rec);
        assert_non_null(strstr(rec, "\"kind\":\"spot-interruption\""));
        cJSON_Delete(node);
        fx_free(f);
}

/* The change log (resourceVersion order): the first node change that carries label key = value, and the
 * first pod change that carries a deletionTimestamp (an eviction or delete answered). */
struct first_changes {
        const char *key, *value;
        uint64_t label_rv, delete_rv;
};

static void find_label(const struct sim_change *c, void *userdata)
{
        struct first_changes *fc = userdata;
        const cJSON *labels = cJSON_GetObjectItem(cJSON_GetObjectItem(c->object, "metadata"), "labels");
        if (!fc->label_rv &&
            streq_ptr(cJSON_GetStringValue(cJSON_GetObjectItem(labels, fc->key)), fc->value))
                fc->label_rv = c->rv;
}

static void find_delete(const struct sim_change *c, void *userdata)
{
        struct first_changes *fc = userdata;
        if (!fc->delete_rv && kube_object_str(c->object, "metadata.deletionTimestamp"))
                fc->delete_rv = c->rv;
}

static struct first_changes first_changes(struct fx *f, const char *key, const char *value)
{
        struct first_changes fc = { .key = key, .value = value };
        sim_lock(f->sf.sim);
        assert_int_equal(sim_changes_since(f->sf.sim, SIM_NODE, NULL, 0, find_label, &fc), 0);
        assert_int_equal(sim_changes_since(f->sf.sim, SIM_POD, NULL, 0, find_delete, &fc), 0);
        sim_unlock(f->sf.sim);
        return fc;
}

static const char *node_label(struct fx *f, const char *key, char *buf, size_t len)
{
        cJSON *node = sim_obj(f, SIM_NODE, NULL, "spot-a");
        assert_non_null(node);
        const cJSON *labels = cJSON_GetObjectItem(cJSON_GetObjectItem(node, "metadata"), "labels");
        const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(labels, key));
        snprintf(buf, len, "%s", v ? v : "");
        cJSON_Delete(node);
        return v ? buf : NULL;
}

#define ONE_POD_NO_PDB                                                                              \
        "  - {name: api, namespace: shop, kind: Deployment, replicas: 2, placement: {spot-a: 2},\n" \
        "     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1}\n"             \
        "events: []\n"

static void count_node_change(const struct sim_change *c, void *userdata)
{
        unsigned *n = userdata;
        if (streq_ptr(c->type, "MODIFIED") &&
            streq_ptr(kube_object_str(c->object, "metadata.name"), "spot-a"))
                (*n)++;
}

/* The writes to spot-a so far. */
static unsigned node_writes(struct fx *f)
{
        unsigned n = 0;
        sim_lock(f->sf.sim);
        assert_int_equal(sim_changes_since(f->sf.sim, SIM_NODE, NULL, 0, count_node_change, &n), 0);
        sim_unlock(f->sf.sim);
        return n;
}

static bool node_marked(struct fx *f, const char *label_key, const char *label_value)
{
        cJSON *node = sim_obj(f, SIM_NODE, NULL, "spot-a");
        assert_non_null(node);
        const cJSON *meta = cJSON_GetObjectItem(node, "metadata"), *spec = cJSON_GetObjectItem(node, "spec"),
                    *t;
        bool tainted = false;
        cJSON_ArrayForEach (t, cJSON_GetObjectItem(spec, "taints"))
                tainted = tainted || streq_ptr(kube_object_str(t, "key"), SPOTDRAIN_TAINT_INTERRUPTION);
        bool ok =
            cJSON_IsTrue(cJSON_GetObjectItem(spec, "unschedulable")) && tainted &&
            cJSON_GetObjectItem(cJSON_GetObjectItem(meta, "annotations"), SPOTDRAIN_ANNOTATION_DRAIN) &&
            streq_ptr(
                cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(meta, "labels"), label_key)),
                label_value);
        if (!ok) {
                char *txt = cJSON_Print(node);
                fprintf(stderr, "spot-a is not marked as expected: %s\n", txt ? txt : "?");
                free(txt);
        }
        cJSON_Delete(node);
        return ok;
}

/* drain.exclude_from_load_balancers: the label is written, and answered, before the first eviction; a
 * label someone else put there is left as it is (and so never taken for spotdrain's). */
static void test_exclude_label_before_eviction(void **state)
{
        char buf[64];
        struct fx *f = fx_new("name: exclude-lb\n" NODES "workloads:\n" ONE_POD_NO_PDB, 10);
        struct drain_exec_options o = options(40 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        o.exclude_from_load_balancers = true;
        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_int_equal(f->result.evicted, 2);
        struct first_changes fc =
            first_changes(f, SPOTDRAIN_LABEL_EXCLUDE_LB, SPOTDRAIN_LABEL_EXCLUDE_LB_VALUE);
        assert_true(fc.label_rv > 0);
        assert_true(fc.delete_rv > fc.label_rv);
        /* Two writes: the cordon, then the label with the taint and the record (four, one each, before). */
        assert_true(node_marked(f, SPOTDRAIN_LABEL_EXCLUDE_LB, SPOTDRAIN_LABEL_EXCLUDE_LB_VALUE));
        assert_int_equal(node_writes(f), 2);
        fx_free(f);

        f = fx_new("name: exclude-lb-theirs\n" NODES "workloads:\n" ONE_POD_NO_PDB, 10);
        cJSON *patch =
            cJSON_Parse("{\"metadata\":{\"labels\":{\"" SPOTDRAIN_LABEL_EXCLUDE_LB "\":\"ops\"}}}");
        struct sim_answer a = { 0 };
        sim_lock(f->sf.sim);
        assert_int_equal(
            sim_patch(f->sf.sim, SIM_NODE, NULL, "spot-a", "application/merge-patch+json", patch, &a), 0);
        sim_unlock(f->sf.sim);
        assert_int_equal(a.status, 200);
        cJSON_Delete(a.body);
        cJSON_Delete(patch);
        o = options(40 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        o.exclude_from_load_balancers = true;
        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_string_equal(node_label(f, SPOTDRAIN_LABEL_EXCLUDE_LB, buf, sizeof(buf)), "ops");
        fx_free(f);

        /* The label's answer held up (a slow admission webhook on node labels): the evictions, which would
         * otherwise go out at once, wait for it. */
        f = fx_new("name: exclude-lb-slow\n" NODES "workloads:\n" ONE_POD_NO_PDB
                   "faults: {node_label_latency_ms: 1500}\n",
                   10);
        o = options(40 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        o.exclude_from_load_balancers = true;
        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_int_equal(f->result.evicted, 2);
        fc = first_changes(f, SPOTDRAIN_LABEL_EXCLUDE_LB, SPOTDRAIN_LABEL_EXCLUDE_LB_VALUE);
        assert_true(fc.label_rv > 0);
        assert_true(fc.delete_rv > fc.label_rv);
        fx_free(f);

        /* Off: no label. */
        f = fx_new("name: exclude-lb-off\n" NODES "workloads:\n" ONE_POD_NO_PDB, 10);
        o = options(40 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_null(node_label(f, SPOTDRAIN_LABEL_EXCLUDE_LB, buf, sizeof(buf)));
        fx_free(f);
}

struct meddler {
        struct sim *sim;
        pthread_t thread;
        atomic_bool stop, meddled;
};

/* Someone else labels spot-a as soon as it is cordoned (polled each millisecond, for at most 20 s). */
static void *meddle(void *userdata)
{
        struct meddler *m = userdata;
        for (int i = 0; i < 20000 && !atomic_load(&m->stop); i++) {
                cJSON *node = NULL;
                sim_lock(m->sim);
                int r = sim_get(m->sim, SIM_NODE, NULL, "spot-a", &node);
                bool cordoned = r >= 0 && cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(node, "spec"),
                                                                           "unschedulable"));
                if (cordoned) {
                        cJSON *patch = cJSON_Parse("{\"metadata\":{\"labels\":{\"team\":\"x\"}}}");
                        struct sim_answer a = { 0 };
                        if (patch &&
                            sim_patch(m->sim, SIM_NODE, NULL, "spot-a", "application/merge-patch+json",
                                      patch, &a) >= 0 &&
                            a.status == 200)
                                atomic_store(&m->meddled, true);
                        cJSON_Delete(a.body);
                        cJSON_Delete(patch);
                }
                sim_unlock(m->sim);
                cJSON_Delete(node);
                if (cordoned)
                        break;
                usleep(1000);
        }
        return NULL;
}

/* The taint, the load balancers' label and the record go in one patch after the cordon, made on the node
 * as the cordon answered. When the node changed in between (someone else's label, written while the patch
 * waits in a slow admission), the patch is refused, and made again on the node read again: theirs is
 * kept, nothing of ours lost. */
static void test_node_marks_conflict(void **state)
{
        struct fx *f = fx_new("name: marks-conflict\n" NODES "workloads:\n" ONE_POD_NO_PDB
                              "faults: {node_label_latency_ms: 1500}\n",
                              10);
        struct meddler m = { .sim = f->sf.sim };
        assert_int_equal(pthread_create(&m.thread, NULL, meddle, &m), 0);
        struct drain_exec_options o = options(40 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        o.exclude_from_load_balancers = true;
        fx_start(f, &o);
        fx_run(f);
        atomic_store(&m.stop, true);
        pthread_join(m.thread, NULL);
        assert_true(atomic_load(&m.meddled));
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_true(node_marked(f, SPOTDRAIN_LABEL_EXCLUDE_LB, SPOTDRAIN_LABEL_EXCLUDE_LB_VALUE));
        assert_true(node_marked(f, "team", "x"));
        /* the cordon, theirs, then ours */
        assert_int_equal(node_writes(f), 3);
        struct first_changes fc =
            first_changes(f, SPOTDRAIN_LABEL_EXCLUDE_LB, SPOTDRAIN_LABEL_EXCLUDE_LB_VALUE);
        assert_true(fc.delete_rv > fc.label_rv);
        fx_free(f);
}

/* What kube_event_create() says of an Event once the drain is first judged (bounded wait), as the kube sink
 * would make a pod's at its eviction. */
static int event_once_judged(struct fx *f)
{
        static const struct kube_event_spec ev = {
                .involved_kind = "Node", .involved_name = "spot-a", .reason = "Test", .message = "m"
        };
        bool never = false;
        for (int i = 0; i < 2000 && !drain_exec_result(f->x)->judged_usec && !f->done; i++)
                loop_run_until(f->loop, &never, 10 * 1000);
        assert_true(drain_exec_result(f->x)->judged_usec > 0);
        return kube_event_create(f->client, &ev, NULL, NULL, NULL);
}

/* When a drain's requests and its pods' Events would not fit the client's rate before the deadline, the
 * Events give way from its first judgement on. With room for both they go. */
static void test_events_give_way(void **state)
{
        /* 3 + 2 requests (the node's, two evictions) where 0.1 a second for 38 s and a burst of 3 allow
         * 4 to 6, the Events doubling them */
        struct fx *f = fx_new("name: events-give-way\n" NODES "workloads:\n" ONE_POD_NO_PDB, 10);
        struct drain_exec_options o = options(40 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        kube_client_set_rate(f->client, 0.1, 3);
        fx_start(f, &o);
        assert_int_equal(event_once_judged(f), -EAGAIN);
        fx_run(f);
        fx_free(f);

        f = fx_new("name: events-room\n" NODES "workloads:\n" ONE_POD_NO_PDB, 10);
        o = options(40 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        kube_client_set_rate(f->client, 10, 20);
        fx_start(f, &o);
        assert_int_equal(event_once_judged(f), 0);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        fx_free(f);
}

/* The grace the Job pod of namespace ci was deleted with; -1 while it is not deleting. */
static int64_t job_deleting(struct fx *f)
{
        cJSON *items = NULL;
        const cJSON *p;
        int64_t grace = -1;
        sim_lock(f->sf.sim);
        assert_int_equal(sim_list(f->sf.sim, SIM_POD, "ci", &items), 0);
        sim_unlock(f->sf.sim);
        cJSON_ArrayForEach (p, items)
                if (kube_object_str(p, "metadata.deletionTimestamp"))
                        grace = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(
                            cJSON_GetObjectItem(p, "metadata"), "deletionGracePeriodSeconds"));
        cJSON_Delete(items);
        return grace;
}

/* A do-not-disrupt Job pod keeps running while the others go, and is stopped at its last safe moment
 * (30 s - 2 s margin - its 10 s grace = 18 s) with the grace left, gracefully: not forced, not killed. */
static void test_do_not_disrupt_kept(void **state)
{
        struct fx *f = fx_new(
            "name: dnd\n" NODES "workloads:\n"
            "  - {name: api, namespace: shop, kind: Deployment, replicas: 2, placement: {spot-a: 2},\n"
            "     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1}\n"
            "  - {name: batch, namespace: ci, kind: Job, replicas: 1, placement: {spot-a: 1},\n"
            "     termination_grace_seconds: 10, shutdown_seconds: 1,\n"
            "     annotations: {karpenter.sh/do-not-disrupt: \"true\"}}\n"
            "events: []\n",
            10);
        struct drain_exec_options o = options(30 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        bool never = false;
        fx_start(f, &o);
        int64_t grace = -1;
        for (int i = 0; i < 4000 && (grace = job_deleting(f)) < 0 && !f->done; i++)
                loop_run_until(f->loop, &never, 10 * 1000);
        uint64_t stopped = clk_now() - f->started;
        assert_int_equal(sim_pods_on(f, "spot-a", "shop"), 0); /* the others went long before */
        assert_true(stopped >= 17 * SEC);
        assert_true(stopped < 28 * SEC);
        /* What is left before deadline - margin, which is more than its 1 s stop. */
        assert_true(grace >= 8 && grace <= 10);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_int_equal(f->result.evicted, 3);
        assert_int_equal(f->result.forced, 0);
        assert_int_equal(sim_pods_on(f, "spot-a", "ci"), 0);
        fx_free(f);
}

#define SKIPPED_PODS                                                                                   \
        "  - {name: infra, namespace: kept, kind: Deployment, replicas: 1, placement: {spot-a: 1},\n"  \
        "     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1}\n"                \
        "  - {name: pinned, namespace: shop, kind: Deployment, replicas: 1, placement: {spot-a: 1},\n" \
        "     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1}\n"

/* drain.skip_namespaces and drain.skip_pod_selector leave their pods alone; drain.taint_effect NoExecute. */
static void test_skip_and_taint_effect(void **state)
{
        struct fx *f = fx_new("name: skip\n" NODES "workloads:\n" SKIPPED_PODS ONE_POD_NO_PDB, 10);
        struct drain_exec_options o = options(30 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        const char *const skip_ns[] = { "other", "kept", NULL };
        o.skip_namespaces = skip_ns;
        o.skip_pod_selector = "app in (pinned, nothing)";
        o.taint_no_execute = true;
        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_int_equal(f->result.evicted, 2);
        assert_int_equal(sim_pods_on(f, "spot-a", "kept"), 1);
        assert_int_equal(sim_pods_on(f, "spot-a", "shop"), 1); /* pinned */
        cJSON *node = sim_obj(f, SIM_NODE, NULL, "spot-a");
        assert_non_null(node);
        const cJSON *t =
            cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(node, "spec"), "taints"), 0);
        assert_string_equal(kube_object_str(t, "key"), SPOTDRAIN_TAINT_INTERRUPTION);
        assert_string_equal(kube_object_str(t, "effect"), "NoExecute");
        cJSON_Delete(node);
        fx_free(f);

        /* A selector that cannot be read stops the drain at its start. */
        f = fx_new("name: skip-bad\n" NODES "workloads:\n" ONE_POD_NO_PDB, 10);
        o = options(30 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        o.skip_pod_selector = "app in (x";
        assert_int_equal(drain_exec_start(f->client, f->bus, &o, on_done, f, &f->x), -EINVAL);
        fx_free(f);
}

/* drain.cordon_only: cordoned, tainted and labelled, and no eviction or delete is ever written: the pods
 * are another drainer's; the deadline ends the drain with them left. */
static void test_cordon_only(void **state)
{
        struct fx *f = fx_new("name: cordon-only\n" NODES "workloads:\n" ONE_POD_NO_PDB, 10);
        struct drain_exec_options o = options(8 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        o.cordon_only = true;
        o.exclude_from_load_balancers = true;
        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DEADLINE_MISSED);
        assert_int_equal(f->result.evicted, 0);
        assert_int_equal(f->result.forced, 0);
        assert_int_equal(f->result.left, 2);
        struct first_changes fc =
            first_changes(f, SPOTDRAIN_LABEL_EXCLUDE_LB, SPOTDRAIN_LABEL_EXCLUDE_LB_VALUE);
        assert_true(fc.label_rv > 0);
        assert_int_equal(fc.delete_rv, 0);
        cJSON *node = sim_obj(f, SIM_NODE, NULL, "spot-a");
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(node, "spec"), "unschedulable")));
        cJSON_Delete(node);
        fx_free(f);
}

#define DS_POD                                                        \
        "  - {name: agent, namespace: monitoring, kind: DaemonSet,\n" \
        "     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1}\n"

static bool node_has_taint(struct fx *f, const char *key, const char *value, const char *effect)
{
        cJSON *node = sim_obj(f, SIM_NODE, NULL, "spot-a");
        const cJSON *t;
        bool found = false;
        cJSON_ArrayForEach (t, cJSON_GetObjectItem(cJSON_GetObjectItem(node, "spec"), "taints"))
                found |= streq_ptr(kube_object_str(t, "key"), key) &&
                         streq_ptr(kube_object_str(t, "value"), value) &&
                         streq_ptr(kube_object_str(t, "effect"), effect);
        cJSON_Delete(node);
        return found;
}

static bool oos_tainted(struct fx *f)
{
        return node_has_taint(f, SPOTDRAIN_TAINT_OUT_OF_SERVICE, SPOTDRAIN_OUT_OF_SERVICE_VALUE,
                              "NoExecute");
}

/* Runs the loop until the node has the out-of-service taint (bounded); whether it came. */
static bool fx_wait_oos(struct fx *f)
{
        bool never = false;
        for (int i = 0; i < 300 && !oos_tainted(f); i++)
                loop_run_until(f->loop, &never, 10 * 1000);
        return oos_tainted(f);
}

/* drain.out_of_service_taint: the node empty (only the DaemonSet's pod left) is tainted
 * out-of-service=nodeshutdown:NoExecute; one where a skipped pod still runs is not, as it is not empty;
 * at the deadline (the instance gone) it is, whatever is left. Off: never. */
static void test_out_of_service_taint(void **state)
{
        struct fx *f = fx_new("name: oos\n" NODES "workloads:\n" DS_POD ONE_POD_NO_PDB, 10);
        struct drain_exec_options o = options(30 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        o.out_of_service_taint = true;
        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_true(fx_wait_oos(f));
        assert_int_equal(sim_pods_on(f, "spot-a", "monitoring"), 1);
        fx_free(f);

        f = fx_new("name: oos-skipped\n" NODES "workloads:\n" SKIPPED_PODS ONE_POD_NO_PDB, 10);
        o = options(30 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        const char *const skip_ns[] = { "kept", NULL };
        o.out_of_service_taint = true;
        o.skip_namespaces = skip_ns;
        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_false(fx_wait_oos(f));
        fx_free(f);

        f = fx_new("name: oos-deadline\n" NODES "workloads:\n" ONE_POD_NO_PDB, 10);
        o = options(6 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        o.out_of_service_taint = true;
        o.cordon_only = true;
        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DEADLINE_MISSED);
        assert_true(fx_wait_oos(f));
        fx_free(f);

        f = fx_new("name: oos-off\n" NODES "workloads:\n" ONE_POD_NO_PDB, 10);
        o = options(30 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        fx_start(f, &o);
        fx_run(f);
        assert_false(fx_wait_oos(f));
        fx_free(f);
}

/* drain.lb_deregistration_seconds (8 s): the pods behind a Service go no earlier than 8 s after the exclude
 * label was answered; the pod behind none goes at once; the result says what was held. */
static void test_lb_deregistration(void **state)
{
        struct fx *f = fx_new(
            "name: lb-dereg\n" NODES "workloads:\n"
            "  - {name: web, namespace: shop, kind: Deployment, replicas: 2, placement: {spot-a: 2},\n"
            "     service: true, termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1}\n"
            "  - {name: worker, namespace: batch, kind: Deployment, replicas: 1, placement: {spot-a: 1},\n"
            "     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1}\n"
            "events: []\n",
            10);
        struct drain_exec_options o = options(40 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        o.exclude_from_load_balancers = true;
        o.lb_deregistration_usec = 8 * SEC;
        bool never = false;
        fx_start(f, &o);
        for (int i = 0; i < 2000 && sim_pods_on(f, "spot-a", "batch") > 0 && !f->done; i++)
                loop_run_until(f->loop, &never, 10 * 1000);
        uint64_t worker_gone = clk_now() - f->started;
        assert_int_equal(sim_pods_on(f, "spot-a", "shop"), 2); /* still serving */
        for (int i = 0; i < 4000 && sim_pods_on(f, "spot-a", "shop") == 2 && !f->done; i++)
                loop_run_until(f->loop, &never, 10 * 1000);
        uint64_t web_going = clk_now() - f->started;
        assert_true(worker_gone < 5 * SEC);
        assert_true(web_going >= 8 * SEC);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_int_equal(f->result.evicted, 3);
        assert_int_equal(f->result.lb_held, 2);
        assert_true(f->result.lb_held_until_usec >= f->started + 8 * SEC);
        assert_non_null(
            strstr(f->result.message, "2 pods behind a Service held 8.0 s for the load balancers"));
        fx_free(f);
}

/* ---- the wait for a node's VolumeAttachments (controller/volumes.c), against the same simulator ---- */

struct vwait {
        bool done, timed_out;
        unsigned left;
        uint64_t at;
};

static void vwait_done(struct volume_wait *w, unsigned left, bool timed_out, void *userdata)
{
        struct vwait *v = userdata;
        *v = (struct vwait){ .done = true, .timed_out = timed_out, .left = left, .at = clk_now() };
}

/* Two StatefulSet pods with volumes on spot-a (cordoned, so that their successors go elsewhere), deleted
 * at once: they exit after 1 s, their volumes detach 4 s later; the wait ends then, not before. With a
 * deadline nearer than that, it ends at the deadline and says how many were left. */
static void test_volume_wait(void **state)
{
        struct fx *f = fx_new(
            "name: volumes\n" NODES "workloads:\n"
            "  - {name: db, namespace: shop, kind: StatefulSet, replicas: 2, placement: {spot-a: 2},\n"
            "     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1,\n"
            "     volume_detach_seconds: 4}\n"
            "events: []\n",
            10);
        struct volume_wait *w = NULL;
        struct vwait v = { 0 };
        cJSON *items = NULL;

        sim_lock(f->sf.sim);
        assert_int_equal(sim_list(f->sf.sim, SIM_VOLUMEATTACHMENT, NULL, &items), 0);
        sim_unlock(f->sf.sim);
        assert_int_equal(volume_attachments_on(items, "spot-a"), 2);
        assert_int_equal(volume_attachments_on(items, "od-1"), 0);
        cJSON_Delete(items);

        /* Not deleted: the deadline (2 s) ends the wait with both still attached. */
        uint64_t t0 = clk_now();
        assert_int_equal(volume_wait_start(f->client, "spot-a", t0 + 2 * SEC, vwait_done, &v, &w), 0);
        assert_false(v.done);
        assert_int_equal(loop_run_until(f->loop, &v.done, REAL_BOUND), 0);
        assert_true(v.timed_out);
        assert_int_equal(v.left, 2);
        assert_true(v.at >= t0 + 2 * SEC);
        w = volume_wait_free(w);

        cJSON *cordon = cJSON_Parse("{\"spec\":{\"unschedulable\":true}}");
        struct sim_answer a = { 0 };
        sim_lock(f->sf.sim);
        assert_int_equal(
            sim_patch(f->sf.sim, SIM_NODE, NULL, "spot-a", "application/merge-patch+json", cordon, &a), 0);
        cJSON_Delete(a.body);
        assert_int_equal(sim_list(f->sf.sim, SIM_POD, "shop", &items), 0);
        const cJSON *p;
        cJSON_ArrayForEach (p, items) {
                a = (struct sim_answer){ 0 };
                assert_int_equal(sim_delete_pod(f->sf.sim, "shop", kube_object_str(p, "metadata.name"), -1,
                                                NULL, "test", &a),
                                 0);
                cJSON_Delete(a.body);
        }
        sim_unlock(f->sf.sim);
        cJSON_Delete(items);
        cJSON_Delete(cordon);

        v = (struct vwait){ 0 };
        t0 = clk_now();
        assert_int_equal(volume_wait_start(f->client, "spot-a", t0 + 30 * SEC, vwait_done, &v, &w), 0);
        assert_int_equal(loop_run_until(f->loop, &v.done, REAL_BOUND), 0);
        assert_false(v.timed_out);
        assert_int_equal(v.left, 0);
        /* exit at 1 s + detach 4 s, seen by the next look (every second) */
        assert_true(v.at >= t0 + 4 * SEC + SEC / 2);
        assert_true(v.at < t0 + 8 * SEC);
        volume_wait_free(w);
        fx_free(f);
}

/* maxUnavailable 1 over 4 pods that take 2 s to start: four waves, 7 s at best. The floor between
 * blind retries is set to 5 s, so only retrying on the PDB status change can finish near 7 s; a retry on
 * any timer of seconds would need 15 s or more. At time scale 1: the 10 s bound between the two is then
 * 3 real s of slack, where at 5 a loaded machine (stress -c 2) could spend its 0.6 s. */
static void test_retry_follows_pdb_status(void **state)
{
        struct fx *f = fx_new(
            "name: waves\n" NODES "workloads:\n"
            "  - {name: api, namespace: shop, kind: Deployment, replicas: 6, placement: {spot-a: 4},\n"
            "     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 2,\n"
            "     pdb: {max_unavailable: 1}}\n"
            "events: []\n",
            1);
        struct drain_exec_options o = options(60 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        o.retry_floor_usec = 5 * SEC;

        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_int_equal(f->result.evicted, 4);
        assert_int_equal(f->result.forced, 0);
        assert_true(f->result.finished_usec - f->started < 10 * SEC);
        assert_int_equal(sim_breaches(f), 0);
        fx_free(f);
}

/* One pod, a PDB allowing no disruption: no eviction is sent while the PDB has no slot (no 429), and at
 * deadline - margin - grace the pod is deleted around it with its whole grace period. */
/* A pod its PDB never lets go, that takes SHUTDOWN seconds to stop (of its grace of 4). */
#define BLOCKED_POD_STOPPING(shutdown)                                                             \
        "workloads:\n"                                                                             \
        "  - {name: db, namespace: shop, kind: Deployment, replicas: 2, placement: {spot-a: 1},\n" \
        "     termination_grace_seconds: 4, shutdown_seconds: " shutdown ", startup_seconds: 1,\n" \
        "     pdb: {min_available: \"100%\"}}\n"                                                   \
        "events: []\n"
#define BLOCKED_POD BLOCKED_POD_STOPPING("1")

static void test_force_at_last_safe_moment(void **state)
{
        struct fx *f = fx_new("name: force\n" NODES BLOCKED_POD, 5);
        struct drain_exec_options o = options(14 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        uint64_t last_safe = o.deadline_usec - 2 * SEC - 4 * SEC;

        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_int_equal(f->result.forced, 1);
        assert_int_equal(f->result.evicted, 0);
        assert_int_equal(f->result.blocked, 0);
        const struct seen_alert *a = find_alert(f, ALERT_PODS_FORCED);
        assert_non_null(a);
        /* Not before its last safe moment (the timer may fire a little after it, never before). */
        assert_true(a->at + 1000 >= last_safe);
        assert_non_null(strstr(a->message, "(grace 4 s)"));
        assert_non_null(strstr(a->message, "shop/db-"));
        /* It stopped within its grace (1 s of 4): nothing was killed. */
        a = find_alert(f, ALERT_DRAIN_COMPLETED);
        assert_non_null(a);
        assert_null(strstr(a->message, "killed"));
        fx_free(f);
}

/* A forced pod that needs longer than the grace its delete gives (6 s of 4) is killed at the grace's end:
 * the drain-completed message names it. */
static void test_killed_pod_named(void **state)
{
        struct fx *f = fx_new("name: killed\n" NODES BLOCKED_POD_STOPPING("6"), 5);
        struct drain_exec_options o = options(14 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);

        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_int_equal(f->result.forced, 1);
        const struct seen_alert *a = find_alert(f, ALERT_DRAIN_COMPLETED);
        assert_non_null(a);
        const char *k = strstr(a->message, "1 pod killed at the end of its grace: shop/db-");
        assert_non_null(k);
        fx_free(f);
}

/* The same under policy respect: never around the PDB; the deadline comes with the pod still there. */
static void test_respect_policy_leaves_pod(void **state)
{
        struct fx *f = fx_new("name: respect\n" NODES BLOCKED_POD, 5);
        struct drain_exec_options o = options(8 * SEC, 2 * SEC, DRAIN_POLICY_RESPECT);

        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DEADLINE_MISSED);
        assert_int_equal(f->result.forced, 0);
        assert_int_equal(f->result.left, 1);
        assert_null(find_alert(f, ALERT_PODS_FORCED));
        const struct seen_alert *a = find_alert(f, ALERT_DEADLINE_MISSED);
        assert_non_null(a);
        assert_non_null(strstr(a->message, "shop/db-"));
        assert_int_equal(sim_pods_on(f, "spot-a", "shop"), 1);
        assert_int_equal(sim_breaches(f), 0);
        fx_free(f);
}

/* A pod under two PDBs: the eviction API answers 500; it is reported and deleted at its last safe moment. */
static void test_multiple_pdbs_forced(void **state)
{
        struct fx *f = fx_new(
            "name: multi\n" NODES "workloads:\n"
            "  - {name: api, namespace: shop, kind: Deployment, replicas: 4, placement: {spot-a: 1},\n"
            "     termination_grace_seconds: 3, shutdown_seconds: 1, startup_seconds: 1,\n"
            "     pdb: {max_unavailable: 1}}\n"
            "events: []\n",
            5);
        cJSON *extra =
            cJSON_Parse("{\"apiVersion\":\"policy/v1\",\"kind\":\"PodDisruptionBudget\","
                        "\"metadata\":{\"name\":\"api-extra\",\"namespace\":\"shop\"},"
                        "\"spec\":{\"maxUnavailable\":1,\"selector\":{\"matchLabels\":{\"app\":\"api\"}}}}");
        struct sim_answer ans = { 0 };

        assert_non_null(extra);
        sim_lock(f->sf.sim);
        assert_int_equal(sim_create(f->sf.sim, SIM_PDB, "shop", extra, &ans), 0);
        sim_unlock(f->sf.sim);
        assert_int_equal(ans.status, 201);
        cJSON_Delete(ans.body);
        cJSON_Delete(extra);

        struct drain_exec_options o = options(10 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_true(f->result.multi_pdb >= 1);
        assert_int_equal(f->result.forced, 1);
        assert_non_null(find_alert(f, ALERT_PODS_FORCED));
        fx_free(f);
}

static unsigned ledger_waiting(const struct drain_ledger *l)
{
        struct drain_ledger_stats st;
        drain_ledger_stats(l, &st);
        return st.waiting;
}

/* Pods that vanish while they wait for a PDB slot are done, not errors. */
static void test_pods_vanish(void **state)
{
        struct fx *f = fx_new("name: vanish\n" NODES BLOCKED_POD, 5);
        struct drain_exec_options o = options(30 * SEC, 2 * SEC, DRAIN_POLICY_RESPECT);
        _cleanup_(drain_ledger_freep) struct drain_ledger *ledger = NULL;
        cJSON *items = NULL;
        const cJSON *p;
        bool never = false;

        assert_int_equal(drain_ledger_new(f->client, 0, &ledger), 0);
        o.ledger = ledger;
        fx_start(f, &o);
        /* Until the executor waits for a slot of the PDB. */
        for (int i = 0; i < 2000 && ledger_waiting(ledger) == 0; i++)
                loop_run_until(f->loop, &never, 10 * 1000);
        assert_int_equal(ledger_waiting(ledger), 1);
        assert_int_equal(drain_exec_result(f->x)->blocked, 0);

        sim_lock(f->sf.sim);
        assert_int_equal(sim_list(f->sf.sim, SIM_POD, "shop", &items), 0);
        cJSON_ArrayForEach (p, items) {
                struct sim_answer ans = { 0 };
                if (!streq_ptr(kube_object_str(p, "spec.nodeName"), "spot-a"))
                        continue;
                assert_int_equal(sim_delete_pod(f->sf.sim, "shop", kube_object_str(p, "metadata.name"), 0,
                                                NULL, "test", &ans),
                                 0);
                cJSON_Delete(ans.body);
        }
        sim_unlock(f->sf.sim);
        cJSON_Delete(items);

        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_int_equal(f->result.forced, 0);
        assert_int_equal(f->result.evicted, 0);
        assert_int_equal(f->result.left, 0);
        assert_int_equal(ledger_waiting(ledger), 0);
        /* Members leave before the ledger goes, and it goes before the client. */
        f->x = drain_exec_free(f->x);
        ledger = drain_ledger_free(ledger);
        fx_free(f);
}

/* A pod that takes 40 s of its 60 s grace to stop: its watch stays silent meanwhile, and that silence is not
 * taken for a dead connection (issue 36: a thousand drains each resuming its watch every 10 s of a stop took
 * the client's rate and left the drains blind). Nothing is asked of the API while the pod stops; its removal
 * is seen on the watch that was open before. */
static void test_watch_patient_while_stopping(void **state)
{
        struct fx *f =
            fx_new("name: patient\n" NODES "workloads:\n"
                   "  - {name: api, namespace: shop, kind: Deployment, replicas: 1, placement: "
                   "{spot-a: 1},\n"
                   "     termination_grace_seconds: 60, shutdown_seconds: 40, startup_seconds: 1}\n"
                   "events: []\n",
                   10);
        struct drain_exec_options o = options(120 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        struct kube_client_stats st;
        bool never = false;

        fx_start(f, &o);
        for (int i = 0; i < 2000 && drain_exec_result(f->x)->evicted == 0 && !f->done; i++)
                loop_run_until(f->loop, &never, 10 * 1000);
        assert_int_equal(drain_exec_result(f->x)->evicted, 1);
        kube_client_stats(f->client, &st);
        uint64_t sent = st.sent, evicted_at = clk_now();
        /* The requests of the stop, should it fail: the simulator logs each (debug). */
        log_setup(LOG_FORMAT_TEXT, LOG_DEBUG);
        fx_run(f);
        log_setup(LOG_FORMAT_TEXT, LOG_INFO);
        kube_client_stats(f->client, &st);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_int_equal(f->result.killed, 0);
        /* The stop took its 40 s (four idle limits of a request), */
        assert_in_range(clk_now() - evicted_at, 35 * SEC, 60 * SEC);
        /* and cost no request but the drain record's at its end. */
        assert_in_range(st.sent - sent, 0, 1);
        fx_free(f);
}

/* seed-504: ten pods under maxUnavailable 1 that take 15 s each to replace cannot leave in 120 s. The
 * executor says so within a second of starting, naming the PDB and the value that would fit. Real time. */
static void test_infeasible_alert_at_once(void **state)
{
        struct fx *f = fx_new(
            "name: seed-504\n" NODES "workloads:\n"
            "  - {name: api, namespace: shop, kind: Deployment, replicas: 30, placement: {spot-a: 10},\n"
            "     termination_grace_seconds: 30, shutdown_seconds: 10, startup_seconds: 15,\n"
            "     pdb: {max_unavailable: 1}}\n"
            "events: []\n",
            1);
        struct drain_exec_options o = options(120 * SEC, 5 * SEC, DRAIN_POLICY_FORCE);

        fx_start(f, &o);
        const struct seen_alert *a = fx_wait_alert(f, ALERT_DRAIN_INFEASIBLE);
        assert_non_null(a);
        assert_true(a->at - f->started < SEC);
        assert_non_null(strstr(a->message, "shop/api"));
        assert_non_null(strstr(a->message, "would fit"));
        assert_true(drain_exec_result(f->x)->infeasible);
        assert_int_equal(alert_bus_count(f->bus, ALERT_DRAIN_INFEASIBLE), 1);
        fx_free(f);
}

/* drain.surge: a one-replica Deployment under minAvailable 1 can leave only once surge has read it (its
 * PDB allows nothing). The first verdict waits for that read, but no longer than 5 s of the drain (engine
 * clock): when the read is answered (the Deployment cannot surge: maxSurge 0), drain-infeasible comes at
 * once; when it never is, at the bound, by the executor's own timer (nothing else wakes the drain before the
 * pod's last safe moment, some 20 s later). */
#define SURGE_VERDICT_WAIT (5 * SEC)
static void test_surge_verdict_bound(void **state)
{
        static const char scenario[] =
            "name: surge-verdict\n" NODES "workloads:\n"
            "  - {name: checkout, namespace: shop, kind: Deployment, replicas: 1, placement: {spot-a: 1},\n"
            "     termination_grace_seconds: 30, shutdown_seconds: 5, startup_seconds: 5,\n"
            "     strategy: {max_surge: 0, max_unavailable: 1}, pdb: {min_available: 1}}\n"
            "events: []\n";
        for (int held = 0; held <= 1; held++) {
                struct fx *f =
                    held ? fx_new_held(scenario, 4, "GET /apis/apps/v1/namespaces/shop/deployments/")
                         : fx_new(scenario, 4);
                struct drain_exec_options o = options(60 * SEC, 5 * SEC, DRAIN_POLICY_FORCE);
                o.surge = DRAIN_SURGE_BLOCKED;

                fx_start(f, &o);
                const struct seen_alert *a = fx_wait_alert(f, ALERT_DRAIN_INFEASIBLE);
                assert_non_null(a);
                uint64_t after = a->at - f->started;
                if (held) {
                        assert_true(atomic_load(&f->relay.held) >= 1);
                        assert_true(after >= SURGE_VERDICT_WAIT);
                        /* The timer's own instant; the slack is the loop's latency on a loaded machine
                         * (1.5 s of engine time is 0.4 s of real time at this scale). */
                        assert_true(after <= SURGE_VERDICT_WAIT + 3 * SEC / 2);
                } else {
                        assert_true(after < 2 * SEC);
                }
                assert_int_equal(alert_bus_count(f->bus, ALERT_DRAIN_INFEASIBLE), 1);
                fx_free(f);
        }
}

/* The first plan goes without its pods' startup times when the lists of their siblings are slow (after
 * 0.5 s): each replacement is then guessed at the default startup. Six pods under maxUnavailable 1:
 * - guessed too slow (30 s, they start in 2 s): the guess alone makes the drain infeasible, yet it fits.
 *   Lists lagged until the first plan is made, then answering: no drain-infeasible at all (once seen on a
 *   loaded machine: "6 waves of 30 s" for pods that start in 12).
 * - guessed too fast (1 s, they start in 8 s: 6 waves do not fit in 35 s): the guess alone makes it fit.
 *   Lagged lists: drain-infeasible once they answer, at the first judgement (judged mid-drain instead, a
 *   PDB short of its replacement is not cried about, and the alert never came).
 * - lists that never answer: the verdict on the guess at the bound, 3 s of the drain (engine clock), not
 *   before.
 * The first predictions wait with the verdict, and so does the first eviction. */
#define STARTUPS_VERDICT_WAIT (3 * SEC)
enum startups_case {
        STARTUPS_GUESS_SLOW,
        STARTUPS_GUESS_FAST,
        STARTUPS_NEVER
};
static void test_startups_verdict_wait(void **state)
{
        static const char slow[] =
            "name: startups-verdict\n" NODES "workloads:\n"
            "  - {name: web, namespace: shop, kind: Deployment, replicas: 12, placement: {spot-a: 6},\n"
            "     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 2,\n"
            "     pdb: {max_unavailable: 1}}\n"
            "events: []\n";
        static const char fast[] =
            "name: startups-verdict\n" NODES "workloads:\n"
            "  - {name: web, namespace: shop, kind: Deployment, replicas: 12, placement: {spot-a: 6},\n"
            "     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 8,\n"
            "     pdb: {max_unavailable: 1}}\n"
            "events: []\n";
        static const char siblings[] = "GET /api/v1/namespaces/shop/pods?labelSelector";
        for (int c = STARTUPS_GUESS_SLOW; c <= STARTUPS_NEVER; c++) {
                bool held = c == STARTUPS_NEVER;
                /* Lagged: a prefix no request has, the siblings' lists lagging instead. */
                struct fx *f =
                    fx_new_held(c == STARTUPS_GUESS_FAST ? fast : slow, 2, held ? siblings : "HOLD NOTHING");
                struct drain_exec_options o = options(40 * SEC, 5 * SEC, DRAIN_POLICY_FORCE);
                o.default_startup_usec = c == STARTUPS_GUESS_FAST ? 1 * SEC : 30 * SEC;
                if (!held) {
                        relay_set_lag(&f->relay, siblings, "");
                        atomic_store(&f->relay.lagging, true);
                }

                fx_start(f, &o);
                if (held) {
                        const struct seen_alert *a = fx_wait_alert(f, ALERT_DRAIN_INFEASIBLE);
                        assert_non_null(a);
                        assert_true(atomic_load(&f->relay.held) >= 1);
                        assert_true(a->at - f->started >= STARTUPS_VERDICT_WAIT);
                        /* No pod went before the verdict: the first eviction waited for it. */
                        long ev = alert_index(f, ALERT_POD_EVICTED);
                        assert_true(ev < 0 || ev > alert_index(f, ALERT_DRAIN_INFEASIBLE));
                        fx_free(f);
                        continue;
                }
                bool never = false;
                for (int i = 0; i < 2000 && !drain_exec_result(f->x)->planned_usec; i++)
                        loop_run_until(f->loop, &never, 10 * 1000);
                /* Planned without the startups (a slow machine may plan before the lists even reach the
                 * relay, which then lags them): neither the verdict nor the predictions are out. */
                assert_true(drain_exec_result(f->x)->planned_usec > 0);
                for (int i = 0; i < 2000 && atomic_load(&f->relay.lagged) < 1; i++)
                        loop_run_until(f->loop, &never, 10 * 1000);
                assert_true(atomic_load(&f->relay.lagged) >= 1);
                assert_null(find_alert(f, ALERT_DRAIN_INFEASIBLE));
                assert_false(drain_exec_result(f->x)->outlook_first.known);
                assert_int_equal(drain_exec_result(f->x)->evicted, 0);
                atomic_store(&f->relay.lagging, false);
                if (c == STARTUPS_GUESS_FAST) {
                        assert_non_null(fx_wait_alert(f, ALERT_DRAIN_INFEASIBLE));
                        assert_true(drain_exec_result(f->x)->infeasible);
                        assert_true(drain_exec_result(f->x)->outlook_first.known);
                } else {
                        fx_run(f);
                        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
                        assert_int_equal(f->result.forced, 0);
                        assert_int_equal(alert_bus_count(f->bus, ALERT_DRAIN_INFEASIBLE), 0);
                        assert_true(f->result.outlook_first.known);
                }
                fx_free(f);
        }
}

struct deletions {
        char *seen[8]; /* normal pods seen deleting */
        size_t n_seen;
        uint64_t last_normal_rv; /* the latest rv at which a normal pod started deleting */
        uint64_t critical_rv;    /* the first rv at which the critical pod did */
        bool bare_deleted;
};

static void note_deletion(const struct sim_change *c, void *userdata)
{
        struct deletions *d = userdata;
        const char *name = kube_object_str(c->object, "metadata.name");
        if (!kube_object_str(c->object, "metadata.deletionTimestamp") ||
            !streq_ptr(kube_object_str(c->object, "spec.nodeName"), "spot-a") || !name)
                return;
        if (startswith(name, "dns-")) {
                if (!d->critical_rv)
                        d->critical_rv = c->rv;
                return;
        }
        for (size_t i = 0; i < d->n_seen; i++)
                if (streq(d->seen[i], name))
                        return; /* a later change of a pod already stopping */
        assert_true(d->n_seen < ARRAY_SIZE(d->seen));
        d->seen[d->n_seen++] = strdup(name);
        d->last_normal_rv = c->rv;
        d->bare_deleted = d->bare_deleted || streq(name, "solo");
}

/* Critical pods go last: the cluster-critical one starts its stop only after every normal pod (a bare one
 * included, evicted with a warning) has started its own. */
static void test_critical_last(void **state)
{
        struct fx *f = fx_new(
            "name: tiers\n" NODES "workloads:\n"
            "  - {name: dns, namespace: kube-system, kind: Deployment, replicas: 2,\n"
            "     placement: {spot-a: 1}, priority_class: system-cluster-critical,\n"
            "     termination_grace_seconds: 2, shutdown_seconds: 1, startup_seconds: 1}\n"
            "  - {name: api, namespace: shop, kind: Deployment, replicas: 4, placement: {spot-a: 2},\n"
            "     termination_grace_seconds: 2, shutdown_seconds: 1, startup_seconds: 2,\n"
            "     pdb: {max_unavailable: 1}}\n"
            "  - {name: solo, namespace: shop, kind: Pod, placement: {spot-a: 1},\n"
            "     termination_grace_seconds: 2, shutdown_seconds: 1}\n"
            "events: []\n",
            5);
        struct drain_exec_options o = options(40 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        struct deletions d = { 0 };

        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_int_equal(f->result.evicted, 4);
        assert_int_equal(f->result.forced, 0);
        sim_lock(f->sf.sim);
        assert_int_equal(sim_changes_since(f->sf.sim, SIM_POD, NULL, 0, note_deletion, &d), 0);
        sim_unlock(f->sf.sim);
        assert_true(d.bare_deleted);
        assert_int_equal(d.n_seen, 3);
        for (size_t i = 0; i < d.n_seen; i++)
                free(d.seen[i]);
        assert_true(d.critical_rv > 0);
        assert_true(d.critical_rv > d.last_normal_rv);
        fx_free(f);
}

/* The agent's own pod is never evicted, and the drain does not wait for it. */
static void test_never_self(void **state)
{
        struct fx *f = fx_new(
            "name: self\n" NODES "workloads:\n"
            "  - {name: agent, namespace: ops, kind: Deployment, replicas: 3, placement: {spot-a: 3},\n"
            "     termination_grace_seconds: 2, shutdown_seconds: 1, startup_seconds: 1}\n"
            "events: []\n",
            5);
        struct drain_exec_options o = options(30 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        cJSON *items = NULL;
        _cleanup_free_ char *self = NULL;

        sim_lock(f->sf.sim);
        assert_int_equal(sim_list(f->sf.sim, SIM_POD, "ops", &items), 0);
        sim_unlock(f->sf.sim);
        self = strdup(kube_object_str(cJSON_GetArrayItem(items, 0), "metadata.name"));
        cJSON_Delete(items);
        assert_non_null(self);
        o.self_namespace = "ops";
        o.self_name = self;

        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_int_equal(f->result.evicted, 2);
        cJSON *pod = sim_obj(f, SIM_POD, "ops", self);
        assert_non_null(pod);
        assert_null(kube_object_str(pod, "metadata.deletionTimestamp"));
        assert_string_equal(kube_object_str(pod, "spec.nodeName"), "spot-a");
        cJSON_Delete(pod);
        fx_free(f);
}

/* ---- planner input from objects (pure) ---- */

static cJSON *pod_json(const char *name, const char *owner_kind, const char *created, const char *ready_at,
                       bool ready)
{
        _cleanup_free_ char *text = strprintf(
            "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"shop\",\"uid\":\"u-%s\",\"creationTimestamp\":"
            "\"%s\","
            "\"labels\":{\"app\":\"api\",\"statefulset.kubernetes.io/pod-name\":\"%s\"},"
            "\"ownerReferences\":[{\"kind\":\"%s\",\"name\":\"api\",\"controller\":true}]},"
            "\"spec\":{\"nodeName\":\"spot-a\",\"terminationGracePeriodSeconds\":7,"
            "\"volumes\":[{\"name\":\"tmp\",\"emptyDir\":{}}]},"
            "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\","
            "\"lastTransitionTime\":\"%s\"}]}}",
            name, name, created, name, owner_kind, ready ? "True" : "False", ready_at);
        assert_non_null(text);
        cJSON *o = cJSON_Parse(text);
        assert_non_null(o);
        return o;
}

static void test_startup_median(void **state)
{
        cJSON *items = cJSON_CreateArray();
        struct drain_startup *s = NULL;
        size_t n = 0;

        /* 10 s, 30 s, 20 s for one owner; a pod not Ready is no sample. */
        cJSON_AddItemToArray(
            items, pod_json("a", "ReplicaSet", "2026-11-30T06:00:00Z", "2026-11-30T06:00:10Z", true));
        cJSON_AddItemToArray(
            items, pod_json("b", "ReplicaSet", "2026-11-30T06:00:00Z", "2026-11-30T06:00:30Z", true));
        cJSON_AddItemToArray(
            items, pod_json("c", "ReplicaSet", "2026-11-30T06:00:00Z", "2026-11-30T06:00:20Z", true));
        cJSON_AddItemToArray(
            items, pod_json("d", "ReplicaSet", "2026-11-30T06:00:00Z", "2026-11-30T06:09:00Z", false));
        cJSON_AddItemToArray(
            items, pod_json("e", "StatefulSet", "2026-11-30T06:00:00Z", "2026-11-30T06:00:04Z", true));
        assert_int_equal(drain_startups_measure(items, &s, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(s[0].owner_key, "shop/ReplicaSet/api");
        assert_int_equal(s[0].startup_usec, 20 * SEC);
        assert_string_equal(s[1].owner_key, "shop/StatefulSet/api");
        assert_int_equal(s[1].startup_usec, 4 * SEC);
        drain_startups_free(s, n);
        cJSON_Delete(items);

        /* Nothing measurable: no entries, not an error. */
        items = cJSON_CreateArray();
        assert_int_equal(drain_startups_measure(items, &s, &n), 0);
        assert_int_equal(n, 0);
        drain_startups_free(s, n);
        cJSON_Delete(items);
}

static void test_inputs_from_objects(void **state)
{
        _cleanup_(drain_inputs_freep) struct drain_inputs *di = NULL;
        cJSON *pod = pod_json("web-0", "StatefulSet", "2026-11-30T06:00:00Z", "2026-11-30T06:00:10Z", true);
        cJSON *other = cJSON_Parse("{\"metadata\":{\"name\":\"solo\",\"namespace\":\"shop\","
                                   "\"deletionTimestamp\":\"2026-11-30T06:01:00Z\","
                                   "\"deletionGracePeriodSeconds\":30,\"labels\":{\"app\":\"api\"}},"
                                   "\"spec\":{\"nodeName\":\"spot-a\"},\"status\":{\"phase\":\"Pending\"}}");
        cJSON *pdb =
            cJSON_Parse("{\"metadata\":{\"name\":\"api\",\"namespace\":\"shop\"},"
                        "\"spec\":{\"maxUnavailable\":1,\"selector\":{\"matchLabels\":{\"app\":\"api\"}}},"
                        "\"status\":{\"currentHealthy\":5,\"desiredHealthy\":4,\"expectedPods\":5,"
                        "\"disruptionsAllowed\":1}}");
        cJSON *elsewhere =
            cJSON_Parse("{\"metadata\":{\"name\":\"api\",\"namespace\":\"batch\"},"
                        "\"spec\":{\"maxUnavailable\":1,\"selector\":{\"matchLabels\":{\"app\":\"api\"}}}}");
        struct drain_inputs_options o = { .now_usec = 1, .default_startup_usec = 3 * SEC };
        size_t node, i;

        assert_int_equal(drain_inputs_new(&o, &di), 0);
        assert_int_equal(drain_inputs_add_node(di, "spot-a", 100 * SEC, 5 * SEC, &node), 0);
        assert_int_equal(drain_inputs_add_pdb(di, pdb), 0);
        assert_int_equal(drain_inputs_add_pdb(di, elsewhere), 0);
        assert_int_equal(drain_inputs_add_pod(di, node, pod, &i), 0);
        assert_int_equal(drain_inputs_add_pod(di, node, other, NULL), 0);
        assert_int_equal(drain_inputs_add_pod(di, 7, pod, NULL), -EINVAL);

        const struct drain_input *in = drain_inputs_get(di);
        assert_int_equal(in->n_nodes, 1);
        assert_int_equal(in->n_pdbs, 2);
        assert_int_equal(in->n_pods, 2);
        assert_int_equal(in->pdbs[0].disruptions_allowed, 1);
        assert_int_equal(in->pdbs[0].spec.max_unavailable.value, 1);
        const struct drain_pod_in *p = &in->pods[i];
        assert_int_equal(p->owner, DRAIN_OWNER_STATEFULSET);
        assert_string_equal(p->owner_key, "shop/StatefulSet/api");
        assert_int_equal(p->grace_usec, 7 * SEC);
        assert_true(p->ready && p->emptydir && !p->deleting && !p->pending);
        /* Only the PDB of its own namespace selects it. */
        assert_int_equal(p->n_pdbs, 1);
        assert_int_equal(p->pdbs[0], 0);
        const struct drain_pod_in *q = &in->pods[1];
        assert_int_equal(q->owner, DRAIN_OWNER_NONE);
        assert_null(q->owner_key);
        assert_true(q->pending && q->deleting);
        uint64_t deletion;
        assert_int_equal(parse_rfc3339("2026-11-30T06:01:00Z", &deletion), 0);
        assert_int_equal(q->deleted_at_usec, deletion - 30 * SEC);

        /* The selector of its siblings drops the per-pod StatefulSet label. */
        _cleanup_free_ char *sel = drain_sibling_selector(drain_inputs_pod(di, i));
        assert_string_equal(sel, "app=api");

        struct drain_plan *plan = NULL;
        assert_int_equal(drain_plan_make(in, &plan), 0);
        assert_int_equal(plan->n_pods, 2);
        drain_plan_free(plan);
        cJSON_Delete(pod);
        cJSON_Delete(other);
        cJSON_Delete(pdb);
        cJSON_Delete(elsewhere);
}

/* ---- the pods' own alerts and post-mortems ---- */

struct pod_alert {
        enum alert_kind kind;
        char *pod, *ns, *file;
        cJSON *postmortem;
};

struct pod_alerts {
        struct pod_alert a[8];
        size_t n;
};

static void record_pod_alert(const struct alert *a, void *userdata)
{
        struct pod_alerts *pa = userdata;
        if (!a->pod || pa->n >= ARRAY_SIZE(pa->a))
                return;
        const char *file = NULL;
        for (const char *const *fl = a->fields; fl && fl[0] && fl[1]; fl += 2)
                if (streq(fl[0], "postmortem_file"))
                        file = fl[1];
        pa->a[pa->n++] = (struct pod_alert){
                .kind = a->kind,
                .pod = strdup(a->pod->name),
                .ns = strdup(a->pod->namespace),
                .file = file ? strdup(file) : NULL,
                .postmortem = a->postmortem ? cJSON_Duplicate(a->postmortem, true) : NULL,
        };
}

static const struct pod_alert *pod_alert_of(const struct pod_alerts *pa, const char *ns, const char *prefix)
{
        for (size_t i = 0; i < pa->n; i++)
                if (streq(pa->a[i].ns, ns) && strncmp(pa->a[i].pod, prefix, strlen(prefix)) == 0)
                        return &pa->a[i];
        return NULL;
}

struct log_read {
        struct buf b;
        bool done;
        int error;
};

static int log_into(const char *data, size_t len, void *userdata)
{
        struct log_read *lr = userdata;
        return buf_append(&lr->b, data, len);
}

static void log_read_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct log_read *lr = userdata;
        lr->error = r->error;
        lr->done = true;
}

/* The last line the log API serves of a pod's container now (what `kubectl logs --tail=1` shows). */
static char *last_log_line(struct fx *f, const char *ns, const char *pod)
{
        struct log_read lr = { 0 };
        _cleanup_free_ char *path =
            strprintf("/api/v1/namespaces/%s/pods/%s/log?container=app&tailLines=1", ns, pod);
        assert_non_null(path);
        assert_int_equal(kube_request_stream(f->client, path, 0, log_into, log_read_done, &lr, NULL), 0);
        assert_int_equal(loop_run_until(f->loop, &lr.done, REAL_BOUND), 0);
        assert_int_equal(lr.error, 0);
        assert_true(lr.b.len > 1 && lr.b.data[lr.b.len - 1] == '\n');
        char *line = strndup(lr.b.data, lr.b.len - 1);
        buf_free(&lr.b);
        return line;
}

static bool has_line(const cJSON *pm, const char *line)
{
        const cJSON *l;
        const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(pm, 0), "containers"), 0);
        cJSON_ArrayForEach (l, cJSON_GetObjectItem(c, "last_lines"))
                if (streq(l->valuestring, line))
                        return true;
        return false;
}

static char *first_pod(struct fx *f, const char *ns)
{
        cJSON *items = NULL;
        sim_lock(f->sf.sim);
        assert_int_equal(sim_list(f->sf.sim, SIM_POD, ns, &items), 0);
        sim_unlock(f->sf.sim);
        char *name = strdup(kube_object_str(cJSON_GetArrayItem(items, 0), "metadata.name"));
        cJSON_Delete(items);
        return name;
}

/* Each pod evicted or deleted gets an alert of its own (its Event); a Job's pod and a pod deleted around its
 * PDB also carry their post-mortem: the final status and the last lines of the container, which include
 * what the log API served just before, and a file of it in the post-mortem directory. A Deployment's pod
 * evicted as planned carries none. */
static void test_pod_alerts_and_postmortem(void **state)
{
        struct fx *f = fx_new(
            "name: postmortem\n" NODES "workloads:\n"
            "  - {name: web, namespace: shop, kind: Deployment, replicas: 1, placement: {spot-a: 1},\n"
            "     termination_grace_seconds: 4, shutdown_seconds: 1, startup_seconds: 1}\n"
            "  - {name: db, namespace: shop, kind: Deployment, replicas: 2, placement: {spot-a: 1},\n"
            "     termination_grace_seconds: 4, shutdown_seconds: 1, startup_seconds: 1,\n"
            "     pdb: {min_available: \"100%\"}}\n"
            "  - {name: batch, namespace: jobs, kind: Job, replicas: 1, placement: {spot-a: 1},\n"
            "     termination_grace_seconds: 4, shutdown_seconds: 1, startup_seconds: 1}\n"
            "events: []\n",
            5);
        struct pod_alerts pa = { 0 };
        char dir[] = "/tmp/test-executor-postmortem-XXXXXX";
        assert_non_null(mkdtemp(dir));
        assert_int_equal(alert_bus_add_sink(f->bus, record_pod_alert, &pa), 0);
        _cleanup_free_ char *batch = first_pod(f, "jobs");
        _cleanup_free_ char *seen_batch = last_log_line(f, "jobs", batch);

        struct drain_exec_options o = options(14 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        o.log_tail_lines = 5;
        o.postmortem_dir = dir;
        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_int_equal(f->result.forced, 1);
        assert_int_equal(pa.n, 3);

        const struct pod_alert *web = pod_alert_of(&pa, "shop", "web-");
        assert_non_null(web);
        assert_int_equal(web->kind, ALERT_POD_EVICTED);
        assert_null(web->postmortem);
        assert_null(web->file);

        const struct pod_alert *job = pod_alert_of(&pa, "jobs", "batch-");
        assert_non_null(job);
        assert_int_equal(job->kind, ALERT_POD_EVICTED);
        assert_non_null(job->postmortem);
        assert_int_equal(cJSON_GetArraySize(job->postmortem), 1);
        const cJSON *pm = cJSON_GetArrayItem(job->postmortem, 0);
        assert_string_equal(kube_object_str(pm, "name"), batch);
        assert_string_equal(kube_object_str(pm, "node"), "spot-a");
        const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(pm, "containers"), 0);
        assert_string_equal(kube_object_str(c, "name"), "app");
        assert_non_null(strstr(kube_object_str(c, "status"), "running"));
        int n_lines = cJSON_GetArraySize(cJSON_GetObjectItem(c, "last_lines"));
        assert_true(n_lines >= 1 && n_lines <= 5);
        assert_true(has_line(job->postmortem, seen_batch));

        const struct pod_alert *db = pod_alert_of(&pa, "shop", "db-");
        assert_non_null(db);
        assert_int_equal(db->kind, ALERT_POD_DELETED);
        assert_non_null(db->postmortem);
        assert_non_null(strstr(kube_object_str(cJSON_GetArrayItem(db->postmortem, 0), "summary"),
                               "deleted at its last safe moment on node spot-a (grace 4 s)"));

        /* The files: one per pod, the same object. */
        for (size_t i = 0; i < pa.n; i++) {
                _cleanup_free_ char *text = NULL;
                size_t len = 0;
                if (!pa.a[i].postmortem)
                        continue;
                assert_non_null(pa.a[i].file);
                assert_int_equal(strncmp(pa.a[i].file, dir, strlen(dir)), 0);
                assert_int_equal(read_file_full(pa.a[i].file, 1 << 20, &text, &len), 0);
                cJSON *saved = cJSON_Parse(text);
                assert_non_null(saved);
                assert_true(cJSON_Compare(saved, cJSON_GetArrayItem(pa.a[i].postmortem, 0), true));
                cJSON_Delete(saved);
                unlink(pa.a[i].file);
        }
        assert_int_equal(rmdir(dir), 0);
        for (size_t i = 0; i < pa.n; i++) {
                free(pa.a[i].pod);
                free(pa.a[i].ns);
                free(pa.a[i].file);
                cJSON_Delete(pa.a[i].postmortem);
        }
        fx_free(f);
}

/* alerts.log_tail_lines 0: the post-mortem keeps the statuses and reads no log. */
static void test_postmortem_statuses_only(void **state)
{
        struct fx *f =
            fx_new("name: statuses\n" NODES "workloads:\n"
                   "  - {name: batch, namespace: jobs, kind: Job, replicas: 1, placement: {spot-a: 1},\n"
                   "     termination_grace_seconds: 4, shutdown_seconds: 1, startup_seconds: 1}\n"
                   "events: []\n",
                   5);
        struct pod_alerts pa = { 0 };
        assert_int_equal(alert_bus_add_sink(f->bus, record_pod_alert, &pa), 0);
        struct drain_exec_options o = options(14 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_int_equal(pa.n, 1);
        assert_non_null(pa.a[0].postmortem);
        assert_null(pa.a[0].file);
        const cJSON *c = cJSON_GetArrayItem(
            cJSON_GetObjectItem(cJSON_GetArrayItem(pa.a[0].postmortem, 0), "containers"), 0);
        assert_string_equal(kube_object_str(c, "name"), "app");
        assert_non_null(kube_object_str(c, "status"));
        assert_null(cJSON_GetObjectItem(c, "last_lines"));
        assert_null(cJSON_GetObjectItem(c, "log_error"));
        free(pa.a[0].pod);
        free(pa.a[0].ns);
        cJSON_Delete(pa.a[0].postmortem);
        fx_free(f);
}

static void pod_alerts_clear(struct pod_alerts *pa)
{
        for (size_t i = 0; i < pa->n; i++) {
                free(pa->a[i].pod);
                free(pa->a[i].ns);
                if (pa->a[i].file)
                        unlink(pa->a[i].file);
                free(pa->a[i].file);
                cJSON_Delete(pa->a[i].postmortem);
        }
        pa->n = 0;
}

static size_t count_kind(const struct pod_alerts *pa, enum alert_kind k)
{
        size_t n = 0;
        for (size_t i = 0; i < pa->n; i++)
                n += pa->a[i].kind == k;
        return n;
}

/* Runs the loop until n alerts of kind k about pods came (bounded, also past the drain's end). */
static void wait_pod_alerts(struct fx *f, const struct pod_alerts *pa, enum alert_kind k, size_t n)
{
        bool never = false;
        for (int i = 0; i < 2000 && count_kind(pa, k) < n; i++)
                loop_run_until(f->loop, &never, 10 * 1000);
}

/* Pods still on the node shortly before its end are captured then (pod-killed, capture before-node-end):
 * a skipped pod after a drain that ended early (the executor lingers until its deadline for it), and every
 * pod of a cordon-only drain; a pod evicted as planned is not. */
static void test_killed_postmortem(void **state)
{
        struct fx *f = fx_new("name: killed\n" NODES "workloads:\n" SKIPPED_PODS ONE_POD_NO_PDB, 10);
        struct pod_alerts pa = { 0 };
        char dir[] = "/tmp/test-executor-killed-XXXXXX";
        assert_non_null(mkdtemp(dir));
        assert_int_equal(alert_bus_add_sink(f->bus, record_pod_alert, &pa), 0);
        struct drain_exec_options o = options(12 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        const char *const skip_ns[] = { "kept", NULL };
        o.skip_namespaces = skip_ns;
        o.log_tail_lines = 3;
        o.postmortem_dir = dir;
        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        uint64_t ended = clk_now() - f->started;
        assert_true(ended < 7 * SEC); /* well before the capture */
        assert_int_equal(count_kind(&pa, ALERT_POD_KILLED), 0);
        assert_true(drain_exec_lingers_until(f->x) == o.deadline_usec - o.deadline_usec % 1000);
        /* Lingering without its plan (as the controller keeps it) still captures. */
        assert_non_null(drain_exec_plan(f->x));
        drain_exec_release_plan(f->x);
        assert_null(drain_exec_plan(f->x));
        assert_null(drain_exec_plan_node(f->x));
        wait_pod_alerts(f, &pa, ALERT_POD_KILLED, 1);
        assert_true(clk_now() - f->started >= 7 * SEC);
        assert_int_equal(count_kind(&pa, ALERT_POD_KILLED), 1);
        const struct pod_alert *k = pod_alert_of(&pa, "kept", "infra-");
        assert_non_null(k);
        assert_int_equal(k->kind, ALERT_POD_KILLED);
        const cJSON *pm = cJSON_GetArrayItem(k->postmortem, 0);
        assert_string_equal(kube_object_str(pm, "capture"), "before-node-end");
        assert_non_null(strstr(kube_object_str(pm, "summary"), "still on node spot-a 5 s before its end"));
        assert_non_null(strstr(kube_object_str(pm, "summary"), "drain.skip_namespaces"));
        const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(pm, "containers"), 0);
        assert_non_null(strstr(kube_object_str(c, "status"), "running"));
        assert_true(cJSON_GetArraySize(cJSON_GetObjectItem(c, "last_lines")) >= 1);
        assert_non_null(k->file);
        assert_non_null(strstr(k->file, ".before-node-end.json"));
        assert_int_equal(access(k->file, R_OK), 0);
        assert_int_equal(drain_exec_lingers_until(f->x), 0);
        /* Not skipped here: evicted as planned, no capture. */
        assert_int_equal(pod_alert_of(&pa, "shop", "pinned-")->kind, ALERT_POD_EVICTED);
        pod_alerts_clear(&pa);
        assert_int_equal(rmdir(dir), 0);
        fx_free(f);

        /* cordon_only: every pod of the drain is still there; each is captured once, before the deadline. */
        f = fx_new("name: killed-cordon-only\n" NODES "workloads:\n" ONE_POD_NO_PDB, 10);
        assert_int_equal(alert_bus_add_sink(f->bus, record_pod_alert, &pa), 0);
        o = options(8 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        o.cordon_only = true;
        fx_start(f, &o);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DEADLINE_MISSED);
        assert_int_equal(count_kind(&pa, ALERT_POD_KILLED), 2);
        for (size_t i = 0; i < pa.n; i++) {
                pm = cJSON_GetArrayItem(pa.a[i].postmortem, 0);
                assert_non_null(strstr(kube_object_str(pm, "summary"), "drain.cordon_only"));
                assert_null(pa.a[i].file);
        }
        pod_alerts_clear(&pa);
        fx_free(f);
}

/* With the simulator keeping a stopped pod readable (pod_removal_seconds, as a kubelet until its final
 * delete), a Job's pod evicted is captured again after its stop (postmortem, capture after-stop): exit code
 * 0 and its last line, the exit, which the capture at its eviction could not have; the file beside the
 * first. A Deployment's pod evicted as planned gets no second capture. */
static void test_postmortem_after_stop(void **state)
{
        struct fx *f = fx_new(
            "name: after-stop\npod_removal_seconds: 2\n" NODES "workloads:\n"
            "  - {name: batch, namespace: jobs, kind: Job, replicas: 1, placement: {spot-a: 1},\n"
            "     termination_grace_seconds: 4, shutdown_seconds: 1, startup_seconds: 1}\n" ONE_POD_NO_PDB,
            10);
        struct pod_alerts pa = { 0 };
        char dir[] = "/tmp/test-executor-after-stop-XXXXXX";
        assert_non_null(mkdtemp(dir));
        assert_int_equal(alert_bus_add_sink(f->bus, record_pod_alert, &pa), 0);
        struct drain_exec_options o = options(30 * SEC, 2 * SEC, DRAIN_POLICY_FORCE);
        o.log_tail_lines = 5;
        o.postmortem_dir = dir;
        fx_start(f, &o);
        wait_pod_alerts(f, &pa, ALERT_POSTMORTEM, 1);
        fx_run(f);
        assert_int_equal(f->result.outcome, DRAIN_EXEC_DRAINED);
        assert_int_equal(count_kind(&pa, ALERT_POSTMORTEM), 1);
        const struct pod_alert *first = NULL, *again = NULL;
        for (size_t i = 0; i < pa.n; i++)
                if (streq(pa.a[i].ns, "jobs") && pa.a[i].kind == ALERT_POD_EVICTED)
                        first = &pa.a[i];
                else if (pa.a[i].kind == ALERT_POSTMORTEM)
                        again = &pa.a[i];
        assert_non_null(first);
        assert_non_null(again);
        assert_string_equal(again->ns, "jobs");
        assert_string_equal(again->pod, first->pod);
        const cJSON *pm0 = cJSON_GetArrayItem(first->postmortem, 0),
                    *pm = cJSON_GetArrayItem(again->postmortem, 0);
        assert_string_equal(kube_object_str(pm0, "capture"), "at-stop");
        assert_string_equal(kube_object_str(pm, "capture"), "after-stop");
        /* Read from the object the watch saw stopped, not asked again (the pod may be gone by then). */
        const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(pm, "containers"), 0);
        assert_non_null(kube_object_str(c, "status"));
        assert_non_null(strstr(kube_object_str(c, "status"), "terminated: exit 0 (Completed)"));
        assert_true(has_line(again->postmortem, "drained, exiting with status 0"));
        assert_false(has_line(first->postmortem, "drained, exiting with status 0"));
        assert_non_null(again->file);
        assert_non_null(strstr(again->file, ".after-stop.json"));
        assert_true(first->file && !strstr(first->file, ".after-stop"));
        pod_alerts_clear(&pa);
        assert_int_equal(rmdir(dir), 0);
        fx_free(f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_startup_median),
                cmocka_unit_test(test_startups_verdict_wait),
                cmocka_unit_test(test_inputs_from_objects),
                cmocka_unit_test(test_feasible_drain),
                cmocka_unit_test(test_exclude_label_before_eviction),
                cmocka_unit_test(test_node_marks_conflict),
                cmocka_unit_test(test_events_give_way),
                cmocka_unit_test(test_do_not_disrupt_kept),
                cmocka_unit_test(test_skip_and_taint_effect),
                cmocka_unit_test(test_cordon_only),
                cmocka_unit_test(test_lb_deregistration),
                cmocka_unit_test(test_volume_wait),
                cmocka_unit_test(test_out_of_service_taint),
                cmocka_unit_test(test_retry_follows_pdb_status),
                cmocka_unit_test(test_force_at_last_safe_moment),
                cmocka_unit_test(test_killed_pod_named),
                cmocka_unit_test(test_respect_policy_leaves_pod),
                cmocka_unit_test(test_multiple_pdbs_forced),
                cmocka_unit_test(test_pods_vanish),
                cmocka_unit_test(test_watch_patient_while_stopping),
                cmocka_unit_test(test_infeasible_alert_at_once),
                cmocka_unit_test(test_surge_verdict_bound),
                cmocka_unit_test(test_critical_last),
                cmocka_unit_test(test_never_self),
                cmocka_unit_test(test_pod_alerts_and_postmortem),
                cmocka_unit_test(test_postmortem_statuses_only),
                cmocka_unit_test(test_killed_postmortem),
                cmocka_unit_test(test_postmortem_after_stop),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
