/* The simulator model on a manual clock: PDB status, eviction and delete as kube-apiserver answers them,
 * controllers, scheduler, kubelet timing, node termination, change log, node patches, result accounting. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "sim/model.h"
#include "spotdrain/util.h"
#include "spotdrain/yaml.h"

static struct sim *mk(const char *doc)
{
        _cleanup_(ynode_freep) struct ynode *tree = NULL;
        _cleanup_free_ char *err = NULL;
        assert_int_equal(yaml_load_string(doc, strlen(doc), "t.yaml", &tree, &err), 0);
        struct sim *s = NULL;
        struct sim_options opt = { .manual_clock = true };
        int r = sim_new(tree, &opt, &s, &err);
        if (r < 0)
                fail_msg("sim_new: %s", err);
        sim_start(s);
        return s;
}

static void sim_freep(struct sim **s)
{
        sim_free(*s);
}

static void cjson_freep(cJSON **o)
{
        cJSON_Delete(*o);
}

static void answer_done(struct sim_answer *a)
{
        cJSON_Delete(a->body);
        a->body = NULL;
}

/* "metadata.uid", "spec.nodeName"... */
static const cJSON *at(const cJSON *o, const char *path)
{
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", path);
        char *save = NULL;
        for (char *k = strtok_r(buf, ".", &save); k && o; k = strtok_r(NULL, ".", &save))
                o = cJSON_GetObjectItemCaseSensitive(o, k);
        return o;
}

static const char *str_at(const cJSON *o, const char *path)
{
        return cJSON_GetStringValue(at(o, path));
}

static int int_at(const cJSON *o, const char *path)
{
        const cJSON *v = at(o, path);
        if (!cJSON_IsNumber(v))
                fail_msg("%s is not a number", path);
        return v->valueint;
}

static void set_time(struct sim *s, double t)
{
        sim_set_now(s, t);
        sim_advance(s);
}

/* Names of pods with label app=APP (on NODE when set; "" = unscheduled), terminating ones only when asked.
 */
static int find_pods(struct sim *s, const char *ns, const char *app, const char *node, bool terminating,
                     char names[][64], int max)
{
        _cleanup_(cjson_freep) cJSON *items = NULL;
        assert_int_equal(sim_list(s, SIM_POD, ns, &items), 0);
        int n = 0;
        const cJSON *p;
        cJSON_ArrayForEach (p, items) {
                if (!streq(str_at(p, "metadata.labels.app"), app))
                        continue;
                if (!terminating && at(p, "metadata.deletionTimestamp"))
                        continue;
                const char *nn = str_at(p, "spec.nodeName");
                if (node && !(isempty(node) ? !nn : streq(nn, node)))
                        continue;
                if (n < max && names)
                        snprintf(names[n], 64, "%s", str_at(p, "metadata.name"));
                n++;
        }
        return n;
}

static cJSON *get(struct sim *s, enum sim_kind k, const char *ns, const char *name)
{
        cJSON *o = NULL;
        int r = sim_get(s, k, ns, name, &o);
        return r < 0 ? NULL : o;
}

static void pdb_numbers(struct sim *s, const char *ns, const char *name, int expected, int desired,
                        int current, int allowed)
{
        _cleanup_(cjson_freep) cJSON *d = get(s, SIM_PDB, ns, name);
        assert_non_null(d);
        assert_int_equal(int_at(d, "status.expectedPods"), expected);
        assert_int_equal(int_at(d, "status.desiredHealthy"), desired);
        assert_int_equal(int_at(d, "status.currentHealthy"), current);
        assert_int_equal(int_at(d, "status.disruptionsAllowed"), allowed);
        assert_int_equal(int_at(d, "status.observedGeneration"), 1);
}

static const char SEED504[] =
    "name: seed-504\nmode: agent\nbudget_seconds: 120\nnodes:\n"
    "  - {name: spot-a, zone: us-east-1a, capacity_type: spot, instance_type: m5.4xlarge, allocatable: "
    "{cpu: "
    "\"16\", memory: 64Gi, pods: 110}}\n"
    "  - {name: od-1, zone: us-east-1a, capacity_type: on-demand, instance_type: m5.4xlarge, allocatable: "
    "{cpu: "
    "\"16\", memory: 64Gi, pods: 110}}\n"
    "  - {name: od-2, zone: us-east-1c, capacity_type: on-demand, instance_type: m5.4xlarge, allocatable: "
    "{cpu: "
    "\"16\", memory: 64Gi, pods: 110}}\n"
    "  - {name: od-3, zone: us-east-1d, capacity_type: on-demand, instance_type: m5.4xlarge, allocatable: "
    "{cpu: "
    "\"16\", memory: 64Gi, pods: 110}}\n"
    "workloads:\n"
    "  - {name: api, namespace: shop, kind: Deployment, replicas: 30, placement: {spot-a: 10},\n"
    "     requests: {cpu: 200m, memory: 256Mi}, termination_grace_seconds: 30, shutdown_seconds: 10, "
    "startup_seconds: 15,\n"
    "     pdb: {max_unavailable: 1}}\n"
    "  - {name: web, namespace: shop, kind: Deployment, replicas: 20, placement: {spot-a: 6},\n"
    "     requests: {cpu: 100m, memory: 128Mi}, termination_grace_seconds: 30, shutdown_seconds: 5, "
    "startup_seconds: 12,\n"
    "     pdb: {max_unavailable: 1}}\n"
    "  - {name: worker, namespace: batch, kind: Deployment, replicas: 8, placement: {spot-a: 4},\n"
    "     requests: {cpu: 500m, memory: 512Mi}, termination_grace_seconds: 60, shutdown_seconds: 20, "
    "startup_seconds: 5}\n"
    "  - {name: metrics-agent, namespace: monitoring, kind: DaemonSet, priority_class: "
    "system-node-critical,\n"
    "     requests: {cpu: 100m, memory: 200Mi}, termination_grace_seconds: 10, shutdown_seconds: 1, "
    "startup_seconds: 3}\n"
    "events:\n"
    "  - {at: 5, type: spot-interruption, node: spot-a}\n";

static void test_seed504_world(void **state)
{
        _cleanup_(sim_freep) struct sim *s = mk(SEED504);
        pdb_numbers(s, "shop", "api", 30, 29, 30, 1);
        pdb_numbers(s, "shop", "web", 20, 19, 20, 1);
        assert_int_equal(find_pods(s, "shop", "api", "spot-a", false, NULL, 0), 10);
        assert_int_equal(find_pods(s, "shop", "web", "spot-a", false, NULL, 0), 6);
        assert_int_equal(find_pods(s, "batch", "worker", "spot-a", false, NULL, 0), 4);
        /* The rest first-fit from the first node on: spot-a has room for them. */
        assert_int_equal(find_pods(s, "shop", "api", NULL, false, NULL, 0), 30);
        assert_int_equal(find_pods(s, "monitoring", "metrics-agent", NULL, false, NULL, 0), 4);
        assert_int_equal(find_pods(s, "monitoring", "metrics-agent", "od-3", false, NULL, 0), 1);
        assert_null(get(s, SIM_PDB, "batch", "worker"));

        _cleanup_(cjson_freep) cJSON *node = get(s, SIM_NODE, NULL, "spot-a");
        assert_non_null(node);
        assert_string_equal(str_at(node, "kind"), "Node");
        const char *pid = str_at(node, "spec.providerID");
        assert_true(startswith(pid, "aws:///us-east-1a/i-0"));
        assert_int_equal(strlen(pid), strlen("aws:///us-east-1a/") + 19);
        const cJSON *labels = at(node, "metadata.labels");
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(labels, "kubernetes.io/hostname")),
                            "spot-a");
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(labels, "topology.kubernetes.io/zone")),
                            "us-east-1a");
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(labels, "karpenter.sh/capacity-type")),
                            "spot");
        assert_string_equal(
            cJSON_GetStringValue(cJSON_GetObjectItem(labels, "eks.amazonaws.com/capacityType")), "SPOT");
        assert_string_equal(
            cJSON_GetStringValue(cJSON_GetObjectItem(labels, "node.kubernetes.io/instance-type")),
            "m5.4xlarge");
        assert_string_equal(str_at(node, "status.allocatable.memory"), "64Gi");
        assert_non_null(str_at(node, "metadata.resourceVersion"));

        /* Instance IDs derive from the name, the same on every run. */
        assert_string_equal(sim_node_instance_id(s, 0), pid + strlen("aws:///us-east-1a/"));
        _cleanup_(sim_freep) struct sim *s2 = mk(SEED504);
        assert_string_equal(sim_node_instance_id(s, 0), sim_node_instance_id(s2, 0));
        assert_string_not_equal(sim_node_instance_id(s, 0), sim_node_instance_id(s, 1));
        assert_string_equal(sim_node_name(s, 1), "od-1");
        assert_string_equal(sim_node_zone(s, 2), "us-east-1c");
        assert_string_equal(sim_node_capacity_type(s, 0), "spot");
        assert_string_equal(sim_node_instance_type(s, 0), "m5.4xlarge");
        assert_string_equal(sim_node_ip(s, 0),
                            str_at(cJSON_GetArrayItem(at(node, "status.addresses"), 0), "address"));
        assert_null(sim_node_name(s, 4));
        assert_true(sim_budget_seconds(s) == 120);
        assert_string_equal(sim_mode(s), "agent");
        assert_string_equal(sim_scenario_name(s), "seed-504");
}

