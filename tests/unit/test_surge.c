/* Surge before evict (src/drain/surge.c) and its start-up sweep (src/drain/surge_sweep.c) against the fake
 * API server (kube_fake.c): the writes they make, what they leave alone, and how they retry. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drain/engine_internal.h"
#include "kube_fake.h"
#include "spotdrain/alert.h"
#include "spotdrain/core.h"
#include "spotdrain/drain.h"
#include "spotdrain/engine.h"
#include "spotdrain/keys.h"
#include "spotdrain/kube.h"
#include "spotdrain/surge.h"

#define WAIT_USEC (10ULL * 1000 * 1000)
#define DEP_PATH  "/apis/apps/v1/namespaces/shop/deployments/checkout"
#define HPA_PATH  "/apis/autoscaling/v2/namespaces/shop/horizontalpodautoscalers"
#define NO_HPAS   "{\"kind\":\"HorizontalPodAutoscalerList\",\"metadata\":{},\"items\":[]}"

struct fx {
        struct loop *loop;
        struct kfake *fake;
        struct kube_config *cfg;
        struct kube_client *client;
        char token_path[64];
        struct drain_inputs *di;
        struct drain_surge *sg;
        struct alert_bus *bus;
        char *no_room; /* the message of the last surge-no-room */
};

static int fx_setup(void **state)
{
        struct fx *fx = calloc(1, sizeof(*fx));
        assert_non_null(fx);
        assert_int_equal(loop_new(&fx->loop), 0);
        assert_int_equal(kfake_start(&fx->fake), 0);
        snprintf(fx->token_path, sizeof(fx->token_path), "/tmp/spotdrain-surge-token-XXXXXX");
        int fd = mkstemp(fx->token_path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "tok", 3), 3);
        close(fd);
        fx->cfg = calloc(1, sizeof(*fx->cfg));
        assert_non_null(fx->cfg);
        fx->cfg->server = strdup(kfake_url(fx->fake));
        fx->cfg->token_file = strdup(fx->token_path);
        struct kube_client_options o = { .qps = -1, .backoff_base_usec = 1000, .backoff_max_usec = 5000 };
        assert_int_equal(kube_client_new(fx->loop, fx->cfg, &o, &fx->client), 0);
        assert_int_equal(alert_bus_new(&fx->bus), 0);
        *state = fx;
        return 0;
}

static int fx_teardown(void **state)
{
        struct fx *fx = *state;
        drain_surge_free(fx->sg);
        alert_bus_free(fx->bus);
        free(fx->no_room);
        drain_inputs_free(fx->di);
        kube_client_free(fx->client);
        kfake_stop(fx->fake);
        kube_config_free(fx->cfg);
        unlink(fx->token_path);
        loop_free(fx->loop);
        free(fx);
        return 0;
}

/* ---- waiting on a condition, bounded ---- */

struct until {
        struct loop *loop;
        bool (*pred)(struct fx *fx);
        struct fx *fx;
        bool done;
        struct timer *t;
};

static void until_check(void *userdata)
{
        struct until *u = userdata;
        u->t = NULL;
        if (u->pred(u->fx))
                u->done = true;
        else
                assert_int_equal(timer_start_in(u->loop, 2000, until_check, u, &u->t), 0);
}

static void run_until(struct fx *fx, bool (*pred)(struct fx *fx))
{
        struct until u = { .loop = fx->loop, .pred = pred, .fx = fx };
        until_check(&u);
        int r = u.done ? 0 : loop_run_until(fx->loop, &u.done, WAIT_USEC);
        timer_cancel(u.t);
        assert_int_equal(r, 0);
        assert_true(u.done);
}

static size_t count_of(struct fx *fx, const char *method, const char *path)
{
        size_t n = 0;
        for (long i = kfake_find(fx->fake, method, path, 0); i >= 0;
             i = kfake_find(fx->fake, method, path, (size_t)i + 1))
                n++;
        return n;
}

/* The body of the n-th request (0-based) of method and path, parsed; the caller deletes it. */
static cJSON *body_of(struct fx *fx, const char *method, const char *path, size_t n)
{
        long i = kfake_find(fx->fake, method, path, 0);
        while (i >= 0 && n-- > 0)
                i = kfake_find(fx->fake, method, path, (size_t)i + 1);
        assert_true(i >= 0);
        cJSON *j = cJSON_Parse(kfake_request(fx->fake, (size_t)i)->body);
        assert_non_null(j);
        return j;
}

