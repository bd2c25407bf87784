/* The Kubernetes API client: one request machine (rate limiter → token → HTTP → 401 re-auth → retry with
 * backoff → Status parsing) and the operations built on it. Multi-step operations (paginated lists,
 * discovery before eviction, read-modify-write of taints, event count bumps) re-issue requests on the same
 * call object, so a caller's handle stays valid for cancellation until its callback runs. The operations
 * themselves are in kube_ops.c. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/client_internal.h"
#include "spotdrain/kube.h"
#include "spotdrain/metrics.h"

enum {
        CALL_STREAM = 1 << 8,
};

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

/* ---- call lifecycle ---- */

static void queue_remove(struct kube_call *call)
{
        struct kube_client *c = call->client;
        if (!call->queued)
                return;
        for (int q = 0; q < 3; q++) {
                struct kube_call *prev = NULL;
                for (struct kube_call *i = c->q_head[q]; i; prev = i, i = i->qnext) {
                        if (i != call)
                                continue;
                        if (prev)
                                prev->qnext = i->qnext;
                        else
                                c->q_head[q] = i->qnext;
                        if (c->q_tail[q] == i)
                                c->q_tail[q] = prev;
                        call->qnext = NULL;
                        call->queued = false;
                        c->stats.queued--;
                        return;
                }
        }
}

void kcall_free(struct kube_call *call)
{
        struct kube_client *c = call->client;
        queue_remove(call);
        if (call->http) {
                http_cancel(call->http);
                c->stats.in_flight--;
        }
        kube_token_wait_cancel(call->token_wait);
        timer_cancel(call->timer);
        if (call->prev)
                call->prev->next = call->next;
        else
                c->calls = call->next;
        if (call->next)
                call->next->prev = call->prev;
        free(call->method);
        free(call->path);
        free(call->content_type);
        free(call->body);
        free(call->url);
        free(call->token);
        free(call->hdr_ct);
        free(call->s_ns);
        free(call->s_name);
        free(call->s_uid);
        free(call->s_extra);
        free(call->s_base);
        cJSON_Delete(call->acc);
        free(call->taint.key);
        free(call->taint.value);
        free(call->taint.effect);
        free(call);
}

struct kube_call *kube_call_cancel(struct kube_call *call)
{
        if (call && !call->finishing)
                kcall_free(call);
        return NULL;
}

void kcall_finish(struct kube_call *call, struct kube_result *r)
{
        call->finishing = true;
        if (call->done)
                call->done(call->client, r, call->userdata);
        kube_result_clear(r);
        kcall_free(call);
}

static void finish_step(struct kube_call *call, struct kube_result *r)
{
        kcall_finish(call, r);
}

void kcall_fail(struct kube_call *call, int error, char *message)
{
        struct kube_result r = { .error = error, .message = message };
        if (!r.message)
                r.message = strprintf("%s %s: %s", call->method, call->path, strerror(-error));
        kcall_finish(call, &r);
}

static void pump_timer_fn(void *userdata);

static void pump_soon(struct kube_client *c, uint64_t after_usec)
{
        if (c->pump_timer)
                return;
        /* Without a timer nothing would ever leave the queue; calls stay queued and a later enqueue
         * retries arming it. */
        (void)timer_start_in(c->loop, after_usec, pump_timer_fn, c, &c->pump_timer);
}

void kcall_enqueue(struct kube_call *call)
{
        struct kube_client *c = call->client;
        int q = (call->flags & KUBE_REQ_URGENT) ? 0 : (call->flags & KUBE_REQ_PRIORITY) ? 1 : 2;
        call->qnext = NULL;
        if (c->q_tail[q])
                c->q_tail[q]->qnext = call;
        else
                c->q_head[q] = call;
        c->q_tail[q] = call;
        call->queued = true;
        c->stats.queued++;
        pump_soon(c, 0);
}

int kcall_set_request(struct kube_call *call, const char *method, const char *path, const char *content_type,
                      const char *body)
{
        char *m = strdup(method), *p = strdup(path), *ct = content_type ? strdup(content_type) : NULL;
        char *b = body ? strdup(body) : NULL;
        if (!m || !p || (content_type && !ct) || (body && !b)) {
                free(m);
                free(p);
                free(ct);
                free(b);
                return -ENOMEM;
        }
        free(call->method);
        free(call->path);
        free(call->content_type);
        free(call->body);
        call->method = m;
        call->path = p;
        call->content_type = ct;
        call->body = b;
        call->retries = 0;
        call->reauthed = false;
        call->backoff =
            BACKOFF_INIT(call->client->opts.backoff_base_usec, call->client->opts.backoff_max_usec);
        return 0;
}

