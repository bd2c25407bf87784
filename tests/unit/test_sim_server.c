/* The simulator API server's pure pieces: label and field selectors as kube-apiserver reads them, continue
 * tokens, and kubectl 1.32+'s protobuf DeleteOptions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "sim/model.h"
#include "sim/server.h"
#include "sim_fixture.h"
#include "spotdrain/util.h"
#include "spotdrain/yaml.h"

static int labels_match(const char *selector, const char *labels_json)
{
        cJSON *labels = labels_json ? cJSON_Parse(labels_json) : NULL;
        int r = sim_label_selector_match(selector, labels);
        cJSON_Delete(labels);
        return r;
}

static void test_label_equality(void **state)
{
        const char *l = "{\"app\":\"web\",\"tier\":\"front\"}";

        assert_int_equal(labels_match("", l), 1);
        assert_int_equal(labels_match(NULL, NULL), 1);
        assert_int_equal(labels_match("app=web", l), 1);
        assert_int_equal(labels_match("app==web", l), 1);
        assert_int_equal(labels_match("app = web , tier=front", l), 1);
        assert_int_equal(labels_match("app=api", l), 0);
        assert_int_equal(labels_match("app!=web", l), 0);
        assert_int_equal(labels_match("app!=api", l), 1);
        /* != matches objects without the key, as in Kubernetes. */
        assert_int_equal(labels_match("zone!=a", l), 1);
        assert_int_equal(labels_match("app=web,tier=back", l), 0);
        assert_int_equal(labels_match("app=web", NULL), 0);
}

static void test_label_sets_and_existence(void **state)
{
        const char *l = "{\"app\":\"web\",\"example.com/team\":\"a-1\"}";

        assert_int_equal(labels_match("app in (api, web)", l), 1);
        assert_int_equal(labels_match("app in (api)", l), 0);
        assert_int_equal(labels_match("app notin (api,db)", l), 1);
        assert_int_equal(labels_match("app notin (web)", l), 0);
        assert_int_equal(labels_match("zone notin (a)", l), 1);
        assert_int_equal(labels_match("zone in (a)", l), 0);
        assert_int_equal(labels_match("example.com/team", l), 1);
        assert_int_equal(labels_match("zone", l), 0);
        assert_int_equal(labels_match("!zone", l), 1);
        assert_int_equal(labels_match("!app", l), 0);
        assert_int_equal(labels_match("app in (web),!zone,example.com/team=a-1", l), 1);
}

static void test_label_malformed(void **state)
{
        assert_int_equal(labels_match("app in web", NULL), -EINVAL);
        assert_int_equal(labels_match("app in (web", NULL), -EINVAL);
        assert_int_equal(labels_match("=web", NULL), -EINVAL);
        assert_int_equal(labels_match("app=web)", NULL), -EINVAL);
        assert_int_equal(labels_match("!", NULL), -EINVAL);
}

static void test_field_selectors(void **state)
{
        cJSON *pod = cJSON_Parse("{\"metadata\":{\"name\":\"p1\",\"namespace\":\"shop\"},"
                                 "\"spec\":{\"nodeName\":\"spot-a\",\"unschedulable\":true},"
                                 "\"status\":{\"phase\":\"Running\"}}");
        cJSON *pending = cJSON_Parse("{\"metadata\":{\"name\":\"p2\"},\"status\":{\"phase\":\"Pending\"}}");

        assert_non_null(pod);
        assert_int_equal(sim_field_selector_match("spec.nodeName=spot-a", pod), 1);
        assert_int_equal(sim_field_selector_match("spec.nodeName==spot-a", pod), 1);
        assert_int_equal(sim_field_selector_match("spec.nodeName!=spot-a", pod), 0);
        assert_int_equal(sim_field_selector_match("metadata.name=p1,metadata.namespace=shop", pod), 1);
        assert_int_equal(sim_field_selector_match("metadata.name=p1,status.phase!=Running", pod), 0);
        assert_int_equal(sim_field_selector_match("spec.unschedulable=true", pod), 1);
        assert_int_equal(sim_field_selector_match("", pod), 1);
        /* An absent field compares as "": spec.nodeName= finds unscheduled pods. */
        assert_int_equal(sim_field_selector_match("spec.nodeName=", pending), 1);
        assert_int_equal(sim_field_selector_match("spec.nodeName=", pod), 0);
        assert_int_equal(sim_field_selector_match("spec.nodeName", pod), -EINVAL);
        assert_int_equal(sim_field_selector_match("=x", pod), -EINVAL);
        cJSON_Delete(pod);
        cJSON_Delete(pending);
}