static void test_mass_interruption_pdbs(void **state)
{
        struct buf b = { 0 };
        assert_int_equal(buf_printf(&b, "name: mass-interruption\nmode: controller\nnodes:\n"), 0);
        for (int i = 0; i < 40; i++)
                assert_int_equal(
                    buf_printf(&b,
                               "  - {name: spot-%02d, capacity_type: spot, allocatable: {cpu: \"8\", "
                               "memory: 32Gi, pods: 58}}\n",
                               i),
                    0);
        for (int i = 0; i < 16; i++)
                assert_int_equal(
                    buf_printf(&b,
                               "  - {name: od-%02d, allocatable: {cpu: \"16\", memory: 64Gi, pods: "
                               "110}}\n",
                               i),
                    0);
        static const struct {
                const char *name, *pdb;
                int replicas, per_node;
        } w[] = {
                { "frontend", "max_unavailable: \"10%\"", 160, 4 },
                { "search", "max_unavailable: \"20%\"", 120, 3 },
                { "orders", "min_available: \"80%\"", 80, 2 },
                { "reports", "max_unavailable: 2", 40, 1 },
                { "odd", "max_unavailable: \"10%\"", 5, 0 },
                { "odd-min", "min_available: \"50%\"", 5, 0 },
        };
        assert_int_equal(buf_printf(&b, "workloads:\n"), 0);
        for (size_t k = 0; k < ARRAY_SIZE(w); k++) {
                assert_int_equal(
                    buf_printf(&b,
                               "  - {name: %s, namespace: prod, replicas: %d, requests: {cpu: 100m, "
                               "memory: 128Mi}, pdb: {%s}, placement: {",
                               w[k].name, w[k].replicas, w[k].pdb),
                    0);
                for (int i = 0; w[k].per_node && i < 40; i++)
                        assert_int_equal(buf_printf(&b, "%sspot-%02d: %d", i ? ", " : "", i, w[k].per_node),
                                         0);
                assert_int_equal(buf_printf(&b, "}}\n"), 0);
        }
        assert_int_equal(buf_printf(&b, "  - {name: node-agent, namespace: kube-system, kind: DaemonSet}\n"),
                         0);
        _cleanup_free_ char *doc = strdup(b.data);
        assert_non_null(doc);
        _cleanup_(sim_freep) struct sim *s = mk(doc);
        buf_free(&b);
        /* Percentages round up: 10% of 160 = 16; 20% of 120 = 24; 80% of 80 = 64. */
        pdb_numbers(s, "prod", "frontend", 160, 144, 160, 16);
        pdb_numbers(s, "prod", "search", 120, 96, 120, 24);
        pdb_numbers(s, "prod", "orders", 80, 64, 80, 16);
        pdb_numbers(s, "prod", "reports", 40, 38, 40, 2);
        /* 10% of 5 = 0.5 → 1 unavailable; 50% of 5 = 2.5 → 3 available. */
        pdb_numbers(s, "prod", "odd", 5, 4, 5, 1);
        pdb_numbers(s, "prod", "odd-min", 5, 3, 5, 2);
        _cleanup_(cjson_freep) cJSON *d = get(s, SIM_PDB, "prod", "frontend");
        assert_string_equal(str_at(d, "spec.maxUnavailable"), "10%");
        assert_string_equal(str_at(d, "spec.selector.matchLabels.app"), "frontend");
        assert_string_equal(str_at(d, "apiVersion"), "policy/v1");
        _cleanup_(cjson_freep) cJSON *r = get(s, SIM_PDB, "prod", "reports");
        assert_int_equal(int_at(r, "spec.maxUnavailable"), 2);
        assert_int_equal(find_pods(s, "kube-system", "node-agent", NULL, false, NULL, 0), 56);

        /* Nobody drains: at each deadline the 10 pods on every interrupted node die, and come back
         * elsewhere. */
        for (int i = 0; i < 20; i++) {
                char ev[80];
                snprintf(ev, sizeof(ev), "%s  - {at: %d.5, type: spot-interruption, node: spot-%02d}\n",
                         i ? "" : "events:\n", i, 2 * i);
                assert_int_equal(buf_printf(&b, "%s", ev), 0);
        }
        _cleanup_free_ char *with_events = strprintf("%s%s", doc, b.data);
        buf_free(&b);
        _cleanup_(sim_freep) struct sim *s2 = mk(with_events);
        set_time(s2, 130);
        assert_false(sim_finished(s2));
        set_time(s2, 200);
        assert_true(sim_finished(s2));
        _cleanup_(cjson_freep) cJSON *res = sim_result(s2);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(res, "nodes")), 20);
        const cJSON *n;
        cJSON_ArrayForEach (n, cJSON_GetObjectItem(res, "nodes")) {
                /* spot-00 also got the 10 unplaced "odd" pods, first fit. */
                int want = streq(str_at(n, "name"), "spot-00") ? 20 : 10;
                assert_int_equal(int_at(n, "pods_evictable"), want);
                assert_int_equal(int_at(n, "pods_killed"), want);
                assert_true(cJSON_IsNull(cJSON_GetObjectItem(n, "drained_at")));
        }
        const cJSON *n0 = cJSON_GetArrayItem(cJSON_GetObjectItem(res, "nodes"), 0);
        assert_true(cJSON_GetObjectItem(n0, "notice_at")->valuedouble == 0.5);
        assert_true(cJSON_GetObjectItem(n0, "deadline_at")->valuedouble == 120.5);
        assert_int_equal(find_pods(s2, "prod", "frontend", NULL, false, NULL, 0), 160);
        assert_int_equal(find_pods(s2, "prod", "frontend", "", false, NULL, 0), 0);
        assert_int_equal(find_pods(s2, "kube-system", "node-agent", NULL, false, NULL, 0), 36);
        pdb_numbers(s2, "prod", "frontend", 160, 144, 160, 16);
}

/* Three pods of web on node a under maxUnavailable 1; node b empty. */
static const char SMALL[] =
    "name: small\nbudget_seconds: 100\nnodes:\n"
    "  - {name: a, capacity_type: spot, allocatable: {cpu: \"4\", memory: 8Gi, pods: 20}}\n"
    "  - {name: b, allocatable: {cpu: \"4\", memory: 8Gi, pods: 20}}\n"
    "workloads:\n"
    "  - {name: web, replicas: 3, placement: {a: 3}, requests: {cpu: 500m, memory: 256Mi},\n"
    "     termination_grace_seconds: 30, shutdown_seconds: 2, startup_seconds: 10,\n"
    "     pdb: {max_unavailable: 1}}\n"
    "  - {name: cart, kind: StatefulSet, replicas: 2, placement: {a: 2}, shutdown_seconds: 5,"
    " startup_seconds: 4}\n"
    "  - {name: solo, kind: Pod, placement: {a: 1}, emptydir: true, shutdown_seconds: 40,"
    " termination_grace_seconds: 10}\n"
    "  - {name: ds, kind: DaemonSet, priority_class: system-node-critical}\n"
    "events:\n"
    "  - {at: 1, type: spot-interruption, node: a}\n";

static void cordon(struct sim *s, const char *node, bool on)
{
        _cleanup_(cjson_freep) cJSON *patch =
            cJSON_Parse(on ? "{\"spec\":{\"unschedulable\":true}}" : "{\"spec\":{\"unschedulable\":null}}");
        _cleanup_(answer_done) struct sim_answer a = { 0 };
        assert_int_equal(
            sim_patch(s, SIM_NODE, NULL, node, "application/strategic-merge-patch+json", patch, &a), 0);
        assert_int_equal(a.status, 200);
}

static int evict(struct sim *s, const char *ns, const char *name, struct sim_answer *a)
{
        _cleanup_(cjson_freep) cJSON *ev =
            cJSON_Parse("{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\"}");
        assert_int_equal(sim_evict(s, ns, name, ev, "test", a), 0);
        return a->status;
}

static void test_eviction(void **state)
{
        _cleanup_(sim_freep) struct sim *s = mk(SMALL);
        char names[3][64], fresh[1][64];
        assert_int_equal(find_pods(s, "default", "web", "a", false, names, 3), 3);
        cordon(s, "a", true);

        _cleanup_(answer_done) struct sim_answer a1 = { 0 };
        assert_int_equal(evict(s, "default", names[0], &a1), 201);
        assert_string_equal(str_at(a1.body, "status"), "Success");
        assert_string_equal(str_at(a1.body, "kind"), "Status");
        _cleanup_(cjson_freep) cJSON *p0 = get(s, SIM_POD, "default", names[0]);
        assert_non_null(at(p0, "metadata.deletionTimestamp"));
        assert_int_equal(int_at(p0, "metadata.deletionGracePeriodSeconds"), 30);
        pdb_numbers(s, "default", "web", 3, 2, 2, 0);
        /* The ReplicaSet replaced it at once, on b (a is cordoned); not Ready yet. */
        assert_int_equal(find_pods(s, "default", "web", "b", false, fresh, 1), 1);

        _cleanup_(answer_done) struct sim_answer a2 = { 0 };
        assert_int_equal(evict(s, "default", names[1], &a2), 429);
        assert_string_equal(str_at(a2.body, "reason"), "TooManyRequests");
        assert_string_equal(str_at(a2.body, "message"),
                            "Cannot evict pod as it would violate the pod's disruption budget.");
        const cJSON *cause = cJSON_GetArrayItem(at(a2.body, "details.causes"), 0);
        assert_string_equal(str_at(cause, "reason"), "DisruptionBudget");
        assert_string_equal(str_at(cause, "message"),
                            "The disruption budget web needs 2 healthy pods and has 2 currently");
        assert_int_equal(int_at(a2.body, "code"), 429);

        /* An unready pod goes without budget under IfHealthyBudget (2 healthy >= 2 desired > 0)... */
        _cleanup_(answer_done) struct sim_answer a3 = { 0 };
        assert_int_equal(evict(s, "default", fresh[0], &a3), 201);
        pdb_numbers(s, "default", "web", 3, 2, 2, 0);
        /* ...and is replaced again; its replacement turns Ready startup_seconds after it was scheduled. */
        set_time(s, 9.9);
        _cleanup_(answer_done) struct sim_answer a4 = { 0 };
        assert_int_equal(evict(s, "default", names[1], &a4), 429);
        set_time(s, 10);
        pdb_numbers(s, "default", "web", 3, 2, 3, 1);
        _cleanup_(answer_done) struct sim_answer a5 = { 0 };
        assert_int_equal(evict(s, "default", names[1], &a5), 201);

        /* Evicting a pod that is already terminating needs no budget. */
        _cleanup_(answer_done) struct sim_answer a6 = { 0 };
        assert_int_equal(evict(s, "default", names[1], &a6), 201);

        /* Gone: 404 NotFound with the kube-apiserver message. */
        set_time(s, 12);
        assert_null(get(s, SIM_POD, "default", names[0]));
        _cleanup_(answer_done) struct sim_answer a7 = { 0 };
        assert_int_equal(evict(s, "default", names[0], &a7), 404);
        _cleanup_free_ char *msg = strprintf("pods \"%s\" not found", names[0]);
        assert_string_equal(str_at(a7.body, "message"), msg);
        assert_string_equal(str_at(a7.body, "reason"), "NotFound");
        assert_string_equal(str_at(a7.body, "details.kind"), "pods");

        /* Evictions never breach. */
        _cleanup_(cjson_freep) cJSON *res = sim_result(s);
        assert_int_equal(int_at(res, "pdb_breaches"), 0);
}

static void test_eviction_uid_and_two_pdbs(void **state)
{
        _cleanup_(sim_freep) struct sim *s = mk(SMALL);
        char names[1][64];
        assert_int_equal(find_pods(s, "default", "web", "a", false, names, 1), 3);
        _cleanup_(cjson_freep) cJSON *ev =
            cJSON_Parse("{\"apiVersion\":\"policy/"
                        "v1\",\"kind\":\"Eviction\",\"deleteOptions\":{\"preconditions\":{\"uid\":"
                        "\"not-it\"}}}");
        _cleanup_(answer_done) struct sim_answer a0 = { 0 };
        assert_int_equal(sim_evict(s, "default", names[0], ev, "test", &a0), 0);
        assert_int_equal(a0.status, 409);

        _cleanup_(cjson_freep) cJSON *pdb =
            cJSON_Parse("{\"apiVersion\":\"policy/"
                        "v1\",\"kind\":\"PodDisruptionBudget\",\"metadata\":{\"name\":\"web-extra\"},"
                        "\"spec\":{\"minAvailable\":1,\"selector\":{\"matchLabels\":{\"app\":\"web\"}}}}");
        _cleanup_(answer_done) struct sim_answer c = { 0 };
        assert_int_equal(sim_create(s, SIM_PDB, "default", pdb, &c), 0);
        assert_int_equal(c.status, 201);
        pdb_numbers(s, "default", "web-extra", 3, 1, 3, 2);
        _cleanup_(answer_done) struct sim_answer a = { 0 };
        assert_int_equal(evict(s, "default", names[0], &a), 500);
        assert_string_equal(str_at(a.body, "message"),
                            "This pod has more than one PodDisruptionBudget, which the "
                            "eviction subresource does not support.");
        assert_string_equal(str_at(a.body, "status"), "Failure");
        /* Nothing happened to the pod. */
        _cleanup_(cjson_freep) cJSON *p = get(s, SIM_POD, "default", names[0]);
        assert_null(at(p, "metadata.deletionTimestamp"));
}