static const char *ann_of(const cJSON *patch)
{
        const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(patch, "metadata"), "annotations");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(ann, SPOTDRAIN_ANNOTATION_SURGE);
        assert_non_null(v); /* every write carries the record, or removes it (null) */
        return cJSON_IsNull(v) ? NULL : cJSON_GetStringValue(v);
}

static const cJSON *replicas_of(const cJSON *patch)
{
        return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(patch, "spec"), "replicas");
}

/* ---- the objects ---- */

static char *deployment(const char *rv, int replicas, const char *record)
{
        _cleanup_free_ char *ann = NULL;
        if (record) {
                cJSON *s = cJSON_CreateString(record);
                _cleanup_free_ char *quoted = cJSON_PrintUnformatted(s);
                cJSON_Delete(s);
                ann = strprintf(",\"annotations\":{\"" SPOTDRAIN_ANNOTATION_SURGE "\":%s}", quoted);
        }
        char *s = strprintf("{\"kind\":\"Deployment\",\"apiVersion\":\"apps/v1\",\"metadata\":{\"name\":"
                            "\"checkout\",\"namespace\":\"shop\",\"resourceVersion\":\"%s\"%s},"
                            "\"spec\":{\"replicas\":%d,\"selector\":{\"matchLabels\":{\"app\":\"checkout\"}}"
                            ",\"strategy\":{\"type\":\"RollingUpdate\","
                            "\"rollingUpdate\":{\"maxSurge\":1,\"maxUnavailable\":0}}}}",
                            rv, ann ? ann : "", replicas);
        assert_non_null(s);
        return s;
}

static void answer_dep(struct fx *fx, const char *rv, int replicas, const char *record)
{
        _cleanup_free_ char *d = deployment(rv, replicas, record);
        assert_int_equal(kfake_answer(fx->fake, "GET", DEP_PATH, 200, d), 0);
}

#define OUR_RECORD                                                                                        \
        "{\"node\":\"spot-a\",\"replicas\":1,\"to\":2,\"mode\":\"scale\",\"started\":\"2026-12-01T00:00:" \
        "00Z\"}"

/* The drain's input: the node and checkout's one pod on it (index 0). */
static void make_inputs(struct fx *fx)
{
        struct drain_inputs_options o = { .now_usec = clk_now(), .surge = DRAIN_SURGE_BLOCKED };
        size_t node;
        assert_int_equal(drain_inputs_new(&o, &fx->di), 0);
        assert_int_equal(drain_inputs_add_node(fx->di, "spot-a", clk_now() + 120 * 1000000ULL, 0, &node), 0);
        cJSON *pod = cJSON_Parse(
            "{\"metadata\":{\"name\":\"checkout-7d9f-x1\",\"namespace\":\"shop\",\"uid\":\"u1\","
            "\"labels\":{\"app\":\"checkout\",\"pod-template-hash\":\"7d9f\"},"
            "\"ownerReferences\":[{\"kind\":\"ReplicaSet\",\"name\":\"checkout-7d9f\",\"controller\":true}]}"
            ","
            "\"spec\":{\"nodeName\":\"spot-a\",\"containers\":[{\"name\":\"c\"}]},"
            "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");
        assert_non_null(pod);
        assert_int_equal(drain_inputs_add_pod(fx->di, node, pod, NULL), 0);
        cJSON_Delete(pod);
        assert_int_equal(
            drain_surge_new(fx->client, "spot-a", DRAIN_SURGE_BLOCKED, fx->bus, NULL, NULL, &fx->sg), 0);
}

static bool learnt(struct fx *fx)
{
        return !drain_surge_learning(fx->sg);
}

static bool surged_once(struct fx *fx)
{
        unsigned s, r;
        drain_surge_counts(fx->sg, &s, &r);
        return s == 1;
}

static bool restored_once(struct fx *fx)
{
        unsigned s, r;
        drain_surge_counts(fx->sg, &s, &r);
        return r == 1;
}