static void test_continue_tokens(void **state)
{
        _cleanup_free_ char *tok = sim_continue_encode(1234, 500);
        uint64_t rv;
        size_t off;

        assert_non_null(tok);
        assert_int_equal(sim_continue_decode(tok, &rv, &off), 0);
        assert_int_equal(rv, 1234);
        assert_int_equal(off, 500);
        assert_int_equal(sim_continue_decode("", &rv, &off), -EINVAL);
        assert_int_equal(sim_continue_decode("not base64!", &rv, &off), -EINVAL);
        /* "12x" in base64: well-formed base64, not a token. */
        assert_int_equal(sim_continue_decode("MTJ4", &rv, &off), -EINVAL);
}

/* kubectl 1.33 drain --disable-eviction --grace-period=7, byte for byte (fixtures/kubectl/golden-B.txt). */
static const unsigned char kubectl_delete[] = { 'k',  '8',  's',  0,    0x0a, 0x13, 0x0a, 0x02, 'v',
                                                '1',  0x12, 0x0d, 'D',  'e',  'l',  'e',  't',  'e',
                                                'O',  'p',  't',  'i',  'o',  'n',  's',  0x12, 0x02,
                                                0x08, 0x07, 0x1a, 0x00, 0x22, 0x00 };

static void test_protobuf_delete_options(void **state)
{
        unsigned char body[sizeof(kubectl_delete)];
        _cleanup_free_ char *uid = NULL;
        int64_t grace = 0;

        assert_int_equal(sim_protobuf_delete_options(kubectl_delete, sizeof(kubectl_delete), &grace, &uid),
                         0);
        assert_int_equal(grace, 7);
        assert_null(uid);
        /* Not the protobuf envelope. */
        memcpy(body, kubectl_delete, sizeof(body));
        body[1] = 'x';
        assert_int_equal(sim_protobuf_delete_options(body, sizeof(body), &grace, &uid), -EBADMSG);
        /* Truncated: the raw field claims more bytes than remain. */
        assert_int_equal(sim_protobuf_delete_options(kubectl_delete, 28, &grace, &uid), -EBADMSG);
}

static void test_protobuf_delete_options_uid(void **state)
{
        /* runtime.Unknown{raw: DeleteOptions{preconditions: {uid: "u-1"}}}, no grace period. */
        static const unsigned char body[] = { 'k',  '8',  's',  0,   0x12, 0x07, 0x12,
                                              0x05, 0x0a, 0x03, 'u', '-',  '1' };
        _cleanup_free_ char *uid = NULL;
        int64_t grace = 0;

        assert_int_equal(sim_protobuf_delete_options(body, sizeof(body), &grace, &uid), 0);
        assert_int_equal(grace, -1);
        assert_string_equal(uid, "u-1");
}

static void test_kubeconfig(void **state)
{
        _cleanup_free_ char *kc = sim_server_kubeconfig("http://127.0.0.1:4242", "sim-abc");

        assert_non_null(kc);
        assert_non_null(strstr(kc, "    server: http://127.0.0.1:4242\n"));
        assert_non_null(strstr(kc, "    token: sim-abc\n"));
        assert_non_null(strstr(kc, "current-context: spotdrain-sim\n"));
}

/* metadata.KEY of a list or object, or NULL. */
static const char *json_str_or_null(const cJSON *o, const char *key)
{
        const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), key);
        return cJSON_IsString(v) && *v->valuestring ? v->valuestring : NULL;
}

/* ---- the server end to end, on a real model with a manual clock ---- */

static const char scenario_yaml[] =
    "name: unit\n"
    "nodes:\n"
    "  - {name: n1, allocatable: {cpu: \"4\", memory: 16Gi, pods: 20}}\n"
    "  - {name: n2, allocatable: {cpu: \"4\", memory: 16Gi, pods: 20}}\n"
    "workloads:\n"
    "  - {name: web, namespace: shop, kind: Deployment, replicas: 3, placement: {n1: 3},\n"
    "     requests: {cpu: 100m, memory: 64Mi}, shutdown_seconds: 1, startup_seconds: 2,\n"
    "     pdb: {max_unavailable: 1}}\n";

struct fixture {
        struct sim_fixture sf;
        struct sim *sim;        /* sf's */
        struct sim_server *srv; /* sf's, or another surface on its model */
        char refused[128];      /* a Running pod whose eviction the PDB refused */
};

struct reply {
        long status;
        cJSON *json;
        bool retry_after;
};

static size_t on_body(char *data, size_t size, size_t n, void *userdata)
{
        if (buf_append(userdata, data, size * n) < 0)
                return 0;
        return size * n;
}