static void test_replacement_timing(void **state)
{
        _cleanup_(sim_freep) struct sim *s = mk(SMALL);
        _cleanup_(cjson_freep) cJSON *old = get(s, SIM_POD, "default", "cart-0");
        assert_non_null(old);
        const char *old_uid = str_at(old, "metadata.uid");
        assert_string_equal(str_at(cJSON_GetArrayItem(at(old, "metadata.ownerReferences"), 0), "kind"),
                            "StatefulSet");

        _cleanup_(answer_done) struct sim_answer d = { 0 };
        assert_int_equal(sim_delete_pod(s, "default", "cart-0", -1, NULL, "test", &d), 0);
        assert_int_equal(d.status, 200);
        assert_non_null(at(d.body, "metadata.deletionTimestamp"));
        /* A StatefulSet waits until the old pod is gone. */
        assert_int_equal(find_pods(s, "default", "cart", NULL, true, NULL, 0), 2);
        set_time(s, 4.9);
        _cleanup_(cjson_freep) cJSON *still = get(s, SIM_POD, "default", "cart-0");
        assert_string_equal(str_at(still, "metadata.uid"), old_uid);
        set_time(s, 5);
        _cleanup_(cjson_freep) cJSON *fresh = get(s, SIM_POD, "default", "cart-0");
        assert_non_null(fresh);
        assert_string_not_equal(str_at(fresh, "metadata.uid"), old_uid);
        assert_null(at(fresh, "metadata.deletionTimestamp"));

        /* A ReplicaSet replaces at the deletionTimestamp. */
        char names[1][64];
        assert_int_equal(find_pods(s, "default", "web", NULL, false, names, 1), 3);
        _cleanup_(answer_done) struct sim_answer d2 = { 0 };
        assert_int_equal(sim_delete_pod(s, "default", names[0], 1, NULL, "test", &d2), 0);
        assert_int_equal(find_pods(s, "default", "web", NULL, false, NULL, 0), 3);
        assert_int_equal(find_pods(s, "default", "web", NULL, true, NULL, 0), 4);
        /* Its shutdown (2 s) is cut to the 1 s grace. */
        set_time(s, 6);
        assert_int_equal(find_pods(s, "default", "web", NULL, true, NULL, 0), 3);
}

static void test_scheduler(void **state)
{
        static const char doc[] =
            "name: sched\nnodes:\n"
            "  - {name: a, allocatable: {cpu: \"1\", memory: 4Gi, pods: 10}}\n"
            "  - {name: b, allocatable: {cpu: \"1\", memory: 4Gi, pods: 10}}\n"
            "  - {name: c, allocatable: {cpu: \"4\", memory: 4Gi, pods: 2}}\n"
            "workloads:\n"
            "  - {name: web, replicas: 3, requests: {cpu: 600m}, shutdown_seconds: 3, startup_seconds: 2}\n";
        _cleanup_(sim_freep) struct sim *s = mk(doc);
        /* First fit in node order: one 600m pod fills a, the next goes to b, the third to c. */
        char on_a[1][64];
        assert_int_equal(find_pods(s, "default", "web", "a", false, on_a, 1), 1);
        assert_int_equal(find_pods(s, "default", "web", "b", false, NULL, 0), 1);
        assert_int_equal(find_pods(s, "default", "web", "c", false, NULL, 0), 1);

        /* b cordoned, c tainted NoSchedule: neither takes new pods. */
        cordon(s, "b", true);
        _cleanup_(cjson_freep) cJSON *taint = cJSON_Parse(
            "{\"spec\":{\"taints\":[{\"key\":\"spotdrain/draining\",\"effect\":\"NoSchedule\"}]}}");
        _cleanup_(answer_done) struct sim_answer tp = { 0 };
        assert_int_equal(sim_patch(s, SIM_NODE, NULL, "c", "application/merge-patch+json", taint, &tp), 0);
        assert_int_equal(tp.status, 200);

        _cleanup_(answer_done) struct sim_answer d = { 0 };
        assert_int_equal(sim_delete_pod(s, "default", on_a[0], -1, NULL, "test", &d), 0);
        /* The terminating pod still holds a's room, b is cordoned, c is tainted: Pending. */
        char pending[1][64];
        assert_int_equal(find_pods(s, "default", "web", "", false, pending, 1), 1);
        _cleanup_(cjson_freep) cJSON *p = get(s, SIM_POD, "default", pending[0]);
        assert_string_equal(str_at(p, "status.phase"), "Pending");
        assert_null(at(p, "spec.nodeName"));
        set_time(s, 2.9);
        assert_int_equal(find_pods(s, "default", "web", "", false, NULL, 0), 1);
        /* The old pod exits at 3: room on a again. */
        set_time(s, 3);
        assert_int_equal(find_pods(s, "default", "web", "a", false, NULL, 0), 1);
        _cleanup_(cjson_freep) cJSON *p2 = get(s, SIM_POD, "default", pending[0]);
        assert_string_equal(str_at(p2, "spec.nodeName"), "a");
        assert_string_equal(str_at(p2, "status.phase"), "Running");
        /* Ready startup_seconds after scheduling. */
        const cJSON *cs = cJSON_GetArrayItem(at(p2, "status.containerStatuses"), 0);
        assert_false(cJSON_IsTrue(cJSON_GetObjectItem(cs, "ready")));
        set_time(s, 5);
        _cleanup_(cjson_freep) cJSON *p3 = get(s, SIM_POD, "default", pending[0]);
        cs = cJSON_GetArrayItem(at(p3, "status.containerStatuses"), 0);
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cs, "ready")));
}

static const cJSON *result_node(const cJSON *res, const char *name)
{
        const cJSON *n;
        cJSON_ArrayForEach (n, cJSON_GetObjectItem(res, "nodes"))
                if (streq(str_at(n, "name"), name))
                        return n;
        return NULL;
}

static void test_exit_and_termination(void **state)
{
        _cleanup_(sim_freep) struct sim *s = mk(SMALL);
        set_time(s, 1);
        double notice, deadline;
        assert_int_equal(sim_node_notice(s, 0, NULL, &notice, &deadline), 0);
        assert_true(notice == 1 && deadline == 101);
        cordon(s, "a", true);
        /* solo (bare pod, no owner) needs 40 s but gets 10: killed at the end of grace. */
        _cleanup_(cjson_freep) cJSON *solo = get(s, SIM_POD, "default", "solo");
        assert_null(at(solo, "metadata.ownerReferences"));
        assert_string_equal(str_at(cJSON_GetArrayItem(at(solo, "spec.volumes"), 0), "name"), "scratch");
        assert_non_null(at(cJSON_GetArrayItem(at(solo, "spec.volumes"), 0), "emptyDir"));
        _cleanup_(answer_done) struct sim_answer d = { 0 };
        assert_int_equal(sim_delete_pod(s, "default", "solo", -1, NULL, "test", &d), 0);
        set_time(s, 10.9);
        _cleanup_(cjson_freep) cJSON *alive = get(s, SIM_POD, "default", "solo");
        assert_non_null(alive);
        set_time(s, 11);
        assert_null(get(s, SIM_POD, "default", "solo"));
        /* cart-0 exits gracefully after its own 5 s. */
        _cleanup_(answer_done) struct sim_answer d2 = { 0 };
        assert_int_equal(sim_delete_pod(s, "default", "cart-0", -1, NULL, "test", &d2), 0);
        set_time(s, 16);
        _cleanup_(cjson_freep) cJSON *res = sim_result(s);
        const cJSON *n = result_node(res, "a");
        assert_non_null(n);
        assert_int_equal(int_at(n, "pods_killed"), 1);
        assert_int_equal(int_at(n, "pods_graceful"), 1);
        assert_int_equal(int_at(n, "pods_evictable"), 6);
        assert_true(cJSON_GetObjectItem(n, "cordoned_at")->valuedouble == 1);
        assert_true(cJSON_IsNull(cJSON_GetObjectItem(n, "drained_at")));
        assert_false(sim_finished(s));

        /* At the deadline the instance is gone with everything still on it. */
        set_time(s, 100.9);
        _cleanup_(cjson_freep) cJSON *still_there = get(s, SIM_NODE, NULL, "a");
        assert_non_null(still_there);
        int left = find_pods(s, "default", "web", "a", true, NULL, 0) +
                   find_pods(s, "default", "cart", "a", true, NULL, 0);
        assert_int_equal(left, 4);
        set_time(s, 101);
        assert_null(get(s, SIM_NODE, NULL, "a"));
        assert_true(sim_node_gone(s, 0));
        assert_true(sim_finished(s));
        assert_int_equal(find_pods(s, "default", "ds", NULL, false, NULL, 0), 1);
        _cleanup_(cjson_freep) cJSON *res2 = sim_result(s);
        n = result_node(res2, "a");
        assert_int_equal(int_at(n, "pods_killed"), 1 + 4);
        assert_true(cJSON_GetObjectItem(n, "deadline_at")->valuedouble == 101);
        assert_true(cJSON_IsNull(cJSON_GetObjectItem(n, "drained_at")));
        /* The displaced web pods come back on b. */
        assert_int_equal(find_pods(s, "default", "web", "b", false, NULL, 0), 3);
        assert_string_equal(str_at(res2, "scenario"), "small");
        assert_non_null(cJSON_GetObjectItem(res2, "replacements"));
}

/* pod_removal_seconds: a pod whose containers stopped stays readable (its deletionTimestamp, terminated
 * container statuses with the exit code) until its kubelet's final delete, that long after; the killed one
 * exits 137. It is not counted killed again when its node goes; a grace-0 delete removes it at once. */