/* A round of a plan whose one pod (index 0) surges; with_pod false: the pod has left the node. */
static void round_with(struct fx *fx, bool with_pod)
{
        struct drain_plan_pod pp = { .surge = true };
        struct drain_plan plan = { .pods = &pp, .n_pods = 1 };
        drain_surge_round(fx->sg, fx->di, &plan, 0, with_pod ? 1 : 0);
}

/* The drain learns checkout as the API has it (no HPA), and makes its next input from what it learnt. */
static void learn(struct fx *fx, const char *rv, int replicas, const char *record)
{
        answer_dep(fx, rv, replicas, record);
        assert_int_equal(kfake_answer(fx->fake, "GET", HPA_PATH, 200, NO_HPAS), 0);
        make_inputs(fx);
        assert_int_equal(drain_surge_input(fx->sg, fx->di, 0), 0);
        run_until(fx, learnt);
        /* The first input was made before the Deployment was known; the next one (the executor makes one
         * each round) knows. */
        assert_false(drain_inputs_get(fx->di)->pods[0].can_surge);
        assert_int_equal(drain_surge_input(fx->sg, fx->di, 0), 0);
}

/* Learns checkout (rv 5, 1 replica, no record), then raises it. */
static void learn_and_raise(struct fx *fx)
{
        learn(fx, "5", 1, NULL);
        assert_true(drain_inputs_get(fx->di)->pods[0].can_surge);
        assert_int_equal(kfake_answer(fx->fake, "PATCH", DEP_PATH, 200, "{}"), 0);
        round_with(fx, true);
        run_until(fx, surged_once);
}

static void test_raise(void **state)
{
        struct fx *fx = *state;
        learn_and_raise(fx);
        assert_int_equal(count_of(fx, "PATCH", DEP_PATH), 1);
        cJSON *p = body_of(fx, "PATCH", DEP_PATH, 0);
        assert_int_equal((int)replicas_of(p)->valuedouble, 2);
        assert_string_equal(kube_object_str(p, "metadata.resourceVersion"), "5");
        cJSON *rec = cJSON_Parse(ann_of(p));
        assert_string_equal(kube_object_str(rec, "node"), "spot-a");
        assert_string_equal(kube_object_str(rec, "mode"), "scale");
        assert_int_equal(cJSON_GetObjectItem(rec, "replicas")->valueint, 1);
        assert_int_equal(cJSON_GetObjectItem(rec, "to")->valueint, 2);
        cJSON_Delete(rec);
        cJSON_Delete(p);
        /* A later round with the pod still there raises nothing more, restores nothing. */
        round_with(fx, true);
        assert_int_equal(drain_surge_input(fx->sg, fx->di, 0), 0);
        assert_true(drain_inputs_get(fx->di)->pods[0].surged_usec > 0);
        assert_int_equal(count_of(fx, "PATCH", DEP_PATH), 1);
}

#define CONFLICT                                                                            \
        "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"Conflict\",\"code\":409," \
        "\"message\":\"the object has been modified\"}"

/* The pod leaves the node: the restore reads checkout (rv, replicas, our record) and writes. Returns its
 * last PATCH, the n-th of the test. */
static cJSON *restore_from(struct fx *fx, const char *rv, int replicas, size_t n)
{
        answer_dep(fx, rv, replicas, OUR_RECORD);
        assert_int_equal(kfake_answer(fx->fake, "PATCH", DEP_PATH, 200, "{}"), 0);
        round_with(fx, false);
        run_until(fx, restored_once);
        assert_int_equal(count_of(fx, "PATCH", DEP_PATH), n + 1);
        assert_false(drain_surge_restoring(fx->sg));
        return body_of(fx, "PATCH", DEP_PATH, n);
}

static void test_restore(void **state)
{
        struct fx *fx = *state;
        learn_and_raise(fx);
        /* The first restore meets a conflict (read at rv 6, written since): read again, write against 7. */
        answer_dep(fx, "6", 2, OUR_RECORD);
        assert_int_equal(kfake_answer(fx->fake, "PATCH", DEP_PATH, 409, CONFLICT), 0);
        cJSON *p = restore_from(fx, "7", 2, 2);
        assert_int_equal((int)replicas_of(p)->valuedouble, 1);
        assert_string_equal(kube_object_str(p, "metadata.resourceVersion"), "7");
        assert_null(ann_of(p));
        cJSON_Delete(p);
        p = body_of(fx, "PATCH", DEP_PATH, 1);
        assert_string_equal(kube_object_str(p, "metadata.resourceVersion"), "6");
        cJSON_Delete(p);
}

