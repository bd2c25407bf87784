/* controller/admission: the eviction webhook's decision (own pod allowed, another node's pod denied, an
 * unknown pod, a token without the node claim, another user not matched) and the AdmissionReview v1 it
 * answers with. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "spotdrain/admission.h"

#define AGENT "system:serviceaccount:spotdrain:spotdrain-agent"

static char *agents[] = { AGENT, NULL };

/* The cluster's pods as the controller's informer knows them. */
static const struct {
        const char *ns, *name, *node;
} pods[] = {
        { "shop", "web-a", "spot-a" },
        { "shop", "web-b", "spot-b" },
        { "shop", "web-p", NULL }, /* pending: bound to no node */
};

struct lookup {
        bool synced;
        unsigned calls;
};

static int pod_node(void *userdata, const char *ns, const char *name, const char **ret_node)
{
        struct lookup *l = userdata;

        l->calls++;
        if (!l->synced)
                return -EAGAIN;
        for (size_t i = 0; i < sizeof(pods) / sizeof(pods[0]); i++)
                if (strcmp(pods[i].ns, ns) == 0 && strcmp(pods[i].name, name) == 0) {
                        *ret_node = pods[i].node;
                        return 1;
                }
        return 0;
}

/* An AdmissionRequest as kube-apiserver sends it for POST .../pods/NAME/eviction. nodes: the token's
 * node-name claim values, NULL for a token without extra. */
static cJSON *eviction(const char *user, const char *const *nodes, size_t n_nodes, const char *ns,
                       const char *name)
{
        char buf[2048];
        int len = snprintf(
            buf, sizeof(buf),
            "{\"uid\":\"705ab4f5-6393-11e8-b7cc-42010a800002\","
            "\"kind\":{\"group\":\"policy\",\"version\":\"v1\",\"kind\":\"Eviction\"},"
            "\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\"},\"subResource\":"
            "\"eviction\","
            "\"requestKind\":{\"group\":\"policy\",\"version\":\"v1\",\"kind\":\"Eviction\"},"
            "\"requestResource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\"},"
            "\"requestSubResource\":\"eviction\",\"name\":\"%s\",\"namespace\":\"%s\",\"operation\":"
            "\"CREATE\","
            "\"userInfo\":{\"username\":\"%s\",\"uid\":\"u1\",\"groups\":[\"system:serviceaccounts\"]}}",
            name, ns, user);
        cJSON *req, *extra, *claim;

        assert_true(len > 0 && (size_t)len < sizeof(buf));
        req = cJSON_Parse(buf);
        assert_non_null(req);
        if (nodes) {
                extra = cJSON_AddObjectToObject(cJSON_GetObjectItem(req, "userInfo"), "extra");
                claim = cJSON_AddArrayToObject(extra, ADMISSION_NODE_CLAIM);
                for (size_t i = 0; i < n_nodes; i++)
                        cJSON_AddItemToArray(claim, cJSON_CreateString(nodes[i]));
        }
        return req;
}

static struct admission_decision decide(cJSON *req, bool synced, unsigned *calls)
{
        struct lookup l = { .synced = synced };
        struct admission_decision d;

        admission_decide(req, agents, pod_node, &l, &d);
        cJSON_Delete(req);
        if (calls)
                *calls = l.calls;
        return d;
}

static const char *const on_a[] = { "spot-a" };

static void test_own_pod_allowed(void **state)
{
        struct admission_decision d = decide(eviction(AGENT, on_a, 1, "shop", "web-a"), true, NULL);

        assert_int_equal(d.verdict, ADMISSION_ALLOWED);
        assert_int_equal(d.deny, ADMISSION_DENY_NONE);
        assert_string_equal(d.node, "spot-a");
        assert_string_equal(d.pod_node, "spot-a");
}

