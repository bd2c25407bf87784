/* Kubernetes object parsers (pods, nodes, PDBs, selectors) and path/query helpers on JSON samples. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "drain/drain_internal.h"
#include "spotdrain/kube.h"

static cJSON *parse(const char *s)
{
        cJSON *j = cJSON_Parse(s);
        assert_non_null(j);
        return j;
}

/* A ReplicaSet pod as kube-apiserver answers it (trimmed). */
static const char pod_web[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web-7d4b9-aaaaa\",\"namespace\":"
    "\"default\","
    "\"uid\":\"0b7c-1\",\"resourceVersion\":\"1234\",\"creationTimestamp\":\"2026-11-30T05:50:00Z\","
    "\"labels\":{\"app\":\"web\",\"pod-template-hash\":\"7d4b9\"},"
    "\"annotations\":{\"karpenter.sh/do-not-disrupt\":\"true\"},"
    "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"web-7d4b9\","
    "\"uid\":\"rs-1\",\"controller\":true,\"blockOwnerDeletion\":true}]},"
    "\"spec\":{\"nodeName\":\"node1\",\"priority\":1000,\"priorityClassName\":\"high\","
    "\"terminationGracePeriodSeconds\":45,\"volumes\":[{\"name\":\"cache\",\"emptyDir\":{}},"
    "{\"name\":\"kube-api-access\",\"projected\":{}}],\"containers\":[{\"name\":\"web\",\"image\":\"nginx\"}"
    "]},"
    "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Initialized\",\"status\":\"True\"},"
    "{\"type\":\"Ready\",\"status\":\"True\",\"lastTransitionTime\":\"2026-11-30T05:50:12Z\"}]}}";

static void test_pod(void **state)
{
        cJSON *j = parse(pod_web);
        struct kube_pod p;
        assert_int_equal(kube_pod_parse(j, &p), 0);
        cJSON_Delete(j);
        assert_string_equal(p.namespace, "default");
        assert_string_equal(p.name, "web-7d4b9-aaaaa");
        assert_string_equal(p.uid, "0b7c-1");
        assert_string_equal(p.node_name, "node1");
        assert_string_equal(p.phase, "Running");
        assert_true(p.ready);
        assert_int_equal(p.deletion_usec, 0);
        assert_string_equal(p.owner_kind, "ReplicaSet");
        assert_string_equal(p.owner_name, "web-7d4b9");
        assert_true(p.owner_controller);
        assert_true(p.has_priority);
        assert_int_equal(p.priority, 1000);
        assert_string_equal(p.priority_class, "high");
        assert_int_equal(p.grace_seconds, 45);
        assert_true(p.has_emptydir);
        assert_false(p.mirror);
        /* 12 s from creation to Ready: the startup estimate the planner learns from */
        assert_int_equal(p.ready_transition_usec - p.creation_usec, 12 * 1000000ULL);
        assert_string_equal(kube_pod_annotation(&p, "karpenter.sh/do-not-disrupt"), "true");
        assert_null(kube_pod_annotation(&p, "nope"));
        assert_string_equal(kube_kv_get(p.labels, p.n_labels, "app"), "web");
        kube_pod_clear(&p);
}

static void test_pod_mirror_deleting_defaults(void **state)
{
        cJSON *j = parse("{\"metadata\":{\"name\":\"kube-proxy-n1\",\"namespace\":\"kube-system\","
                         "\"deletionTimestamp\":\"2026-11-30T06:00:30Z\","
                         "\"annotations\":{\"kubernetes.io/config.mirror\":\"abc\"},"
                         "\"ownerReferences\":[{\"kind\":\"Node\",\"name\":\"n1\"}]},"
                         "\"spec\":{},\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\","
                         "\"status\":\"False\"}]}}");
        struct kube_pod p;
        assert_int_equal(kube_pod_parse(j, &p), 0);
        cJSON_Delete(j);
        assert_true(p.mirror);
        assert_false(p.ready);
        assert_int_not_equal(p.deletion_usec, 0);
        assert_int_equal(p.grace_seconds, 30);
        /* No deletionGracePeriodSeconds: the delete was asked the spec's grace before the timestamp. */
        assert_int_equal(p.deletion_grace_seconds, -1);
        assert_int_equal(p.deleted_usec, p.deletion_usec - 30 * 1000000ULL);
        kube_pod_clear(&p);
        j = parse("{\"metadata\":{\"name\":\"a\",\"deletionTimestamp\":\"2026-11-30T06:00:30Z\","
                  "\"deletionGracePeriodSeconds\":5},\"spec\":{\"terminationGracePeriodSeconds\":60}}");
        assert_int_equal(kube_pod_parse(j, &p), 0);
        cJSON_Delete(j);
        assert_int_equal(p.deletion_grace_seconds, 5);
        assert_int_equal(p.deleted_usec, p.deletion_usec - 5 * 1000000ULL);
        kube_pod_clear(&p);
        j = parse("{\"metadata\":{\"name\":\"b\"}}");
        assert_int_equal(kube_pod_parse(j, &p), 0);
        cJSON_Delete(j);
        assert_int_equal(p.deleted_usec, 0);
        kube_pod_clear(&p);
        j = parse("{\"metadata\":{\"name\":\"kube-proxy-n1\",\"namespace\":\"kube-system\","
                  "\"deletionTimestamp\":\"2026-11-30T06:00:30Z\","
                  "\"annotations\":{\"kubernetes.io/config.mirror\":\"abc\"},"
                  "\"ownerReferences\":[{\"kind\":\"Node\",\"name\":\"n1\"}]},"
                  "\"spec\":{},\"status\":{\"phase\":\"Running\"}}");
        assert_int_equal(kube_pod_parse(j, &p), 0);
        cJSON_Delete(j);
        assert_false(p.has_priority);
        assert_false(p.has_emptydir);
        assert_null(p.node_name);
        assert_string_equal(p.owner_kind, "Node");
        assert_false(p.owner_controller);
        kube_pod_clear(&p);

        j = parse("{\"metadata\":{}}");
        assert_int_equal(kube_pod_parse(j, &p), -EINVAL);
        cJSON_Delete(j);
}

/* The object a DELETED event carries once the kubelet confirmed a graceful stop (kube-apiserver 1.36, seen
 * on the real control plane tier): its final delete of grace 0 would move deletionTimestamp back to the
 * first delete's time, but kube-apiserver never moves one into the past, so it is the confirmation's own
 * time (06:00:12), with deletionGracePeriodSeconds 0, and the containers report their end. The grace the
 * stop had is the spec's; it is no forced delete. The same object without the containers' ends (kubectl
 * delete --force of a running pod) is one. */
static void test_pod_confirmed_stop(void **state)
{
        const char *confirmed =
            "{\"metadata\":{\"name\":\"a\",\"deletionTimestamp\":\"2026-11-30T06:00:12Z\","
            "\"deletionGracePeriodSeconds\":0},\"spec\":{\"terminationGracePeriodSeconds\":30},"
            "\"status\":{\"containerStatuses\":[{\"name\":\"app\",\"state\":{\"terminated\":{"
            "\"exitCode\":0,\"finishedAt\":\"2026-11-30T06:00:11Z\"}}},{\"name\":\"side\",\"state\":{"
            "\"terminated\":{\"exitCode\":0,\"finishedAt\":\"2026-11-30T06:00:12Z\"}}}]}}";
        cJSON *j = parse(confirmed);
        struct kube_pod p;
        assert_int_equal(kube_pod_parse(j, &p), 0);
        cJSON_Delete(j);
        assert_int_equal(p.deletion_grace_seconds, 0);
        assert_int_equal(p.deleted_usec, p.deletion_usec);
        assert_int_equal(p.stopped_usec, p.deletion_usec); /* the last container's end */
        assert_int_equal(kube_pod_stop_grace(&p), 30);
        assert_false(kube_pod_force_deleted(&p, p.deleted_usec + 300000));
        kube_pod_clear(&p);
        /* A container still running: forced when gone at once, not when it went 12 s after. */
        j = parse("{\"metadata\":{\"name\":\"f\",\"deletionTimestamp\":\"2026-11-30T06:00:00Z\","
                  "\"deletionGracePeriodSeconds\":0},\"spec\":{\"terminationGracePeriodSeconds\":30},"
                  "\"status\":{\"containerStatuses\":[{\"name\":\"app\",\"state\":{\"terminated\":{"
                  "\"exitCode\":0,\"finishedAt\":\"2026-11-30T06:00:00Z\"}}},{\"name\":\"side\","
                  "\"state\":{\"running\":{\"startedAt\":\"2026-11-30T05:00:00Z\"}}}]}}");
        assert_int_equal(kube_pod_parse(j, &p), 0);
        cJSON_Delete(j);
        assert_int_equal(p.stopped_usec, 0);
        assert_true(kube_pod_force_deleted(&p, p.deleted_usec + 300000));
        assert_false(kube_pod_force_deleted(&p, p.deleted_usec + 12 * 1000000ULL));
        kube_pod_clear(&p);
        /* Still terminating: the grace its delete gave, 5 s, whatever the spec says. */
        j = parse("{\"metadata\":{\"name\":\"b\",\"deletionTimestamp\":\"2026-11-30T06:00:05Z\","
                  "\"deletionGracePeriodSeconds\":5},\"spec\":{\"terminationGracePeriodSeconds\":30}}");
        assert_int_equal(kube_pod_parse(j, &p), 0);
        cJSON_Delete(j);
        assert_int_equal(kube_pod_stop_grace(&p), 5);
        assert_false(kube_pod_force_deleted(&p, p.deleted_usec + 300000));
        kube_pod_clear(&p);
}

/* A Node as kube-apiserver answers it (trimmed: one image, one managedFields entry). */
static const char node_spot[] =
    "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"ip-10-0-1-5.ec2.internal\","
    "\"uid\":\"n-1\",\"resourceVersion\":\"812\",\"labels\":{\"karpenter.sh/capacity-type\":\"spot\","
    "\"topology.kubernetes.io/zone\":\"us-east-1a\"},\"annotations\":{\"a\":\"b\"},"
    "\"managedFields\":[{\"manager\":\"kubelet\",\"operation\":\"Update\",\"apiVersion\":\"v1\","
    "\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:status\":{\"f:images\":{}}}}]},"
    "\"spec\":{\"providerID\":\"aws:///us-east-1a/i-0abcd1234ef567890\",\"unschedulable\":true,"
    "\"taints\":[{\"key\":\"node.kubernetes.io/unschedulable\",\"effect\":\"NoSchedule\"},"
    "{\"key\":\"dedicated\",\"value\":\"ci\",\"effect\":\"NoExecute\"}]},"
    "\"status\":{\"capacity\":{\"cpu\":\"4\",\"memory\":\"16202876Ki\",\"pods\":\"58\"},"
    "\"conditions\":[{\"type\":\"MemoryPressure\",\"status\":\"False\",\"reason\":"
    "\"KubeletHasSufficientMemory\"},{\"type\":\"Ready\",\"status\":\"True\",\"reason\":"
    "\"KubeletReady\",\"message\":\"kubelet is posting ready status\"}],"
    "\"nodeInfo\":{\"kubeletVersion\":\"v1.31.2-eks-94953ac\",\"osImage\":\"Amazon Linux 2023\"},"
    "\"images\":[{\"names\":[\"602401143452.dkr.ecr.us-east-1.amazonaws.com/amazon-k8s-cni@sha256:"
    "9d4c1a2b\"],\"sizeBytes\":45312211}]}}";

static void test_node(void **state)
{
        cJSON *j = parse(node_spot);
        struct kube_node n;
        assert_int_equal(kube_node_parse(j, &n), 0);
        cJSON_Delete(j);
        assert_string_equal(n.name, "ip-10-0-1-5.ec2.internal");
        assert_string_equal(n.instance_id, "i-0abcd1234ef567890");
        assert_true(n.unschedulable);
        assert_true(n.ready);
        assert_int_equal(n.n_taints, 2);
        assert_string_equal(n.taints[1].key, "dedicated");
        assert_string_equal(n.taints[1].value, "ci");
        assert_string_equal(n.taints[1].effect, "NoExecute");
        assert_null(n.taints[0].value);
        assert_string_equal(kube_kv_get(n.labels, n.n_labels, "karpenter.sh/capacity-type"), "spot");
        assert_string_equal(kube_kv_get(n.annotations, n.n_annotations, "a"), "b");
        kube_node_clear(&n);

        j = parse(
            "{\"metadata\":{\"name\":\"kind-worker\"},\"spec\":{\"providerID\":\"kind://docker/kind/w\"}}");
        assert_int_equal(kube_node_parse(j, &n), 0);
        cJSON_Delete(j);
        assert_null(n.instance_id);
        assert_false(n.ready);
        assert_false(n.unschedulable);
        kube_node_clear(&n);
}

/* Equal, or both absent. */
static void assert_same_str(const char *a, const char *b)
{
        assert_int_equal(a == NULL, b == NULL);
        if (a)
                assert_string_equal(a, b);
}

static void assert_kv_equal(const struct kube_kv *a, size_t na, const struct kube_kv *b, size_t nb)
{
        assert_int_equal(na, nb);
        for (size_t i = 0; i < na; i++)
                assert_same_str(kube_kv_get(b, nb, a[i].key), a[i].value);
}

/* kube_node_fields keeps all that kube_node_parse() reads of a Node (the informers of the controller and
 * the provisioner keep only those), and drops the rest of its status. */
static void test_node_fields(void **state)
{
        cJSON *whole = parse(node_spot);
        cJSON *kept = kube_object_prune(whole, kube_node_fields);
        assert_non_null(kept);
        struct kube_node a, b;
        assert_int_equal(kube_node_parse(whole, &a), 0);
        assert_int_equal(kube_node_parse(kept, &b), 0);
        assert_same_str(b.name, a.name);
        assert_same_str(b.uid, a.uid);
        assert_same_str(b.provider_id, a.provider_id);
        assert_same_str(b.instance_id, a.instance_id);
        assert_int_equal(b.unschedulable, a.unschedulable);
        assert_true(a.ready && b.ready);
        assert_int_equal(b.n_taints, a.n_taints);
        for (size_t i = 0; i < a.n_taints; i++) {
                assert_same_str(b.taints[i].key, a.taints[i].key);
                assert_same_str(b.taints[i].value, a.taints[i].value);
                assert_same_str(b.taints[i].effect, a.taints[i].effect);
        }
        assert_kv_equal(a.labels, a.n_labels, b.labels, b.n_labels);
        assert_kv_equal(a.annotations, a.n_annotations, b.annotations, b.n_annotations);
        kube_node_clear(&a);
        kube_node_clear(&b);
        const cJSON *status = cJSON_GetObjectItemCaseSensitive(kept, "status");
        assert_null(cJSON_GetObjectItemCaseSensitive(status, "images"));
        assert_null(cJSON_GetObjectItemCaseSensitive(status, "nodeInfo"));
        assert_null(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(kept, "metadata"),
                                                     "managedFields"));
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(status, "conditions")), 1);
        cJSON_Delete(kept);
        cJSON_Delete(whole);
}