static void test_stopped_pod_readable(void **state)
{
        _cleanup_free_ char *doc = strprintf("%spod_removal_seconds: 3\n", SMALL);
        _cleanup_(sim_freep) struct sim *s = mk(doc);
        set_time(s, 1);
        cordon(s, "a", true);
        _cleanup_(answer_done) struct sim_answer d = { 0 }, d2 = { 0 }, d3 = { 0 };
        assert_int_equal(sim_delete_pod(s, "default", "solo", -1, NULL, "test", &d), 0);
        assert_int_equal(sim_delete_pod(s, "default", "cart-0", -1, NULL, "test", &d2), 0);
        set_time(s, 11.5); /* solo killed at 11 (grace 10), cart-0 stopped at 6 */
        _cleanup_(cjson_freep) cJSON *solo = get(s, SIM_POD, "default", "solo");
        assert_non_null(solo);
        assert_non_null(at(solo, "metadata.deletionTimestamp"));
        const cJSON *cs = cJSON_GetArrayItem(at(solo, "status.containerStatuses"), 0);
        assert_int_equal(int_at(cs, "state.terminated.exitCode"), 137);
        assert_string_equal(str_at(cs, "state.terminated.reason"), "Error");
        assert_false(cJSON_IsTrue(at(cs, "ready")));
        /* cart-0 was removed at 6 + 3: the name is its successor's. */
        _cleanup_(cjson_freep) cJSON *cart = get(s, SIM_POD, "default", "cart-0");
        assert_null(at(cart, "metadata.deletionTimestamp"));
        struct sim_pod_log_facts f;
        assert_int_equal(sim_pod_log_facts(s, "default", "solo", &f), 0);
        set_time(s, 13.9);
        _cleanup_(cjson_freep) cJSON *still = get(s, SIM_POD, "default", "solo");
        assert_non_null(still);
        set_time(s, 14);
        assert_null(get(s, SIM_POD, "default", "solo"));
        _cleanup_(cjson_freep) cJSON *res = sim_result(s);
        const cJSON *n = result_node(res, "a");
        assert_int_equal(int_at(n, "pods_killed"), 1);
        assert_int_equal(int_at(n, "pods_graceful"), 1);

        /* A web pod stopped gracefully (exit 0), then the kubelet's grace-0 delete. */
        char names[3][64];
        assert_int_equal(find_pods(s, "default", "web", "a", false, names, 3), 3);
        assert_int_equal(sim_delete_pod(s, "default", names[0], -1, NULL, "test", &d3), 0);
        set_time(s, 16.5);
        _cleanup_(cjson_freep) cJSON *web = get(s, SIM_POD, "default", names[0]);
        assert_non_null(web);
        cs = cJSON_GetArrayItem(at(web, "status.containerStatuses"), 0);
        assert_int_equal(int_at(cs, "state.terminated.exitCode"), 0);
        assert_string_equal(str_at(cs, "state.terminated.reason"), "Completed");
        _cleanup_(answer_done) struct sim_answer d4 = { 0 };
        assert_int_equal(sim_delete_pod(s, "default", names[0], 0, NULL, "test", &d4), 0);
        set_time(s, 16.6);
        assert_null(get(s, SIM_POD, "default", names[0]));

        /* One stopped at 99 and still readable at the deadline (101) is not killed again. */
        assert_int_equal(find_pods(s, "default", "web", "a", false, names, 3), 2);
        set_time(s, 97);
        _cleanup_(answer_done) struct sim_answer d5 = { 0 };
        assert_int_equal(sim_delete_pod(s, "default", names[0], -1, NULL, "test", &d5), 0);
        set_time(s, 100);
        _cleanup_(cjson_freep) cJSON *stopped = get(s, SIM_POD, "default", names[0]);
        assert_non_null(
            at(cJSON_GetArrayItem(at(stopped, "status.containerStatuses"), 0), "state.terminated"));
        set_time(s, 101);
        _cleanup_(cjson_freep) cJSON *res2 = sim_result(s);
        n = result_node(res2, "a");
        /* solo, and what was still running at 101: one web pod and cart-1 (cart-0's successor is on b) */
        assert_int_equal(int_at(n, "pods_killed"), 1 + 2);
}

static void test_delete_breach(void **state)
{
        _cleanup_(sim_freep) struct sim *s = mk(SMALL);
        set_time(s, 1);
        char names[2][64];
        assert_int_equal(find_pods(s, "default", "web", "a", false, names, 2), 3);
        _cleanup_(answer_done) struct sim_answer d1 = { 0 }, d2 = { 0 };
        /* 3 healthy, 2 desired: the first DELETE stays within the budget but went around it. */
        assert_int_equal(sim_delete_pod(s, "default", names[0], 5, NULL, "test", &d1), 0);
        assert_int_equal(int_at(d1.body, "metadata.deletionGracePeriodSeconds"), 5);
        _cleanup_(cjson_freep) cJSON *r1 = sim_result(s);
        assert_int_equal(int_at(r1, "pdb_breaches"), 0);
        assert_int_equal(int_at(result_node(r1, "a"), "pods_forced"), 1);
        /* The second drops healthy to 1 < 2. */
        assert_int_equal(sim_delete_pod(s, "default", names[1], 5, NULL, "test", &d2), 0);
        _cleanup_(cjson_freep) cJSON *r2 = sim_result(s);
        assert_int_equal(int_at(r2, "pdb_breaches"), 1);
        assert_int_equal(int_at(result_node(r2, "a"), "pods_forced"), 2);
        /* A pod without PDB is not forced. */
        _cleanup_(answer_done) struct sim_answer d3 = { 0 };
        assert_int_equal(sim_delete_pod(s, "default", "cart-1", 5, NULL, "test", &d3), 0);
        _cleanup_(cjson_freep) cJSON *r3 = sim_result(s);
        assert_int_equal(int_at(result_node(r3, "a"), "pods_forced"), 2);
        /* UID precondition. */
        _cleanup_(answer_done) struct sim_answer d4 = { 0 };
        assert_int_equal(sim_delete_pod(s, "default", "cart-0", 5, "other", "test", &d4), 0);
        assert_int_equal(d4.status, 409);
        _cleanup_(answer_done) struct sim_answer d5 = { 0 };
        assert_int_equal(sim_delete_pod(s, "default", "nope", 5, NULL, "test", &d5), 0);
        assert_int_equal(d5.status, 404);
}

struct collected {
        uint64_t last_rv;
        int n;
        bool ordered;
        const char *types[8];
        cJSON *first;
        cJSON *deleted; /* the first DELETED object */
};

static void collect(const struct sim_change *c, void *userdata)
{
        struct collected *col = userdata;
        if (c->rv <= col->last_rv)
                col->ordered = false;
        col->last_rv = c->rv;
        if (col->n < 8)
                col->types[col->n] = c->type;
        if (!col->first)
                col->first = cJSON_Duplicate(c->object, true);
        if (!col->deleted && streq(c->type, "DELETED"))
                col->deleted = cJSON_Duplicate(c->object, true);
        col->n++;
}

static void test_change_log(void **state)
{
        _cleanup_(sim_freep) struct sim *s = mk(SMALL);
        uint64_t rv0 = sim_resource_version(s);
        assert_true(rv0 > 0);
        /* The starting world is in the log as ADDED. */
        struct collected all = { .ordered = true };
        assert_int_equal(sim_changes_since(s, SIM_NODE, NULL, 0, collect, &all), 0);
        assert_int_equal(all.n, 2);
        assert_string_equal(all.types[0], "ADDED");
        cJSON_Delete(all.first);

        cordon(s, "a", true);
        struct collected c = { .ordered = true };
        assert_int_equal(sim_changes_since(s, SIM_NODE, NULL, rv0, collect, &c), 0);
        assert_int_equal(c.n, 1);
        assert_string_equal(c.types[0], "MODIFIED");
        assert_true(cJSON_IsTrue(at(c.first, "spec.unschedulable")));
        char rv[32];
        snprintf(rv, sizeof(rv), "%llu", (unsigned long long)c.last_rv);
        assert_string_equal(str_at(c.first, "metadata.resourceVersion"), rv);
        cJSON_Delete(c.first);

        /* Pods: delete one, watch it go MODIFIED (deletionTimestamp) then DELETED, with an ADDED
         * replacement. */
        uint64_t rv1 = sim_resource_version(s);
        char names[1][64];
        assert_int_equal(find_pods(s, "default", "web", "a", false, names, 1), 3);
        _cleanup_(answer_done) struct sim_answer d = { 0 };
        assert_int_equal(sim_delete_pod(s, "default", names[0], -1, NULL, "test", &d), 0);
        set_time(s, 2);
        struct collected pc = { .ordered = true };
        assert_int_equal(sim_changes_since(s, SIM_POD, "default", rv1, collect, &pc), 0);
        assert_true(pc.ordered);
        assert_string_equal(pc.types[0], "MODIFIED");
        assert_non_null(at(pc.first, "metadata.deletionTimestamp"));
        bool deleted = false, added = false;
        for (int i = 0; i < pc.n && i < 8; i++) {
                deleted = deleted || streq(pc.types[i], "DELETED");
                added = added || streq(pc.types[i], "ADDED");
        }
        assert_true(deleted && added);
        /* The kubelet's confirmation (grace 0) 2 s after the delete of grace 30: kube-apiserver would move
         * deletionTimestamp back to the delete's time but never into the past, so it is the confirmation's
         * time, 28 s before the first one, with grace 0 (seen on kube-apiserver 1.36). */
        uint64_t end_of_grace, confirmed;
        assert_int_equal(parse_rfc3339(str_at(pc.first, "metadata.deletionTimestamp"), &end_of_grace), 0);
        assert_int_equal(parse_rfc3339(str_at(pc.deleted, "metadata.deletionTimestamp"), &confirmed), 0);
        assert_int_equal(end_of_grace - confirmed, 28 * 1000000ULL);
        assert_int_equal(int_at(pc.deleted, "metadata.deletionGracePeriodSeconds"), 0);
        assert_string_equal(str_at(cJSON_GetArrayItem(at(pc.deleted, "status.containerStatuses"), 0),
                                   "state.terminated.reason"),
                            "Completed");
        cJSON_Delete(pc.first);
        cJSON_Delete(pc.deleted);
        struct collected none = { .ordered = true };
        assert_int_equal(sim_changes_since(s, SIM_POD, "kube-system", rv1, collect, &none), 0);
        assert_int_equal(none.n, 0);

        /* Past the ring's size (20000) the oldest changes are forgotten: -ESTALE. */
        _cleanup_(cjson_freep) cJSON *lease = cJSON_Parse("{\"metadata\":{\"name\":\"l\"},\"spec\":{}}");
        _cleanup_(answer_done) struct sim_answer c0 = { 0 };
        assert_int_equal(sim_create(s, SIM_LEASE, "default", lease, &c0), 0);
        for (int i = 0; i < 20001; i++) {
                struct sim_answer a = { 0 };
                assert_int_equal(sim_replace(s, SIM_LEASE, "default", "l", lease, &a), 0);
                assert_int_equal(a.status, 200);
                answer_done(&a);
        }
        struct collected st = { .ordered = true };
        assert_int_equal(sim_changes_since(s, SIM_NODE, NULL, rv0, collect, &st), -ESTALE);
        assert_int_equal(sim_changes_since(s, SIM_LEASE, NULL, sim_resource_version(s) - 3, collect, &st),
                         0);
        assert_int_equal(st.n, 3);
        assert_true(st.ordered);
        assert_true(st.n >= 1);
        cJSON_Delete(st.first);
}