static void test_conflict_retried(void **state)
{
        struct fx *fx = *state;
        /* The raise meets a conflict: read again (rv 9 now), raise again against it. */
        learn(fx, "5", 1, NULL);
        assert_int_equal(kfake_answer(fx->fake, "PATCH", DEP_PATH, 409, CONFLICT), 0);
        answer_dep(fx, "9", 1, NULL);
        assert_int_equal(kfake_answer(fx->fake, "PATCH", DEP_PATH, 200, "{}"), 0);
        round_with(fx, true);
        run_until(fx, surged_once);
        assert_int_equal(count_of(fx, "PATCH", DEP_PATH), 2);
        assert_int_equal(count_of(fx, "GET", DEP_PATH), 2);
        cJSON *p = body_of(fx, "PATCH", DEP_PATH, 1);
        assert_string_equal(kube_object_str(p, "metadata.resourceVersion"), "9");
        assert_int_equal((int)replicas_of(p)->valuedouble, 2);
        cJSON_Delete(p);
}

static void test_changed_replicas_left(void **state)
{
        struct fx *fx = *state;
        learn_and_raise(fx);
        /* Someone scaled it to 5 meanwhile: only the record goes. */
        cJSON *p = restore_from(fx, "7", 5, 1);
        assert_null(replicas_of(p));
        assert_null(ann_of(p));
        assert_string_equal(kube_object_str(p, "metadata.resourceVersion"), "7");
        cJSON_Delete(p);
}

static void test_adopted(void **state)
{
        struct fx *fx = *state;
        /* A restarted drain finds its node's record: surged already, not raised again, and not restored
         * while its pod is still on the node. */
        learn(fx, "8", 2, OUR_RECORD);
        uint64_t started = 0;
        assert_int_equal(parse_rfc3339("2026-12-01T00:00:00Z", &started), 0);
        assert_true(drain_inputs_get(fx->di)->pods[0].surged_usec == started);
        assert_true(drain_surge_restoring(fx->sg));
        round_with(fx, true);
        assert_int_equal(count_of(fx, "PATCH", DEP_PATH), 0);
        /* The pod gone: put back to the record's 1 as its own. */
        answer_dep(fx, "9", 2, OUR_RECORD);
        assert_int_equal(kfake_answer(fx->fake, "PATCH", DEP_PATH, 200, "{}"), 0);
        round_with(fx, false);
        run_until(fx, restored_once);
        cJSON *p = body_of(fx, "PATCH", DEP_PATH, 0);
        assert_int_equal((int)replicas_of(p)->valuedouble, 1);
        assert_null(ann_of(p));
        cJSON_Delete(p);
        unsigned s, r;
        drain_surge_counts(fx->sg, &s, &r);
        assert_int_equal(s, 0); /* adopted, not surged by this drain */
}

/* The drains of one process learn checkout from one read of it and one list of shop's HPAs: each is
 * scripted once, so a second read would be answered 404 (and its drain could not surge). A read nobody waits
 * for any more is cancelled, and a restore reads for itself. */
static struct drain_surge *shared_sg2;

static bool both_learnt(struct fx *fx)
{
        return !drain_surge_learning(fx->sg) && !drain_surge_learning(shared_sg2);
}

