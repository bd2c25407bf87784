/* The dispatcher's effects (node.h, node_effects) against the in-process simulator: the ops they fill (the
 * front end's members only when its hooks have them), one drain per node (an earlier deadline replaces
 * the drain under way, drain_stop frees it, a finished one is told and then reaped), the node actions
 * (cordon, uncordon, the soft taint), a drain's marks in one patch, and the replacement request without
 * provisioning. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <cjson/cJSON.h>

#include "sim/model.h"
#include "sim_fixture.h"
#include "spotdrain/core.h"
#include "spotdrain/dispatch.h"
#include "spotdrain/engine.h"
#include "spotdrain/keys.h"
#include "spotdrain/kube.h"
#include "spotdrain/node.h"
#include "spotdrain/notice.h"

#define BOUND_USEC (15ULL * 1000000ULL)

/* spot-a's pods take 20 s to stop: its drain stays under way while the test looks. spot-b has none: its
 * drain ends at once. */
static const char scenario[] =
    "name: node-effects\n"
    "budget_seconds: 120\n"
    "nodes:\n"
    "  - {name: spot-a, instance_id: i-0a00000000000000a, zone: us-east-1a,"
    " allocatable: {cpu: \"4\", memory: 16Gi, pods: 20}}\n"
    "  - {name: spot-b, instance_id: i-0b00000000000000b, zone: us-east-1b,"
    " allocatable: {cpu: \"4\", memory: 16Gi, pods: 20}}\n"
    "  - {name: od-c, instance_id: i-0c00000000000000c, zone: us-east-1a, capacity_type: on-demand,"
    " allocatable: {cpu: \"4\", memory: 16Gi, pods: 20}}\n"
    "workloads:\n"
    "  - {name: web, namespace: shop, kind: Deployment, replicas: 2, placement: {spot-a: 2},"
    " requests: {cpu: 100m, memory: 128Mi}, termination_grace_seconds: 30, shutdown_seconds: 20,"
    " startup_seconds: 1}\n";

struct rec {
        unsigned started, ended, released, seen;
        struct drain_exec *started_x, *ended_x, *released_x;
        char started_node[32], ended_node[32], released_node[32];
        bool drained, ended_flag, released_flag;
        void *seen_userdata;
};

static void rec_started(void *userdata, const char *node, const struct notice *n, struct drain_exec *x)
{
        struct rec *r = userdata;
        r->started++;
        r->started_x = x;
        snprintf(r->started_node, sizeof(r->started_node), "%s", node);
}

static void rec_ended(void *userdata, const char *node, struct drain_exec *x,
                      const struct drain_exec_result *res)
{
        struct rec *r = userdata;
        r->ended++;
        r->ended_x = x;
        r->drained = res->outcome == DRAIN_EXEC_DRAINED;
        r->ended_flag = true;
        snprintf(r->ended_node, sizeof(r->ended_node), "%s", node);
}

static void rec_released(void *userdata, const char *node, struct drain_exec *x)
{
        struct rec *r = userdata;
        r->released++;
        r->released_x = x;
        r->released_flag = true;
        snprintf(r->released_node, sizeof(r->released_node), "%s", node);
}

static void rec_seen(void *userdata, const char *node, const struct notice *n)
{
        struct rec *r = userdata;
        r->seen++;
        r->seen_userdata = userdata;
}

static struct notice interruption(const char *instance_id)
{
        struct notice n = { .kind = NOTICE_SPOT_INTERRUPTION, .notice_time = clk_now() };
        snprintf(n.instance_id, sizeof(n.instance_id), "%s", instance_id);
        snprintf(n.event_id, sizeof(n.event_id), "test-%s", instance_id);
        return n;
}

/* Whether node is unschedulable (key NULL) or has the taint key, as the simulator has it now. */
static bool node_has(struct sim *sim, const char *node, const char *key)
{
        cJSON *obj = NULL, *t;
        bool has = false;

        sim_lock(sim);
        assert_int_equal(sim_get(sim, SIM_NODE, NULL, node, &obj), 0);
        sim_unlock(sim);
        const cJSON *spec = cJSON_GetObjectItem(obj, "spec");
        if (!key)
                has = cJSON_IsTrue(cJSON_GetObjectItem(spec, "unschedulable"));
        else
                cJSON_ArrayForEach (t, cJSON_GetObjectItem(spec, "taints"))
                        has = has || streq(cJSON_GetStringValue(cJSON_GetObjectItem(t, "key")), key);
        cJSON_Delete(obj);
        return has;
}

struct node_wait {
        struct sim *sim;
        struct loop *l;
        const char *node, *key;
        bool want, done;
        struct timer *timer;
};

