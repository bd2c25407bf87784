/* The Kubernetes API client's request machine: the waiting calls by priority and deadline, the rate
 * limiter, the token, the HTTP request, 401 re-auth, retries with backoff and throttling, streams. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/client_internal.h"
#include "spotdrain/kube.h"
#include "spotdrain/metrics.h"

/* ---- call lifecycle ---- */

/* ---- the waiting calls: a binary heap per class, earliest key first ---- */

/* What the informers see by first: a watch's stream or (re)list is one request, and until it is answered
 * its owner is blind (a drain cannot plan before its pods are listed, does not see them go without its
 * watch, and forces the ones it believes still there at their last safe moment). Then calls with a
 * deadline key, earliest first; then those without one (reads, writes no pod's last safe moment waits on),
 * in the order they were made. A granted eviction does not wait behind every read made before its last
 * safe moment, holding its PDB slot meanwhile. With a thousand drains under way keyed calls (evictions,
 * forced deletes) are never few: behind them, drains waited 63 s for their pods' list and 100 s for their
 * watch. */
static bool heap_before(const struct kube_call *a, const struct kube_call *b)
{
        bool as = a->flags & KUBE_REQ_SIGHT, bs = b->flags & KUBE_REQ_SIGHT;
        if (as != bs)
                return as;
        if (!a->key != !b->key)
                return a->key != 0;
        if (a->key != b->key)
                return a->key < b->key;
        return a->seq < b->seq;
}

static void heap_place(struct kube_call **h, size_t i, struct kube_call *call)
{
        h[i] = call;
        call->hidx = i;
}

static void heap_up(struct kube_call **h, size_t i)
{
        struct kube_call *call = h[i];
        while (i > 0 && heap_before(call, h[(i - 1) / 2])) {
                heap_place(h, i, h[(i - 1) / 2]);
                i = (i - 1) / 2;
        }
        heap_place(h, i, call);
}

static void heap_down(struct kube_call **h, size_t n, size_t i)
{
        struct kube_call *call = h[i];
        for (;;) {
                size_t l = 2 * i + 1, m = l;
                if (l >= n)
                        break;
                if (l + 1 < n && heap_before(h[l + 1], h[l]))
                        m = l + 1;
                if (!heap_before(h[m], call))
                        break;
                heap_place(h, i, h[m]);
                i = m;
        }
        heap_place(h, i, call);
}

static void queue_remove(struct kube_call *call)
{
        struct kube_client *c = call->client;
        if (!call->queued)
                return;
        int q = call->hq;
        struct kube_call **h = c->heap[q];
        size_t i = call->hidx, last = --c->heap_n[q];
        if (i != last) {
                heap_place(h, i, h[last]);
                heap_down(h, last, i);
                heap_up(h, h[i]->hidx);
        }
        call->queued = false;
        c->stats.queued--;
}

