/* The Kubernetes API client: one request machine (rate limiter → token → HTTP → 401 re-auth → retry with
 * backoff → Status parsing) and the operations built on it. Multi-step operations (paginated lists,
 * discovery before eviction, read-modify-write of taints, event count bumps) re-issue requests on the same
 * call object, so a caller's handle stays valid for cancellation until its callback runs. This file has
 * the client and the entry points; the machine is in client_call.c, what an answer means in
 * client_result.c, the operations themselves in kube_ops.c. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/client_internal.h"
#include "spotdrain/kube.h"
#include "spotdrain/metrics.h"

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
                c->opts.qps = KUBE_DEFAULT_QPS;
        if (c->opts.burst == 0)
                c->opts.burst = KUBE_DEFAULT_BURST;
        if (c->opts.max_retries == 0)
                c->opts.max_retries = 3;
        if (c->opts.backoff_base_usec == 0)
                c->opts.backoff_base_usec = 200 * 1000;
        if (c->opts.backoff_max_usec == 0)
                c->opts.backoff_max_usec = 10 * 1000 * 1000;
        if (c->opts.conflict_retries == 0)
                c->opts.conflict_retries = 5;
        c->tokens = c->opts.burst;
        c->last_refill = c->win_start = clk_now();
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
        timer_cancel(c->resume_timer);
        for (int q = 0; q < 3; q++)
                free(c->heap[q]);
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
        kube_client_pump_soon(c, 0);
}

void kube_client_events_yield(struct kube_client *c, uint64_t until_usec)
{
        if (c && until_usec > c->events_yield_until) {
                if (clk_now() >= c->events_yield_until)
                        log_info(
                            "kube: the drains need the API's rate until %.1f s from now: Kubernetes Events "
                            "give way (the other sinks have the alerts)",
                            (double)(until_usec - clk_now()) / 1e6);
                c->events_yield_until = until_usec;
        }
}

void kube_client_stats(const struct kube_client *c, struct kube_client_stats *ret)
{
        uint64_t now = clk_now();
        *ret = c->stats;
        /* current_rate settles a recovery that is due; the figures are the same either way. */
        ret->rate = kube_client_current_rate((struct kube_client *)c, now);
        ret->paused = now < c->paused_until;
}

void kube_client_limit(const struct kube_client *c, double *ret_qps, unsigned *ret_burst)
{
        if (ret_qps)
                *ret_qps = c->opts.qps;
        if (ret_burst)
                *ret_burst = c->opts.burst;
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

int kube_request_stream(struct kube_client *c, const char *path, unsigned flags,
                        int (*on_data)(const char *data, size_t len, void *userdata), kube_done_fn done,
                        void *userdata, struct kube_call **ret_call)
{
        if (!on_data || (flags & ~(unsigned)(KUBE_REQ_PATIENT | KUBE_REQ_SIGHT)))
                return -EINVAL;
        struct kube_call *call;
        int r = kcall_new(c, "GET", path, NULL, NULL, KUBE_REQ_PRIORITY | CALL_STREAM | flags, done,
                          userdata, &call);
        if (r < 0)
                return r;
        call->on_data = on_data;
        kcall_enqueue(call);
        if (ret_call)
                *ret_call = call;
        return 0;
}