static bool label_app_is(const cJSON *labels, void *userdata)
{
        return streq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(labels, "app")), userdata);
}

/* The names of the items on node (NULL: any, "": unscheduled) with label app (NULL: any), space-joined in
 * list order. */
static char *names_of(const cJSON *items, const char *node, const char *app)
{
        struct buf b = { 0 };
        const cJSON *p;
        cJSON_ArrayForEach (p, items) {
                const char *nn = str_at(p, "spec.nodeName");
                if (node && !(isempty(node) ? !nn : streq(nn, node)))
                        continue;
                if (app && !streq(str_at(p, "metadata.labels.app"), app))
                        continue;
                assert_int_equal(buf_printf(&b, "%s ", str_at(p, "metadata.name")), 0);
        }
        return b.data ? b.data : strdup("");
}

/* A filtered list is the full list without what the filter rejects, in the same order. */
static void check_filtered(struct sim *s, const char *ns, const char *node, const char *app, int count)
{
        _cleanup_(cjson_freep) cJSON *all = NULL, *some = NULL;
        assert_int_equal(sim_list(s, SIM_POD, ns, &all), 0);
        struct sim_list_filter f = { .node_name = node,
                                     .labels = app ? label_app_is : NULL,
                                     .userdata = (void *)app };
        assert_int_equal(sim_list_filtered(s, SIM_POD, ns, &f, &some), 0);
        assert_int_equal(cJSON_GetArraySize(some), count);
        _cleanup_free_ char *want = names_of(all, node, app), *have = names_of(some, NULL, NULL);
        assert_string_equal(have, want);
}

static void test_list_filtered(void **state)
{
        _cleanup_(sim_freep) struct sim *s = mk(SEED504);
        check_filtered(s, NULL, "spot-a", NULL, 10 + 6 + 4 + 1);
        check_filtered(s, NULL, NULL, "web", 20);
        check_filtered(s, "shop", "spot-a", "api", 10);
        check_filtered(s, "batch", "spot-a", "api", 0);
        check_filtered(s, NULL, "no-such-node", NULL, 0);
        check_filtered(s, NULL, "", NULL, 0);

        /* Nodes filter on their labels too. */
        _cleanup_(cjson_freep) cJSON *nodes = NULL;
        struct sim_list_filter nf = { .labels = label_app_is, .userdata = (void *)"x" };
        assert_int_equal(sim_list_filtered(s, SIM_NODE, NULL, &nf, &nodes), 0);
        assert_int_equal(cJSON_GetArraySize(nodes), 0);

        /* Nowhere to go: the replacement of a deleted pod stays unscheduled (spec.nodeName ""), and the
         * terminating pod is still listed on its node. */
        static const char *const all_nodes[] = { "spot-a", "od-1", "od-2", "od-3" };
        for (size_t i = 0; i < ARRAY_SIZE(all_nodes); i++)
                cordon(s, all_nodes[i], true);
        char names[1][64];
        assert_int_equal(find_pods(s, "shop", "web", "spot-a", false, names, 1), 6);
        _cleanup_(answer_done) struct sim_answer d = { 0 };
        assert_int_equal(sim_delete_pod(s, "shop", names[0], -1, NULL, "test", &d), 0);
        assert_int_equal(d.status, 200);
        check_filtered(s, NULL, "", NULL, 1);
        check_filtered(s, "shop", "", "web", 1);
        check_filtered(s, NULL, "spot-a", NULL, 21);
        set_time(s, 6); /* the web pod's shutdown (5 s) is over */
        check_filtered(s, NULL, "spot-a", NULL, 20);
        check_filtered(s, NULL, "", NULL, 1);
}

/* The names of the pods in items, in order, joined by spaces. */
static void join_names(const cJSON *items, char *out, size_t len)
{
        const cJSON *it;
        out[0] = '\0';
        cJSON_ArrayForEach (it, items) {
                size_t n = strlen(out);
                snprintf(out + n, len - n, "%s%s", n ? " " : "", str_at(it, "metadata.name"));
        }
}

/* A cluster's pods in parts (as a watch from resourceVersion 0 sends them): the parts join into the whole
 * list, a pod gone between two parts is not in the later one, and one created after the first part is left
 * to the change log. */
static void test_list_pods_part(void **state)
{
        _cleanup_(sim_freep) struct sim *s = mk(SEED504);
        _cleanup_(cjson_freep) cJSON *whole = NULL;
        assert_int_equal(sim_list_filtered(s, SIM_POD, NULL, NULL, &whole), 0);
        int n_whole = cJSON_GetArraySize(whole);
        assert_true(n_whole > 10);
        char want[16384], have[16384] = "";
        join_names(whole, want, sizeof(want));

        uint64_t upto = sim_pods_last_created(s), after = 0, last;
        assert_true(upto > 0);
        int parts = 0;
        for (;;) {
                _cleanup_(cjson_freep) cJSON *part = NULL;
                assert_int_equal(sim_list_pods_part(s, NULL, NULL, after, upto, 7, &part, &last), 0);
                assert_true(cJSON_GetArraySize(part) <= 7);
                if (last == after) {
                        assert_int_equal(cJSON_GetArraySize(part), 0);
                        break;
                }
                assert_true(last > after);
                char names[2048];
                join_names(part, names, sizeof(names));
                size_t n = strlen(have);
                snprintf(have + n, sizeof(have) - n, "%s%s", n ? " " : "", names);
                after = last;
                parts++;
        }
        assert_string_equal(have, want);
        assert_int_equal(parts, (n_whole + 6) / 7);

        /* One namespace, through a label filter: the same pods as the filtered whole list. */
        struct sim_list_filter web = { .labels = label_app_is, .userdata = (void *)"web" };
        _cleanup_(cjson_freep) cJSON *shop = NULL, *shop_part = NULL;
        assert_int_equal(sim_list_filtered(s, SIM_POD, "shop", &web, &shop), 0);
        assert_int_equal(sim_list_pods_part(s, "shop", &web, 0, upto, 1000, &shop_part, &last), 0);
        join_names(shop, want, sizeof(want));
        join_names(shop_part, have, sizeof(have));
        assert_true(cJSON_GetArraySize(shop) > 0);
        assert_string_equal(have, want);

        /* The first part, then a pod deleted (gone once its shutdown is over, its replacement created): the
         * rest no longer has it, and the replacement, newer than upto, is not in any part. */
        _cleanup_(cjson_freep) cJSON *first = NULL;
        assert_int_equal(sim_list_pods_part(s, NULL, NULL, 0, upto, 1, &first, &after), 0);
        char names[1][64];
        assert_int_equal(find_pods(s, "shop", "web", "spot-a", false, names, 1), 6);
        _cleanup_(answer_done) struct sim_answer d = { 0 };
        assert_int_equal(sim_delete_pod(s, "shop", names[0], -1, NULL, "test", &d), 0);
        assert_int_equal(d.status, 200);
        set_time(s, 60);
        assert_true(sim_pods_last_created(s) > upto);
        _cleanup_(cjson_freep) cJSON *rest = NULL;
        assert_int_equal(sim_list_pods_part(s, NULL, NULL, after, upto, 100000, &rest, &last), 0);
        assert_int_equal(cJSON_GetArraySize(first) + cJSON_GetArraySize(rest), n_whole - 1);
        const cJSON *it;
        cJSON_ArrayForEach (it, rest)
                assert_string_not_equal(str_at(it, "metadata.name"), names[0]);
}

/* A world larger than the change log: only its newest SIM_LOG_MAX (20000) changes are kept, and a watch from
 * before them is told its version is gone. */
static void test_large_world_log(void **state)
{
        struct buf b = { 0 };
        assert_int_equal(buf_printf(&b, "name: large\nbudget_seconds: 60\nnodes:\n"), 0);
        for (int i = 0; i < 200; i++)
                assert_int_equal(
                    buf_printf(&b, "  - {name: n-%d, allocatable: {cpu: \"16\", memory: 64Gi, pods: 110}}\n",
                               i),
                    0);
        assert_int_equal(buf_printf(&b, "workloads:\n  - {name: big, replicas: 20100, shutdown_seconds: 1, "
                                        "startup_seconds: 2, pdb: {max_unavailable: 1}}\n"),
                         0);
        _cleanup_free_ char *doc = b.data;
        _cleanup_(sim_freep) struct sim *s = mk(doc);
        uint64_t rv = sim_resource_version(s);
        /* namespaces, 200 nodes, Deployment and ReplicaSet, 20100 pods, 1 PDB */
        assert_int_equal(rv, 4 + 200 + 2 + 20100 + 1);
        struct collected old = { .ordered = true };
        assert_int_equal(sim_changes_since(s, SIM_NODE, NULL, 0, collect, &old), -ESTALE);
        assert_int_equal(sim_changes_since(s, SIM_POD, NULL, rv - 20001, collect, &old), -ESTALE);
        struct collected pods = { .ordered = true };
        assert_int_equal(sim_changes_since(s, SIM_POD, NULL, rv - 20000, collect, &pods), 0);
        assert_int_equal(pods.n, 19999);
        assert_true(pods.ordered);
        assert_string_equal(pods.types[0], "ADDED");
        cJSON_Delete(pods.first);
        struct collected pdbs = { .ordered = true };
        assert_int_equal(sim_changes_since(s, SIM_PDB, NULL, rv - 20000, collect, &pdbs), 0);
        assert_int_equal(pdbs.n, 1);
        cJSON_Delete(pdbs.first);

        /* Indexes at that size: a node's pods, a pod by name, and an eviction's changes from the log's end.
         */
        check_filtered(s, NULL, "n-7", NULL, 110); /* first fit: the first nodes are full */
        char names[1][64];
        assert_int_equal(find_pods(s, "default", "big", "n-7", false, names, 1), 110);
        _cleanup_(cjson_freep) cJSON *pod = get(s, SIM_POD, "default", names[0]);
        assert_non_null(pod);
        _cleanup_(answer_done) struct sim_answer a = { 0 };
        assert_int_equal(evict(s, "default", names[0], &a), 201);
        struct collected after = { .ordered = true, .last_rv = rv };
        assert_int_equal(sim_changes_since(s, SIM_POD, NULL, rv, collect, &after), 0);
        assert_true(after.ordered);
        assert_true(after.n >= 2); /* the evicted pod MODIFIED, its replacement ADDED (and bound) */
        assert_string_equal(after.types[0], "MODIFIED");
        assert_string_equal(str_at(after.first, "metadata.name"), names[0]);
        cJSON_Delete(after.first);
}