static size_t on_header(char *data, size_t size, size_t n, void *userdata)
{
        if (strncasecmp(data, "Retry-After:", 12) == 0)
                *(bool *)userdata = true;
        return size * n;
}

/* One request; the body of the answer parsed as JSON (NULL if it is not). */
static struct reply request(struct fixture *f, const char *method, const char *path, const char *ctype,
                            const void *body, size_t body_len, const char *accept)
{
        _cleanup_free_ char *url = strprintf("%s%s", sim_server_url(f->srv), path);
        _cleanup_free_ char *ct = ctype ? strprintf("Content-Type: %s", ctype) : NULL;
        _cleanup_free_ char *acc = accept ? strprintf("Accept: %s", accept) : NULL;
        struct curl_slist *headers = NULL;
        struct buf out = {};
        struct reply r = {};
        CURL *c = curl_easy_init();

        assert_non_null(c);
        assert_non_null(url);
        if (ct)
                headers = curl_slist_append(headers, ct);
        if (acc)
                headers = curl_slist_append(headers, acc);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, &r.retry_after);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
        if (body) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)body_len);
        }
        assert_int_equal(curl_easy_perform(c), CURLE_OK);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
        if (out.len)
                r.json = cJSON_ParseWithLength(out.data, out.len);
        buf_free(&out);
        curl_slist_free_all(headers);
        curl_easy_cleanup(c);
        return r;
}

static struct reply get(struct fixture *f, const char *path)
{
        return request(f, "GET", path, NULL, NULL, 0, NULL);
}

/* A server on a scenario of its own, manual clock. */
static struct fixture *fixture_new(const char *yaml)
{
        struct fixture *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        sim_fixture_start(&f->sf, yaml,
                          &(struct sim_fixture_options){ .manual_clock = true, .no_kubeconfig = true });
        f->sim = f->sf.sim;
        f->srv = f->sf.srv;
        assert_true(sim_server_port(f->srv) > 0);
        return f;
}

static void fixture_free(struct fixture *f)
{
        sim_fixture_stop(&f->sf);
        free(f);
}

static int setup_server(void **state)
{
        *state = fixture_new(scenario_yaml);
        return 0;
}

static int teardown_server(void **state)
{
        fixture_free(*state);
        return 0;
}

static void free_reply(struct reply *r)
{
        cJSON_Delete(r->json);
        r->json = NULL;
}

static bool list_has(const cJSON *arr, const char *key, const char *value)
{
        const cJSON *it;
        cJSON_ArrayForEach (it, arr) {
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(it, key);
                if (cJSON_IsString(v) && streq(v->valuestring, value))
                        return true;
        }
        return false;
}

static void test_discovery(void **state)
{
        struct fixture *f = *state;
        struct reply r = get(f, "/api");
        const cJSON *res, *it;
        bool eviction = false;

        assert_int_equal(r.status, 200);
        assert_string_equal(cJSON_GetObjectItem(r.json, "kind")->valuestring, "APIVersions");
        free_reply(&r);

        r = get(f, "/apis");
        assert_int_equal(r.status, 200);
        assert_true(list_has(cJSON_GetObjectItem(r.json, "groups"), "name", "policy"));
        assert_true(list_has(cJSON_GetObjectItem(r.json, "groups"), "name", "coordination.k8s.io"));
        free_reply(&r);

        /* drain looks for pods/eviction in group policy, version v1 */
        r = get(f, "/api/v1");
        res = cJSON_GetObjectItem(r.json, "resources");
        cJSON_ArrayForEach (it, res) {
                if (streq(cJSON_GetObjectItem(it, "name")->valuestring, "pods/eviction")) {
                        eviction = true;
                        assert_string_equal(cJSON_GetObjectItem(it, "group")->valuestring, "policy");
                        assert_string_equal(cJSON_GetObjectItem(it, "version")->valuestring, "v1");
                        assert_string_equal(cJSON_GetObjectItem(it, "kind")->valuestring, "Eviction");
                }
        }
        assert_true(eviction);
        assert_true(list_has(res, "name", "nodes"));
        free_reply(&r);

        r = get(f, "/apis/policy/v1");
        assert_true(list_has(cJSON_GetObjectItem(r.json, "resources"), "name", "poddisruptionbudgets"));
        free_reply(&r);

        r = get(f, "/apis/nosuch/v1");
        assert_int_equal(r.status, 404);
        assert_string_equal(cJSON_GetObjectItem(r.json, "kind")->valuestring, "Status");
        free_reply(&r);
}

