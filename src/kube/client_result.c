/* The Kubernetes API client: what an answer means (request → result): the Status, RBAC denials, PDB
 * refusals, Retry-After. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/client_internal.h"
#include "spotdrain/kube.h"
#include "spotdrain/metrics.h"

void kube_result_clear(struct kube_result *r)
{
        if (!r)
                return;
        cJSON_Delete(r->object);
        free(r->message);
        free(r->reason);
        for (size_t i = 0; i < r->n_causes; i++) {
                free(r->causes[i].reason);
                free(r->causes[i].message);
                free(r->causes[i].field);
        }
        free(r->causes);
        free(r->pdb_name);
        *r = (struct kube_result){ 0 };
}

/* ---- request → result ---- */

/* The RBAC words for a request: verb, resource (with subresource) and namespace, from method and path. */
void kube_describe_request(const char *method, const char *path, char *verb, size_t verb_len, char *resource,
                           size_t resource_len, char *ns, size_t ns_len)
{
        char parts[8][128];
        size_t n = 0;
        const char *p = path;
        bool watch = strstr(path, "watch=true") != NULL;
        while (*p && *p != '?' && n < ARRAY_SIZE(parts)) {
                while (*p == '/')
                        p++;
                size_t l = strcspn(p, "/?");
                if (l == 0)
                        break;
                snprintf(parts[n++], sizeof(parts[0]), "%.*s", (int)l, p);
                p += l;
        }
        size_t i = 0;
        if (n >= 2 && streq(parts[0], "api"))
                i = 2;
        else if (n >= 3 && streq(parts[0], "apis"))
                i = 3;
        ns[0] = 0;
        if (n - i >= 3 && streq(parts[i], "namespaces")) {
                snprintf(ns, ns_len, "%.120s", parts[i + 1]);
                i += 2;
        }
        bool named = n - i >= 2;
        if (n <= i)
                snprintf(resource, resource_len, "%s", path);
        else if (n - i >= 3)
                snprintf(resource, resource_len, "%.120s/%.120s", parts[i], parts[i + 2]);
        else
                snprintf(resource, resource_len, "%.120s", parts[i]);

        const char *v = "get";
        if (streq(method, "GET"))
                v = named ? "get" : watch ? "watch" : "list";
        else if (streq(method, "POST"))
                v = "create";
        else if (streq(method, "PUT"))
                v = "update";
        else if (streq(method, "PATCH"))
                v = "patch";
        else if (streq(method, "DELETE"))
                v = named ? "delete" : "deletecollection";
        snprintf(verb, verb_len, "%s", v);
}

/* Whether a resource lives outside namespaces (so a request without one is not "in all namespaces"). */
static bool cluster_scoped(const char *resource)
{
        static const char *const cluster[] = {
                "nodes",          "namespaces",   "persistentvolumes",   "priorityclasses",
                "storageclasses", "clusterroles", "clusterrolebindings", "customresourcedefinitions",
                "apiservices",    "csinodes",
        };
        size_t n = strcspn(resource, "/");
        for (size_t i = 0; i < ARRAY_SIZE(cluster); i++)
                if (strlen(cluster[i]) == n && strncmp(cluster[i], resource, n) == 0)
                        return true;
        return resource[0] == '/'; /* discovery paths */
}

static char *dup_json_str(const cJSON *o, const char *key)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        return cJSON_IsString(v) && v->valuestring ? strdup(v->valuestring) : NULL;
}

static void parse_status(const cJSON *st, struct kube_result *r)
{
        if (!cJSON_IsObject(st))
                return;
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(st, "kind");
        if (!cJSON_IsString(kind) || !streq(kind->valuestring, "Status"))
                return;
        r->reason = dup_json_str(st, "reason");
        const cJSON *causes =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(st, "details"), "causes");
        int n = cJSON_GetArraySize(causes);
        if (n > 0) {
                r->causes = calloc((size_t)n, sizeof(*r->causes));
                if (!r->causes)
                        return;
                const cJSON *cause;
                cJSON_ArrayForEach (cause, causes) {
                        struct kube_cause *kc = &r->causes[r->n_causes++];
                        kc->reason = dup_json_str(cause, "reason");
                        kc->message = dup_json_str(cause, "message");
                        kc->field = dup_json_str(cause, "field");
                }
        }
}