void kcall_free(struct kube_call *call)
{
        struct kube_client *c = call->client;
        queue_remove(call);
        if (call->http) {
                http_cancel(call->http);
                c->stats.in_flight--;
        }
        if (call->active) {
                c->n_active--;
                kube_client_pump_soon(c, 0);
        }
        kube_token_wait_cancel(call->token_wait);
        timer_cancel(call->timer);
        if (call->prev)
                call->prev->next = call->next;
        else
                c->calls = call->next;
        if (call->next)
                call->next->prev = call->prev;
        c->n_calls--;
        if (call->event)
                c->events_in_flight--;
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

void kube_client_pump_soon(struct kube_client *c, uint64_t after_usec)
{
        if (c->pump_timer)
                return;
        /* Without a timer nothing would ever leave the queue; calls stay queued and a later enqueue
         * retries arming it. */
        if (timer_start_in(c->loop, after_usec, pump_timer_fn, c, &c->pump_timer) >= 0)
                timer_urgent(c->pump_timer);
}

void kcall_enqueue(struct kube_call *call)
{
        struct kube_client *c = call->client;
        int q = (call->flags & KUBE_REQ_URGENT) ? 0 : (call->flags & KUBE_REQ_PRIORITY) ? 1 : 2;
        if (call->queued)
                return;
        /* Room was made when the call was (heap_reserve): every heap holds every live call. */
        call->hq = q;
        c->heap[q][c->heap_n[q]] = call;
        heap_up(c->heap[q], c->heap_n[q]++);
        call->queued = true;
        call->queued_at = clk_now();
        call->held_at = kube_client_rate_held(c, call->queued_at);
        c->stats.queued++;
        /* An urgent call does not wait out a throttling pause the pump may be armed for. */
        if (q == 0 && c->pump_timer && clk_now() < c->paused_until)
                c->pump_timer = timer_cancel(c->pump_timer);
        kube_client_pump_soon(c, 0);
}

void kube_call_set_deadline(struct kube_call *call, uint64_t key_usec)
{
        if (!call)
                return;
        call->key = key_usec;
        if (!call->queued)
                return;
        struct kube_call **h = call->client->heap[call->hq];
        heap_up(h, call->hidx);
        heap_down(h, call->client->heap_n[call->hq], call->hidx);
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

/* Makes room in every heap for one more live call, so that queueing it never fails. */
static int heap_reserve(struct kube_client *c)
{
        for (int q = 0; q < 3; q++) {
                if (c->n_calls < c->heap_cap[q])
                        continue;
                size_t cap = c->heap_cap[q] ? 2 * c->heap_cap[q] : 16;
                struct kube_call **h = reallocarray(c->heap[q], cap, sizeof(*h));
                if (!h)
                        return -ENOMEM;
                c->heap[q] = h;
                c->heap_cap[q] = cap;
        }
        return 0;
}

int kcall_new(struct kube_client *c, const char *method, const char *path, const char *content_type,
              const char *body, unsigned flags, kube_done_fn done, void *userdata, struct kube_call **ret)
{
        if (!c || !path || !method)
                return -EINVAL;
        if (heap_reserve(c) < 0)
                return -ENOMEM;
        struct kube_call *call = calloc(1, sizeof(*call));
        if (!call)
                return -ENOMEM;
        call->client = c;
        call->flags = flags;
        call->done = done;
        call->userdata = userdata;
        call->step = finish_step;
        call->grace = -1;
        call->seq = ++c->seq;
        int r = kcall_set_request(call, method, path, content_type, body);
        if (r < 0) {
                free(call);
                return r;
        }
        call->next = c->calls;
        if (c->calls)
                c->calls->prev = call;
        c->calls = call;
        c->n_calls++;
        *ret = call;
        return 0;
}

static void throttled(struct kube_client *c, const char *retry_after);

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

void kube_stream_time_out(struct kube_call *s, const char *why)
{
        if (!(s->flags & CALL_STREAM) || !s->http || s->finishing)
                return;
        s->http = http_cancel_silent(s->http);
        s->client->stats.in_flight--;
        struct http_response resp = { .status = 200, .error = -ETIMEDOUT };
        snprintf(resp.errbuf, sizeof(resp.errbuf), "%s", why);
        struct kube_result r;
        kube_result_from_response(s, &resp, &r);
        s->step(s, &r);
}

/* The watch streams sent before the stall end as if their own idle limit had passed: each watch resumes from
 * its resourceVersion, on a live connection. One at a time, looked up again after each: an owner's callback
 * may end or start calls. */
static void resume_streams(void *userdata)
{
        struct kube_client *c = userdata;
        c->resume_timer = NULL;
        for (;;) {
                struct kube_call *s = NULL;
                for (struct kube_call *k = c->calls; k && !s; k = k->next)
                        if ((k->flags & CALL_STREAM) && k->http && !k->finishing && k->sent_at < c->stall_at)
                                s = k;
                if (!s)
                        return;
                kube_stream_time_out(s, "another request got no answer within its idle limit");
        }
}

static void stalled_at(struct kube_client *c, uint64_t at)
{
        c->stall_at = at;
        c->stall_seen = clk_now();
        if (!c->resume_timer && timer_start_in(c->loop, 0, resume_streams, c, &c->resume_timer) < 0)
                log_debug("kube: cannot resume the watches after a stall");
}

static void stalled(struct kube_client *c)
{
        stalled_at(c, clk_now());
}

void kube_client_streams_silent(struct kube_client *c, uint64_t before)
{
        uint64_t now = clk_now();
        if (c->stall_seen && now < c->stall_seen + KUBE_STALL_CAUTION_USEC)
                return;
        log_debug("kube: a watch resumed by its owner got the events its stream had not passed on: resuming "
                  "the other watches");
        stalled_at(c, before);
}

static void call_http_done(const struct http_response *resp, void *userdata)
{
        struct kube_call *call = userdata;
        struct kube_client *c = call->client;
        call->http = NULL;
        c->stats.in_flight--;
        if (call->active) {
                call->active = false;
                c->n_active--;
                if (c->stats.queued)
                        kube_client_pump_soon(c, 0);
        }
        count_request(c->opts.metrics, call->method, call->path, resp);
        if (resp->status > 0)
                c->stats.unreachable_since = 0;
        else if (resp->error < 0 && resp->error != -ECANCELED) {
                if (!c->stats.unreachable_since)
                        c->stats.unreachable_since = clk_now();
                snprintf(c->stats.last_error, sizeof(c->stats.last_error), "%s",
                         resp->errbuf[0] ? resp->errbuf : strerror(-resp->error));
        }

        if (resp->status == 401 && !call->reauthed) {
                /* The token may have rotated (projected service-account tokens, exec plugins): read it again
                 * and try once more. */
                kube_config_token_rejected(c->cfg, call->token);
                call->reauthed = true;
                kcall_enqueue(call);
                return;
        }

        if (resp->status == 429 && !isempty(resp->retry_after) && !kube_pdb_refusal(resp)) {
                throttled(c, resp->retry_after);
                /* Rejected before it ran: safe to send again whatever its verb (as client-go does). A
                 * watch is re-established by its owner. */
                if (!(call->flags & CALL_STREAM) && call->throttled < KUBE_THROTTLE_RETRIES) {
                        /* Even an urgent call waits out the pause before it is sent again: sent into the
                         * server's refusal it would use up its retries in a moment. */
                        uint64_t now = clk_now();
                        call->throttled++;
                        if (c->paused_until <= now || timer_start_in(c->loop, c->paused_until - now,
                                                                     retry_timer_fn, call, &call->timer) < 0)
                                kcall_enqueue(call);
                        return;
                }
        }

        /* No answer at all within the idle limit: the connection stopped passing bytes, perhaps for the
         * watches on it too, which may be silent for a minute before they notice. */
        if (!(call->flags & CALL_STREAM) && resp->status == 0 && resp->error == -ETIMEDOUT)
                stalled(c);

        bool transport = resp->status == 0 || resp->error < 0;
        bool retry_status = (call->flags & KUBE_REQ_IDEMPOTENT) &&
                            (resp->status >= 500 || (resp->status == 429 && !isempty(resp->retry_after)));
        if (!(call->flags & CALL_STREAM) && (transport || retry_status) &&
            call->retries < c->opts.max_retries) {
                uint64_t delay = backoff_next(&call->backoff);
                uint64_t ra = kube_parse_retry_after(resp->retry_after);
                if (ra > delay)
                        delay = ra;
                call->retries++;
                log_debug("kube: %s %s: %s, retrying in %" PRIu64 " ms", call->method, call->path,
                          transport ? "transport error" : "server error", delay / 1000);
                if (timer_start_in(c->loop, delay, retry_timer_fn, call, &call->timer) >= 0)
                        return;
        }

        struct kube_result r;
        kube_result_from_response(call, resp, &r);
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
        kube_describe_request(call->method, call->path, verb, sizeof(verb), resource, sizeof(resource), ns,
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
                 * the same limit and resumes from its resourceVersion, unless it is patient: silent while
                 * its resource is quiet, up to the bookmark that comes every minute. */
                .idle_timeout_usec = (call->flags & KUBE_REQ_PATIENT) ? KUBE_WATCH_IDLE_TIMEOUT_USEC
                                     : c->opts.idle_timeout_usec      ? c->opts.idle_timeout_usec
                                                                      : KUBE_IDLE_TIMEOUT_USEC,
                .on_data = (call->flags & CALL_STREAM) ? call_on_data : NULL,
        };
        r = http_send(c->loop, &req, call_http_done, call, &call->http);
        if (r < 0)
                return kcall_fail(call, r, NULL);
        c->stats.sent++;
        uint64_t now = clk_now();
        call->sent_at = now;
        if (now >= c->win_start + USEC_PER_SEC) {
                c->win_rate = (double)c->win_sent * 1e6 / (double)(now - c->win_start);
                c->win_start = now;
                c->win_sent = 0;
        }
        c->win_sent++;
        c->stats.in_flight++;
        if (c->stats.in_flight > c->stats.max_in_flight)
                c->stats.max_in_flight = c->stats.in_flight;
}

/* The rate allowed now (< 0: unlimited): the operator's cap, lowered while the server throttles. A lowered
 * rate climbs back by a quarter for every whole second since it last changed, up to the cap, where the
 * slow-down ends. */
double kube_client_current_rate(struct kube_client *c, uint64_t now)
{
        double cap = c->opts.qps > 0 ? c->opts.qps : -1;
        if (c->apf_rate <= 0)
                return cap;
        if (now >= c->paused_until && now >= c->apf_changed + USEC_PER_SEC) {
                uint64_t steps = (now - c->apf_changed) / USEC_PER_SEC;
                for (uint64_t i = 0; i < steps && c->apf_rate > 0; i++) {
                        c->apf_rate *= 1.25;
                        if (c->apf_rate >= (cap > 0 ? cap : KUBE_UNLIMITED_RECOVERED))
                                c->apf_rate = 0;
                }
                c->apf_changed += steps * USEC_PER_SEC;
                if (c->apf_rate <= 0) {
                        log_debug("kube: the API server no longer throttles; back to %g requests a second",
                                  cap);
                        return cap;
                }
        }
        return cap > 0 && cap < c->apf_rate ? cap : c->apf_rate;
}

static void refill(struct kube_client *c, uint64_t now, double rate)
{
        /* While slowed down, no burst beyond a second's worth: the server just said it has no room. */
        double burst = c->opts.burst;
        if (c->apf_rate > 0 && burst > rate)
                burst = rate > 1 ? rate : 1;
        if (now > c->last_refill) {
                c->tokens += (double)(now - c->last_refill) * rate / 1e6;
                if (c->tokens > burst)
                        c->tokens = burst;
        }
        c->last_refill = now;
}

/* The server's priority and fairness turned a request away (kube-apiserver's 429 with Retry-After, before
 * running it): every request but the urgent ones waits out the Retry-After, and the rate is halved from
 * what the client was sending (once per pause: the answers to the requests already under way say the
 * same thing). */
static void throttled(struct kube_client *c, const char *retry_after)
{
        uint64_t now = clk_now();
        uint64_t pause = kube_parse_retry_after(retry_after);
        c->stats.throttled++;
        if (now + pause > c->paused_until)
                c->paused_until = now + pause;
        if (c->apf_cut_at && now < c->apf_cut_at + (pause > USEC_PER_SEC ? pause : USEC_PER_SEC))
                return;
        double rate = kube_client_current_rate(c, now);
        double sent = c->win_rate;
        if (now >= c->win_start + USEC_PER_SEC / 4) {
                double part = (double)c->win_sent * 1e6 / (double)(now - c->win_start);
                if (part > sent)
                        sent = part;
        }
        double base = rate > 0 && rate < sent ? rate : sent;
        c->apf_rate = base / 2 > 1 ? base / 2 : 1;
        c->apf_cut_at = c->apf_changed = now;
        c->tokens = 0;
        c->last_refill = now;
        log_debug("kube: the API server throttles (429, Retry-After %s); pausing %" PRIu64
                  " ms, then %.1f requests a second",
                  retry_after ? retry_after : "-", pause / 1000, c->apf_rate);
}

uint64_t kube_client_rate_held(const struct kube_client *c, uint64_t now)
{
        return c->rate_held_usec +
               (c->rate_held_since && now > c->rate_held_since ? now - c->rate_held_since : 0);
}

/* The queue is held by the rate from now (held), or not. */
static void rate_hold(struct kube_client *c, uint64_t now, bool held)
{
        if (c->rate_held_since) {
                c->rate_held_usec = kube_client_rate_held(c, now);
                c->rate_held_since = 0;
        }
        if (held)
                c->rate_held_since = now ? now : 1;
}

const char *kube_event_shed_reason(struct kube_client *c, const struct kube_call *call, uint64_t now)
{
        /* Only while the server's Retry-After pause lasts: the client's rate climbing back after a 429
         * may take minutes, and an Event is what an operator reads first (4,038 of them were dropped in a
         * 2,000-node run for 13 requests turned away when the climb counted too). */
        if (now < c->paused_until)
                return "throttled";
        if (now < c->events_yield_until)
                return "short";
        if (call && kube_client_rate_held(c, now) > call->held_at + KUBE_EVENT_MAX_WAIT_USEC)
                return "backlog";
        return NULL;
}

/* Starts queued calls while the token bucket allows: urgent first, then priority, then ordinary, each
 * earliest deadline key first. During a throttling pause only urgent calls go. An Event whose turn comes
 * while the API is short is dropped rather than sent: what the drains need goes first. */
void kube_client_pump(struct kube_client *c)
{
        for (;;) {
                int q = c->heap_n[0] ? 0 : c->heap_n[1] ? 1 : c->heap_n[2] ? 2 : -1;
                uint64_t now = clk_now();
                if (q < 0) {
                        rate_hold(c, now, false);
                        return;
                }
                const char *shed =
                    c->heap[q][0]->event ? kube_event_shed_reason(c, c->heap[q][0], now) : NULL;
                if (shed) {
                        struct kube_call *ev = c->heap[q][0];
                        queue_remove(ev);
                        (void)metrics_counter_inc(c->opts.metrics, METRIC_EVENTS_DROPPED, shed, NULL);
                        kcall_fail(ev, -EBUSY,
                                   strprintf("Event not recorded: the API server is short (%s)", shed));
                        continue;
                }
                if (q > 0 && now < c->paused_until) {
                        rate_hold(c, now, true);
                        kube_client_pump_soon(c, c->paused_until - now);
                        return;
                }
                /* An answer starts the next: the queue waits on the answers, not on the rate. */
                if (q > 0 && c->n_active >= KUBE_MAX_IN_FLIGHT) {
                        rate_hold(c, now, false);
                        return;
                }
                double rate = kube_client_current_rate(c, now);
                if (rate > 0) {
                        refill(c, now, rate);
                        if (c->tokens < 1.0) {
                                uint64_t wait = (uint64_t)((1.0 - c->tokens) * 1e6 / rate) + 1;
                                rate_hold(c, now, true);
                                kube_client_pump_soon(c, wait);
                                return;
                        }
                        c->tokens -= 1.0;
                }
                struct kube_call *call = c->heap[q][0];
                queue_remove(call);
                if (!(call->flags & CALL_STREAM)) {
                        call->active = true;
                        c->n_active++;
                }
                call_start(call);
        }
}

static void pump_timer_fn(void *userdata)
{
        struct kube_client *c = userdata;
        c->pump_timer = NULL;
        kube_client_pump(c);
}