static void test_list_paging_and_selectors(void **state)
{
        struct fixture *f = *state;
        struct reply r = get(f, "/api/v1/namespaces/shop/pods?limit=2");
        const char *cont;
        _cleanup_free_ char *next = NULL;

        assert_int_equal(r.status, 200);
        assert_string_equal(cJSON_GetObjectItem(r.json, "kind")->valuestring, "PodList");
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "items")), 2);
        cont = json_str_or_null(r.json, "continue");
        assert_non_null(cont);
        next = strprintf("/api/v1/namespaces/shop/pods?limit=2&continue=%s", cont);
        free_reply(&r);

        r = get(f, next);
        assert_int_equal(r.status, 200);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "items")), 1);
        assert_null(json_str_or_null(r.json, "continue"));
        free_reply(&r);

        r = get(f, "/api/v1/pods?fieldSelector=spec.nodeName%3Dn2");
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "items")), 0);
        free_reply(&r);
        r = get(f, "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1");
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "items")), 3);
        free_reply(&r);
        r = get(f, "/api/v1/pods?labelSelector=app+in+(web%2Cx)");
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "items")), 3);
        free_reply(&r);
        r = get(f, "/api/v1/pods?labelSelector=app+in+web");
        assert_int_equal(r.status, 400);
        free_reply(&r);

        r = get(f, "/api/v1/namespaces/shop/pods/nope");
        assert_int_equal(r.status, 404);
        assert_string_equal(cJSON_GetObjectItem(r.json, "reason")->valuestring, "NotFound");
        free_reply(&r);
}

static const char *pod_name_at(struct fixture *f, size_t i, char *buf, size_t len)
{
        struct reply r = get(f, "/api/v1/namespaces/shop/pods");
        const cJSON *pod = cJSON_GetArrayItem(cJSON_GetObjectItem(r.json, "items"), (int)i);
        snprintf(buf, len, "%s",
                 cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "metadata"), "name")->valuestring);
        free_reply(&r);
        return buf;
}

static void test_eviction_and_pdb(void **state)
{
        struct fixture *f = *state;
        char a[128], b[128];
        _cleanup_free_ char *pa = NULL, *pb = NULL, *body = NULL;
        struct reply r;

        pod_name_at(f, 0, a, sizeof(a));
        pod_name_at(f, 1, b, sizeof(b));
        pa = strprintf("/api/v1/namespaces/shop/pods/%s/eviction", a);
        pb = strprintf("/api/v1/namespaces/shop/pods/%s/eviction", b);
        body = strprintf(
            "{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":{\"name\":\"%s\"}}", a);

        r = request(f, "POST", pa, "application/json", body, strlen(body), NULL);
        assert_int_equal(r.status, 201);
        free_reply(&r);
        /* The PDB's one disruption is used: the next eviction is refused, without Retry-After. */
        r = request(f, "POST", pb, "application/json", "{}", 2, NULL);
        assert_int_equal(r.status, 429);
        assert_false(r.retry_after);
        assert_string_equal(cJSON_GetObjectItem(r.json, "reason")->valuestring, "TooManyRequests");
        free_reply(&r);
        snprintf(f->refused, sizeof(f->refused), "%s", b);

        r = request(f, "GET", "/apis/policy/v1/namespaces/shop/poddisruptionbudgets", NULL, NULL, 0,
                    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json");
        assert_int_equal(r.status, 200);
        assert_string_equal(cJSON_GetObjectItem(r.json, "kind")->valuestring, "Table");
        assert_true(
            list_has(cJSON_GetObjectItem(r.json, "columnDefinitions"), "name", "Allowed Disruptions"));
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "rows")), 1);
        assert_int_equal(
            cJSON_GetArrayItem(
                cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(r.json, "rows"), 0), "cells"), 3)
                ->valueint,
            0);
        free_reply(&r);
}

static void test_protobuf_delete(void **state)
{
        struct fixture *f = *state;
        _cleanup_free_ char *path = strprintf("/api/v1/namespaces/shop/pods/%s", f->refused);
        struct reply r;

        /* kubectl 1.32+ --disable-eviction: a protobuf body, never 415 */
        r = request(f, "DELETE", path, "application/vnd.kubernetes.protobuf", kubectl_delete,
                    sizeof(kubectl_delete), "application/vnd.kubernetes.protobuf,application/json");
        assert_int_equal(r.status, 200);
        assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "metadata"), "deletionTimestamp"));
        assert_int_equal(
            cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "metadata"), "deletionGracePeriodSeconds")
                ->valueint,
            7);
        free_reply(&r);
}

/* A whole watch stream (it ends at its timeoutSeconds), NUL-terminated, into out. */
static void watch_stream(const char *url, struct buf *out)
{
        CURL *c = curl_easy_init();
        assert_non_null(c);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
        assert_int_equal(curl_easy_perform(c), CURLE_OK);
        curl_easy_cleanup(c);
        assert_int_equal(buf_append(out, "", 1), 0);
}