static void test_pdb_and_selector(void **state)
{
        cJSON *j =
            parse("{\"apiVersion\":\"policy/v1\",\"kind\":\"PodDisruptionBudget\","
                  "\"metadata\":{\"name\":\"web-pdb\",\"namespace\":\"default\",\"generation\":3},"
                  "\"spec\":{\"maxUnavailable\":\"25%\",\"unhealthyPodEvictionPolicy\":\"AlwaysAllow\","
                  "\"selector\":{\"matchLabels\":{\"app\":\"web\"},\"matchExpressions\":["
                  "{\"key\":\"tier\",\"operator\":\"In\",\"values\":[\"front\",\"edge\"]},"
                  "{\"key\":\"canary\",\"operator\":\"DoesNotExist\"}]}},"
                  "\"status\":{\"observedGeneration\":3,\"currentHealthy\":8,\"desiredHealthy\":6,"
                  "\"expectedPods\":8,\"disruptionsAllowed\":2}}");
        struct kube_pdb pdb;
        assert_int_equal(kube_pdb_parse(j, &pdb), 0);
        cJSON_Delete(j);
        assert_string_equal(pdb.name, "web-pdb");
        assert_true(pdb.max_unavailable.set);
        assert_true(pdb.max_unavailable.percent);
        assert_int_equal(pdb.max_unavailable.value, 25);
        assert_false(pdb.min_available.set);
        assert_string_equal(pdb.unhealthy_pod_eviction_policy, "AlwaysAllow");
        assert_int_equal(pdb.generation, 3);
        assert_int_equal(pdb.observed_generation, 3);
        assert_int_equal(pdb.current_healthy, 8);
        assert_int_equal(pdb.desired_healthy, 6);
        assert_int_equal(pdb.expected_pods, 8);
        assert_int_equal(pdb.disruptions_allowed, 2);

        struct kube_kv front[] = { { (char *)"app", (char *)"web" }, { (char *)"tier", (char *)"front" } };
        struct kube_kv canary[] = { { (char *)"app", (char *)"web" },
                                    { (char *)"tier", (char *)"edge" },
                                    { (char *)"canary", (char *)"1" } };
        struct kube_kv back[] = { { (char *)"app", (char *)"web" }, { (char *)"tier", (char *)"back" } };
        struct kube_kv other[] = { { (char *)"app", (char *)"api" }, { (char *)"tier", (char *)"front" } };
        assert_true(kube_selector_matches(&pdb.selector, front, 2));
        assert_false(kube_selector_matches(&pdb.selector, canary, 3));
        assert_false(kube_selector_matches(&pdb.selector, back, 2));
        assert_false(kube_selector_matches(&pdb.selector, other, 2));

        cJSON *pj = parse(pod_web);
        struct kube_pod pod;
        assert_int_equal(kube_pod_parse(pj, &pod), 0);
        cJSON_Delete(pj);
        /* the sample pod has no tier label */
        assert_false(kube_pdb_matches_pod(&pdb, &pod));
        kube_pdb_clear(&pdb);

        j = parse("{\"metadata\":{\"name\":\"all\",\"namespace\":\"default\"},\"spec\":{\"minAvailable\":2,"
                  "\"selector\":{}}}");
        assert_int_equal(kube_pdb_parse(j, &pdb), 0);
        cJSON_Delete(j);
        assert_false(pdb.min_available.percent);
        assert_int_equal(pdb.min_available.value, 2);
        assert_true(kube_pdb_matches_pod(&pdb, &pod)); /* an empty selector matches every pod */
        free(pod.namespace);
        pod.namespace = strdup("other");
        assert_false(kube_pdb_matches_pod(&pdb, &pod));
        kube_pdb_clear(&pdb);

        j = parse(
            "{\"metadata\":{\"name\":\"nil\",\"namespace\":\"other\"},\"spec\":{\"minAvailable\":\"50%\"}}");
        assert_int_equal(kube_pdb_parse(j, &pdb), 0);
        cJSON_Delete(j);
        assert_true(pdb.min_available.percent);
        assert_false(kube_pdb_matches_pod(&pdb, &pod)); /* a nil selector matches nothing */
        kube_pdb_clear(&pdb);
        kube_pod_clear(&pod);

        j = parse("{\"metadata\":{\"name\":\"bad\"},\"spec\":{\"selector\":{\"matchExpressions\":"
                  "[{\"key\":\"a\",\"operator\":\"Near\"}]}}}");
        assert_int_equal(kube_pdb_parse(j, &pdb), -EINVAL);
        cJSON_Delete(j);
        j = parse("{\"metadata\":{\"name\":\"bad\"},\"spec\":{\"minAvailable\":\"ten\"}}");
        assert_int_equal(kube_pdb_parse(j, &pdb), -EINVAL);
        cJSON_Delete(j);
}

