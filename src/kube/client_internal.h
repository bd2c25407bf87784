/* Shared by the two halves of the Kubernetes API client: client.c (the request machine: queue, rate limit,
 * token, HTTP, 401 re-auth, retries, Status parsing) and kube_ops.c (the operations built on it). Not part
 * of the public interface. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/kube.h"

#define EVENT_CACHE_MAX 64
/* Requests under way at once, watches aside, urgent ones beyond it: a burst of 300 would open as many
 * connections to an API server that speaks HTTP/1.1 (the simulator), and wait in the server's priority and
 * fairness queues on HTTP/2 anyway. */
#define KUBE_MAX_IN_FLIGHT 64
/* An Event that waited this long for its turn is not sent: the API was short all that time, and what
 * waits behind the rate goes first (kube_event_create()). */
#define KUBE_EVENT_MAX_WAIT_USEC (10 * USEC_PER_SEC)
/* An unlimited client (kube.qps < 0) slowed down by the server is back to unlimited past this rate. */
#define KUBE_UNLIMITED_RECOVERED 10000.0
#ifndef USEC_PER_SEC
#define USEC_PER_SEC UINT64_C(1000000)
#endif

struct event_memo {
        char *key; /* kind/ns/name/reason/message */
        char *namespace, *name;
        int count;
};

/* After a stall, a watch that finds another (kube_client_streams_silent) resumes no stream for this long. */
#define KUBE_STALL_CAUTION_USEC (60ULL * 1000000ULL)

struct kube_client {
        struct loop *loop;
        struct kube_config *cfg;
        struct kube_client_options opts;

        struct kube_call *calls; /* every live call */
        size_t n_calls;
        unsigned n_active; /* requests sent and not answered yet, watches aside (KUBE_MAX_IN_FLIGHT) */
        /* The calls waiting for a token, one binary heap per class ([0] urgent, [1] priority, [2]
         * ordinary), each ordered by deadline key, then the calls without one as they were made. */
        struct kube_call **heap[3];
        size_t heap_n[3], heap_cap[3];
        uint64_t seq;
        double tokens;
        uint64_t last_refill;
        struct timer *pump_timer;
        /* A request got no answer within its idle limit at stall_at: the watches' streams sent before then
         * resume (resume_streams) */
        struct timer *resume_timer;
        uint64_t stall_at;
        uint64_t stall_seen; /* when the last stall was found (engine clock); 0: never */

        /* Following the API server's priority and fairness: a throttling 429 pauses every request but the
         * urgent ones until paused_until and lowers the rate (apf_rate; 0 = not lowered, opts.qps
         * applies), which climbs back a step each second without one. */
        uint64_t paused_until;
        uint64_t events_yield_until; /* kube_client_events_yield() */
        double apf_rate;
        uint64_t apf_changed; /* when apf_rate was last lowered or raised */
        uint64_t apf_cut_at;  /* when it was last lowered */
        /* How long the queue has been held by the rate (no token, or a throttling pause) in all, and since
         * when it is held now (0: it is not): an Event's wait behind the rate, not behind slow answers
         * (kube_event_shed_reason()). */
        uint64_t rate_held_usec, rate_held_since;
        uint64_t win_start; /* the sending rate measured over whole seconds */
        unsigned win_sent;
        double win_rate;

        char *eviction_version;
        struct event_memo events[EVENT_CACHE_MAX];
        size_t n_events, next_event;
        uint64_t event_seq;
        unsigned events_in_flight; /* Event calls made and not freed (KUBE_EVENTS_IN_FLIGHT at most) */

        struct kube_client_stats stats;
};

struct kube_call;
typedef void (*step_fn)(struct kube_call *call, struct kube_result *r);

struct kube_call {
        struct kube_client *client;
        struct kube_call *prev, *next; /* client->calls */
        bool queued;
        size_t hidx;        /* its place in client->heap[hq] while queued */
        int hq;             /* its class */
        uint64_t key;       /* deadline key (kube_call_set_deadline); 0 = none: after the keyed ones */
        uint64_t seq;       /* ties, and the order of the calls without a key: the order they were made */
        unsigned throttled; /* times the server throttled it (429 of priority and fairness) */
        bool active;        /* counted in client->n_active */
        uint64_t sent_at;   /* when the request under way was sent */

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
        bool finishing;     /* its callback runs: cancelling it now is a no-op */
        bool event;         /* counted in client->events_in_flight */
        uint64_t queued_at; /* when it was last queued for sending */
        uint64_t held_at;   /* kube_client_rate_held() then */

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

static inline const char *strnull(const char *s)
{
        return s ? s : "";
}

/* ---- call lifecycle (client_call.c) ---- */

/* Makes a call (not queued yet): the request, its flags (KUBE_REQ_*), and the callback of its end. */
int kcall_new(struct kube_client *c, const char *method, const char *path, const char *content_type,
              const char *body, unsigned flags, kube_done_fn done, void *userdata, struct kube_call **ret);
/* Sets the request a call sends next, and resets its retries. */
int kcall_set_request(struct kube_call *call, const char *method, const char *path, const char *content_type,
                      const char *body);
/* Queues a call for sending, by its priority. */
void kcall_enqueue(struct kube_call *call);
/* Sends the next request of a multi-step operation; on failure the operation ends with that error. */
void kcall_reissue(struct kube_call *call, const char *method, const char *path, const char *content_type,
                   const char *body, step_fn step);
/* Ends a call: its callback runs with r (cleared afterwards), then the call is freed. */
void kcall_finish(struct kube_call *call, struct kube_result *r);
/* Ends a call with an error; message (taken) defaults to the request and strerror. */
void kcall_fail(struct kube_call *call, int error, char *message);
/* Frees a call without its callback. */
void kcall_free(struct kube_call *call);

/* ---- the request machine (client_call.c) ---- */

enum {
        CALL_STREAM = 1 << 8,
};

/* Sends what the rate limiter allows now; the rest when it allows them (kube_client_pump_soon). */
void kube_client_pump(struct kube_client *c);
void kube_client_pump_soon(struct kube_client *c, uint64_t after_usec);
double kube_client_current_rate(struct kube_client *c, uint64_t now);
/* How long the queue has been held by the rate until now, in all. */
uint64_t kube_client_rate_held(const struct kube_client *c, uint64_t now);
/* Why an Event is not to be sent now (NULL: it may go): "throttled" while the server's priority and
 * fairness pauses the client, "short" while the drains asked Events to give way
 * (kube_client_events_yield()), "backlog" when the queue was held by the rate (the client's own or the
 * server's) for KUBE_EVENT_MAX_WAIT_USEC since the Event was queued (call NULL: not queued yet). Time
 * spent behind answers that are slow to come (all KUBE_MAX_IN_FLIGHT under way) does not count: the API
 * is not short then, the machine or the network is. Counted in spotdrain_kube_events_dropped_total{reason}.
 */
const char *kube_event_shed_reason(struct kube_client *c, const struct kube_call *call, uint64_t now);

/* ---- request → result (client_result.c) ---- */

/* The RBAC words for a request: verb, resource (with subresource) and namespace, from method and path. */
void kube_describe_request(const char *method, const char *path, char *verb, size_t verb_len, char *resource,
                           size_t resource_len, char *ns, size_t ns_len);
void kube_result_from_response(struct kube_call *call, const struct http_response *resp,
                               struct kube_result *r);
uint64_t kube_parse_retry_after(const char *s);
bool kube_pdb_refusal(const struct http_response *resp);