static void test_cordon_and_watch(void **state)
{
        struct fixture *f = *state;
        struct reply r = get(f, "/api/v1/nodes");
        const char *rv = json_str_or_null(r.json, "resourceVersion");
        _cleanup_free_ char *watch = NULL;
        _cleanup_free_ char *rvs = rv ? strdup(rv) : NULL;
        struct buf out = {};

        assert_non_null(rvs);
        free_reply(&r);
        r = request(f, "PATCH", "/api/v1/nodes/n2", "application/strategic-merge-patch+json",
                    "{\"spec\":{\"unschedulable\":true}}", 32, NULL);
        assert_int_equal(r.status, 200);
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "spec"), "unschedulable")));
        free_reply(&r);

        /* A watch from before the cordon replays it, then ends at its timeout. */
        watch = strprintf("%s/api/v1/nodes?watch=1&resourceVersion=%s&timeoutSeconds=1",
                          sim_server_url(f->srv), rvs);
        watch_stream(watch, &out);
        assert_non_null(strstr(out.data, "{\"type\":\"MODIFIED\",\"object\":{"));
        assert_non_null(strstr(out.data, "\"unschedulable\":true"));
        assert_null(strstr(out.data, "\"name\":\"n1\""));
        buf_free(&out);

        r = get(f, "/sim/v1/clock");
        assert_int_equal(r.status, 200);
        assert_true(cJSON_IsNumber(cJSON_GetObjectItem(r.json, "now")));
        free_reply(&r);
        r = get(f, "/sim/v1/result");
        assert_int_equal(r.status, 200);
        assert_true(cJSON_GetObjectItem(r.json, "api_requests")->valuedouble > 0);
        free_reply(&r);
}

/* A watch of every pod from resourceVersion 0 on a cluster larger than one part (500 pods): each pod once,
 * as ADDED, in the list's order. */
static void test_watch_all_pods_in_parts(void **state)
{
        static const char big[] = "name: big\n"
                                  "nodes:\n"
                                  "  - {name: n1, allocatable: {cpu: \"400\", memory: 1600Gi, pods: 2000}}\n"
                                  "workloads:\n"
                                  "  - {name: web, namespace: shop, kind: Deployment, replicas: 1201,\n"
                                  "     placement: {n1: 1201}, requests: {cpu: 10m, memory: 8Mi}}\n";
        struct fixture *f = fixture_new(big);
        struct reply r = get(f, "/api/v1/pods");
        assert_int_equal(r.status, 200);
        const cJSON *items = cJSON_GetObjectItem(r.json, "items"), *it;
        assert_int_equal(cJSON_GetArraySize(items), 1201);

        _cleanup_free_ char *url =
            strprintf("%s/api/v1/pods?watch=1&resourceVersion=0&timeoutSeconds=1", sim_server_url(f->srv));
        struct buf out = {};
        watch_stream(url, &out);

        char *line = out.data, *end;
        int n = 0;
        it = items ? items->child : NULL;
        while ((end = strchr(line, '\n'))) {
                *end = '\0';
                cJSON *ev = cJSON_Parse(line);
                assert_non_null(ev);
                assert_string_equal(cJSON_GetObjectItem(ev, "type")->valuestring, "ADDED");
                assert_non_null(it);
                const cJSON *meta = cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "object"), "metadata");
                assert_string_equal(
                    cJSON_GetObjectItem(meta, "name")->valuestring,
                    cJSON_GetObjectItem(cJSON_GetObjectItem(it, "metadata"), "name")->valuestring);
                cJSON_Delete(ev);
                it = it->next;
                n++;
                line = end + 1;
        }
        assert_int_equal(n, 1201);
        buf_free(&out);
        free_reply(&r);
        fixture_free(f);
}