/* Sends the next request of a multi-step operation; on failure the operation ends with that error. */
void kcall_reissue(struct kube_call *call, const char *method, const char *path, const char *content_type,
                   const char *body, step_fn step)
{
        int r = kcall_set_request(call, method, path, content_type, body);
        if (r < 0)
                return kcall_fail(call, r, NULL);
        call->step = step;
        kcall_enqueue(call);
}

int kcall_new(struct kube_client *c, const char *method, const char *path, const char *content_type,
              const char *body, unsigned flags, kube_done_fn done, void *userdata, struct kube_call **ret)
{
        if (!c || !path || !method)
                return -EINVAL;
        struct kube_call *call = calloc(1, sizeof(*call));
        if (!call)
                return -ENOMEM;
        call->client = c;
        call->flags = flags;
        call->done = done;
        call->userdata = userdata;
        call->step = finish_step;
        call->grace = -1;
        int r = kcall_set_request(call, method, path, content_type, body);
        if (r < 0) {
                free(call);
                return r;
        }
        call->next = c->calls;
        if (c->calls)
                c->calls->prev = call;
        c->calls = call;
        *ret = call;
        return 0;
}

/* ---- request → result ---- */

/* The RBAC words for a request: verb, resource (with subresource) and namespace, from method and path. */
static void describe_request(const char *method, const char *path, char *verb, size_t verb_len,
                             char *resource, size_t resource_len, char *ns, size_t ns_len)
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