static void node_wait_check(void *userdata)
{
        struct node_wait *w = userdata;
        w->timer = NULL;
        w->done = node_has(w->sim, w->node, w->key) == w->want;
        if (!w->done)
                assert_int_equal(timer_start_in(w->l, 5000, node_wait_check, w, &w->timer), 0);
}

/* Runs the loop until node_has() answers want (bounded). */
static void wait_node(struct sim_fixture *sf, struct loop *l, const char *node, const char *key, bool want)
{
        struct node_wait w = { .sim = sf->sim, .l = l, .node = node, .key = key, .want = want };
        assert_int_equal(timer_start_in(l, 0, node_wait_check, &w, &w.timer), 0);
        assert_int_equal(loop_run_until(l, &w.done, BOUND_USEC), 0);
        timer_cancel(w.timer);
}

static void test_effects(void **state)
{
        struct sim_fixture sf = {};
        struct loop *l = NULL;
        struct kube_client *kube = NULL;
        struct node_effects *e = NULL;
        struct drain_exec *first;
        struct dispatch_ops ops;
        struct rec r = {};
        struct notice na, nb;
        uint64_t now;

        sim_fixture_start(&sf, scenario, &(struct sim_fixture_options){ .scale = 10, .scale_engine = true });
        now = clk_now();
        na = interruption("i-0a00000000000000a");
        nb = interruption("i-0b00000000000000b");
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(kube_client_new(l, sf.kcfg, NULL, &kube), 0);
        assert_int_equal(node_effects_new(l, &(struct node_drainer){ .kube = kube },
                                          &(struct node_effects_hooks){ .drain_started = rec_started,
                                                                        .drain_ended = rec_ended,
                                                                        .drain_released = rec_released,
                                                                        .ops = { .notice_seen = rec_seen },
                                                                        .userdata = &r },
                                          &e),
                         0);

        /* The generic effects always; of the front end's, only what its hooks have, called with its
         * userdata. */
        node_effects_dispatch_ops(e, &ops);
        assert_non_null(ops.drain);
        assert_non_null(ops.drain_stop);
        assert_non_null(ops.soft_taint);
        assert_non_null(ops.replacement_request);
        assert_non_null(ops.uncordon);
        assert_non_null(ops.cordon);
        assert_null(ops.node_refresh);
        assert_null(ops.lifecycle_heartbeat);
        assert_null(ops.lifecycle_launch);
        assert_null(ops.ticket_done);
        assert_non_null(ops.notice_seen);
        ops.notice_seen(e, "spot-a", &na);
        assert_int_equal(r.seen, 1);
        assert_ptr_equal(r.seen_userdata, &r);
        /* No provisioning: nothing to ask, and no failure. */
        assert_int_equal(ops.replacement_request(e, "spot-a", &na), 0);

        /* The node actions: cordon, the undo of a drain, the soft taint added and removed. */
        assert_int_equal(ops.cordon(e, "od-c"), 0);
        wait_node(&sf, l, "od-c", NULL, true);
        assert_int_equal(ops.uncordon(e, "od-c"), 0);
        wait_node(&sf, l, "od-c", NULL, false);
        assert_int_equal(ops.soft_taint(e, "od-c", true), 0);
        wait_node(&sf, l, "od-c", SPOTDRAIN_TAINT_REBALANCE, true);
        assert_int_equal(ops.soft_taint(e, "od-c", false), 0);
        wait_node(&sf, l, "od-c", SPOTDRAIN_TAINT_REBALANCE, false);

        /* A drain, then an earlier deadline: the drain under way is released and replaced. */
        assert_int_equal(ops.drain(e, "spot-a", &na, now + 120 * 1000000ULL), 0);
        assert_int_equal(r.started, 1);
        assert_string_equal(r.started_node, "spot-a");
        assert_int_equal(r.released, 0);
        first = r.started_x;
        assert_non_null(first);
        assert_int_equal(ops.drain(e, "spot-a", &na, now + 60 * 1000000ULL), 0);
        assert_int_equal(r.released, 1);
        assert_ptr_equal(r.released_x, first);
        assert_int_equal(r.started, 2);
        /* Stopped: released without an end. */
        first = r.started_x;
        ops.drain_stop(e, "spot-a");
        assert_int_equal(r.released, 2);
        assert_ptr_equal(r.released_x, first);
        assert_string_equal(r.released_node, "spot-a");
        ops.drain_stop(e, "spot-a"); /* none any more: nothing happens */
        assert_int_equal(r.released, 2);
        assert_int_equal(r.ended, 0);

        /* A drain that ends is told, then reaped. */
        r.released_flag = false;
        assert_int_equal(ops.drain(e, "spot-b", &nb, now + 30 * 1000000ULL), 0);
        first = r.started_x;
        assert_int_equal(loop_run_until(l, &r.ended_flag, BOUND_USEC), 0);
        assert_int_equal(r.ended, 1);
        assert_true(r.drained);
        assert_ptr_equal(r.ended_x, first);
        assert_string_equal(r.ended_node, "spot-b");
        assert_int_equal(loop_run_until(l, &r.released_flag, BOUND_USEC), 0);
        assert_int_equal(r.released, 3);
        assert_ptr_equal(r.released_x, first);

        /* A drain under way goes with the effects, released first. */
        assert_int_equal(ops.drain(e, "spot-a", &na, now + 120 * 1000000ULL), 0);
        first = r.started_x;
        e = node_effects_free(e);
        assert_int_equal(r.released, 4);
        assert_ptr_equal(r.released_x, first);
        assert_int_equal(r.ended, 1);

        kube_client_free(kube);
        loop_free(l);
        sim_fixture_stop(&sf);
}