static void test_other_node_denied(void **state)
{
        struct admission_decision d = decide(eviction(AGENT, on_a, 1, "shop", "web-b"), true, NULL);

        assert_int_equal(d.verdict, ADMISSION_DENIED);
        assert_int_equal(d.deny, ADMISSION_DENY_OTHER_NODE);
        assert_string_equal(d.pod_node, "spot-b");
        assert_non_null(strstr(d.message, "may not evict pod shop/web-b, which is bound to node spot-b"));

        /* A pod bound to no node is not the agent's either. */
        d = decide(eviction(AGENT, on_a, 1, "shop", "web-p"), true, NULL);
        assert_int_equal(d.verdict, ADMISSION_DENIED);
        assert_int_equal(d.deny, ADMISSION_DENY_OTHER_NODE);
        assert_non_null(strstr(d.message, "bound to no node"));

        /* The same name in another namespace is another pod. */
        d = decide(eviction(AGENT, on_a, 1, "other", "web-a"), true, NULL);
        assert_int_equal(d.verdict, ADMISSION_DENIED);
        assert_int_equal(d.deny, ADMISSION_DENY_UNKNOWN_POD);
}

static void test_unknown_pod_denied(void **state)
{
        struct admission_decision d = decide(eviction(AGENT, on_a, 1, "shop", "ghost"), true, NULL);

        assert_int_equal(d.verdict, ADMISSION_DENIED);
        assert_int_equal(d.deny, ADMISSION_DENY_UNKNOWN_POD);
        assert_non_null(strstr(d.message, "knows no pod shop/ghost"));

        /* Before the pod list is complete nothing is known either way: denied, the agent retries. */
        d = decide(eviction(AGENT, on_a, 1, "shop", "web-a"), false, NULL);
        assert_int_equal(d.verdict, ADMISSION_DENIED);
        assert_int_equal(d.deny, ADMISSION_DENY_NOT_SYNCED);
}

static void test_no_claim_denied(void **state)
{
        static const char *const two[] = { "spot-a", "spot-b" };
        static const char *const empty[] = { "" };
        unsigned calls;
        struct admission_decision d = decide(eviction(AGENT, NULL, 0, "shop", "web-a"), true, &calls);

        assert_int_equal(d.verdict, ADMISSION_DENIED);
        assert_int_equal(d.deny, ADMISSION_DENY_NO_CLAIM);
        assert_int_equal(calls, 0); /* decided before any lookup */
        assert_non_null(strstr(d.message, "does not name one node"));

        d = decide(eviction(AGENT, on_a, 0, "shop", "web-a"), true, NULL); /* the claim, no value */
        assert_int_equal(d.deny, ADMISSION_DENY_NO_CLAIM);
        d = decide(eviction(AGENT, two, 2, "shop", "web-a"), true, NULL);
        assert_int_equal(d.deny, ADMISSION_DENY_NO_CLAIM);
        d = decide(eviction(AGENT, empty, 1, "shop", "web-a"), true, NULL);
        assert_int_equal(d.deny, ADMISSION_DENY_NO_CLAIM);

        /* An agent's request that names no pod. */
        d = decide(eviction(AGENT, on_a, 1, "", "web-a"), true, NULL);
        assert_int_equal(d.verdict, ADMISSION_DENIED);
        assert_int_equal(d.deny, ADMISSION_DENY_MALFORMED);
}

static void test_other_user_not_matched(void **state)
{
        unsigned calls;
        struct admission_decision d;

        /* The controller, an administrator, an agent of another release: not judged, whatever they evict. */
        d = decide(
            eviction("system:serviceaccount:spotdrain:spotdrain-controller", NULL, 0, "shop", "web-b"), true,
            &calls);
        assert_int_equal(d.verdict, ADMISSION_NOT_MATCHED);
        assert_int_equal(calls, 0);
        d = decide(eviction("system:serviceaccount:other:spotdrain-agent", on_a, 1, "shop", "web-b"), true,
                   NULL);
        assert_int_equal(d.verdict, ADMISSION_NOT_MATCHED);
        d = decide(eviction("admin", NULL, 0, "shop", "web-b"), true, NULL);
        assert_int_equal(d.verdict, ADMISSION_NOT_MATCHED);

        /* The agent's other requests are the admission policy's, not this webhook's. */
        cJSON *req = eviction(AGENT, on_a, 1, "shop", "web-b");
        cJSON_ReplaceItemInObject(req, "subResource", cJSON_CreateString("status"));
        d = decide(req, true, NULL);
        assert_int_equal(d.verdict, ADMISSION_NOT_MATCHED);
        req = eviction(AGENT, on_a, 1, "shop", "web-b");
        cJSON_DeleteItemFromObject(req, "subResource");
        d = decide(req, true, NULL);
        assert_int_equal(d.verdict, ADMISSION_NOT_MATCHED);
        req = eviction(AGENT, on_a, 1, "shop", "web-b");
        cJSON_ReplaceItemInObject(req, "operation", cJSON_CreateString("DELETE"));
        d = decide(req, true, NULL);
        assert_int_equal(d.verdict, ADMISSION_NOT_MATCHED);

        /* An empty list of agents judges no one. */
        struct lookup l = { .synced = true };
        char *none[] = { NULL };
        req = eviction(AGENT, on_a, 1, "shop", "web-b");
        admission_decide(req, none, pod_node, &l, &d);
        cJSON_Delete(req);
        assert_int_equal(d.verdict, ADMISSION_NOT_MATCHED);
}