static void test_not_in_and_exists(void **state)
{
        cJSON *j =
            parse("{\"matchExpressions\":[{\"key\":\"env\",\"operator\":\"NotIn\",\"values\":[\"prod\"]},"
                  "{\"key\":\"app\",\"operator\":\"Exists\"}]}");
        struct kube_selector s;
        assert_int_equal(kube_selector_parse(j, &s), 0);
        cJSON_Delete(j);
        struct kube_kv dev[] = { { (char *)"app", (char *)"x" }, { (char *)"env", (char *)"dev" } };
        struct kube_kv prod[] = { { (char *)"app", (char *)"x" }, { (char *)"env", (char *)"prod" } };
        struct kube_kv noenv[] = { { (char *)"app", (char *)"x" } };
        struct kube_kv noapp[] = { { (char *)"env", (char *)"dev" } };
        assert_true(kube_selector_matches(&s, dev, 2));
        assert_false(kube_selector_matches(&s, prod, 2));
        assert_true(kube_selector_matches(&s, noenv, 1));
        assert_false(kube_selector_matches(&s, noapp, 1));
        kube_selector_clear(&s);
}

/* kubectl's --selector syntax, as drain.skip_pod_selector takes it. */
static void test_selector_text(void **state)
{
        struct kube_kv web[] = { { (char *)"app", (char *)"web" }, { (char *)"tier", (char *)"front" } };
        struct kube_kv db[] = { { (char *)"app", (char *)"db" }, { (char *)"keep", (char *)"" } };
        struct kube_kv none[] = { { (char *)"other", (char *)"x" } };
        static const struct {
                const char *text;
                bool web, db, none;
        } cases[] = {
                { "", true, true, true },
                { "app=web", true, false, false },
                { " app == web ", true, false, false },
                { "app!=web", false, true, true },
                { "app in (web, db),tier notin (back)", true, true, false },
                { "app notin (web)", false, true, true },
                { "keep", false, true, false },
                { "!keep", true, false, true },
                { "app,!tier", false, true, false },
                { "example.com/team=a-b_c.d", false, false, false },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct kube_selector s;
                assert_int_equal(kube_selector_parse_text(cases[i].text, &s), 0);
                assert_int_equal(kube_selector_matches(&s, web, 2), cases[i].web);
                assert_int_equal(kube_selector_matches(&s, db, 2), cases[i].db);
                assert_int_equal(kube_selector_matches(&s, none, 1), cases[i].none);
                kube_selector_clear(&s);
        }
        /* (web,) is allowed, as Kubernetes allows it: the set holds "" too. */
        static const char *const bad[] = { "=web",      "app=web,",     "app in web", "app in (web",
                                           "app ~ web", "app=web tier", "," };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct kube_selector s = { 0 };
                assert_int_equal(kube_selector_parse_text(bad[i], &s), -EINVAL);
                assert_false(s.present);
        }
}