static void test_shared_reads(void **state)
{
        struct fx *fx = *state;
        struct drain_surge_reads *rd = NULL;
        struct drain_surge *sg3 = NULL;
        size_t reads, waiting;

        assert_int_equal(drain_surge_reads_new(fx->client, &rd), 0);
        answer_dep(fx, "5", 1, NULL);
        assert_int_equal(kfake_answer(fx->fake, "GET", HPA_PATH, 200, NO_HPAS), 0);
        make_inputs(fx);
        drain_surge_share(fx->sg, rd);
        assert_int_equal(
            drain_surge_new(fx->client, "spot-b", DRAIN_SURGE_BLOCKED, NULL, NULL, NULL, &shared_sg2), 0);
        drain_surge_share(shared_sg2, rd);
        assert_int_equal(drain_surge_input(fx->sg, fx->di, 0), 0);
        assert_int_equal(drain_surge_input(shared_sg2, fx->di, 0), 0);
        drain_surge_reads_count(rd, &reads, &waiting);
        assert_int_equal(reads, 2);   /* checkout, shop's HPAs */
        assert_int_equal(waiting, 4); /* both drains in each */
        run_until(fx, both_learnt);
        assert_int_equal(count_of(fx, "GET", DEP_PATH), 1);
        assert_int_equal(count_of(fx, "GET", HPA_PATH), 1);
        drain_surge_reads_count(rd, &reads, &waiting);
        assert_int_equal(reads, 0);
        assert_int_equal(drain_surge_input(fx->sg, fx->di, 0), 0);
        assert_true(drain_inputs_get(fx->di)->pods[0].can_surge);
        assert_int_equal(drain_surge_input(shared_sg2, fx->di, 0), 0);
        assert_true(drain_inputs_get(fx->di)->pods[0].can_surge);

        /* A third drain asks anew (nothing under way), and is freed before the answer: the reads go. */
        assert_int_equal(drain_surge_new(fx->client, "spot-c", DRAIN_SURGE_BLOCKED, NULL, NULL, NULL, &sg3),
                         0);
        drain_surge_share(sg3, rd);
        assert_int_equal(drain_surge_input(sg3, fx->di, 0), 0);
        drain_surge_reads_count(rd, &reads, &waiting);
        assert_int_equal(reads, 2);
        assert_int_equal(waiting, 2);
        sg3 = drain_surge_free(sg3);
        drain_surge_reads_count(rd, &reads, &waiting);
        assert_int_equal(reads, 0);
        /* The process lets its reads go before its drains: they hold it until they go. */
        rd = drain_surge_reads_free(rd);

        /* The raise and the restore of the first drain are its own. */
        assert_int_equal(kfake_answer(fx->fake, "PATCH", DEP_PATH, 200, "{}"), 0);
        round_with(fx, true);
        run_until(fx, surged_once);
        cJSON *p = restore_from(fx, "6", 2, 1);
        assert_string_equal(kube_object_str(p, "metadata.resourceVersion"), "6");
        cJSON_Delete(p);
        shared_sg2 = drain_surge_free(shared_sg2);
}

static void test_other_nodes_record_not_surged(void **state)
{
        struct fx *fx = *state;
        learn(fx, "8", 2,
              "{\"node\":\"spot-b\",\"replicas\":1,\"to\":2,\"mode\":\"scale\","
              "\"started\":\"2026-12-01T00:00:00Z\"}");
        assert_false(drain_inputs_get(fx->di)->pods[0].can_surge);
        round_with(fx, true);
        round_with(fx, false);
        assert_false(drain_surge_restoring(fx->sg));
        assert_int_equal(count_of(fx, "PATCH", DEP_PATH), 0);
}

static void on_alert(const struct alert *a, void *userdata)
{
        struct fx *fx = userdata;
        if (a->kind != ALERT_SURGE_NO_ROOM)
                return;
        free(fx->no_room);
        fx->no_room = strdup(a->message);
}

static bool no_room_reported(struct fx *fx)
{
        return alert_bus_count(fx->bus, ALERT_SURGE_NO_ROOM) > 0;
}

static void test_no_room(void **state)
{
        struct fx *fx = *state;
        assert_int_equal(alert_bus_add_sink(fx->bus, on_alert, fx), 0);
        /* The new pod stays Pending: the scheduler finds no node with room for it. */
        assert_int_equal(
            kfake_answer(
                fx->fake, "GET", "/api/v1/namespaces/shop/pods", 200,
                "{\"kind\":\"PodList\",\"metadata\":{},\"items\":[{\"metadata\":{\"name\":"
                "\"checkout-7d9f-x1\",\"namespace\":\"shop\"},\"spec\":{\"nodeName\":\"spot-a\","
                "\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"500m\"}}}]}},"
                "{\"metadata\":{\"name\":\"checkout-7d9f-y2\",\"namespace\":\"shop\"},\"spec\":{"
                "\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"500m\","
                "\"memory\":\"512Mi\"}}}]},\"status\":{\"phase\":\"Pending\",\"conditions\":[{"
                "\"type\":\"PodScheduled\",\"status\":\"False\",\"reason\":\"Unschedulable\"}]}}]}"),
            0);
        learn_and_raise(fx);
        run_until(fx, no_room_reported);
        assert_int_equal(alert_bus_count(fx->bus, ALERT_SURGE_NO_ROOM), 1);
        assert_string_equal(
            fx->no_room, "surge of shop/checkout needs room for 1 pod (cpu 500m, memory 512Mi) on another "
                         "node: none has it; its pods on spot-a wait for replacement capacity");
        long i = kfake_find(fx->fake, "GET", "/api/v1/namespaces/shop/pods", 0);
        assert_true(i >= 0);
        assert_non_null(strstr(kfake_request(fx->fake, (size_t)i)->query, "labelSelector=app%3Dcheckout"));
}