static void test_node_patch(void **state)
{
        _cleanup_(sim_freep) struct sim *s = mk(SMALL);
        _cleanup_(cjson_freep) cJSON *n0 = get(s, SIM_NODE, NULL, "b");
        const char *rv0 = str_at(n0, "metadata.resourceVersion");

        /* A stale resourceVersion in the patch: 409 Conflict. */
        _cleanup_(cjson_freep) cJSON *stale =
            cJSON_Parse("{\"metadata\":{\"resourceVersion\":\"1\"},\"spec\":{\"unschedulable\":true}}");
        _cleanup_(answer_done) struct sim_answer a0 = { 0 };
        assert_int_equal(sim_patch(s, SIM_NODE, NULL, "b", "application/merge-patch+json", stale, &a0), 0);
        assert_int_equal(a0.status, 409);
        assert_string_equal(str_at(a0.body, "reason"), "Conflict");

        _cleanup_free_ char *good_s = strprintf(
            "{\"metadata\":{\"resourceVersion\":\"%s\",\"labels\":{\"team\":\"x\",\"kubernetes.io/os\":"
            "null}},\"spec\":{\"unschedulable\":true}}",
            rv0);
        _cleanup_(cjson_freep) cJSON *good = cJSON_Parse(good_s);
        _cleanup_(answer_done) struct sim_answer a1 = { 0 };
        assert_int_equal(
            sim_patch(s, SIM_NODE, NULL, "b", "application/strategic-merge-patch+json", good, &a1), 0);
        assert_int_equal(a1.status, 200);
        assert_true(cJSON_IsTrue(at(a1.body, "spec.unschedulable")));
        const cJSON *labels = at(a1.body, "metadata.labels");
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(labels, "team")), "x");
        assert_null(cJSON_GetObjectItem(labels, "kubernetes.io/os"));
        assert_string_not_equal(str_at(a1.body, "metadata.resourceVersion"), rv0);

        /* The same patch again changes nothing: the resourceVersion stays. */
        uint64_t rv = sim_resource_version(s);
        cordon(s, "b", true);
        assert_true(sim_resource_version(s) == rv);

        /* JSON patch: taint added, label removed, then uncordon. */
        _cleanup_(cjson_freep) cJSON *jp =
            cJSON_Parse("[{\"op\":\"add\",\"path\":\"/spec/taints/"
                        "-\",\"value\":{\"key\":\"k\",\"effect\":\"NoExecute\"}},"
                        "{\"op\":\"remove\",\"path\":\"/metadata/labels/team\"},"
                        "{\"op\":\"replace\",\"path\":\"/spec/unschedulable\",\"value\":false}]");
        _cleanup_(answer_done) struct sim_answer a2 = { 0 };
        assert_int_equal(sim_patch(s, SIM_NODE, NULL, "b", "application/json-patch+json", jp, &a2), 0);
        assert_int_equal(a2.status, 200);
        const cJSON *t = cJSON_GetArrayItem(at(a2.body, "spec.taints"), 0);
        assert_string_equal(str_at(t, "key"), "k");
        assert_non_null(str_at(t, "timeAdded"));
        assert_null(at(a2.body, "spec.unschedulable"));
        assert_null(cJSON_GetObjectItem(at(a2.body, "metadata.labels"), "team"));

        /* Taints are replaced as a list; null clears them. */
        _cleanup_(cjson_freep) cJSON *clear = cJSON_Parse("{\"spec\":{\"taints\":null}}");
        _cleanup_(answer_done) struct sim_answer a3 = { 0 };
        assert_int_equal(sim_patch(s, SIM_NODE, NULL, "b", "application/merge-patch+json", clear, &a3), 0);
        assert_null(at(a3.body, "spec.taints"));

        /* Malformed values: 422; unknown node: 404. */
        _cleanup_(cjson_freep) cJSON *bad = cJSON_Parse("{\"spec\":{\"unschedulable\":\"yes\"}}");
        _cleanup_(answer_done) struct sim_answer a4 = { 0 };
        assert_int_equal(sim_patch(s, SIM_NODE, NULL, "b", "application/merge-patch+json", bad, &a4), 0);
        assert_int_equal(a4.status, 422);
        _cleanup_(cjson_freep) cJSON *badt =
            cJSON_Parse("{\"spec\":{\"taints\":[{\"key\":\"k\",\"effect\":\"Maybe\"}]}}");
        _cleanup_(answer_done) struct sim_answer a5 = { 0 };
        assert_int_equal(sim_patch(s, SIM_NODE, NULL, "b", "application/merge-patch+json", badt, &a5), 0);
        assert_int_equal(a5.status, 422);
        _cleanup_(answer_done) struct sim_answer a6 = { 0 };
        assert_int_equal(sim_patch(s, SIM_NODE, NULL, "zz", "application/merge-patch+json", clear, &a6), 0);
        assert_int_equal(a6.status, 404);

        /* PUT with a stale resourceVersion: 409; with the current one the annotations are replaced. */
        _cleanup_(cjson_freep) cJSON *cur = get(s, SIM_NODE, NULL, "b");
        _cleanup_(cjson_freep) cJSON *put = cJSON_Duplicate(cur, true);
        cJSON *md = cJSON_GetObjectItem(put, "metadata");
        cJSON_ReplaceItemInObject(cJSON_GetObjectItem(md, "annotations"), "node.alpha.kubernetes.io/ttl",
                                  cJSON_CreateString("5"));
        _cleanup_(answer_done) struct sim_answer a7 = { 0 };
        assert_int_equal(sim_replace(s, SIM_NODE, NULL, "b", put, &a7), 0);
        assert_int_equal(a7.status, 200);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(at(a7.body, "metadata.annotations"),
                                                                     "node.alpha.kubernetes.io/ttl")),
                            "5");
        _cleanup_(answer_done) struct sim_answer a8 = { 0 };
        assert_int_equal(sim_replace(s, SIM_NODE, NULL, "b", put, &a8), 0);
        assert_int_equal(a8.status, 409);
}

static void test_cordon_accounting(void **state)
{
        _cleanup_(sim_freep) struct sim *s = mk(SMALL);
        set_time(s, 1);
        set_time(s, 1.5);
        cordon(s, "a", true);
        _cleanup_(cjson_freep) cJSON *res = sim_result(s);
        const cJSON *n = result_node(res, "a");
        assert_true(cJSON_GetObjectItem(n, "cordoned_at")->valuedouble == 1.5);
        assert_true(cJSON_GetObjectItem(n, "notice_at")->valuedouble == 1);
        assert_null(result_node(res, "b"));
        /* Drained once the last evictable pod is gone (the DaemonSet pod stays). */
        char names[8][64];
        int k = find_pods(s, "default", "web", "a", false, names, 8);
        for (int i = 0; i < k; i++) {
                struct sim_answer a = { 0 };
                assert_int_equal(sim_delete_pod(s, "default", names[i], -1, NULL, "test", &a), 0);
                answer_done(&a);
        }
        static const char *const others[] = { "cart-0", "cart-1", "solo" };
        for (size_t i = 0; i < ARRAY_SIZE(others); i++) {
                struct sim_answer a = { 0 };
                assert_int_equal(sim_delete_pod(s, "default", others[i], 30, NULL, "test", &a), 0);
                answer_done(&a);
        }
        set_time(s, 20);
        sim_record_alert(s, "drain-completed", "a", "done", NULL);
        _cleanup_(cjson_freep) cJSON *pm = cJSON_Parse("[{\"name\":\"solo\",\"containers\":[]}]");
        sim_record_alert(s, "pod-deleted", "a", "solo deleted", pm);
        _cleanup_(cjson_freep) cJSON *res2 = sim_result(s);
        n = result_node(res2, "a");
        /* solo took its 30 s grace (shutdown 40): gone at 31.5, not yet. */
        assert_true(cJSON_IsNull(cJSON_GetObjectItem(n, "drained_at")));
        set_time(s, 40);
        _cleanup_(cjson_freep) cJSON *res3 = sim_result(s);
        n = result_node(res3, "a");
        assert_true(cJSON_GetObjectItem(n, "drained_at")->valuedouble == 31.5);
        assert_int_equal(int_at(n, "pods_graceful"), 5);
        assert_int_equal(int_at(n, "pods_killed"), 1);
        const cJSON *al = cJSON_GetArrayItem(cJSON_GetObjectItem(res3, "alerts"), 0);
        assert_string_equal(str_at(al, "kind"), "drain-completed");
        assert_true(cJSON_GetObjectItem(al, "at")->valuedouble == 20);
        assert_null(cJSON_GetObjectItem(al, "postmortem"));
        /* An alert with a post-mortem carries its list (docs/contracts.md §4). */
        al = cJSON_GetArrayItem(cJSON_GetObjectItem(res3, "alerts"), 1);
        assert_string_equal(str_at(al, "kind"), "pod-deleted");
        assert_true(cJSON_Compare(cJSON_GetObjectItem(al, "postmortem"), pm, true));
}

/* The Ready condition of node name now. */
static const char *node_ready(struct sim *s, const char *name)
{
        static char status[16];
        _cleanup_(cjson_freep) cJSON *n = get(s, SIM_NODE, NULL, name);
        const cJSON *c;

        status[0] = '\0';
        cJSON_ArrayForEach (c, at(n, "status.conditions"))
                if (streq(str_at(c, "type"), "Ready"))
                        snprintf(status, sizeof(status), "%s", str_at(c, "status"));
        return status;
}

/* A scheduled reboot: the node goes down at its deadline (every pod still on it killed, the node kept, its
 * conditions Unknown), is Ready again reboot_seconds later, and an uncordon after that is recorded. */
static void test_reboot(void **state)
{
        _cleanup_(sim_freep) struct sim *s = mk("name: r\nbudget_seconds: 10\n"
                                                "nodes: [{name: a}, {name: b}]\n"
                                                "workloads:\n  - {name: w, replicas: 2, placement: {a: 2}}\n"
                                                "events:\n  - {at: 1, type: scheduled-change, node: a,"
                                                " code: system-reboot, reboot_seconds: 5}\n");
        set_time(s, 1);
        cordon(s, "a", true);
        set_time(s, 10.5);
        assert_string_equal(node_ready(s, "a"), "True");
        set_time(s, 11);
        assert_string_equal(node_ready(s, "a"), "Unknown");
        assert_false(sim_finished(s));
        /* An uncordon while it is down is not one after its return. */
        cordon(s, "a", false);
        cordon(s, "a", true);
        set_time(s, 16);
        assert_string_equal(node_ready(s, "a"), "True");
        assert_true(sim_finished(s));
        _cleanup_(cjson_freep) cJSON *mid = sim_result(s);
        assert_true(cJSON_IsNull(cJSON_GetObjectItem(result_node(mid, "a"), "uncordoned_at")));
        set_time(s, 17);
        cordon(s, "a", false);
        _cleanup_(cjson_freep) cJSON *res = sim_result(s);
        const cJSON *n = result_node(res, "a");
        assert_string_equal(str_at(n, "maintenance_code"), "system-reboot");
        assert_true(cJSON_GetObjectItem(n, "rebooted_at")->valuedouble == 11);
        assert_true(cJSON_GetObjectItem(n, "ready_again_at")->valuedouble == 16);
        assert_true(cJSON_GetObjectItem(n, "uncordoned_at")->valuedouble == 17);
        /* Nobody drained it: its two pods died with the reboot. */
        assert_int_equal(int_at(n, "pods_killed"), 2);
        _cleanup_(cjson_freep) cJSON *still = get(s, SIM_NODE, NULL, "a");
        assert_non_null(still);
}