static void test_paths_and_escaping(void **state)
{
        char *p = kube_path(NULL, "v1", "shop", "pods", "web-1", "eviction");
        assert_string_equal(p, "/api/v1/namespaces/shop/pods/web-1/eviction");
        free(p);
        p = kube_path("policy", "v1", NULL, "poddisruptionbudgets", NULL, NULL);
        assert_string_equal(p, "/apis/policy/v1/poddisruptionbudgets");
        free(p);
        p = kube_path("", "v1", NULL, "nodes", "n1", NULL);
        assert_string_equal(p, "/api/v1/nodes/n1");
        free(p);
        p = kube_query_escape("spec.nodeName=n1,status.phase!=Succeeded");
        assert_string_equal(p, "spec.nodeName%3Dn1%2Cstatus.phase%21%3DSucceeded");
        free(p);

        cJSON *j = parse("{\"metadata\":{\"resourceVersion\":\"9\",\"name\":\"x\"},\"items\":[]}");
        assert_string_equal(kube_object_rv(j), "9");
        assert_string_equal(kube_object_str(j, "metadata.name"), "x");
        assert_null(kube_object_str(j, "metadata.nope"));
        assert_non_null(kube_list_items(j));
        cJSON_Delete(j);
}

static void test_evict_outcome_mapping(void **state)
{
        struct kube_result r = { .http_status = 500, .message = (char *)"POST x: 500 internal error" };
        assert_int_equal(kube_evict_outcome(&r), KUBE_EVICT_ERROR);
        r.message =
            (char
                 *)"This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
                   "support.";
        assert_int_equal(kube_evict_outcome(&r), KUBE_EVICT_MULTIPLE);
        r.http_status = 409;
        assert_int_equal(kube_evict_outcome(&r), KUBE_EVICT_CONFLICT);
        r.http_status = 201;
        assert_int_equal(kube_evict_outcome(&r), KUBE_EVICT_EVICTED);
        r.http_status = 0;
        assert_int_equal(kube_evict_outcome(&r), KUBE_EVICT_ERROR);
}

