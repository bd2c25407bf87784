/* Room on other nodes for surged pods (src/drain/room.c): what the scheduler would pass over, what a node's
 * pods already hold, and what is reported missing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "spotdrain/surge.h"

/* A Ready node with allocatable cpu/memory; extra: more JSON members of the node object (after metadata). */
static char *node_json(const char *name, const char *cpu, const char *memory, const char *spec,
                       const char *labels, bool ready)
{
        char *s = NULL;
        assert_true(
            asprintf(&s,
                     "{\"metadata\":{\"name\":\"%s\",\"labels\":{%s}},\"spec\":{%s},"
                     "\"status\":{\"allocatable\":{\"cpu\":\"%s\",\"memory\":\"%s\",\"pods\":\"29\"},"
                     "\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
                     name, labels ? labels : "", spec ? spec : "", cpu, memory,
                     ready ? "True" : "False") > 0);
        return s;
}

static char *pod_json(const char *name, const char *node, const char *cpu, const char *memory,
                      const char *extra_spec, const char *phase)
{
        char *s = NULL;
        assert_true(asprintf(&s,
                             "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"shop\"},\"spec\":{%s%s%s%s"
                             "\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"%s\","
                             "\"memory\":\"%s\"}}}]},\"status\":{\"phase\":\"%s\"}}",
                             name, node ? "\"nodeName\":\"" : "", node ? node : "", node ? "\"," : "",
                             extra_spec ? extra_spec : "", cpu, memory, phase ? phase : "Running") > 0);
        return s;
}

struct world {
        cJSON *nodes, *pods, *want[4];
        size_t n_want;
};

static void add(cJSON *arr, char *json)
{
        cJSON *o = cJSON_Parse(json);
        free(json);
        assert_non_null(o);
        cJSON_AddItemToArray(arr, o);
}

static void want(struct world *w, char *json)
{
        w->want[w->n_want] = cJSON_Parse(json);
        free(json);
        assert_non_null(w->want[w->n_want]);
        w->n_want++;
}

static void fit(struct world *w, struct drain_room *r)
{
        assert_int_equal(
            drain_room_fit(w->nodes, w->pods, "spot-a", (const cJSON *const *)w->want, w->n_want, r), 0);
}

static void world_init(struct world *w)
{
        *w = (struct world){ .nodes = cJSON_CreateArray(), .pods = cJSON_CreateArray() };
        /* The draining node itself, roomy: never counted. */
        add(w->nodes, node_json("spot-a", "8", "32Gi", NULL, NULL, true));
}

static void world_done(struct world *w)
{
        cJSON_Delete(w->nodes);
        cJSON_Delete(w->pods);
        for (size_t i = 0; i < w->n_want; i++)
                cJSON_Delete(w->want[i]);
}

/* surge-no-room's world: od-1 has 1 cpu, 800m of it taken; a 500m pod does not fit, a 200m one does. */
static void test_room_taken_by_running_pods(void **state)
{
        struct world w;
        struct drain_room r;
        world_init(&w);
        add(w.nodes, node_json("od-1", "1", "4Gi", NULL, NULL, true));
        add(w.pods, pod_json("batch", "od-1", "800m", "1Gi", NULL, NULL));
        want(&w, pod_json("checkout", "spot-a", "500m", "512Mi", NULL, NULL));
        fit(&w, &r);
        assert_int_equal(r.n_want, 1);
        assert_int_equal(r.n_missing, 1);
        assert_int_equal(r.missing_cpu_millis, 500);
        assert_int_equal(r.missing_memory_bytes, 512LL << 20);
        cJSON_Delete(w.want[0]);
        w.n_want = 0;
        want(&w, pod_json("small", "spot-a", "200m", "512Mi", NULL, NULL));
        fit(&w, &r);
        assert_int_equal(r.n_missing, 0);
        world_done(&w);
}

/* Ended pods hold nothing; a terminating pod (deletionTimestamp, still Running) holds its room. */
static void test_room_ended_pods_free_it(void **state)
{
        struct world w;
        struct drain_room r;
        world_init(&w);
        add(w.nodes, node_json("od-1", "1", "4Gi", NULL, NULL, true));
        add(w.pods, pod_json("done", "od-1", "800m", "1Gi", NULL, "Succeeded"));
        add(w.pods, pod_json("failed", "od-1", "800m", "1Gi", NULL, "Failed"));
        want(&w, pod_json("checkout", "spot-a", "500m", "512Mi", NULL, NULL));
        fit(&w, &r);
        assert_int_equal(r.n_missing, 0);
        add(w.pods, pod_json("stopping", "od-1", "600m", "1Gi", NULL, "Running"));
        fit(&w, &r);
        assert_int_equal(r.n_missing, 1);
        world_done(&w);
}