static void test_render_and_leases(void **state)
{
        _cleanup_(sim_freep) struct sim *s = mk(SMALL);
        char names[1][64];
        assert_int_equal(find_pods(s, "default", "web", "a", false, names, 1), 3);
        _cleanup_(cjson_freep) cJSON *p = get(s, SIM_POD, "default", names[0]);
        assert_string_equal(str_at(p, "apiVersion"), "v1");
        assert_int_equal(strlen(str_at(p, "metadata.uid")), 36);
        const cJSON *ref = cJSON_GetArrayItem(at(p, "metadata.ownerReferences"), 0);
        assert_string_equal(str_at(ref, "kind"), "ReplicaSet");
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(ref, "controller")));
        const char *hash = str_at(p, "metadata.labels.pod-template-hash");
        assert_non_null(hash);
        _cleanup_free_ char *rs = strprintf("web-%s", hash);
        assert_string_equal(str_at(ref, "name"), rs);
        assert_true(startswith(names[0], rs));
        _cleanup_(cjson_freep) cJSON *rso = get(s, SIM_REPLICASET, "default", rs);
        assert_non_null(rso);
        assert_string_equal(str_at(rso, "metadata.uid"), str_at(ref, "uid"));
        _cleanup_(cjson_freep) cJSON *dep = get(s, SIM_DEPLOYMENT, "default", "web");
        assert_int_equal(int_at(dep, "status.readyReplicas"), 3);
        assert_string_equal(str_at(p, "status.phase"), "Running");
        assert_string_equal(
            str_at(cJSON_GetArrayItem(at(p, "spec.containers"), 0), "resources.requests.cpu"), "500m");
        assert_int_equal(int_at(p, "spec.terminationGracePeriodSeconds"), 30);
        assert_non_null(str_at(p, "metadata.creationTimestamp"));
        assert_non_null(str_at(p, "status.startTime"));

        char ds[1][64];
        assert_int_equal(find_pods(s, "default", "ds", "a", false, ds, 1), 1);
        _cleanup_(cjson_freep) cJSON *dp = get(s, SIM_POD, "default", ds[0]);
        assert_int_equal(int_at(dp, "spec.priority"), 2000001000);
        assert_string_equal(str_at(dp, "spec.priorityClassName"), "system-node-critical");
        assert_string_equal(str_at(cJSON_GetArrayItem(at(dp, "spec.tolerations"), 0), "operator"), "Exists");
        _cleanup_(cjson_freep) cJSON *dso = get(s, SIM_DAEMONSET, "default", "ds");
        assert_int_equal(int_at(dso, "status.desiredNumberScheduled"), 2);

        /* Leases as kube-apiserver: create, duplicate → 409, replace with a stale resourceVersion → 409. */
        _cleanup_(cjson_freep) cJSON *lease =
            cJSON_Parse("{\"apiVersion\":\"coordination.k8s.io/"
                        "v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"spotdrain\"},"
                        "\"spec\":{\"holderIdentity\":\"me\",\"leaseDurationSeconds\":15}}");
        _cleanup_(answer_done) struct sim_answer c1 = { 0 }, c2 = { 0 }, u1 = { 0 }, u2 = { 0 };
        assert_int_equal(sim_create(s, SIM_LEASE, "kube-system", lease, &c1), 0);
        assert_int_equal(c1.status, 201);
        assert_non_null(str_at(c1.body, "metadata.uid"));
        assert_int_equal(sim_create(s, SIM_LEASE, "kube-system", lease, &c2), 0);
        assert_int_equal(c2.status, 409);
        assert_string_equal(str_at(c2.body, "reason"), "AlreadyExists");
        _cleanup_(cjson_freep) cJSON *upd = cJSON_Duplicate(c1.body, true);
        cJSON_ReplaceItemInObject(cJSON_GetObjectItem(upd, "spec"), "holderIdentity",
                                  cJSON_CreateString("you"));
        assert_int_equal(sim_replace(s, SIM_LEASE, "kube-system", "spotdrain", upd, &u1), 0);
        assert_int_equal(u1.status, 200);
        assert_string_equal(str_at(u1.body, "spec.holderIdentity"), "you");
        assert_string_equal(str_at(u1.body, "metadata.uid"), str_at(c1.body, "metadata.uid"));
        assert_int_equal(sim_replace(s, SIM_LEASE, "kube-system", "spotdrain", upd, &u2), 0);
        assert_int_equal(u2.status, 409);
        _cleanup_(cjson_freep) cJSON *got = get(s, SIM_LEASE, "kube-system", "spotdrain");
        assert_string_equal(str_at(got, "spec.holderIdentity"), "you");

        /* Events with generateName. */
        _cleanup_(cjson_freep) cJSON *ev =
            cJSON_Parse("{\"apiVersion\":\"v1\",\"kind\":\"Event\",\"metadata\":{\"generateName\":\"a.\"},"
                        "\"reason\":\"X\"}");
        _cleanup_(answer_done) struct sim_answer e1 = { 0 };
        assert_int_equal(sim_create(s, SIM_EVENT, "default", ev, &e1), 0);
        assert_int_equal(e1.status, 201);
        assert_true(startswith(str_at(e1.body, "metadata.name"), "a."));
        _cleanup_(cjson_freep) cJSON *evs = NULL;
        assert_int_equal(sim_list(s, SIM_EVENT, NULL, &evs), 0);
        assert_int_equal(cJSON_GetArraySize(evs), 1);
        assert_int_equal(sim_kind_from_resource("poddisruptionbudgets"), SIM_PDB);
        assert_string_equal(sim_kind_resource(SIM_LEASE), "leases");
}

/* kubectl drain's way on seed-504: cordon, evict everything, retry each 429 after 5 s. maxUnavailable 1 with
 * a 15 s startup lets one api pod go every 15 s: 8 of 10 make it before the deadline, 2 are killed with it.
 */
static void test_seed504_kubectl_drain(void **state)
{
        _cleanup_(sim_freep) struct sim *s = mk(SEED504);
        set_time(s, 5);
        cordon(s, "spot-a", true);
        int evicted = 0, refused = 0;
        for (double t = 5; t < 125; t += 5) {
                set_time(s, t);
                static const struct {
                        const char *ns, *app;
                } apps[] = { { "shop", "api" }, { "shop", "web" }, { "batch", "worker" } };
                for (size_t k = 0; k < ARRAY_SIZE(apps); k++) {
                        char names[16][64];
                        int n = find_pods(s, apps[k].ns, apps[k].app, "spot-a", false, names, 16);
                        for (int i = 0; i < n && i < 16; i++) {
                                _cleanup_(answer_done) struct sim_answer a = { 0 };
                                int st = evict(s, apps[k].ns, names[i], &a);
                                assert_true(st == 201 || st == 429);
                                evicted += st == 201;
                                refused += st == 429;
                        }
                }
        }
        set_time(s, 125);
        assert_true(sim_finished(s));
        assert_int_equal(evicted, 18);
        assert_true(refused > 0);
        _cleanup_(cjson_freep) cJSON *res = sim_result(s);
        const cJSON *n = result_node(res, "spot-a");
        assert_true(cJSON_GetObjectItem(n, "notice_at")->valuedouble == 5);
        assert_true(cJSON_GetObjectItem(n, "deadline_at")->valuedouble == 125);
        assert_true(cJSON_GetObjectItem(n, "cordoned_at")->valuedouble == 5);
        assert_true(cJSON_IsNull(cJSON_GetObjectItem(n, "drained_at")));
        assert_int_equal(int_at(n, "pods_evictable"), 20);
        assert_int_equal(int_at(n, "pods_graceful"), 18);
        assert_int_equal(int_at(n, "pods_killed"), 2);
        assert_int_equal(int_at(n, "pods_forced"), 0);
        assert_int_equal(int_at(res, "pdb_breaches"), 0);
        /* Every api pod runs again elsewhere. */
        assert_int_equal(find_pods(s, "shop", "api", NULL, false, NULL, 0), 30);
}

static void test_options_and_clock(void **state)
{
        _cleanup_(ynode_freep) struct ynode *tree = NULL;
        assert_int_equal(yaml_load_string(SMALL, strlen(SMALL), "t.yaml", &tree, NULL), 0);
        struct sim_options opt = { .mode = "controller", .time_scale = 10 };
        _cleanup_(sim_freep) struct sim *s = NULL;
        assert_int_equal(sim_new(tree, &opt, &s, NULL), 0);
        assert_string_equal(sim_mode(s), "controller");
        assert_true(sim_time_scale(s) == 10);
        /* Before sim_start the real clock stands at 0; timestamps are the epoch plus scenario seconds. */
        assert_true(sim_now(s) == 0);
        assert_true(sim_wall_usec(s, 30) - sim_wall_usec(s, 0) == 30000000ULL);
        sim_start(s);
        assert_true(sim_now(s) >= 0);

        struct sim_options bad = { .mode = "batch" };
        struct sim *s2 = NULL;
        _cleanup_free_ char *err = NULL;
        assert_int_equal(sim_new(tree, &bad, &s2, &err), -EINVAL);
        assert_null(s2);
        assert_non_null(strstr(err, "batch"));

        /* The same seed builds the same world; another seed other names. */
        struct sim_options m1 = { .manual_clock = true, .seed = 7 },
                           m2 = { .manual_clock = true, .seed = 8 };
        _cleanup_(sim_freep) struct sim *a = NULL, *b = NULL, *c = NULL;
        assert_int_equal(sim_new(tree, &m1, &a, NULL), 0);
        assert_int_equal(sim_new(tree, &m1, &b, NULL), 0);
        assert_int_equal(sim_new(tree, &m2, &c, NULL), 0);
        char na[1][64], nb[1][64], nc[1][64];
        find_pods(a, "default", "web", NULL, false, na, 1);
        find_pods(b, "default", "web", NULL, false, nb, 1);
        find_pods(c, "default", "web", NULL, false, nc, 1);
        assert_string_equal(na[0], nb[0]);
        assert_string_not_equal(na[0], nc[0]);
}

/* rebalance-early: no spare room. An instance launched at the recommendation joins 45 s later and takes the
 * pods the full cluster could not place. */
/* asg-launch (issue #17 item 2): the instance is launched under the group's launch hook at the event, its
 * node joins NotReady join_seconds later (no pod scheduled there), turns Ready at ready_seconds (or never);
 * the hook's action takes one completion, recorded with its result and time in the result's launches. */