/* Pruning keeps the listed fields (creating their parents), the identity fields always, and nothing else. */
static void test_prune(void **state)
{
        cJSON *node = parse(
            "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"n1\",\"uid\":\"u1\","
            "\"resourceVersion\":\"7\",\"labels\":{\"a\":\"b\"},\"managedFields\":[{\"x\":1}]},"
            "\"spec\":{\"providerID\":\"aws:///us-east-1a/i-1\",\"taints\":[{\"key\":\"k\"}]},"
            "\"status\":{\"images\":[{\"names\":[\"big\"]}],\"nodeInfo\":{\"kubeletVersion\":\"1\"}}}");
        static const char *const keep[] = {
                "spec.providerID", "metadata.labels",      "status.nodeInfo.kubeletVersion",
                "spec.missing",    "metadata.name.deeper", NULL
        };
        cJSON *p = kube_object_prune(node, keep);
        assert_non_null(p);
        assert_string_equal(kube_object_str(p, "kind"), "Node");
        assert_string_equal(kube_object_str(p, "metadata.name"), "n1");
        assert_string_equal(kube_object_str(p, "metadata.uid"), "u1");
        assert_string_equal(kube_object_rv(p), "7");
        assert_string_equal(kube_object_str(p, "metadata.labels.a"), "b");
        assert_string_equal(kube_object_str(p, "spec.providerID"), "aws:///us-east-1a/i-1");
        assert_string_equal(kube_object_str(p, "status.nodeInfo.kubeletVersion"), "1");
        /* Not listed: gone. */
        assert_null(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "metadata"),
                                                     "managedFields"));
        assert_null(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "spec"), "taints"));
        assert_null(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "status"), "images"));
        assert_null(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "spec"), "missing"));
        /* A pruned object pruned again with the same list is the same. */
        cJSON *again = kube_object_prune(p, keep);
        assert_true(cJSON_Compare(p, again, true));
        /* An array filtered by a field of its elements. */
        cJSON *pod =
            parse("{\"metadata\":{\"name\":\"p\"},\"status\":{\"conditions\":[{\"type\":\"Initialized\","
                  "\"status\":\"True\"},{\"type\":\"Ready\",\"status\":\"False\"},{\"status\":\"True\"}]}}");
        static const char *const ready[] = { "status.conditions[type=Ready]", "status.phase[x=y]", NULL };
        cJSON *pp = kube_object_prune(pod, ready);
        const cJSON *conds =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pp, "status"), "conditions");
        assert_int_equal(cJSON_GetArraySize(conds), 1);
        assert_string_equal(kube_object_str(cJSON_GetArrayItem(conds, 0), "status"), "False");
        assert_null(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pp, "status"), "phase"));
        /* An array's elements with some of their fields. */
        cJSON *cs = parse("{\"status\":{\"containerStatuses\":[{\"name\":\"app\",\"state\":{\"terminated\":"
                          "{\"exitCode\":0}},\"image\":\"big\",\"imageID\":\"sha\"},7,{\"image\":\"x\"}]}}");
        static const char *const some[] = { "status.containerStatuses[]{name,state,ready}",
                                            "status.other[]{a", NULL };
        cJSON *pcs = kube_object_prune(cs, some);
        const cJSON *kept = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pcs, "status"),
                                                             "containerStatuses");
        assert_int_equal(cJSON_GetArraySize(kept), 2); /* the number is no object */
        const cJSON *app = cJSON_GetArrayItem(kept, 0);
        assert_string_equal(kube_object_str(app, "name"), "app");
        assert_non_null(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(app, "state"), "terminated"),
            "exitCode"));
        assert_null(cJSON_GetObjectItemCaseSensitive(app, "image"));
        assert_null(cJSON_GetObjectItemCaseSensitive(app, "imageID"));
        assert_null(cJSON_GetArrayItem(cJSON_GetArrayItem(kept, 1), 0)); /* {} */
        cJSON *pcs2 = kube_object_prune(pcs, some);
        assert_true(cJSON_Compare(pcs, pcs2, true));
        cJSON_Delete(pcs2);
        cJSON_Delete(pcs);
        cJSON_Delete(cs);
        struct kube_pod kp = { 0 };
        assert_int_equal(kube_pod_parse(pp, &kp), 0);
        assert_false(kp.ready);
        kube_pod_clear(&kp);
        cJSON_Delete(pp);
        cJSON_Delete(pod);
        /* Nothing listed: the identity only. */
        cJSON *bare = kube_object_prune(node, NULL);
        assert_null(cJSON_GetObjectItemCaseSensitive(bare, "spec"));
        assert_string_equal(kube_object_str(bare, "metadata.name"), "n1");
        cJSON_Delete(bare);
        cJSON_Delete(again);
        cJSON_Delete(p);
        cJSON_Delete(node);
}