/* Cordoned, NotReady and tainted nodes are passed over; a toleration or a matching selector lets it in. */
static void test_room_nodes_passed_over(void **state)
{
        struct world w;
        struct drain_room r;
        world_init(&w);
        add(w.nodes, node_json("cordoned", "4", "8Gi", "\"unschedulable\":true", NULL, true));
        add(w.nodes, node_json("notready", "4", "8Gi", NULL, NULL, false));
        add(w.nodes, node_json("gpu", "4", "8Gi",
                               "\"taints\":[{\"key\":\"gpu\",\"value\":\"yes\",\"effect\":\"NoSchedule\"}]",
                               "\"pool\":\"gpu\"", true));
        want(&w, pod_json("checkout", "spot-a", "500m", "512Mi", NULL, NULL));
        fit(&w, &r);
        assert_int_equal(r.n_missing, 1);
        /* Tolerating another value of the key is not enough. */
        world_done(&w);
        world_init(&w);
        add(w.nodes, node_json("gpu", "4", "8Gi",
                               "\"taints\":[{\"key\":\"gpu\",\"value\":\"yes\",\"effect\":\"NoSchedule\"}]",
                               "\"pool\":\"gpu\"", true));
        want(&w,
             pod_json("a", "spot-a", "500m", "512Mi",
                      "\"tolerations\":[{\"key\":\"gpu\",\"operator\":\"Equal\",\"value\":\"no\"}],", NULL));
        want(&w, pod_json(
                     "b", "spot-a", "500m", "512Mi",
                     "\"tolerations\":[{\"key\":\"gpu\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}],"
                     "\"nodeSelector\":{\"pool\":\"gpu\"},",
                     NULL));
        want(&w, pod_json("c", "spot-a", "500m", "512Mi",
                          "\"tolerations\":[{\"operator\":\"Exists\"}],\"nodeSelector\":{\"pool\":\"cpu\"},",
                          NULL));
        fit(&w, &r);
        /* a: wrong value; c: tolerates everything but selects another pool; b fits. */
        assert_int_equal(r.n_want, 3);
        assert_int_equal(r.n_missing, 2);
        assert_int_equal(r.missing_cpu_millis, 1000);
        world_done(&w);
}

/* Pods are packed largest first, and room taken by one is not given to the next. */
static void test_room_packing(void **state)
{
        struct world w;
        struct drain_room r;
        world_init(&w);
        add(w.nodes, node_json("od-1", "1", "4Gi", NULL, NULL, true));
        add(w.nodes, node_json("od-2", "700m", "4Gi", NULL, NULL, true));
        want(&w, pod_json("small", "spot-a", "300m", "256Mi", NULL, NULL));
        want(&w, pod_json("big", "spot-a", "900m", "256Mi", NULL, NULL));
        want(&w, pod_json("mid", "spot-a", "600m", "256Mi", NULL, NULL));
        fit(&w, &r);
        /* big on od-1, mid on od-2, small nowhere (100m left on each). */
        assert_int_equal(r.n_missing, 1);
        assert_int_equal(r.missing_cpu_millis, 300);
        world_done(&w);
}

/* A node without allocatable figures is not taken as room; a malformed request is an error. */
static void test_room_bad_input(void **state)
{
        struct world w;
        struct drain_room r;
        world_init(&w);
        add(w.nodes, strdup("{\"metadata\":{\"name\":\"bare\"},\"status\":{"
                            "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}"));
        want(&w, pod_json("checkout", "spot-a", "500m", "512Mi", NULL, NULL));
        fit(&w, &r);
        assert_int_equal(r.n_missing, 1);
        cJSON_Delete(w.want[0]);
        w.n_want = 0;
        want(&w, pod_json("broken", "spot-a", "lots", "512Mi", NULL, NULL));
        assert_int_equal(
            drain_room_fit(w.nodes, w.pods, "spot-a", (const cJSON *const *)w.want, w.n_want, &r), -EINVAL);
        world_done(&w);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_room_taken_by_running_pods),
                cmocka_unit_test(test_room_ended_pods_free_it),
                cmocka_unit_test(test_room_nodes_passed_over),
                cmocka_unit_test(test_room_packing),
                cmocka_unit_test(test_room_bad_input),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