/* ---- the start-up sweep ---- */

static struct drain_surge_sweep *the_sweep;

static bool sweep_done(struct fx *fx)
{
        return drain_surge_sweep_done(the_sweep);
}

static char *record_for(const char *node)
{
        return strprintf("{\"node\":\"%s\",\"replicas\":1,\"to\":2,\"mode\":\"scale\","
                         "\"started\":\"2026-12-01T00:00:00Z\"}",
                         node);
}

/* A Deployment of the list, with a record naming node. */
static char *listed(const char *name, const char *node)
{
        _cleanup_free_ char *rec = record_for(node);
        cJSON *s = cJSON_CreateString(rec);
        _cleanup_free_ char *quoted = cJSON_PrintUnformatted(s);
        cJSON_Delete(s);
        return strprintf("{\"metadata\":{\"name\":\"%s\",\"namespace\":\"shop\",\"annotations\":{"
                         "\"" SPOTDRAIN_ANNOTATION_SURGE "\":%s}}}",
                         name, quoted);
}

static void answer_named(struct fx *fx, const char *name, const char *rv, int replicas, const char *node)
{
        _cleanup_free_ char *rec = record_for(node);
        _cleanup_free_ char *d = deployment(rv, replicas, rec);
        _cleanup_free_ char *path = strprintf("/apis/apps/v1/namespaces/shop/deployments/%s", name);
        /* deployment() names it checkout: the name in the body is not what the sweep goes by. */
        assert_int_equal(kfake_answer(fx->fake, "GET", path, 200, d), 0);
        assert_int_equal(kfake_answer(fx->fake, "PATCH", path, 200, "{}"), 0);
}

