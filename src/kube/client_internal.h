/* Shared by the two halves of the Kubernetes API client: client.c (the request machine: queue, rate limit,
 * token, HTTP, 401 re-auth, retries, Status parsing) and kube_ops.c (the operations built on it). Not part
 * of the public interface. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/kube.h"

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

static inline const char *strnull(const char *s)
{
        return s ? s : "";
}

/* ---- call lifecycle (client.c) ---- */

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