/* The whole review in and out, as the API server sees it. */
static cJSON *review(cJSON *req, bool synced, int *ret, const char **error)
{
        struct lookup l = { .synced = synced };
        cJSON *in = cJSON_CreateObject(), *out;
        char *body, *json = NULL;

        cJSON_AddStringToObject(in, "apiVersion", "admission.k8s.io/v1");
        cJSON_AddStringToObject(in, "kind", "AdmissionReview");
        cJSON_AddItemToObject(in, "request", req);
        body = cJSON_PrintUnformatted(in);
        cJSON_Delete(in);
        *ret = admission_review(body, strlen(body), agents, pod_node, &l, &json, NULL, error);
        free(body);
        if (*ret < 0)
                return NULL;
        out = cJSON_Parse(json);
        free(json);
        assert_non_null(out);
        return out;
}

static void test_review_answer(void **state)
{
        const char *error = NULL;
        cJSON *out, *resp, *status;
        int r;

        out = review(eviction(AGENT, on_a, 1, "shop", "web-b"), true, &r, &error);
        assert_int_equal(r, 0);
        assert_string_equal(cJSON_GetObjectItem(out, "apiVersion")->valuestring, "admission.k8s.io/v1");
        assert_string_equal(cJSON_GetObjectItem(out, "kind")->valuestring, "AdmissionReview");
        resp = cJSON_GetObjectItem(out, "response");
        assert_string_equal(cJSON_GetObjectItem(resp, "uid")->valuestring,
                            "705ab4f5-6393-11e8-b7cc-42010a800002");
        assert_true(cJSON_IsFalse(cJSON_GetObjectItem(resp, "allowed")));
        status = cJSON_GetObjectItem(resp, "status");
        assert_int_equal(cJSON_GetObjectItem(status, "code")->valueint, 403);
        assert_string_equal(cJSON_GetObjectItem(status, "reason")->valuestring, "Forbidden");
        assert_non_null(strstr(cJSON_GetObjectItem(status, "message")->valuestring, "shop/web-b"));
        cJSON_Delete(out);

        out = review(eviction(AGENT, on_a, 1, "shop", "web-a"), true, &r, &error);
        resp = cJSON_GetObjectItem(out, "response");
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(resp, "allowed")));
        assert_null(cJSON_GetObjectItem(resp, "status"));
        cJSON_Delete(out);

        out = review(eviction("admin", NULL, 0, "shop", "web-b"), true, &r, &error);
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(out, "response"), "allowed")));
        cJSON_Delete(out);
}

static void test_review_malformed(void **state)
{
        static const char *const bodies[] = {
                "",
                "not json",
                "{\"apiVersion\":\"admission.k8s.io/"
                "v1beta1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"x\"}}",
                "{\"apiVersion\":\"admission.k8s.io/"
                "v1\",\"kind\":\"TokenReview\",\"request\":{\"uid\":\"x\"}}",
                "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}",
                "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{}}",
                "{\"apiVersion\":\"admission.k8s.io/"
                "v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"\"}}",
                "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":[1]}",
        };
        struct lookup l = { .synced = true };

        for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
                const char *error = NULL;
                char *json = NULL;
                assert_int_equal(admission_review(bodies[i], strlen(bodies[i]), agents, pod_node, &l, &json,
                                                  NULL, &error),
                                 -EINVAL);
                assert_null(json);
                assert_non_null(error);
        }
        assert_int_equal(l.calls, 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_own_pod_allowed),        cmocka_unit_test(test_other_node_denied),
                cmocka_unit_test(test_unknown_pod_denied),     cmocka_unit_test(test_no_claim_denied),
                cmocka_unit_test(test_other_user_not_matched), cmocka_unit_test(test_review_answer),
                cmocka_unit_test(test_review_malformed),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