static void test_sweep(void **state)
{
        struct fx *fx = *state;
        /* gone: its node is gone; idle: its node is not draining; busy: its node drains with a pod of it;
         * empty: its node drains with no pod of it left; other: another node's (the agent sweeps its own).
         */
        _cleanup_free_ char *a = listed("gone", "spot-gone");
        _cleanup_free_ char *b = listed("idle", "od-1");
        _cleanup_free_ char *c = listed("checkout", "spot-a");
        _cleanup_free_ char *d = listed("empty", "spot-a");
        _cleanup_free_ char *list = strprintf(
            "{\"kind\":\"DeploymentList\",\"metadata\":{},\"items\":[%s,%s,%s,%s,{\"metadata\":{\"name\":"
            "\"plain\",\"namespace\":\"shop\"}}]}",
            a, b, c, d);
        /* The list fails first: retried. */
        assert_int_equal(kfake_answer(fx->fake, "GET", "/apis/apps/v1/deployments", 503, "{}"), 0);
        assert_int_equal(kfake_answer(fx->fake, "GET", "/apis/apps/v1/deployments", 200, list), 0);
        assert_int_equal(
            kfake_answer(fx->fake, "GET", "/api/v1/nodes/od-1", 200, "{\"metadata\":{\"name\":\"od-1\"}}"),
            0);
        _cleanup_free_ char *draining_node =
            strprintf("{\"metadata\":{\"name\":\"spot-a\",\"annotations\":{\"" SPOTDRAIN_ANNOTATION_DRAIN
                      "\":\"{\\\"kind\\\":\\\"spot-interruption\\\",\\\"deadline\\\":\\\"2099-01-01T00:00:"
                      "00Z\\\"}\"}}}");
        assert_int_equal(kfake_answer(fx->fake, "GET", "/api/v1/nodes/spot-a", 200, draining_node), 0);
        assert_int_equal(
            kfake_answer(
                fx->fake, "GET", "/api/v1/pods", 200,
                "{\"kind\":\"PodList\",\"metadata\":{},\"items\":[{\"metadata\":{\"name\":\"checkout-7d9f-"
                "x1\","
                "\"namespace\":\"shop\",\"labels\":{\"pod-template-hash\":\"7d9f\"},\"ownerReferences\":[{"
                "\"kind\":\"ReplicaSet\",\"name\":\"checkout-7d9f\",\"controller\":true}]},\"spec\":{"
                "\"nodeName\":\"spot-a\"}}]}"),
            0);
        answer_named(fx, "gone", "3", 2, "spot-gone");
        answer_named(fx, "idle", "4", 2, "od-1");
        answer_named(fx, "empty", "5", 2, "spot-a");

        assert_int_equal(drain_surge_sweep_new(fx->client, NULL, &the_sweep), 0);
        run_until(fx, sweep_done);
        unsigned found, restored;
        drain_surge_sweep_counts(the_sweep, &found, &restored);
        assert_int_equal(found, 4);
        assert_int_equal(restored, 3);
        assert_int_equal(count_of(fx, "GET", "/apis/apps/v1/deployments"), 2);
        assert_int_equal(count_of(fx, "PATCH", "/apis/apps/v1/namespaces/shop/deployments/gone"), 1);
        assert_int_equal(count_of(fx, "PATCH", "/apis/apps/v1/namespaces/shop/deployments/idle"), 1);
        assert_int_equal(count_of(fx, "PATCH", "/apis/apps/v1/namespaces/shop/deployments/empty"), 1);
        assert_int_equal(count_of(fx, "PATCH", DEP_PATH), 0); /* its drain restores it */
        assert_int_equal(count_of(fx, "GET", DEP_PATH), 0);
        long i = kfake_find(fx->fake, "GET", "/api/v1/pods", 0);
        assert_true(i >= 0);
        assert_non_null(strstr(kfake_request(fx->fake, (size_t)i)->query, "spec.nodeName%3Dspot-a"));
        cJSON *p = body_of(fx, "PATCH", "/apis/apps/v1/namespaces/shop/deployments/gone", 0);
        assert_int_equal((int)replicas_of(p)->valuedouble, 1);
        assert_null(ann_of(p));
        cJSON_Delete(p);
        the_sweep = drain_surge_sweep_free(the_sweep);
}

static void test_sweep_own_node(void **state)
{
        struct fx *fx = *state;
        /* The agent's sweep takes only records naming its node. */
        _cleanup_free_ char *a = listed("gone", "spot-gone");
        _cleanup_free_ char *b = listed("idle", "od-1");
        _cleanup_free_ char *list =
            strprintf("{\"kind\":\"DeploymentList\",\"metadata\":{},\"items\":[%s,%s]}", a, b);
        assert_int_equal(kfake_answer(fx->fake, "GET", "/apis/apps/v1/deployments", 200, list), 0);
        assert_int_equal(
            kfake_answer(fx->fake, "GET", "/api/v1/nodes/od-1", 200, "{\"metadata\":{\"name\":\"od-1\"}}"),
            0);
        answer_named(fx, "idle", "4", 2, "od-1");
        assert_int_equal(drain_surge_sweep_new(fx->client, "od-1", &the_sweep), 0);
        run_until(fx, sweep_done);
        unsigned found, restored;
        drain_surge_sweep_counts(the_sweep, &found, &restored);
        assert_int_equal(found, 1);
        assert_int_equal(restored, 1);
        assert_int_equal(count_of(fx, "GET", "/api/v1/nodes/spot-gone"), 0);
        assert_int_equal(count_of(fx, "PATCH", "/apis/apps/v1/namespaces/shop/deployments/gone"), 0);
        the_sweep = drain_surge_sweep_free(the_sweep);
}

int main(void)
{
        log_setup(LOG_FORMAT_TEXT, LOG_WARNING);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_raise, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_restore, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_conflict_retried, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_changed_replicas_left, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_adopted, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_other_nodes_record_not_surged, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_shared_reads, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_no_room, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_sweep, fx_setup, fx_teardown),
                cmocka_unit_test_setup_teardown(test_sweep_own_node, fx_setup, fx_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