static void test_events_and_leases(void **state)
{
        static const char event[] =
            "{\"apiVersion\":\"v1\",\"kind\":\"Event\",\"metadata\":{\"name\":\"e1\","
            "\"namespace\":\"shop\"},\"involvedObject\":{\"kind\":\"Node\",\"name\":\"n1\"},"
            "\"reason\":\"SpotInterruption\",\"message\":\"two minutes\",\"type\":\"Warning\"}";
        static const char lease[] =
            "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{"
            "\"name\":\"spotdrain\",\"namespace\":\"shop\"},\"spec\":{\"holderIdentity\":\"a\"}}";
        struct fixture *f = *state;
        const cJSON *item;
        struct reply r;

        r = request(f, "POST", "/api/v1/namespaces/shop/events", "application/json", event, strlen(event),
                    NULL);
        assert_int_equal(r.status, 201);
        free_reply(&r);
        /* The same store through events.k8s.io/v1, in that group's field names. */
        r = get(f, "/apis/events.k8s.io/v1/namespaces/shop/events");
        assert_int_equal(r.status, 200);
        item = cJSON_GetArrayItem(cJSON_GetObjectItem(r.json, "items"), 0);
        assert_string_equal(cJSON_GetObjectItem(item, "apiVersion")->valuestring, "events.k8s.io/v1");
        assert_string_equal(cJSON_GetObjectItem(item, "note")->valuestring, "two minutes");
        assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(item, "regarding"), "name")->valuestring,
                            "n1");
        free_reply(&r);

        r = request(f, "POST", "/apis/coordination.k8s.io/v1/namespaces/shop/leases", "application/json",
                    lease, strlen(lease), NULL);
        assert_int_equal(r.status, 201);
        free_reply(&r);
        r = request(f, "POST", "/apis/coordination.k8s.io/v1/namespaces/shop/leases", "application/json",
                    lease, strlen(lease), NULL);
        assert_int_equal(r.status, 409);
        free_reply(&r);

        r = request(f, "POST", "/apis/apps/v1/namespaces/shop/deployments", "application/json", "{}", 2,
                    NULL);
        assert_int_equal(r.status, 405);
        assert_string_equal(cJSON_GetObjectItem(r.json, "kind")->valuestring, "Status");
        free_reply(&r);
        /* Server-side apply needs a field manager, as kube-apiserver asks. */
        r = request(f, "PATCH", "/api/v1/nodes/n1", "application/apply-patch+yaml", "x: 1", 4, NULL);
        assert_int_equal(r.status, 422);
        free_reply(&r);
}

/* Query parameters decoded as kube-apiserver decodes them (apimachinery's string conversions). */
static void test_query_parameters(void **state)
{
        struct fixture *f = *state;
        struct reply r;

        /* Booleans: only "false" and "0" (any case) and absence are false; "?watch" alone is true. */
        r = get(f, "/api/v1/namespaces/shop/pods?watch=0");
        assert_string_equal(cJSON_GetObjectItem(r.json, "kind")->valuestring, "PodList");
        free_reply(&r);
        r = get(f, "/api/v1/namespaces/shop/pods?watch=False");
        assert_string_equal(cJSON_GetObjectItem(r.json, "kind")->valuestring, "PodList");
        free_reply(&r);
        r = get(f, "/api/v1/namespaces/shop/pods?watch&timeoutSeconds=1");
        assert_int_equal(r.status, 200);
        assert_string_equal(cJSON_GetObjectItem(r.json, "type")->valuestring, "ADDED");
        free_reply(&r);
        r = get(f, "/api/v1/namespaces/shop/pods?watch=yes&timeoutSeconds=1");
        assert_string_equal(cJSON_GetObjectItem(r.json, "type")->valuestring, "ADDED");
        free_reply(&r);

        /* Integers: strconv.ParseInt; a limit of 0 or less is none. */
        r = get(f, "/api/v1/namespaces/shop/pods?limit=abc");
        assert_int_equal(r.status, 400);
        assert_non_null(strstr(cJSON_GetObjectItem(r.json, "message")->valuestring,
                               "strconv.ParseInt: parsing \"abc\": invalid syntax"));
        free_reply(&r);
        r = get(f, "/api/v1/namespaces/shop/pods?limit=99999999999999999999");
        assert_int_equal(r.status, 400);
        assert_non_null(strstr(cJSON_GetObjectItem(r.json, "message")->valuestring, "value out of range"));
        free_reply(&r);
        r = get(f, "/api/v1/namespaces/shop/pods?limit=%2B1");
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "items")), 1);
        assert_non_null(json_str_or_null(r.json, "continue"));
        free_reply(&r);
        r = get(f, "/api/v1/namespaces/shop/pods?limit=-1&continue=");
        assert_int_equal(r.status, 200);
        assert_true(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "items")) >= 3);
        assert_null(json_str_or_null(r.json, "continue"));
        free_reply(&r);
        r = get(f, "/api/v1/namespaces/shop/pods?watch=1&timeoutSeconds=1s");
        assert_int_equal(r.status, 400);
        free_reply(&r);
        r = get(f, "/api/v1/namespaces/shop/pods?watch=1&resourceVersion=abc");
        assert_int_equal(r.status, 400);
        free_reply(&r);
}