/* RBAC's refusal reads 'User "u" cannot patch resource "nodes" in API group "" at the cluster scope'
 * (or with no message at all from some proxies); admission's names its policy or webhook instead. */
static bool rbac_denial(const char *msg)
{
        return strstr(msg, " cannot ") && strstr(msg, " resource \"");
}

void kube_result_from_response(struct kube_call *call, const struct http_response *resp,
                               struct kube_result *r)
{
        *r = (struct kube_result){ .http_status = resp->status };
        if (resp->status == 0 || resp->error < 0) {
                r->error = resp->error < 0 ? resp->error : -EIO;
                r->message = strprintf("%s %s: %s", call->method, call->path,
                                       resp->errbuf[0] ? resp->errbuf : strerror(-r->error));
                return;
        }
        cJSON *json =
            resp->body && resp->body_len > 0 ? cJSON_ParseWithLength(resp->body, resp->body_len) : NULL;
        if (resp->status >= 200 && resp->status < 300) {
                if (!json && resp->body_len > 0) {
                        r->error = -EBADMSG;
                        r->message = strprintf("%s %s: the answer is not JSON", call->method, call->path);
                        return;
                }
                r->object = json;
                return;
        }
        r->error = http_status_to_errno_method(call->method, resp->status);
        parse_status(json, r);
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(json, "message");
        const char *smsg = cJSON_IsString(m) ? m->valuestring : NULL;
        if (resp->status == 403 && smsg && !rbac_denial(smsg)) {
                /* Admission said no (a ValidatingAdmissionPolicy, a webhook, PodSecurity), not RBAC: the
                 * API server's own words name the policy and its reason; a hint about verbs would mislead.
                 */
                r->message = strprintf("forbidden: %s %s: %s", call->method, call->path, smsg);
        } else if (resp->status == 403) {
                char verb[32], resource[256], ns[128];
                kube_describe_request(call->method, call->path, verb, sizeof(verb), resource,
                                      sizeof(resource), ns, sizeof(ns));
                if (ns[0])
                        r->message = strprintf(
                            "forbidden: cannot %s %s in namespace %s \u2014 RBAC needs verb %s on %s", verb,
                            resource, ns, verb, resource);
                else
                        r->message = strprintf(
                            "forbidden: cannot %s %s %s \u2014 RBAC needs verb %s on %s", verb, resource,
                            cluster_scoped(resource) ? "(cluster-scoped)" : "in all namespaces", verb,
                            resource);
        } else if (smsg)
                r->message = strprintf("%s %s: %ld %s", call->method, call->path, resp->status, smsg);
        else
                r->message = strprintf("%s %s: HTTP %ld", call->method, call->path, resp->status);
        cJSON_Delete(json);
}

uint64_t kube_parse_retry_after(const char *s)
{
        if (isempty(s))
                return 0;
        char *end;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s)
                return 0;
        if (v > 60)
                v = 60;
        return (uint64_t)v * 1000000ULL;
}

/* An eviction's refusal by a PodDisruptionBudget (a Status with a DisruptionBudget cause, from the
 * eviction subresource), as opposed to the server's own throttling: priority and fairness (and the older
 * max-in-flight filter) answer 429 with Retry-After and a plain-text body, before the request runs. */
bool kube_pdb_refusal(const struct http_response *resp)
{
        if (!resp->body || resp->body_len == 0)
                return false;
        cJSON *st = cJSON_ParseWithLength(resp->body, resp->body_len);
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(st, "kind");
        bool pdb = false;
        if (cJSON_IsString(kind) && streq(kind->valuestring, "Status")) {
                const cJSON *causes = cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(st, "details"), "causes");
                const cJSON *cause;
                cJSON_ArrayForEach (cause, causes) {
                        const cJSON *reason = cJSON_GetObjectItemCaseSensitive(cause, "reason");
                        if (cJSON_IsString(reason) && streq(reason->valuestring, "DisruptionBudget"))
                                pdb = true;
                }
        }
        cJSON_Delete(st);
        return pdb;
}