struct answer {
        bool done;
        int error;
        long status;
};

static void answered(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct answer *a = userdata;
        a->done = true;
        a->error = r->error;
        a->status = r->http_status;
}

static cJSON *node_now(struct sim *sim, const char *node)
{
        cJSON *obj = NULL;
        sim_lock(sim);
        assert_int_equal(sim_get(sim, SIM_NODE, NULL, node, &obj), 0);
        sim_unlock(sim);
        return obj;
}

static void sim_node_patch(struct sim *sim, const char *node, const char *json)
{
        cJSON *patch = cJSON_Parse(json);
        struct sim_answer a = { 0 };
        assert_non_null(patch);
        sim_lock(sim);
        assert_int_equal(
            sim_patch(sim, SIM_NODE, NULL, node, "application/strategic-merge-patch+json", patch, &a), 0);
        sim_unlock(sim);
        assert_int_equal(a.status, 200);
        cJSON_Delete(a.body);
        cJSON_Delete(patch);
}

/* A drain's marks in one patch, made on the node as read: someone else's taint and label stay, and a node
 * changed since it was read is not written (409), so that the caller can make them one at a time. */
static void test_drain_marks(void **state)
{
        struct sim_fixture sf = {};
        struct loop *l = NULL;
        struct kube_client *kube = NULL;
        struct answer a = {};
        const struct node_marks m = { .kind = "spot-interruption", .lb = true, .record = "rec-1" };

        sim_fixture_start(&sf, scenario, &(struct sim_fixture_options){ .scale = 10, .scale_engine = true });
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(kube_client_new(l, sf.kcfg, NULL, &kube), 0);

        cJSON *before = node_now(sf.sim, "spot-b");
        sim_node_patch(
            sf.sim, "spot-b",
            "{\"metadata\":{\"labels\":{\"" SPOTDRAIN_LABEL_EXCLUDE_LB "\":\"ops\"}},"
            "\"spec\":{\"taints\":[{\"key\":\"team\",\"value\":\"x\",\"effect\":\"NoSchedule\"}]}}");
        cJSON *now = node_now(sf.sim, "spot-b");

        /* Read before someone else's change: refused, nothing written. */
        assert_int_equal(node_drain_marks(kube, before, &m, answered, &a, NULL), 0);
        assert_int_equal(loop_run_until(l, &a.done, BOUND_USEC), 0);
        assert_int_equal(a.status, 409);
        assert_true(a.error < 0);
        assert_false(node_has(sf.sim, "spot-b", SPOTDRAIN_TAINT_INTERRUPTION));

        /* Read after: the taint beside theirs, their label kept, the record. */
        a = (struct answer){};
        assert_int_equal(node_drain_marks(kube, now, &m, answered, &a, NULL), 0);
        assert_int_equal(loop_run_until(l, &a.done, BOUND_USEC), 0);
        assert_int_equal(a.error, 0);
        assert_true(node_has(sf.sim, "spot-b", SPOTDRAIN_TAINT_INTERRUPTION));
        assert_true(node_has(sf.sim, "spot-b", "team"));
        cJSON *after = node_now(sf.sim, "spot-b");
        const cJSON *meta = cJSON_GetObjectItem(after, "metadata");
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(meta, "labels"),
                                                                     SPOTDRAIN_LABEL_EXCLUDE_LB)),
                            "ops");
        const cJSON *ann = cJSON_GetObjectItem(meta, "annotations");
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(ann, SPOTDRAIN_ANNOTATION_DRAIN)),
                            "rec-1");
        cJSON_Delete(after);

        /* Without a resourceVersion there is nothing to make it on. */
        cJSON_DeleteItemFromObject(cJSON_GetObjectItem(now, "metadata"), "resourceVersion");
        assert_int_equal(node_drain_marks(kube, now, &m, answered, &a, NULL), -EINVAL);

        cJSON_Delete(before);
        cJSON_Delete(now);
        kube_client_free(kube);
        loop_free(l);
        sim_fixture_stop(&sf);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_effects),
                cmocka_unit_test(test_drain_marks),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