/* The pod garbage collector's mark on the pods of a node that is no more: killed when something still ran;
 * a pod whose containers had all stopped before, or one without the mark, was not. */
static void test_killed_with_node(void **state)
{
        static const char *const gc = "{\"type\":\"DisruptionTarget\",\"status\":\"True\","
                                      "\"reason\":\"DeletionByPodGC\"}";
        static const char *const running = "{\"name\":\"app\",\"state\":{\"running\":{}}}";
        static const char *const stopped = "{\"name\":\"app\",\"state\":{\"terminated\":{\"exitCode\":0}}}";
        static const char *const sigkill =
            "{\"name\":\"app\",\"state\":{\"terminated\":{\"exitCode\":137}}}";
        struct {
                const char *conds, *statuses;
                bool killed;
                int sigkilled;
        } cases[] = {
                { gc, running, true, -1 },
                { gc, "", true, -1 },      /* never reported: it still ran, as far as anyone knows */
                { gc, stopped, false, 0 }, /* it had stopped before its node went */
                { "{\"type\":\"DisruptionTarget\",\"status\":\"True\",\"reason\":\"EvictionByEvictionAPI\"}",
                  running, false, -1 },
                { "{\"type\":\"Ready\",\"status\":\"False\"}", sigkill, false, 1 },
        };
        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
                char text[1024];
                snprintf(
                    text, sizeof(text),
                    "{\"metadata\":{\"name\":\"p\"},\"status\":{\"phase\":\"Failed\",\"conditions\":[%s],"
                    "\"containerStatuses\":[%s]}}",
                    cases[i].conds, cases[i].statuses);
                cJSON *o = parse(text);
                assert_int_equal(kube_pod_killed_with_node(o), cases[i].killed);
                assert_int_equal(kube_pod_sigkilled(o), cases[i].sigkilled);
                cJSON_Delete(o);
        }
}

