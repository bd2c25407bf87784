/* The Kubernetes API client: one request machine (rate limiter → token → HTTP → 401 re-auth → retry with
 * backoff → Status parsing) and the operations built on it. Multi-step operations (paginated lists,
 * discovery before eviction, read-modify-write of taints, event count bumps) re-issue requests on the same
 * call object, so a caller's handle stays valid for cancellation until its callback runs. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spotdrain/kube.h"
#include "spotdrain/metrics.h"

#define EVENT_CACHE_MAX 64

struct event_memo {
        char *key; /* kind/ns/name/reason/message */
        char *namespace, *name;
        int count;
};

struct kube_client {
        struct loop *loop;
        struct kube_config *cfg;
        struct kube_client_options opts;

        struct kube_call *calls;                 /* every live call */
        struct kube_call *q_head[3], *q_tail[3]; /* [0] urgent, [1] priority, [2] ordinary */
        double tokens;
        uint64_t last_refill;
        struct timer *pump_timer;

        char *eviction_version;
        struct event_memo events[EVENT_CACHE_MAX];
        size_t n_events, next_event;
        uint64_t event_seq;

        struct kube_client_stats stats;
};

enum {
        CALL_STREAM = 1 << 8,
};

struct kube_call;
typedef void (*step_fn)(struct kube_call *call, struct kube_result *r);

struct kube_call {
        struct kube_client *client;
        struct kube_call *prev, *next; /* client->calls */
        struct kube_call *qnext;
        bool queued;

        /* the request under way */
        char *method, *path, *content_type, *body;
        unsigned flags;
        int (*on_data)(const char *data, size_t len, void *userdata);
        char *url, *token;
        const char *headers[3];
        char *hdr_ct;
        struct http_tls tls;
        struct http_call *http;
        struct kube_token_wait *token_wait; /* waits for the exec plugin's credential */
        struct timer *timer;
        struct backoff backoff;
        unsigned retries;
        bool reauthed;
        bool finishing; /* its callback runs: cancelling it now is a no-op */

        step_fn step;
        kube_done_fn done;
        void *userdata;

        /* state of multi-step operations */
        char *s_ns, *s_name, *s_uid, *s_extra, *s_base;
        int64_t grace;
        cJSON *acc;
        const char *const *keep_fields; /* kube_list: pruning of each item */
        struct kube_taint taint;
        bool add;
        unsigned conflicts, restarts;
};

static const char *strnull(const char *s)
{
        return s ? s : "";
}

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

static void call_free(struct kube_call *call)
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
                call_free(call);
        return NULL;
}

static void call_finish(struct kube_call *call, struct kube_result *r)
{
        call->finishing = true;
        if (call->done)
                call->done(call->client, r, call->userdata);
        kube_result_clear(r);
        call_free(call);
}

static void finish_step(struct kube_call *call, struct kube_result *r)
{
        call_finish(call, r);
}

static void call_fail(struct kube_call *call, int error, char *message)
{
        struct kube_result r = { .error = error, .message = message };
        if (!r.message)
                r.message = strprintf("%s %s: %s", call->method, call->path, strerror(-error));
        call_finish(call, &r);
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

static void enqueue(struct kube_call *call)
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

static int call_set_request(struct kube_call *call, const char *method, const char *path,
                            const char *content_type, const char *body)
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
static void call_reissue(struct kube_call *call, const char *method, const char *path,
                         const char *content_type, const char *body, step_fn step)
{
        int r = call_set_request(call, method, path, content_type, body);
        if (r < 0)
                return call_fail(call, r, NULL);
        call->step = step;
        enqueue(call);
}

static int call_new(struct kube_client *c, const char *method, const char *path, const char *content_type,
                    const char *body, unsigned flags, kube_done_fn done, void *userdata,
                    struct kube_call **ret)
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
        int r = call_set_request(call, method, path, content_type, body);
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
        enqueue(call);
}

/* Every answer (retries included) counts in spotdrain_api_requests_total; evictions also by status code. */
static void count_request(const char *method, const char *path, const struct http_response *resp)
{
        char code[24];
        if (resp->status > 0)
                snprintf(code, sizeof(code), "%ld", resp->status);
        else
                snprintf(code, sizeof(code), "error");
        metrics_counter_inc(METRIC_API_REQUESTS, method, code, NULL);
        const char *q = strchr(path, '?');
        size_t n = q ? (size_t)(q - path) : strlen(path);
        if (n >= 9 && memcmp(path + n - 9, "/eviction", 9) == 0)
                metrics_counter_inc(METRIC_EVICTIONS, code, NULL);
}