static void test_content_types(void **state)
{
        static const char lease[] =
            "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{"
            "\"name\":\"ct\",\"namespace\":\"shop\"},\"spec\":{\"holderIdentity\":\"a\"}}";
        static const char label[] = "{\"metadata\":{\"labels\":{\"applied\":\"yes\"}}}";
        struct fixture *f = *state;
        struct reply r;

        r = request(f, "POST", "/apis/coordination.k8s.io/v1/namespaces/shop/leases", "text/plain", lease,
                    strlen(lease), NULL);
        assert_int_equal(r.status, 415);
        assert_string_equal(cJSON_GetObjectItem(r.json, "reason")->valuestring, "UnsupportedMediaType");
        free_reply(&r);
        r = request(f, "POST", "/apis/coordination.k8s.io/v1/namespaces/shop/leases",
                    "application/json;charset=utf-8", lease, strlen(lease), NULL);
        assert_int_equal(r.status, 201);
        free_reply(&r);
        r = request(f, "PUT", "/apis/coordination.k8s.io/v1/namespaces/shop/leases/ct", "Application/JSON",
                    lease, strlen(lease), NULL);
        assert_int_equal(r.status, 200);
        free_reply(&r);

        r = request(f, "PATCH", "/api/v1/nodes/n1", "application/json", label, strlen(label), NULL);
        assert_int_equal(r.status, 415);
        free_reply(&r);
        r = request(f, "PATCH", "/api/v1/nodes/n1", "application/merge-patch+json; charset=utf-8", label,
                    strlen(label), NULL);
        assert_int_equal(r.status, 200);
        free_reply(&r);
        r = request(f, "PATCH", "/api/v1/nodes/n2?fieldManager=unit", "application/apply-patch+yaml", label,
                    strlen(label), NULL);
        assert_int_equal(r.status, 200);
        assert_string_equal(
            cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "metadata"), "labels"),
                                "applied")
                ->valuestring,
            "yes");
        free_reply(&r);
}

/* The text of a GET (not JSON). */
static char *get_text(struct fixture *f, const char *path, long *ret_status)
{
        _cleanup_free_ char *url = strprintf("%s%s", sim_server_url(f->srv), path);
        struct buf out = {};
        CURL *c = curl_easy_init();

        assert_non_null(c);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
        assert_int_equal(curl_easy_perform(c), CURLE_OK);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, ret_status);
        curl_easy_cleanup(c);
        assert_int_equal(buf_append(&out, "", 1), 0);
        return out.data;
}

static size_t count_lines(const char *s)
{
        size_t n = 0;
        for (; *s; s++)
                n += *s == '\n';
        return n;
}

/* Moves the manual clock on after a while, for a follower waiting on it. */
static void *advance_later(void *p)
{
        struct sim *s = p;
        usleep(300 * 1000);
        sim_lock(s);
        sim_set_now(s, sim_now(s) + 10);
        sim_advance(s);
        sim_broadcast(s);
        sim_unlock(s);
        return NULL;
}

static void test_pod_logs(void **state)
{
        struct fixture *f = *state;
        char name[128], path[512];
        _cleanup_free_ char *all = NULL, *tail = NULL, *stamped = NULL, *since = NULL, *dying = NULL,
                            *followed = NULL;
        long status;
        pthread_t th;

        pod_name_at(f, 2, name, sizeof(name));
        snprintf(path, sizeof(path), "/api/v1/namespaces/shop/pods/%s/log", name);
        all = get_text(f, path, &status);
        if (status != 200)
                fprintf(stderr, "%s\n", all);
        assert_int_equal(status, 200);
        assert_non_null(strstr(all, "web starting on node n1"));
        assert_non_null(strstr(all, "ready: listening on :8080"));
        assert_non_null(strstr(all, "served "));
        assert_true(count_lines(all) > 100); /* an hour of lines every 15 s */

        snprintf(path, sizeof(path), "/api/v1/namespaces/shop/pods/%s/log?tailLines=2&container=app", name);
        tail = get_text(f, path, &status);
        assert_int_equal(count_lines(tail), 2);
        assert_non_null(strstr(all, tail)); /* the last two lines of the whole log */
        snprintf(path, sizeof(path), "/api/v1/namespaces/shop/pods/%s/log?tailLines=1&timestamps=true",
                 name);
        stamped = get_text(f, path, &status);
        assert_int_equal(count_lines(stamped), 1);
        assert_true(strncmp(stamped, "20", 2) == 0 && strstr(stamped, "Z served ") != NULL);
        snprintf(path, sizeof(path), "/api/v1/namespaces/shop/pods/%s/log?sinceSeconds=20", name);
        since = get_text(f, path, &status);
        assert_true(count_lines(since) >= 1 && count_lines(since) <= 2);
        assert_null(strstr(since, "starting"));

        snprintf(path, sizeof(path), "/api/v1/namespaces/shop/pods/%s/log?container=nope", name);
        free(get_text(f, path, &status));
        assert_int_equal(status, 400);
        snprintf(path, sizeof(path), "/api/v1/namespaces/shop/pods/%s/log?tailLines=-1", name);
        free(get_text(f, path, &status));
        assert_int_equal(status, 422);
        snprintf(path, sizeof(path), "/api/v1/namespaces/shop/pods/%s/log?sinceSeconds=1&sinceTime=x", name);
        free(get_text(f, path, &status));
        assert_int_equal(status, 422);
        free(get_text(f, "/api/v1/namespaces/shop/pods/nope/log", &status));
        assert_int_equal(status, 404);

        /* The pod deleted with 7 s of grace got its SIGTERM; followed, its log ends with its exit. */
        snprintf(path, sizeof(path), "/api/v1/namespaces/shop/pods/%s/log", f->refused);
        dying = get_text(f, path, &status);
        assert_int_equal(status, 200);
        assert_non_null(strstr(dying, "received SIGTERM: draining connections (grace period 7s)"));
        assert_null(strstr(dying, "exiting"));
        snprintf(path, sizeof(path), "/api/v1/namespaces/shop/pods/%s/log?follow=true&tailLines=1",
                 f->refused);
        assert_int_equal(pthread_create(&th, NULL, advance_later, f->sim), 0);
        followed = get_text(f, path, &status);
        pthread_join(th, NULL);
        assert_int_equal(status, 200);
        assert_non_null(strstr(followed, "received SIGTERM"));
        assert_non_null(strstr(followed, "drained, exiting with status 0"));
        assert_int_equal(count_lines(followed), 2);
}