static void result_from_response(struct kube_call *call, const struct http_response *resp,
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
        if (resp->status == 403) {
                char verb[32], resource[256], ns[128];
                describe_request(call->method, call->path, verb, sizeof(verb), resource, sizeof(resource),
                                 ns, sizeof(ns));
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

static uint64_t parse_retry_after(const char *s)
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

static void retry_timer_fn(void *userdata)
{
        struct kube_call *call = userdata;
        call->timer = NULL;
        kcall_enqueue(call);
}

/* Every answer (retries included) counts in spotdrain_api_requests_total; evictions also by status code. */
static void count_request(struct metrics *m, const char *method, const char *path,
                          const struct http_response *resp)
{
        char code[24];
        if (resp->status > 0)
                snprintf(code, sizeof(code), "%ld", resp->status);
        else
                snprintf(code, sizeof(code), "error");
        metrics_counter_inc(m, METRIC_API_REQUESTS, method, code, NULL);
        const char *q = strchr(path, '?');
        size_t n = q ? (size_t)(q - path) : strlen(path);
        if (n >= 9 && memcmp(path + n - 9, "/eviction", 9) == 0)
                metrics_counter_inc(m, METRIC_EVICTIONS, code, NULL);
}

static void call_http_done(const struct http_response *resp, void *userdata)
{
        struct kube_call *call = userdata;
        struct kube_client *c = call->client;
        call->http = NULL;
        c->stats.in_flight--;
        count_request(c->opts.metrics, call->method, call->path, resp);

        if (resp->status == 401 && !call->reauthed) {
                /* The token may have rotated (projected service-account tokens, exec plugins): read it again
                 * and try once more. */
                kube_config_token_rejected(c->cfg, call->token);
                call->reauthed = true;
                kcall_enqueue(call);
                return;
        }

        bool transport = resp->status == 0 || resp->error < 0;
        bool retry_status = (call->flags & KUBE_REQ_IDEMPOTENT) &&
                            (resp->status >= 500 || (resp->status == 429 && !isempty(resp->retry_after)));
        if (!(call->flags & CALL_STREAM) && (transport || retry_status) &&
            call->retries < c->opts.max_retries) {
                uint64_t delay = backoff_next(&call->backoff);
                uint64_t ra = parse_retry_after(resp->retry_after);
                if (ra > delay)
                        delay = ra;
                call->retries++;
                log_debug("kube: %s %s: %s, retrying in %" PRIu64 " ms", call->method, call->path,
                          transport ? "transport error" : "server error", delay / 1000);
                if (timer_start_in(c->loop, delay, retry_timer_fn, call, &call->timer) >= 0)
                        return;
        }

        struct kube_result r;
        result_from_response(call, resp, &r);
        call->step(call, &r);
}

static int call_on_data(const char *data, size_t len, void *userdata)
{
        struct kube_call *call = userdata;
        return call->on_data(data, len, call->userdata);
}

static void call_no_credentials(struct kube_call *call, int error, const char *why)
{
        kcall_fail(
            call, error,
            strprintf("%s %s: no credentials: %s", call->method, call->path, why ? why : strerror(-error)));
}

static void call_send(struct kube_call *call, const char *token);

static void call_token_ready(int error, const char *token, const char *error_message, void *userdata)
{
        struct kube_call *call = userdata;
        call->token_wait = NULL;
        if (error < 0)
                return call_no_credentials(call, error, error_message);
        call_send(call, token);
}

/* The name a path ends with (after the resource, before any subresource), for "would evict shop/web-1". */
static void path_name(const char *path, const char *resource, char *name, size_t len)
{
        _cleanup_free_ char *copy = strndup(path, strcspn(path, "?"));
        const char *res = NULL, *seg;
        size_t rl = strcspn(resource, "/");
        name[0] = 0;
        if (!copy)
                return;
        for (char *save = NULL, *t = strtok_r(copy, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
                seg = t;
                if (res) {
                        snprintf(name, len, "%s", seg);
                        return;
                }
                if (strlen(seg) == rl && strncmp(seg, resource, rl) == 0)
                        res = seg;
        }
}

/* Shadow mode: a write is not sent. It is logged ("would evict pod shop/web-1"), counted, and answered as
 * the API server would accept it: 201 or 200 with the body sent as the object, so that the caller goes on
 * as after a write that went through (the object itself does not change: the informers never see it). */
static void dry_run_answer(struct kube_call *call)
{
        char verb[32], resource[256], ns[128], name[256];
        const char *what = NULL;
        describe_request(call->method, call->path, verb, sizeof(verb), resource, sizeof(resource), ns,
                         sizeof(ns));
        path_name(call->path, resource, name, sizeof(name));
        const char *body = strnull(call->body);
        if (streq(resource, "pods/eviction"))
                what = "evict pod";
        else if (streq(resource, "pods") && streq(verb, "delete"))
                what = "delete pod";
        else if (streq(resource, "nodes") && strstr(body, "\"unschedulable\":true"))
                what = "cordon node";
        else if (streq(resource, "nodes") && strstr(body, "\"unschedulable\":false"))
                what = "uncordon node";
        _cleanup_free_ char *action = what ? strdup(what) : strprintf("%s %s", verb, resource);
        _cleanup_free_ char *object = name[0] ? strprintf("%s%s%s", ns, ns[0] ? "/" : "", name)
                                              : strprintf("in %s", ns[0] ? ns : "the cluster");
        dry_run_would(action ? action : verb, "%s %s (%s %s)", action ? action : verb, strnull(object),
                      call->method, call->path);

        struct kube_result r = { .http_status = streq(call->method, "POST") ? 201 : 200 };
        r.object = call->body ? cJSON_Parse(call->body) : NULL;
        call->step(call, &r);
}

static void call_start(struct kube_call *call)
{
        struct kube_client *c = call->client;
        if (dry_run_enabled() && !streq(call->method, "GET"))
                return dry_run_answer(call);
        const char *token = NULL;
        _cleanup_free_ char *err = NULL;
        int r = kube_config_token_async(c->cfg, c->loop, &token, call_token_ready, call, &call->token_wait,
                                        &err);
        if (r < 0)
                return call_no_credentials(call, r, err);
        if (r == 0)
                return; /* an exec plugin runs; call_token_ready goes on */
        call_send(call, token);
}

static void call_send(struct kube_call *call, const char *token)
{
        struct kube_client *c = call->client;
        int r;
        free(call->token);
        call->token = token ? strdup(token) : NULL;
        free(call->url);
        call->url = strprintf("%s%s", c->cfg->server, call->path);
        free(call->hdr_ct);
        /* Without a type curl would label a body as a form. */
        const char *ct = call->content_type ? call->content_type : call->body ? "application/json" : NULL;
        call->hdr_ct = ct ? strprintf("Content-Type: %s", ct) : NULL;
        if ((token && !call->token) || !call->url || (ct && !call->hdr_ct))
                return kcall_fail(call, -ENOMEM, NULL);
        size_t h = 0;
        call->headers[h++] = "Accept: application/json";
        if (call->hdr_ct)
                call->headers[h++] = call->hdr_ct;
        call->headers[h] = NULL;
        call->tls = (struct http_tls){
                .ca_file = c->cfg->ca_file,
                .ca_pem = c->cfg->ca_pem,
                .cert_file = c->cfg->cert_file,
                .cert_pem = c->cfg->cert_pem,
                .key_file = c->cfg->key_file,
                .key_pem = c->cfg->key_pem,
                .server_name = c->cfg->tls_server_name,
        };
        struct http_request req = {
                .method = call->method,
                .url = call->url,
                .headers = call->headers,
                .body = call->body,
                .body_len = call->body ? strlen(call->body) : 0,
                .bearer_token = call->token,
                .tls = &call->tls,
                .timeout_usec = (call->flags & CALL_STREAM) ? 0 : c->opts.request_timeout_usec,
                /* The API server answers at once: ten silent seconds is a connection that stopped passing
                 * bytes (the HTTP client then closes it), and the call is retried on another. A watch gets
                 * the same limit (http.c's default for streams) and resumes from its resourceVersion. */
                .idle_timeout_usec = KUBE_IDLE_TIMEOUT_USEC,
                .on_data = (call->flags & CALL_STREAM) ? call_on_data : NULL,
        };
        r = http_send(c->loop, &req, call_http_done, call, &call->http);
        if (r < 0)
                return kcall_fail(call, r, NULL);
        c->stats.sent++;
        c->stats.in_flight++;
        if (c->stats.in_flight > c->stats.max_in_flight)
                c->stats.max_in_flight = c->stats.in_flight;
}

static void refill(struct kube_client *c)
{
        uint64_t now = clk_now();
        if (now > c->last_refill) {
                c->tokens += (double)(now - c->last_refill) * c->opts.qps / 1e6;
                if (c->tokens > c->opts.burst)
                        c->tokens = c->opts.burst;
        }
        c->last_refill = now;
}

/* Starts queued calls while the token bucket allows: urgent first, then priority, then ordinary. */
static void pump(struct kube_client *c)
{
        for (;;) {
                int q = c->q_head[0] ? 0 : c->q_head[1] ? 1 : c->q_head[2] ? 2 : -1;
                if (q < 0)
                        return;
                if (c->opts.qps > 0) {
                        refill(c);
                        if (c->tokens < 1.0) {
                                uint64_t wait = (uint64_t)((1.0 - c->tokens) * 1e6 / c->opts.qps) + 1;
                                pump_soon(c, wait);
                                return;
                        }
                        c->tokens -= 1.0;
                }
                struct kube_call *call = c->q_head[q];
                c->q_head[q] = call->qnext;
                if (!c->q_head[q])
                        c->q_tail[q] = NULL;
                call->qnext = NULL;
                call->queued = false;
                c->stats.queued--;
                call_start(call);
        }
}

static void pump_timer_fn(void *userdata)
{
        struct kube_client *c = userdata;
        c->pump_timer = NULL;
        pump(c);
}

/* ---- client ---- */

int kube_client_new(struct loop *l, struct kube_config *cfg, const struct kube_client_options *opts,
                    struct kube_client **ret)
{
        if (!l || !cfg || isempty(cfg->server))
                return -EINVAL;
        struct kube_client *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->loop = l;
        c->cfg = cfg;
        if (opts)
                c->opts = *opts;
        if (c->opts.qps == 0)
                c->opts.qps = 20;
        if (c->opts.burst == 0)
                c->opts.burst = 30;
        if (c->opts.max_retries == 0)
                c->opts.max_retries = 3;
        if (c->opts.backoff_base_usec == 0)
                c->opts.backoff_base_usec = 200 * 1000;
        if (c->opts.backoff_max_usec == 0)
                c->opts.backoff_max_usec = 10 * 1000 * 1000;
        if (c->opts.conflict_retries == 0)
                c->opts.conflict_retries = 5;
        c->tokens = c->opts.burst;
        c->last_refill = clk_now();
        *ret = c;
        return 0;
}

struct kube_client *kube_client_free(struct kube_client *c)
{
        if (!c)
                return NULL;
        while (c->calls)
                kcall_free(c->calls);
        timer_cancel(c->pump_timer);
        for (size_t i = 0; i < c->n_events; i++) {
                free(c->events[i].key);
                free(c->events[i].namespace);
                free(c->events[i].name);
        }
        free(c->eviction_version);
        free(c);
        return NULL;
}

struct loop *kube_client_loop(struct kube_client *c)
{
        return c->loop;
}

void kube_client_set_rate(struct kube_client *c, double qps, unsigned burst)
{
        c->opts.qps = qps;
        if (burst > 0)
                c->opts.burst = burst;
        c->tokens = c->opts.burst;
        c->last_refill = clk_now();
        /* The pump may be waiting for a token under the old rate. */
        c->pump_timer = timer_cancel(c->pump_timer);
        pump_soon(c, 0);
}

void kube_client_stats(const struct kube_client *c, struct kube_client_stats *ret)
{
        *ret = c->stats;
}

void kube_sync_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct kube_sync *s = userdata;
        s->result = *r;
        *r = (struct kube_result){ 0 };
        s->done = true;
}

int kube_sync_wait(struct kube_client *c, int start_error, struct kube_call *call, struct kube_sync *s,
                   uint64_t timeout_usec)
{
        if (start_error < 0)
                return start_error;
        int r = loop_run_until(c->loop, &s->done, timeout_usec);
        if (!s->done) {
                kube_call_cancel(call);
                return r < 0 ? r : -ETIMEDOUT;
        }
        return s->result.error;
}

int kube_request(struct kube_client *c, const char *method, const char *path, const char *content_type,
                 const char *body, unsigned flags, kube_done_fn done, void *userdata,
                 struct kube_call **ret_call)
{
        struct kube_call *call;
        int r = kcall_new(c, method, path, content_type, body,
                          flags & (KUBE_REQ_URGENT | KUBE_REQ_PRIORITY | KUBE_REQ_IDEMPOTENT), done,
                          userdata, &call);
        if (r < 0)
                return r;
        kcall_enqueue(call);
        if (ret_call)
                *ret_call = call;
        return 0;
}

int kube_request_stream(struct kube_client *c, const char *path,
                        int (*on_data)(const char *data, size_t len, void *userdata), kube_done_fn done,
                        void *userdata, struct kube_call **ret_call)
{
        if (!on_data)
                return -EINVAL;
        struct kube_call *call;
        int r =
            kcall_new(c, "GET", path, NULL, NULL, KUBE_REQ_PRIORITY | CALL_STREAM, done, userdata, &call);
        if (r < 0)
                return r;
        call->on_data = on_data;
        kcall_enqueue(call);
        if (ret_call)
                *ret_call = call;
        return 0;
}

int kube_get_sync(struct kube_client *c, const char *path, uint64_t timeout_usec, cJSON **ret,
                  char **ret_error)
{
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        int r = kube_get(c, path, kube_sync_done, &s, &call);
        r = kube_sync_wait(c, r, call, &s, timeout_usec);
        if (r >= 0 && ret)
                *ret = TAKE_PTR(s.result.object);
        if (r < 0 && ret_error)
                *ret_error = s.result.message ? TAKE_PTR(s.result.message)
                                              : strprintf("GET %s: %s", path, strerror(-r));
        kube_result_clear(&s.result);
        return r;
}

int kube_list_sync(struct kube_client *c, const char *path, const struct kube_list_options *o,
                   uint64_t timeout_usec, cJSON **ret, char **ret_error)
{
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        int r = kube_list(c, path, o, kube_sync_done, &s, &call);
        r = kube_sync_wait(c, r, call, &s, timeout_usec);
        if (r >= 0 && ret)
                *ret = TAKE_PTR(s.result.object);
        if (r < 0 && ret_error)
                *ret_error = s.result.message ? TAKE_PTR(s.result.message)
                                              : strprintf("list %s: %s", path, strerror(-r));
        kube_result_clear(&s.result);
        return r;
}