static void test_asg_launch(void **state)
{
        static const char doc[] =
            "name: launch\nmode: controller\nautoscaling: {heartbeat_timeout_seconds: 30}\nnodes:\n"
            "  - {name: od-1, zone: us-east-1a, capacity_type: on-demand, allocatable: {cpu: \"1\", memory: "
            "4Gi}}\n"
            "workloads:\n"
            "  - {name: web, namespace: shop, replicas: 2, placement: {od-1: 1}, requests: {cpu: 600m}}\n"
            "events:\n"
            "  - {at: 5, type: asg-launch, node: new-a, instance_id: i-0a0000000000000aa, join_seconds: 2,\n"
            "     ready_seconds: 10}\n"
            "  - {at: 5, type: asg-launch, node: new-b, join_seconds: 2, ready_seconds: never}\n";
        _cleanup_(sim_freep) struct sim *s = mk(doc);
        const char *iid = NULL;
        double launched = -1;

        assert_true(sim_has_launch_hook(s));
        set_time(s, 6);
        assert_int_equal(sim_launch_count(s), 2);
        assert_int_equal(sim_launch_hook(s, 0, &iid, &launched), 0);
        assert_string_equal(iid, "i-0a0000000000000aa");
        assert_true(launched == 5);
        assert_string_equal(sim_launch_hook_state(s, iid), "Pending:Wait");
        assert_null(sim_launch_hook_state(s, "i-0ffffffffffffffff"));

        set_time(s, 8); /* joined, NotReady: the Pending pod of web is not scheduled there */
        _cleanup_(cjson_freep) cJSON *a = NULL;
        assert_int_equal(sim_get(s, SIM_NODE, NULL, "new-a", &a), 0);
        const cJSON *c;
        cJSON_ArrayForEach (c, at(a, "status.conditions"))
                if (streq(str_at(c, "type"), "Ready"))
                        assert_string_equal(str_at(c, "status"), "False");
        char names[4][64];
        assert_int_equal(find_pods(s, "shop", "web", "", false, names, 4), 1);

        set_time(s, 15); /* Ready: the pod goes there */
        _cleanup_(cjson_freep) cJSON *a2 = NULL;
        assert_int_equal(sim_get(s, SIM_NODE, NULL, "new-a", &a2), 0);
        cJSON_ArrayForEach (c, at(a2, "status.conditions"))
                if (streq(str_at(c, "type"), "Ready"))
                        assert_string_equal(str_at(c, "status"), "True");
        assert_int_equal(find_pods(s, "shop", "web", "new-a", false, names, 4), 1);

        set_time(s, 16);
        assert_int_equal(sim_launch_hook_complete(s, iid, "CONTINUE"), 0);
        assert_int_equal(sim_launch_hook_complete(s, iid, "ABANDON"), -ENOENT); /* one action, taken */
        assert_string_equal(sim_launch_hook_state(s, iid), "InService");
        _cleanup_(cjson_freep) cJSON *r = sim_result(s);
        const cJSON *l0 = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "launches"), 0);
        const cJSON *l1 = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "launches"), 1);
        assert_string_equal(str_at(l0, "result"), "CONTINUE");
        assert_int_equal(int_at(l0, "joined_at"), 7);
        assert_int_equal(int_at(l0, "ready_at"), 15);
        assert_int_equal(int_at(l0, "completed_at"), 16);
        assert_string_equal(str_at(l0, "completed_by"), "client");
        assert_true(cJSON_IsNull(at(l1, "ready_at")));
        assert_true(cJSON_IsNull(at(l1, "result")));
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r, "replacements")), 0);

        /* new-b: a heartbeat keeps its action another HeartbeatTimeout (30 s), then the default result. */
        const char *b = NULL;
        assert_int_equal(sim_launch_hook(s, 1, &b, &launched), 0);
        set_time(s, 20);
        assert_int_equal(sim_launch_hook_complete(s, b, NULL), 0);
        set_time(s, 49);
        assert_string_equal(sim_launch_hook_state(s, b), "Pending:Wait");
        set_time(s, 51);
        assert_string_equal(sim_launch_hook_state(s, b), "Terminating");
        assert_int_equal(sim_launch_hook_complete(s, b, NULL), -ENOENT);
        _cleanup_(cjson_freep) cJSON *r2 = sim_result(s);
        const cJSON *b1 = cJSON_GetArrayItem(cJSON_GetObjectItem(r2, "launches"), 1);
        assert_string_equal(str_at(b1, "result"), "ABANDON");
        assert_string_equal(str_at(b1, "completed_by"), "timeout");
        assert_int_equal(int_at(b1, "completed_at"), 50);
}

static void test_launch(void **state)
{
        static const char doc[] =
            "name: rebalance-early\nmode: controller\nnodes:\n"
            "  - {name: spot-a, zone: us-east-1a, capacity_type: spot, allocatable: {cpu: \"8\", memory: "
            "32Gi}}\n"
            "  - {name: spot-b, zone: us-east-1b, capacity_type: spot, allocatable: {cpu: \"8\", memory: "
            "32Gi}}\n"
            "workloads:\n"
            "  - {name: checkout, namespace: shop, replicas: 12, placement: {spot-a: 6, spot-b: 6},\n"
            "     requests: {cpu: \"1\", memory: 2Gi}, shutdown_seconds: 8, startup_seconds: 20,\n"
            "     pdb: {min_available: \"75%\"}}\n"
            "  - {name: agent, namespace: kube-system, kind: DaemonSet, requests: {cpu: 100m}}\n"
            "provisioning:\n"
            "  node_launch_seconds: 45\n"
            "  instance_types:\n"
            "    - {name: m5.2xlarge, cpu: \"8\", memory: 32Gi}\n"
            "events:\n"
            "  - {at: 0, type: rebalance-recommendation, node: spot-a}\n"
            "  - {at: 60, type: spot-interruption, node: spot-a}\n";
        _cleanup_(sim_freep) struct sim *s = mk(doc);
        pdb_numbers(s, "shop", "checkout", 12, 9, 12, 3);
        _cleanup_free_ char *id = NULL;
        assert_int_equal(sim_launch_instance(s, "m5.32xlarge", "us-east-1c", "on-demand", NULL), -EINVAL);
        assert_int_equal(sim_launch_instance(s, "m5.2xlarge", "us-east-1c", "reserved", NULL), -EINVAL);
        assert_int_equal(sim_launch_instance(s, "m5.2xlarge", "us-east-1c", "on-demand", &id), 0);
        assert_true(startswith(id, "i-0"));
        assert_int_equal(strlen(id), 19);
        assert_true(sim_advance(s) == 45);
        _cleanup_(cjson_freep) cJSON *r0 = sim_result(s);
        const cJSON *rep = cJSON_GetArrayItem(cJSON_GetObjectItem(r0, "replacements"), 0);
        assert_true(cJSON_GetObjectItem(rep, "requested_at")->valuedouble == 0);
        assert_true(cJSON_IsNull(cJSON_GetObjectItem(rep, "ready_at")));

        /* Cordoned and evicted before the node arrives: the replacements wait Pending where there is no
         * room. */
        set_time(s, 1);
        cordon(s, "spot-a", true);
        char names[8][64];
        assert_int_equal(find_pods(s, "shop", "checkout", "spot-a", false, names, 8), 6);
        int ok = 0;
        for (int i = 0; i < 6; i++) {
                _cleanup_(answer_done) struct sim_answer a = { 0 };
                ok += evict(s, "shop", names[i], &a) == 201;
        }
        assert_int_equal(ok, 3);
        /* spot-b had room for one (1.9 CPU free), the other two wait. */
        assert_int_equal(find_pods(s, "shop", "checkout", "spot-b", false, NULL, 0), 7);
        assert_int_equal(find_pods(s, "shop", "checkout", "", false, NULL, 0), 2);
        set_time(s, 45);
        assert_int_equal(sim_node_count(s), 3);
        const char *name = sim_node_name(s, 2);
        assert_string_equal(sim_node_instance_id(s, 2), id);
        assert_string_equal(sim_node_zone(s, 2), "us-east-1c");
        _cleanup_(cjson_freep) cJSON *node = get(s, SIM_NODE, NULL, name);
        assert_non_null(node);
        const cJSON *labels = at(node, "metadata.labels");
        assert_string_equal(
            cJSON_GetStringValue(cJSON_GetObjectItem(labels, "node.kubernetes.io/instance-type")),
            "m5.2xlarge");
        _cleanup_free_ char *pid = strprintf("aws:///us-east-1c/%s", id);
        assert_string_equal(str_at(node, "spec.providerID"), pid);
        /* The DaemonSet runs there, and the Pending pods moved in. */
        assert_int_equal(find_pods(s, "kube-system", "agent", name, false, NULL, 0), 1);
        assert_int_equal(find_pods(s, "shop", "checkout", name, false, NULL, 0), 2);
        assert_int_equal(find_pods(s, "shop", "checkout", "", false, NULL, 0), 0);
        _cleanup_(cjson_freep) cJSON *r1 = sim_result(s);
        rep = cJSON_GetArrayItem(cJSON_GetObjectItem(r1, "replacements"), 0);
        assert_true(cJSON_GetObjectItem(rep, "ready_at")->valuedouble == 45);
        assert_string_equal(str_at(rep, "instance_type"), "m5.2xlarge");
        assert_string_equal(str_at(rep, "zone"), "us-east-1c");
}

static void *cordon_thread(void *arg)
{
        struct sim *s = arg;
        sim_lock(s);
        cordon(s, "b", true);
        sim_unlock(s);
        return NULL;
}

/* sim_wait wakes on a change made by another thread (bounded: the test fails rather than hangs). */
static void test_wait(void **state)
{
        _cleanup_(sim_freep) struct sim *s = mk(SMALL);
        sim_lock(s);
        uint64_t rv = sim_resource_version(s);
        /* Already past: returns at once. */
        sim_wait(s, rv - 1, 60ULL * 1000000ULL);
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, cordon_thread, s), 0);
        uint64_t start = now_monotonic_usec();
        while (sim_resource_version(s) == rv && now_monotonic_usec() - start < 60ULL * 1000000ULL)
                sim_wait(s, rv, 60ULL * 1000000ULL);
        assert_true(sim_resource_version(s) > rv);
        sim_unlock(s);
        assert_int_equal(pthread_join(th, NULL), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_seed504_world),
                cmocka_unit_test(test_mass_interruption_pdbs),
                cmocka_unit_test(test_eviction),
                cmocka_unit_test(test_eviction_uid_and_two_pdbs),
                cmocka_unit_test(test_replacement_timing),
                cmocka_unit_test(test_scheduler),
                cmocka_unit_test(test_exit_and_termination),
                cmocka_unit_test(test_stopped_pod_readable),
                cmocka_unit_test(test_delete_breach),
                cmocka_unit_test(test_change_log),
                cmocka_unit_test(test_list_filtered),
                cmocka_unit_test(test_list_pods_part),
                cmocka_unit_test(test_large_world_log),
                cmocka_unit_test(test_node_patch),
                cmocka_unit_test(test_cordon_accounting),
                cmocka_unit_test(test_reboot),
                cmocka_unit_test(test_render_and_leases),
                cmocka_unit_test(test_wait),
                cmocka_unit_test(test_launch),
                cmocka_unit_test(test_asg_launch),
                cmocka_unit_test(test_options_and_clock),
                cmocka_unit_test(test_seed504_kubectl_drain),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