static void test_faults(void **state)
{
        static const char yaml[] =
            "name: f\nseed: 7\nfaults: {api_error_rate: 1, api_latency_ms: 1, node_label_latency_ms: 3}\n";
        struct fixture *f = *state, faulty = *f;
        struct sim_server_options opt = { .listen = "127.0.0.1:0" };
        _cleanup_free_ char *error = NULL;
        struct ynode *tree = NULL;
        struct reply r;

        assert_int_equal(yaml_load_string(yaml, strlen(yaml), "f.yaml", &tree, &error), 0);
        sim_server_options_from_scenario(tree, &opt);
        ynode_free(tree);
        assert_true(opt.api_error_rate == 1);
        assert_int_equal(opt.api_latency_ms, 1);
        assert_int_equal(opt.node_label_latency_ms, 3);
        assert_int_equal(opt.seed, 7);

        /* A second surface on the same model, failing every resource request but no discovery document. */
        assert_int_equal(sim_server_start_with(f->sim, &opt, &faulty.srv), 0);
        r = get(&faulty, "/api/v1/nodes");
        assert_int_equal(r.status, 500);
        assert_string_equal(cJSON_GetObjectItem(r.json, "reason")->valuestring, "InternalError");
        free_reply(&r);
        r = get(&faulty, "/api/v1");
        assert_int_equal(r.status, 200);
        free_reply(&r);
        r = get(&faulty, "/apis/policy/v1");
        assert_int_equal(r.status, 200);
        free_reply(&r);
        sim_server_stop(faulty.srv);

        /* The first server has none. */
        r = get(f, "/api/v1/nodes");
        assert_int_equal(r.status, 200);
        free_reply(&r);
}

int main(void)
{
        /* One server for the whole group; the end-to-end tests run in order and build on each other's
         * changes. */
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_label_equality),
                cmocka_unit_test(test_label_sets_and_existence),
                cmocka_unit_test(test_label_malformed),
                cmocka_unit_test(test_field_selectors),
                cmocka_unit_test(test_continue_tokens),
                cmocka_unit_test(test_protobuf_delete_options),
                cmocka_unit_test(test_protobuf_delete_options_uid),
                cmocka_unit_test(test_kubeconfig),
                cmocka_unit_test(test_discovery),
                cmocka_unit_test(test_list_paging_and_selectors),
                cmocka_unit_test(test_eviction_and_pdb),
                cmocka_unit_test(test_protobuf_delete),
                cmocka_unit_test(test_cordon_and_watch),
                cmocka_unit_test(test_watch_all_pods_in_parts),
                cmocka_unit_test(test_events_and_leases),
                cmocka_unit_test(test_query_parameters),
                cmocka_unit_test(test_content_types),
                cmocka_unit_test(test_pod_logs),
                cmocka_unit_test(test_faults),
        };
        int failed;

        curl_global_init(CURL_GLOBAL_DEFAULT);
        failed = cmocka_run_group_tests(tests, setup_server, teardown_server);
        curl_global_cleanup();
        return failed;
}