/* What a drain keeps of each pod (drain_pod_fields) still says whether it has an emptyDir, but not the
 * source of every volume: the service account token volume kube-apiserver adds to every pod is a dozen
 * fields that nothing reads, kept for each pod of each drain. */
static void test_drain_pod_fields(void **state)
{
        cJSON *pod =
            parse("{\"metadata\":{\"name\":\"p\",\"namespace\":\"shop\"},\"spec\":{\"nodeName\":\"n1\","
                  "\"volumes\":[{\"name\":\"scratch\",\"emptyDir\":{\"sizeLimit\":\"1Gi\"}},"
                  "{\"name\":\"kube-api-access-x7k2p\",\"projected\":{\"defaultMode\":420,\"sources\":["
                  "{\"serviceAccountToken\":{\"expirationSeconds\":3607,\"path\":\"token\"}},"
                  "{\"configMap\":{\"name\":\"kube-root-ca.crt\",\"items\":[{\"key\":\"ca.crt\",\"path\":"
                  "\"ca.crt\"}]}},{\"downwardAPI\":{\"items\":[{\"path\":\"namespace\",\"fieldRef\":{"
                  "\"apiVersion\":\"v1\",\"fieldPath\":\"metadata.namespace\"}}]}}]}}]}}");
        cJSON *kept = kube_object_prune(pod, drain_pod_fields);
        assert_non_null(kept);
        struct kube_pod p;
        assert_int_equal(kube_pod_parse(kept, &p), 0);
        assert_true(p.has_emptydir);
        assert_string_equal(p.node_name, "n1");
        kube_pod_clear(&p);
        const cJSON *vols =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(kept, "spec"), "volumes");
        assert_int_equal(cJSON_GetArraySize(vols), 2);
        assert_string_equal(kube_object_str(cJSON_GetArrayItem(vols, 1), "name"), "kube-api-access-x7k2p");
        assert_null(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(vols, 1), "projected"));
        /* Without an emptyDir, none is seen. */
        cJSON_DeleteItemFromArray(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"), "volumes"), 0);
        cJSON *kept2 = kube_object_prune(pod, drain_pod_fields);
        assert_int_equal(kube_pod_parse(kept2, &p), 0);
        assert_false(p.has_emptydir);
        kube_pod_clear(&p);
        cJSON_Delete(kept2);
        cJSON_Delete(kept);
        cJSON_Delete(pod);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_pod),
                cmocka_unit_test(test_pod_mirror_deleting_defaults),
                cmocka_unit_test(test_pod_confirmed_stop),
                cmocka_unit_test(test_node),
                cmocka_unit_test(test_node_fields),
                cmocka_unit_test(test_pdb_and_selector),
                cmocka_unit_test(test_not_in_and_exists),
                cmocka_unit_test(test_selector_text),
                cmocka_unit_test(test_paths_and_escaping),
                cmocka_unit_test(test_evict_outcome_mapping),
                cmocka_unit_test(test_prune),
                cmocka_unit_test(test_drain_pod_fields),
                cmocka_unit_test(test_killed_with_node),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