static void call_http_done(const struct http_response *resp, void *userdata)
{
        struct kube_call *call = userdata;
        struct kube_client *c = call->client;
        call->http = NULL;
        c->stats.in_flight--;
        count_request(call->method, call->path, resp);

        if (resp->status == 401 && !call->reauthed) {
                /* The token may have rotated (projected service-account tokens, exec plugins): read it again
                 * and try once more. */
                kube_config_token_rejected(c->cfg, call->token);
                call->reauthed = true;
                enqueue(call);
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
        call_fail(
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

static void call_start(struct kube_call *call)
{
        struct kube_client *c = call->client;
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
                return call_fail(call, -ENOMEM, NULL);
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
                return call_fail(call, r, NULL);
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
                call_free(c->calls);
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
        int r = call_new(c, method, path, content_type, body,
                         flags & (KUBE_REQ_URGENT | KUBE_REQ_PRIORITY | KUBE_REQ_IDEMPOTENT), done, userdata,
                         &call);
        if (r < 0)
                return r;
        enqueue(call);
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
        int r = call_new(c, "GET", path, NULL, NULL, KUBE_REQ_PRIORITY | CALL_STREAM, done, userdata, &call);
        if (r < 0)
                return r;
        call->on_data = on_data;
        enqueue(call);
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

static char *print_json(const cJSON *j)
{
        return cJSON_PrintUnformatted(j);
}

/* ---- get / list ---- */

int kube_get(struct kube_client *c, const char *path, kube_done_fn done, void *userdata,
             struct kube_call **ret_call)
{
        return kube_request(c, "GET", path, NULL, NULL, KUBE_REQ_IDEMPOTENT, done, userdata, ret_call);
}

static void list_step(struct kube_call *call, struct kube_result *r);

static cJSON *list_acc_new(void)
{
        cJSON *acc = cJSON_CreateObject();
        if (!acc || !cJSON_AddObjectToObject(acc, "metadata") || !cJSON_AddArrayToObject(acc, "items")) {
                cJSON_Delete(acc);
                return NULL;
        }
        return acc;
}

static void list_step(struct kube_call *call, struct kube_result *r)
{
        bool continuing = strstr(call->path, "&continue=") != NULL;
        if (r->error == -ESTALE && r->http_status == 410 && continuing && call->restarts < 1) {
                /* The continue token expired: start the list again from the first page. */
                call->restarts++;
                cJSON_Delete(call->acc);
                call->acc = list_acc_new();
                kube_result_clear(r);
                if (!call->acc)
                        return call_fail(call, -ENOMEM, NULL);
                return call_reissue(call, "GET", call->s_base, NULL, NULL, list_step);
        }
        if (r->error < 0)
                return call_finish(call, r);
        cJSON *items = kube_list_items(r->object);
        cJSON *acc_items = kube_list_items(call->acc);
        while (items && items->child) {
                cJSON *item = cJSON_DetachItemViaPointer(items, items->child);
                if (call->keep_fields) {
                        cJSON *pruned = kube_object_prune(item, call->keep_fields);
                        cJSON_Delete(item);
                        if (!pruned) {
                                kube_result_clear(r);
                                return call_fail(call, -ENOMEM, NULL);
                        }
                        item = pruned;
                }
                cJSON_AddItemToArray(acc_items, item);
        }
        const char *cont = kube_object_str(r->object, "metadata.continue");
        if (!isempty(cont)) {
                _cleanup_free_ char *esc = kube_query_escape(cont);
                _cleanup_free_ char *next = esc ? strprintf("%s&continue=%s", call->s_base, esc) : NULL;
                kube_result_clear(r);
                if (!next)
                        return call_fail(call, -ENOMEM, NULL);
                return call_reissue(call, "GET", next, NULL, NULL, list_step);
        }
        const char *rv = kube_object_rv(r->object);
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(call->acc, "metadata");
        if (rv && !cJSON_AddStringToObject(meta, "resourceVersion", rv)) {
                kube_result_clear(r);
                return call_fail(call, -ENOMEM, NULL);
        }
        const char *kind = kube_object_str(r->object, "kind");
        if (kind)
                cJSON_AddStringToObject(call->acc, "kind", kind);
        cJSON_Delete(r->object);
        r->object = TAKE_PTR(call->acc);
        call_finish(call, r);
}

int kube_list(struct kube_client *c, const char *path, const struct kube_list_options *o, kube_done_fn done,
              void *userdata, struct kube_call **ret_call)
{
        static const struct kube_list_options none = { 0 };
        if (!o)
                o = &none;
        struct buf b = { 0 };
        _cleanup_free_ char *ls = o->label_selector ? kube_query_escape(o->label_selector) : NULL;
        _cleanup_free_ char *fs = o->field_selector ? kube_query_escape(o->field_selector) : NULL;
        _cleanup_free_ char *rv = o->resource_version ? kube_query_escape(o->resource_version) : NULL;
        if ((o->label_selector && !ls) || (o->field_selector && !fs) || (o->resource_version && !rv))
                return -ENOMEM;
        char sep = strchr(path, '?') ? '&' : '?';
        int r = buf_printf(&b, "%s%c", path, sep);
        if (r >= 0 && ls)
                r = buf_printf(&b, "labelSelector=%s&", ls);
        if (r >= 0 && fs)
                r = buf_printf(&b, "fieldSelector=%s&", fs);
        if (r >= 0 && rv)
                r = buf_printf(&b, "resourceVersion=%s&", rv);
        if (r >= 0)
                r = buf_printf(&b, "limit=%u", o->limit ? o->limit : 500);
        if (r < 0) {
                buf_free(&b);
                return -ENOMEM;
        }
        _cleanup_free_ char *full = b.data;
        struct kube_call *call;
        r = call_new(c, "GET", full, NULL, NULL, KUBE_REQ_IDEMPOTENT | (o->priority ? KUBE_REQ_PRIORITY : 0),
                     done, userdata, &call);
        if (r < 0)
                return r;
        call->s_base = strdup(full);
        call->keep_fields = o->keep_fields;
        call->acc = list_acc_new();
        if (!call->s_base || !call->acc) {
                call_free(call);
                return -ENOMEM;
        }
        call->step = list_step;
        enqueue(call);
        if (ret_call)
                *ret_call = call;
        return 0;
}

/* ---- discovery and eviction ---- */

const char *kube_eviction_version(const struct kube_client *c)
{
        return c->eviction_version;
}

/* Remembers which Eviction version GET /api/v1 offers: policy/v1 when pods/eviction says group policy,
 * version v1; otherwise the older v1beta1. */
static int discovery_apply(struct kube_client *c, const cJSON *list)
{
        const char *v = "policy/v1beta1";
        const cJSON *res;
        cJSON_ArrayForEach (res, cJSON_GetObjectItemCaseSensitive(list, "resources")) {
                if (!streq(kube_object_str(res, "name"), "pods/eviction"))
                        continue;
                if (streq(kube_object_str(res, "group"), "policy") &&
                    streq(kube_object_str(res, "version"), "v1"))
                        v = "policy/v1";
        }
        return free_and_strdup(&c->eviction_version, v);
}

static void discover_step(struct kube_call *call, struct kube_result *r)
{
        if (r->error >= 0) {
                int k = discovery_apply(call->client, r->object);
                if (k < 0) {
                        kube_result_clear(r);
                        return call_fail(call, k, NULL);
                }
        }
        call_finish(call, r);
}

int kube_discover_eviction(struct kube_client *c, kube_done_fn done, void *userdata,
                           struct kube_call **ret_call)
{
        struct kube_call *call;
        int r = call_new(c, "GET", "/api/v1", NULL, NULL, KUBE_REQ_IDEMPOTENT | KUBE_REQ_PRIORITY, done,
                         userdata, &call);
        if (r < 0)
                return r;
        call->step = discover_step;
        enqueue(call);
        if (ret_call)
                *ret_call = call;
        return 0;
}

static cJSON *delete_options(int64_t grace, const char *uid, bool with_kind)
{
        cJSON *o = cJSON_CreateObject();
        if (!o)
                return NULL;
        bool ok = true;
        if (with_kind)
                ok = cJSON_AddStringToObject(o, "apiVersion", "v1") &&
                     cJSON_AddStringToObject(o, "kind", "DeleteOptions");
        if (ok && grace >= 0)
                ok = cJSON_AddNumberToObject(o, "gracePeriodSeconds", (double)grace) != NULL;
        if (ok && uid) {
                cJSON *pre = cJSON_AddObjectToObject(o, "preconditions");
                ok = pre && cJSON_AddStringToObject(pre, "uid", uid);
        }
        if (!ok) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

enum kube_evict_outcome kube_evict_outcome(const struct kube_result *r)
{
        switch (r->http_status) {
        case 200:
        case 201:
                return KUBE_EVICT_EVICTED;
        case 429:
                return KUBE_EVICT_BLOCKED;
        case 404:
                return KUBE_EVICT_GONE;
        case 409:
                return KUBE_EVICT_CONFLICT;
        case 500:
                /* A plain server error is not the several-PDBs answer; only the latter is final. */
                if (r->message && strstr(r->message, "PodDisruptionBudget"))
                        return KUBE_EVICT_MULTIPLE;
                return KUBE_EVICT_ERROR;
        default:
                return KUBE_EVICT_ERROR;
        }
}

static void evict_step(struct kube_call *call, struct kube_result *r)
{
        if (r->http_status == 429) {
                /* "The disruption budget NAME needs N healthy pods and has M currently": the cause is more
                 * useful than the generic Status message, and names the PDB. */
                for (size_t i = 0; i < r->n_causes; i++) {
                        const char *m = r->causes[i].message;
                        if (!streq(r->causes[i].reason, "DisruptionBudget") || !m)
                                continue;
                        const char *prefix = "The disruption budget ";
                        if (startswith(m, prefix)) {
                                const char *s = m + strlen(prefix);
                                free(r->pdb_name);
                                r->pdb_name = strndup(s, strcspn(s, " "));
                        }
                        char *nm = strdup(m);
                        if (nm) {
                                free(r->message);
                                r->message = nm;
                        }
                        break;
                }
        }
        call_finish(call, r);
}

/* Aims the call at the eviction subresource with the Eviction body of the discovered version. */
static int evict_prepare(struct kube_call *call)
{
        const char *version = call->client->eviction_version ? call->client->eviction_version : "policy/v1";
        cJSON *ev = cJSON_CreateObject();
        cJSON *meta = ev ? cJSON_AddObjectToObject(ev, "metadata") : NULL;
        bool ok = meta && cJSON_AddStringToObject(ev, "apiVersion", version) &&
                  cJSON_AddStringToObject(ev, "kind", "Eviction") &&
                  cJSON_AddStringToObject(meta, "name", call->s_name) &&
                  cJSON_AddStringToObject(meta, "namespace", call->s_ns);
        if (ok && (call->grace >= 0 || call->s_uid)) {
                cJSON *opts = delete_options(call->grace, call->s_uid, false);
                ok = opts && cJSON_AddItemToObject(ev, "deleteOptions", opts);
                if (!ok)
                        cJSON_Delete(opts);
        }
        _cleanup_free_ char *body = ok ? print_json(ev) : NULL;
        cJSON_Delete(ev);
        _cleanup_free_ char *path = kube_path(NULL, "v1", call->s_ns, "pods", call->s_name, "eviction");
        if (!body || !path)
                return -ENOMEM;
        int r = call_set_request(call, "POST", path, "application/json", body);
        if (r < 0)
                return r;
        /* An eviction answer (429, 500) goes back to the caller: the drain engine decides. */
        call->flags &= ~KUBE_REQ_IDEMPOTENT;
        call->step = evict_step;
        return 0;
}

static void evict_discovered_step(struct kube_call *call, struct kube_result *r)
{
        if (r->error < 0)
                return call_finish(call, r);
        int k = discovery_apply(call->client, r->object);
        kube_result_clear(r);
        if (k >= 0)
                k = evict_prepare(call);
        if (k < 0)
                return call_fail(call, k, NULL);
        enqueue(call);
}

int kube_evict(struct kube_client *c, const char *namespace, const char *name, const char *uid,
               int64_t grace_seconds, kube_done_fn done, void *userdata, struct kube_call **ret_call)
{
        if (!namespace || !name)
                return -EINVAL;
        struct kube_call *call;
        /* Starts as the discovery GET; evict_prepare re-aims the call when the version is already known. */
        int r = call_new(c, "GET", "/api/v1", NULL, NULL, KUBE_REQ_PRIORITY | KUBE_REQ_IDEMPOTENT, done,
                         userdata, &call);
        if (r < 0)
                return r;
        call->s_ns = strdup(namespace);
        call->s_name = strdup(name);
        call->s_uid = uid ? strdup(uid) : NULL;
        call->grace = grace_seconds;
        if (!call->s_ns || !call->s_name || (uid && !call->s_uid)) {
                call_free(call);
                return -ENOMEM;
        }
        call->step = evict_discovered_step;
        if (c->eviction_version) {
                r = evict_prepare(call);
                if (r < 0) {
                        call_free(call);
                        return r;
                }
        }
        enqueue(call);
        if (ret_call)
                *ret_call = call;
        return 0;
}

int kube_pod_delete(struct kube_client *c, const char *namespace, const char *name, const char *uid,
                    int64_t grace_seconds, kube_done_fn done, void *userdata, struct kube_call **ret_call)
{
        if (!namespace || !name)
                return -EINVAL;
        _cleanup_free_ char *path = kube_path(NULL, "v1", namespace, "pods", name, NULL);
        cJSON *o = delete_options(grace_seconds, uid, true);
        _cleanup_free_ char *body = o ? print_json(o) : NULL;
        cJSON_Delete(o);
        if (!path || !body)
                return -ENOMEM;
        return kube_request(c, "DELETE", path, "application/json", body, KUBE_REQ_PRIORITY, done, userdata,
                            ret_call);
}

/* ---- nodes ---- */

int kube_node_cordon(struct kube_client *c, const char *node, bool cordon, kube_done_fn done, void *userdata,
                     struct kube_call **ret_call)
{
        if (!node)
                return -EINVAL;
        _cleanup_free_ char *path = kube_path(NULL, "v1", NULL, "nodes", node, NULL);
        if (!path)
                return -ENOMEM;
        return kube_request(c, "PATCH", path, "application/strategic-merge-patch+json",
                            cordon ? "{\"spec\":{\"unschedulable\":true}}"
                                   : "{\"spec\":{\"unschedulable\":null}}",
                            /* Setting spec.unschedulable twice changes nothing: safe to retry. */
                            KUBE_REQ_URGENT | KUBE_REQ_IDEMPOTENT, done, userdata, ret_call);
}

static void taint_got_step(struct kube_call *call, struct kube_result *r);

static bool taint_same(const cJSON *t, const struct kube_taint *want)
{
        return streq(kube_object_str(t, "key"), want->key) &&
               (!want->effect || streq(kube_object_str(t, "effect"), want->effect));
}

static void taint_patched_step(struct kube_call *call, struct kube_result *r)
{
        if (r->http_status == 409 && call->conflicts < call->client->opts.conflict_retries) {
                /* Someone changed the node between our read and our patch: read it again. */
                call->conflicts++;
                kube_result_clear(r);
                return call_reissue(call, "GET", call->s_base, NULL, NULL, taint_got_step);
        }
        call_finish(call, r);
}

static void taint_got_step(struct kube_call *call, struct kube_result *r)
{
        if (r->error < 0)
                return call_finish(call, r);
        const cJSON *old =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r->object, "spec"), "taints");
        const char *rv = kube_object_rv(r->object);
        cJSON *patch = cJSON_CreateObject();
        cJSON *meta = patch ? cJSON_AddObjectToObject(patch, "metadata") : NULL;
        cJSON *spec = patch ? cJSON_AddObjectToObject(patch, "spec") : NULL;
        cJSON *taints = spec ? cJSON_AddArrayToObject(spec, "taints") : NULL;
        bool ok = meta && taints && (!rv || cJSON_AddStringToObject(meta, "resourceVersion", rv));
        bool changed = false, present = false;
        const cJSON *t;
        cJSON_ArrayForEach (t, old) {
                if (ok && taint_same(t, &call->taint)) {
                        present = true;
                        if (!call->add || !streq_ptr(kube_object_str(t, "value"), call->taint.value)) {
                                changed = true;
                                continue;
                        }
                }
                cJSON *dup = cJSON_Duplicate(t, true);
                ok = ok && dup && cJSON_AddItemToArray(taints, dup);
        }
        if (ok && call->add && (changed || !present)) {
                cJSON *nt = cJSON_CreateObject();
                ok = nt && cJSON_AddItemToArray(taints, nt) &&
                     cJSON_AddStringToObject(nt, "key", call->taint.key) &&
                     (!call->taint.value || cJSON_AddStringToObject(nt, "value", call->taint.value)) &&
                     cJSON_AddStringToObject(nt, "effect", call->taint.effect);
                changed = true;
        }
        _cleanup_free_ char *body = ok && changed ? print_json(patch) : NULL;
        cJSON_Delete(patch);
        if (!ok || (changed && !body)) {
                kube_result_clear(r);
                return call_fail(call, -ENOMEM, NULL);
        }
        if (!changed)
                return call_finish(call, r); /* already as wanted: the node as read */
        kube_result_clear(r);
        /* The patch carries the resourceVersion it was computed from, so a retry after a 5xx is safe: a
         * change in between answers 409. */
        call_reissue(call, "PATCH", call->s_base, "application/strategic-merge-patch+json", body,
                     taint_patched_step);
}

int kube_node_taint(struct kube_client *c, const char *node, const struct kube_taint *t, bool add,
                    kube_done_fn done, void *userdata, struct kube_call **ret_call)
{
        if (!node || !t || !t->key || (add && !t->effect))
                return -EINVAL;
        _cleanup_free_ char *path = kube_path(NULL, "v1", NULL, "nodes", node, NULL);
        if (!path)
                return -ENOMEM;
        struct kube_call *call;
        int r = call_new(c, "GET", path, NULL, NULL, KUBE_REQ_PRIORITY | KUBE_REQ_IDEMPOTENT, done, userdata,
                         &call);
        if (r < 0)
                return r;
        call->s_base = TAKE_PTR(path);
        call->taint.key = strdup(t->key);
        call->taint.value = t->value ? strdup(t->value) : NULL;
        call->taint.effect = t->effect ? strdup(t->effect) : NULL;
        call->add = add;
        if (!call->taint.key || (t->value && !call->taint.value) || (t->effect && !call->taint.effect)) {
                call_free(call);
                return -ENOMEM;
        }
        call->step = taint_got_step;
        enqueue(call);
        if (ret_call)
                *ret_call = call;
        return 0;
}

int kube_node_set_meta(struct kube_client *c, const char *node, bool annotations, const char *const *keys,
                       const char *const *values, size_t n, kube_done_fn done, void *userdata,
                       struct kube_call **ret_call)
{
        if (!node || (n > 0 && (!keys || !values)))
                return -EINVAL;
        cJSON *patch = cJSON_CreateObject();
        cJSON *meta = patch ? cJSON_AddObjectToObject(patch, "metadata") : NULL;
        cJSON *m = meta ? cJSON_AddObjectToObject(meta, annotations ? "annotations" : "labels") : NULL;
        bool ok = m != NULL;
        for (size_t i = 0; ok && i < n; i++)
                ok = values[i] ? cJSON_AddStringToObject(m, keys[i], values[i]) != NULL
                               : cJSON_AddNullToObject(m, keys[i]) != NULL;
        _cleanup_free_ char *body = ok ? print_json(patch) : NULL;
        cJSON_Delete(patch);
        _cleanup_free_ char *path = kube_path(NULL, "v1", NULL, "nodes", node, NULL);
        if (!body || !path)
                return -ENOMEM;
        return kube_request(c, "PATCH", path, "application/merge-patch+json", body, KUBE_REQ_PRIORITY, done,
                            userdata, ret_call);
}

/* ---- events ---- */

static char *event_key(const struct kube_event_spec *e)
{
        return strprintf("%s/%s/%s/%s/%s", strnull(e->involved_kind), strnull(e->involved_namespace),
                         strnull(e->involved_name), strnull(e->reason), strnull(e->message));
}

static struct event_memo *event_memo_find(struct kube_client *c, const char *key)
{
        for (size_t i = 0; i < c->n_events; i++)
                if (streq(c->events[i].key, key))
                        return &c->events[i];
        return NULL;
}

static void event_memo_store(struct kube_client *c, const char *key, const char *ns, const char *name,
                             int count)
{
        struct event_memo *m = event_memo_find(c, key);
        if (!m) {
                if (c->n_events < EVENT_CACHE_MAX)
                        m = &c->events[c->n_events++];
                else {
                        /* Oldest slot goes: repeats are bumped only while they are recent. */
                        m = &c->events[c->next_event];
                        c->next_event = (c->next_event + 1) % EVENT_CACHE_MAX;
                }
                free(m->key);
                free(m->namespace);
                free(m->name);
                m->key = strdup(key);
                m->namespace = strdup(ns);
                m->name = strdup(name);
        }
        m->count = count;
        if (!m->key || !m->namespace || !m->name) {
                /* Without a full entry the next repeat just creates a new Event. */
                free(m->key);
                m->key = NULL;
        }
}

static void event_now(char *buf, size_t len)
{
        if (format_rfc3339(clk_now(), buf, len) < 0)
                snprintf(buf, len, "1970-01-01T00:00:00Z");
}

static void event_created_step(struct kube_call *call, struct kube_result *r)
{
        if (r->error >= 0) {
                const char *ns = kube_object_str(r->object, "metadata.namespace");
                const char *name = kube_object_str(r->object, "metadata.name");
                const cJSON *count = cJSON_GetObjectItemCaseSensitive(r->object, "count");
                if (ns && name)
                        event_memo_store(call->client, call->s_extra, ns, name,
                                         cJSON_IsNumber(count) ? count->valueint : 1);
        }
        call_finish(call, r);
}

static void event_patched_step(struct kube_call *call, struct kube_result *r)
{
        if (r->http_status == 404) {
                /* The earlier Event expired (events have a TTL): create a fresh one. */
                kube_result_clear(r);
                _cleanup_free_ char *path = kube_path(NULL, "v1", call->s_ns, "events", NULL, NULL);
                if (!path)
                        return call_fail(call, -ENOMEM, NULL);
                return call_reissue(call, "POST", path, "application/json", call->s_base,
                                    event_created_step);
        }
        event_created_step(call, r);
}

int kube_event_create(struct kube_client *c, const struct kube_event_spec *e, kube_done_fn done,
                      void *userdata, struct kube_call **ret_call)
{
        if (!e || !e->involved_kind || !e->involved_name || !e->reason)
                return -EINVAL;
        const char *ns = e->namespace            ? e->namespace
                         : e->involved_namespace ? e->involved_namespace
                                                 : "default";
        char now[64];
        event_now(now, sizeof(now));
        _cleanup_free_ char *key = event_key(e);
        _cleanup_free_ char *name = strprintf("%s.%" PRIx64 "%04" PRIx64, e->involved_name,
                                              now_realtime_usec(), c->event_seq++ & 0xffff);
        if (!key || !name)
                return -ENOMEM;

        cJSON *ev = cJSON_CreateObject();
        cJSON *meta = ev ? cJSON_AddObjectToObject(ev, "metadata") : NULL;
        cJSON *inv = ev ? cJSON_AddObjectToObject(ev, "involvedObject") : NULL;
        cJSON *src = ev ? cJSON_AddObjectToObject(ev, "source") : NULL;
        bool ok =
            meta && inv && src && cJSON_AddStringToObject(ev, "apiVersion", "v1") &&
            cJSON_AddStringToObject(ev, "kind", "Event") && cJSON_AddStringToObject(meta, "name", name) &&
            cJSON_AddStringToObject(meta, "namespace", ns) &&
            cJSON_AddStringToObject(inv, "kind", e->involved_kind) &&
            cJSON_AddStringToObject(inv, "name", e->involved_name) &&
            (!e->involved_namespace || cJSON_AddStringToObject(inv, "namespace", e->involved_namespace)) &&
            (!e->involved_uid || cJSON_AddStringToObject(inv, "uid", e->involved_uid)) &&
            (!e->involved_api_version ||
             cJSON_AddStringToObject(inv, "apiVersion", e->involved_api_version)) &&
            cJSON_AddStringToObject(ev, "reason", e->reason) &&
            cJSON_AddStringToObject(ev, "message", strnull(e->message)) &&
            cJSON_AddStringToObject(ev, "type", e->warning ? "Warning" : "Normal") &&
            cJSON_AddStringToObject(src, "component", "spotdrain") &&
            cJSON_AddStringToObject(ev, "reportingComponent", "spotdrain") &&
            cJSON_AddStringToObject(ev, "firstTimestamp", now) &&
            cJSON_AddStringToObject(ev, "lastTimestamp", now) && cJSON_AddNumberToObject(ev, "count", 1);
        _cleanup_free_ char *body = ok ? print_json(ev) : NULL;
        cJSON_Delete(ev);
        if (!body)
                return -ENOMEM;

        struct event_memo *m = event_memo_find(c, key);
        _cleanup_free_ char *path = m ? kube_path(NULL, "v1", m->namespace, "events", m->name, NULL)
                                      : kube_path(NULL, "v1", ns, "events", NULL, NULL);
        _cleanup_free_ char *patch =
            m ? strprintf("{\"count\":%d,\"lastTimestamp\":\"%s\"}", m->count + 1, now) : NULL;
        if (!path || (m && !patch))
                return -ENOMEM;
        struct kube_call *call;
        int r =
            m ? call_new(c, "PATCH", path, "application/merge-patch+json", patch, 0, done, userdata, &call)
              : call_new(c, "POST", path, "application/json", body, 0, done, userdata, &call);
        if (r < 0)
                return r;
        call->s_extra = TAKE_PTR(key);
        call->s_base = TAKE_PTR(body);
        call->s_ns = strdup(ns);
        if (!call->s_ns) {
                call_free(call);
                return -ENOMEM;
        }
        call->step = m ? event_patched_step : event_created_step;
        enqueue(call);
        if (ret_call)
                *ret_call = call;
        return 0;
}

/* ---- leases ---- */

static int format_micro_time(uint64_t usec, char *buf, size_t len)
{
        time_t t = (time_t)(usec / 1000000ULL);
        struct tm tm;
        if (!gmtime_r(&t, &tm))
                return -EINVAL;
        int n = snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06uZ", tm.tm_year + 1900, tm.tm_mon + 1,
                         tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (unsigned)(usec % 1000000ULL));
        return n > 0 && (size_t)n < len ? 0 : -ENOBUFS;
}

static char *lease_body(const struct kube_lease *l, bool with_rv)
{
        char acquire[64], renew[64];
        cJSON *o = cJSON_CreateObject();
        cJSON *meta = o ? cJSON_AddObjectToObject(o, "metadata") : NULL;
        cJSON *spec = o ? cJSON_AddObjectToObject(o, "spec") : NULL;
        bool ok =
            meta && spec && cJSON_AddStringToObject(o, "apiVersion", "coordination.k8s.io/v1") &&
            cJSON_AddStringToObject(o, "kind", "Lease") && cJSON_AddStringToObject(meta, "name", l->name) &&
            cJSON_AddStringToObject(meta, "namespace", l->namespace) &&
            (!with_rv || !l->resource_version ||
             cJSON_AddStringToObject(meta, "resourceVersion", l->resource_version)) &&
            (!l->holder_identity || cJSON_AddStringToObject(spec, "holderIdentity", l->holder_identity)) &&
            (l->lease_duration_seconds <= 0 ||
             cJSON_AddNumberToObject(spec, "leaseDurationSeconds", l->lease_duration_seconds)) &&
            cJSON_AddNumberToObject(spec, "leaseTransitions", l->lease_transitions);
        if (ok && l->acquire_time_usec)
                ok = format_micro_time(l->acquire_time_usec, acquire, sizeof(acquire)) >= 0 &&
                     cJSON_AddStringToObject(spec, "acquireTime", acquire);
        if (ok && l->renew_time_usec)
                ok = format_micro_time(l->renew_time_usec, renew, sizeof(renew)) >= 0 &&
                     cJSON_AddStringToObject(spec, "renewTime", renew);
        char *body = ok ? print_json(o) : NULL;
        cJSON_Delete(o);
        return body;
}

int kube_lease_get(struct kube_client *c, const char *namespace, const char *name, kube_done_fn done,
                   void *userdata, struct kube_call **ret_call)
{
        if (!namespace || !name)
                return -EINVAL;
        _cleanup_free_ char *path = kube_path("coordination.k8s.io", "v1", namespace, "leases", name, NULL);
        if (!path)
                return -ENOMEM;
        return kube_request(c, "GET", path, NULL, NULL, KUBE_REQ_PRIORITY | KUBE_REQ_IDEMPOTENT, done,
                            userdata, ret_call);
}

int kube_lease_create(struct kube_client *c, const struct kube_lease *l, kube_done_fn done, void *userdata,
                      struct kube_call **ret_call)
{
        if (!l || !l->namespace || !l->name)
                return -EINVAL;
        _cleanup_free_ char *path =
            kube_path("coordination.k8s.io", "v1", l->namespace, "leases", NULL, NULL);
        _cleanup_free_ char *body = lease_body(l, false);
        if (!path || !body)
                return -ENOMEM;
        return kube_request(c, "POST", path, "application/json", body, KUBE_REQ_PRIORITY, done, userdata,
                            ret_call);
}

int kube_lease_update(struct kube_client *c, const struct kube_lease *l, kube_done_fn done, void *userdata,
                      struct kube_call **ret_call)
{
        if (!l || !l->namespace || !l->name)
                return -EINVAL;
        _cleanup_free_ char *path =
            kube_path("coordination.k8s.io", "v1", l->namespace, "leases", l->name, NULL);
        _cleanup_free_ char *body = lease_body(l, true);
        if (!path || !body)
                return -ENOMEM;
        return kube_request(c, "PUT", path, "application/json", body, KUBE_REQ_PRIORITY, done, userdata,
                            ret_call);
}
