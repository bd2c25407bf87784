/* kube: the Kubernetes API client (async on the core loop) and the object parsers the drain engine needs. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/core.h"
#include "spotdrain/kubeconfig.h"
#include "spotdrain/pdb.h"

/* The Kubernetes client's configuration (kubeconfig, kube.*). Its keys: kube_config_section (its
 * settings.c). */
struct kube_settings {
        char *kubeconfig;
        char *context;
        double qps;
        int64_t burst;
};
struct config_section;
extern const struct config_section kube_config_section;

/* ==== client ==== */

struct metrics;

/* No byte from the API server for this long ends a request (the HTTP client's idle limit): it is retried; or
 * a watch's stream, which resumes from its resourceVersion. */
#define KUBE_IDLE_TIMEOUT_USEC (10ULL * 1000000ULL)
/* The same for a patient watch (kube_watch_options.patient): longer than the minute between the bookmarks
 * kube-apiserver sends a watch that asks for them (as every watch here does), so that a quiet resource costs
 * no request every 10 s. A connection that stopped passing bytes meanwhile is found by TCP keepalive, or by
 * a request that gets no answer within its own idle limit: the client then resumes every watch at once. */
#define KUBE_WATCH_IDLE_TIMEOUT_USEC (65ULL * 1000000ULL)

struct kube_client_options {
        /* client-side rate limit, the operator's cap; 0 = default KUBE_DEFAULT_QPS, <0 = unlimited. The
         * client goes slower on its own while the API server throttles it (429 of priority and fairness). */
        double qps;
        unsigned burst;                /* token bucket size; 0 = default KUBE_DEFAULT_BURST */
        unsigned max_retries;          /* retries of idempotent GETs and transport errors; 0 = default 3 */
        uint64_t backoff_base_usec;    /* 0 = 200 ms */
        uint64_t backoff_max_usec;     /* 0 = 10 s */
        unsigned conflict_retries;     /* read-modify-write retries after 409; 0 = default 5 */
        uint64_t request_timeout_usec; /* 0 = core's default */
        uint64_t idle_timeout_usec;    /* a request's idle limit; 0 = KUBE_IDLE_TIMEOUT_USEC */
        /* spotdrain_api_requests_total, spotdrain_evictions_total, spotdrain_kube_events_dropped_total;
         * borrowed, must outlive the client;
         * NULL = not counted */
        struct metrics *metrics;
};

/* The defaults of kube.qps and kube.burst: Karpenter's (its KUBE_CLIENT_QPS and KUBE_CLIENT_BURST). The
 * server's priority and fairness, which the client follows, is what keeps it from overloading the API. */
#define KUBE_DEFAULT_QPS   200
#define KUBE_DEFAULT_BURST 300
/* Retries of a request the server throttled (kube-apiserver rejected it before running it, so any verb is
 * safe to send again): client-go's limit. */
#define KUBE_THROTTLE_RETRIES 10

struct kube_client;
/* The client borrows cfg and l; both must outlive it. opts may be NULL. */
int kube_client_new(struct loop *l, struct kube_config *cfg, const struct kube_client_options *opts,
                    struct kube_client **ret);
/* Cancels every call under way (no callbacks run). NULL-safe. Must not be called from a kube callback;
 * watches and informers must be stopped first. */
struct kube_client *kube_client_free(struct kube_client *c);
static inline void kube_client_freep(struct kube_client **c)
{
        kube_client_free(*c);
}
struct loop *kube_client_loop(struct kube_client *c);
/* Changes the rate limit (qps < 0: unlimited; burst 0: keep); the bucket starts full again. */
void kube_client_set_rate(struct kube_client *c, double qps, unsigned burst);

struct kube_client_stats {
        uint64_t sent;      /* HTTP requests started (retries included) */
        unsigned queued;    /* waiting for a rate-limiter token */
        unsigned in_flight; /* HTTP requests under way */
        unsigned max_in_flight;
        uint64_t throttled; /* 429s of the server's priority and fairness (not an eviction's PDB 429) */
        double rate;        /* requests per second allowed now (< 0: unlimited) */
        bool paused;        /* waiting out a Retry-After */
        /* Engine clock: the first request that got no answer (a transport failure) since the server last
         * answered one, 0 while it answers; last_error says why the latest got none. */
        uint64_t unreachable_since;
        char last_error[256];
};
void kube_client_stats(const struct kube_client *c, struct kube_client_stats *ret);
/* Kubernetes Events give way to the drains until until_usec (engine clock): each is dropped, not sent
 * (spotdrain_kube_events_dropped_total{reason="short"}), rather than take a request the evictions need. A
 * later until extends the time; an earlier one changes nothing. */
void kube_client_events_yield(struct kube_client *c, uint64_t until_usec);

/* A metav1.Status cause. */
struct kube_cause {
        char *reason;
        char *message;
        char *field;
};

/* The outcome of one operation. Callbacks may take `object` (TAKE_PTR); everything else is freed after the
 * callback returns. */
struct kube_result {
        int error;        /* 0 or negative errno (http_status_to_errno, or transport error) */
        long http_status; /* 0 when no answer came */
        cJSON *object; /* the answer on success (for lists: {"metadata":{"resourceVersion"},"items":[..]}) */
        char *message; /* why it failed, for a human; NULL on success */
        /* metav1.Status of a failure, when the server sent one */
        char *reason;
        struct kube_cause *causes;
        size_t n_causes;
        /* evictions: the PDB named in a 429 cause, if any */
        char *pdb_name;
};
void kube_result_clear(struct kube_result *r);

struct kube_call;
typedef void (*kube_done_fn)(struct kube_client *c, struct kube_result *r, void *userdata);

/* Orders a call among the waiting ones of its class (urgent, priority, ordinary): earliest key first (a
 * pod's last safe moment, clk_now() usec), then the calls without a key in the order they were made.
 * Applies to the call's later requests and retries too. NULL-safe. */
void kube_call_set_deadline(struct kube_call *call, uint64_t key_usec);
/* The operator's cap on the rate (kube.qps, kube.burst; qps < 0: unlimited). */
void kube_client_limit(const struct kube_client *c, double *ret_qps, unsigned *ret_burst);

/* Cancels an operation under way; its callback does not run. NULL-safe; returns NULL. Inside the call's own
 * callback it does nothing; after the callback returned, the handle is invalid. */
struct kube_call *kube_call_cancel(struct kube_call *call);

/* Blocking use (one-shot commands, tests): pass kube_sync_done and a struct kube_sync to any async
 * operation, then kube_sync_wait. The result belongs to the caller (kube_result_clear). */
struct kube_sync {
        bool done;
        struct kube_result result;
};
void kube_sync_done(struct kube_client *c, struct kube_result *r, void *userdata);
/* Runs the loop until the call finishes (returns its result's error) or timeout_usec passes (the call is
 * cancelled, -ETIMEDOUT). call may be NULL when the operation could not start (then returns start_error). */
int kube_sync_wait(struct kube_client *c, int start_error, struct kube_call *call, struct kube_sync *s,
                   uint64_t timeout_usec);

/* One-shot conveniences: the answer object (ret may be NULL) or the error with a message (ret_error may be
 * NULL; free it). */
int kube_get_sync(struct kube_client *c, const char *path, uint64_t timeout_usec, cJSON **ret,
                  char **ret_error);
struct kube_list_options;
int kube_list_sync(struct kube_client *c, const char *path, const struct kube_list_options *o,
                   uint64_t timeout_usec, cJSON **ret, char **ret_error);

enum {
        KUBE_REQ_PRIORITY = 1 << 0,   /* ahead of ordinary requests in the rate limiter's queue */
        KUBE_REQ_IDEMPOTENT = 1 << 1, /* may be retried after 5xx, and 429 with Retry-After */
        /* ahead of priority requests too: what a notice needs first (the cordon), which a burst of
         * notices must not queue behind the lists and evictions of the drains already under way */
        KUBE_REQ_URGENT = 1 << 2,
        /* a stream (kube_request_stream) that may be silent for KUBE_WATCH_IDLE_TIMEOUT_USEC rather than
         * KUBE_IDLE_TIMEOUT_USEC */
        KUBE_REQ_PATIENT = 1 << 3,
        /* a watch's stream or (re)list: what its informer's owner sees by, ahead of every other request of
         * its class (the watch streams and lists set it) */
        KUBE_REQ_SIGHT = 1 << 4,
};

/* Any request. path is absolute ("/api/v1/nodes/n1?x=y"); body may be NULL. ret_call may be NULL. The verb
 * and resource for a 403 message are derived from method and path. */
int kube_request(struct kube_client *c, const char *method, const char *path, const char *content_type,
                 const char *body, unsigned flags, kube_done_fn done, void *userdata,
                 struct kube_call **ret_call);

/* Builds "/api/v1/namespaces/NS/pods/NAME" style paths: group NULL or "" is the core group. namespace NULL
 * = cluster scope or all namespaces; name NULL = the collection. */
char *kube_path(const char *group, const char *version, const char *namespace, const char *resource,
                const char *name, const char *subresource);
/* Percent-encodes a query value (everything but unreserved characters). NULL on ENOMEM. */
char *kube_query_escape(const char *s);

/* A streaming GET (watches): on_data gets the body as it arrives (return <0 to stop); done runs at the end
 * with the status (the body of a failure went through on_data). Priority, never retried here. flags: 0 or
 * KUBE_REQ_PATIENT. */
int kube_request_stream(struct kube_client *c, const char *path, unsigned flags,
                        int (*on_data)(const char *data, size_t len, void *userdata), kube_done_fn done,
                        void *userdata, struct kube_call **ret_call);

/* A stream under way (kube_request_stream) ends as if its idle limit had passed: done gets -ETIMEDOUT after
 * the answer had begun, why its message. Nothing for another call, or one not sent yet. */
void kube_stream_time_out(struct kube_call *call, const char *why);
/* A watch its owner resumed got at once the events its old stream had not passed on: that connection had
 * stopped passing bytes, and so may have those of the other streams, sent before `before` (engine clock).
 * They resume, as after a request that got no answer; not again within a minute of the last stall. */
void kube_client_streams_silent(struct kube_client *c, uint64_t before);

int kube_get(struct kube_client *c, const char *path, kube_done_fn done, void *userdata,
             struct kube_call **ret_call);

struct kube_list_options {
        const char *label_selector;
        const char *field_selector;
        unsigned limit; /* page size; 0 = 500 */
        const char *resource_version;
        bool priority; /* ahead of ordinary requests in the rate limiter (the lists decisions wait for) */
        bool sight;    /* KUBE_REQ_SIGHT: a watch's (re)list (kube_watch_start() sets it) */
        /* Keep only these fields of each item (kube_object_prune()), page by page, so that a large list
         * never holds whole objects beyond one page; NULL keeps everything. Borrowed until the list ends. */
        const char *const *keep_fields;
};
/* Lists a collection path, following metadata.continue and concatenating items. */
int kube_list(struct kube_client *c, const char *path, const struct kube_list_options *o, kube_done_fn done,
              void *userdata, struct kube_call **ret_call);
/* Helpers on an answer: its items array, metadata.resourceVersion (borrowed, may be NULL). */
cJSON *kube_list_items(const cJSON *list);
const char *kube_object_rv(const cJSON *obj);
const char *kube_object_str(const cJSON *obj, const char *dotted_path); /* "metadata.name" */
/* A copy of obj with only the fields at the NULL-terminated dotted paths of keep ("spec.providerID",
 * "metadata.annotations"; a last segment "conditions[type=Ready]" keeps the array's matching elements,
 * "containerStatuses[]{name,state}" every element with those of its fields only), and
 * always kind, apiVersion and metadata name, namespace, uid, resourceVersion,
 * generation and deletionTimestamp; NULL on ENOMEM. An informer of 2,000 Nodes keeps kilobytes of each
 * (status.images alone) that a controller never reads. */
cJSON *kube_object_prune(const cJSON *obj, const char *const *keep);

/* ---- watch ---- */
enum kube_event_type {
        KUBE_EVENT_ADDED,
        KUBE_EVENT_MODIFIED,
        KUBE_EVENT_DELETED,
};
struct kube_watch_ops {
        /* obj is borrowed for the call */
        void (*event)(void *userdata, enum kube_event_type type, const cJSON *obj);
        /* after a (re)list: the complete current state; the watch resumes from rv */
        void (*relisted)(void *userdata, const cJSON *items, const char *rv);
        /* informative: a list or watch failed; the watch retries with backoff */
        void (*error)(void *userdata, const struct kube_result *r);
};
struct kube_watch_options {
        const char *path; /* collection path, e.g. /api/v1/pods */
        const char *label_selector;
        const char *field_selector;
        const char *resource_version; /* NULL: start with a list (relisted is called) */
        unsigned timeout_seconds;     /* server-side watch timeout; 0 = 300 */
        /* An informer keeps only these fields of each object (kube_object_prune()); NULL: all. Borrowed:
         * must outlive the informer. */
        const char *const *keep_fields;
        /* Its stream may stay silent up to KUBE_WATCH_IDLE_TIMEOUT_USEC (a resource that may be quiet for
         * long, where a minute's delay after a connection froze costs nothing, or whose owner resumes it
         * with kube_watch_resume() when it expects events); else KUBE_IDLE_TIMEOUT_USEC. */
        bool patient;
        /* An informer keeps each object as JSON text (a pruned pod: 0.8 KiB against 4.6 as a tree) and
         * parses it when asked: what kube_informer_get() and kube_informer_at() return then lasts until the
         * loop's next turn only, never across two of the loop's callbacks. */
        bool compact;
};
/* The watch stream's own decoding, without a network (src/kube/watch_decode.c): a line framer and an event
 * decoder, which kube_watch feeds with the stream's chunks and which fuzz/fuzz_watch.c fuzzes. */

/* One watch line at most (its newline not counted): etcd stores objects of at most 1.5 MiB. */
#define KUBE_WATCH_MAX_LINE (16u * 1024 * 1024)

/* Takes a byte stream in chunks of any size and hands over its complete lines. The newline search resumes
 * where the last one stopped, so a large line arriving in small chunks is scanned once. Zero-initialise
 * (max_line 0 = KUBE_WATCH_MAX_LINE), or kube_line_framer_init. */
struct kube_line_framer {
        struct buf buf; /* bytes not handed over yet, from offset start */
        size_t start;   /* where the next line begins in buf */
        size_t scanned; /* buf.data[start, scanned) holds no newline */
        size_t max_line;
};
void kube_line_framer_init(struct kube_line_framer *f, size_t max_line);
/* Appends a chunk (0 or -ENOMEM). Lines handed over before are invalid after this. */
int kube_line_framer_feed(struct kube_line_framer *f, const void *data, size_t len);
/* The next complete line, without its '\n' (a '\r' before it is kept): 1 with *line and *len set (borrowed
 * until the next feed or reset), 0 when no complete line is buffered, -EFBIG when the line is longer than
 * max_line (whether its newline came or not; the framer holds the same line until reset). */
int kube_line_framer_next(struct kube_line_framer *f, const char **line, size_t *len);
/* Once next answered 0: what follows the last complete line (a last line without its newline, at the
 * stream's end); length 0 when nothing. Borrowed as for next; the bytes stay buffered until reset. */
size_t kube_line_framer_rest(const struct kube_line_framer *f, const char **line);
void kube_line_framer_reset(struct kube_line_framer *f); /* empties it, keeps the memory */
/* Every line fed was taken: the memory goes (a watch may idle for hours between events). */
void kube_line_framer_release(struct kube_line_framer *f);
void kube_line_framer_free(struct kube_line_framer *f);

/* What one watch line is. */
enum kube_watch_line {
        KUBE_WATCH_LINE_EMPTY,      /* nothing but spaces and '\r' */
        KUBE_WATCH_LINE_EVENT,      /* ADDED, MODIFIED or DELETED: see type */
        KUBE_WATCH_LINE_BOOKMARK,   /* a new resourceVersion and nothing else */
        KUBE_WATCH_LINE_ERROR,      /* an ERROR event: object is a Status, code its code */
        KUBE_WATCH_LINE_STATUS,     /* JSON without a string "type": the Status of a refused watch */
        KUBE_WATCH_LINE_UNKNOWN,    /* an event of a type we do not know (ignored) */
        KUBE_WATCH_LINE_UNPARSABLE, /* not JSON (or no memory to parse it) */
};
struct kube_watch_decoded {
        enum kube_watch_line kind;
        enum kube_event_type type; /* KUBE_WATCH_LINE_EVENT */
        cJSON *json;               /* the whole line, owned (kube_watch_decoded_clear); NULL if none */
        /* the event's "object" (borrowed from json; NULL or not an object when the line lacks one) */
        const cJSON *object;
        const char *rv; /* object's metadata.resourceVersion (borrowed); NULL when absent */
        /* ERROR: the object's "code"; STATUS: the line's own "code"; 0 when it is not a number */
        int code;
};
/* Decodes one line (trailing '\r' and spaces trimmed). Returns kind; ret->json must be cleared. */
enum kube_watch_line kube_watch_decode(const char *line, size_t len, struct kube_watch_decoded *ret);
void kube_watch_decoded_clear(struct kube_watch_decoded *d);

struct kube_watch;
int kube_watch_start(struct kube_client *c, const struct kube_watch_options *o,
                     const struct kube_watch_ops *ops, void *userdata, struct kube_watch **ret);
struct kube_watch *kube_watch_stop(struct kube_watch *w); /* NULL-safe; no callback after this */
/* When its stream last delivered a byte, or the last one began: clk_now() time, 0 before the first. */
uint64_t kube_watch_heard_at(const struct kube_watch *w);
/* Its stream, silent where its owner expected events (a patient watch on a connection that may have stopped
 * passing bytes), resumes from its resourceVersion at once on a live connection. */
void kube_watch_resume(struct kube_watch *w);
const char *kube_watch_rv(const struct kube_watch *w);
unsigned kube_watch_relists(const struct kube_watch *w);

/* ---- informer: list + watch into a local store, with per-object callbacks ---- */
struct kube_informer_ops {
        void (*added)(void *userdata, const cJSON *obj);
        void (*modified)(void *userdata, const cJSON *old_obj, const cJSON *obj);
        void (*deleted)(void *userdata, const cJSON *obj);
        void (*synced)(void *userdata); /* after the first list was delivered */
};
struct kube_informer;
int kube_informer_start(struct kube_client *c, const struct kube_watch_options *o,
                        const struct kube_informer_ops *ops, void *userdata, struct kube_informer **ret);
struct kube_informer *kube_informer_stop(struct kube_informer *inf);
uint64_t kube_informer_heard_at(const struct kube_informer *inf);
void kube_informer_resume(struct kube_informer *inf);
bool kube_informer_synced(const struct kube_informer *inf);
/* Moves whenever an object is added, replaced or removed: equal values mean the same store. */
unsigned long kube_informer_generation(const struct kube_informer *inf);
size_t kube_informer_size(const struct kube_informer *inf);
/* The stored object (borrowed) by namespace (NULL for cluster-scoped) and name; of a compact informer, until
 * the loop's next turn (kube_watch_options.compact). */
const cJSON *kube_informer_get(const struct kube_informer *inf, const char *namespace, const char *name);
const cJSON *kube_informer_at(const struct kube_informer *inf, size_t i);
/* The stored object's resourceVersion (borrowed, until its next change), without a compact informer's
 * parse; NULL when there is no such object, or it has none. */
const char *kube_informer_rv(const struct kube_informer *inf, const char *namespace, const char *name);

/* ---- discovery ---- */
/* "policy/v1" or "policy/v1beta1" once known (GET /api/v1 looked up), else NULL. */
const char *kube_eviction_version(const struct kube_client *c);
int kube_discover_eviction(struct kube_client *c, kube_done_fn done, void *userdata,
                           struct kube_call **ret_call);

/* ---- pods: eviction and delete ---- */
enum kube_evict_outcome {
        KUBE_EVICT_ERROR,    /* anything else; see error/message */
        KUBE_EVICT_EVICTED,  /* 201 (or 200) */
        KUBE_EVICT_BLOCKED,  /* 429: a PDB allows no disruption now; pdb_name and message say which */
        KUBE_EVICT_MULTIPLE, /* 500: the pod has several PDBs; message from the server */
        KUBE_EVICT_GONE,     /* 404: the pod no longer exists, which is what was wanted */
        KUBE_EVICT_CONFLICT, /* 409: UID precondition failed (a different pod has this name now) */
};
enum kube_evict_outcome kube_evict_outcome(const struct kube_result *r);
/* Eviction POST (policy/v1, or v1beta1 when discovery lacks v1; discovers first when not known yet).
 * grace_seconds < 0: none given. uid may be NULL. Never retried on 429/500: the caller decides. */
int kube_evict(struct kube_client *c, const char *namespace, const char *name, const char *uid,
               int64_t grace_seconds, kube_done_fn done, void *userdata, struct kube_call **ret_call);
/* DELETE with gracePeriodSeconds (<0: none) and preconditions.uid (NULL: none). */
int kube_pod_delete(struct kube_client *c, const char *namespace, const char *name, const char *uid,
                    int64_t grace_seconds, kube_done_fn done, void *userdata, struct kube_call **ret_call);

/* ---- nodes ---- */
struct kube_taint {
        char *key;
        char *value; /* may be NULL */
        char *effect;
};
int kube_node_cordon(struct kube_client *c, const char *node, bool cordon, kube_done_fn done, void *userdata,
                     struct kube_call **ret_call);
/* Read-modify-write of spec.taints with the read resourceVersion; retried on 409 Conflict. Adding a taint
 * whose key and effect exist replaces its value; removing matches key and effect (effect NULL: any). */
int kube_node_taint(struct kube_client *c, const char *node, const struct kube_taint *t, bool add,
                    kube_done_fn done, void *userdata, struct kube_call **ret_call);
/* Puts into spec (a patch's) "taints": the node's spec.taints old (may be NULL) with t added or removed, as
 * kube_node_taint() changes them; *ret_changed (may be NULL) says whether it differs from old. -ENOMEM. */
int kube_taints_put(cJSON *spec, const cJSON *old, const struct kube_taint *t, bool add, bool *ret_changed);
/* Read-modify-write of one label that the caller owns by its value: add sets key=value only when the node
 * has no such key (someone else's is left as it is); remove deletes it only while its value is value. The
 * result is the node as patched, or as read when there was nothing to change. Retried on 409 Conflict. */
int kube_node_label_owned(struct kube_client *c, const char *node, const char *key, const char *value,
                          bool add, kube_done_fn done, void *userdata, struct kube_call **ret_call);
/* Merge patch of metadata.labels (annotations=false) or metadata.annotations: values[i] NULL removes
 * keys[i]. */
int kube_node_set_meta(struct kube_client *c, const char *node, bool annotations, const char *const *keys,
                       const char *const *values, size_t n, kube_done_fn done, void *userdata,
                       struct kube_call **ret_call);

/* ---- events ---- */
struct kube_kv;
struct kube_event_spec {
        const char *involved_kind; /* "Node", "Pod" */
        const char *involved_api_version;
        const char *involved_namespace; /* NULL for cluster-scoped objects */
        const char *involved_name;
        const char *involved_uid;
        const char *namespace; /* where the Event lives; NULL = involved_namespace or "default" */
        const char *reason;
        const char *message;
        bool warning;                      /* type Warning, else Normal */
        const struct kube_kv *annotations; /* metadata.annotations of the Event; may be NULL */
        size_t n_annotations;
};
/* Creates a core/v1 Event (reportingComponent spotdrain); a repeat of the same object/reason/message from
 * this client patches the earlier Event's count and lastTimestamp instead. -EBUSY (nothing sent) while
 * KUBE_EVENTS_IN_FLIGHT Events of this client wait for their answer: in a mass reclaim every evicted pod has
 * its Event, and behind the client's rate limit (the evictions go first) they would queue by the ten
 * thousand, a kilobyte and more each. client-go's recorder likewise drops what its queue of 1,000
 * (maxQueuedEvents) cannot take. Events are also the first to go when the API is short: -EAGAIN (nothing
 * sent) while the server's priority and fairness slows this client down, and a queued Event whose turn comes
 * then, or after 10 s in the queue, ends with -EBUSY unsent. Each is counted by reason in
 * spotdrain_kube_events_dropped_total. */
#define KUBE_EVENTS_IN_FLIGHT 1000
int kube_event_create(struct kube_client *c, const struct kube_event_spec *e, kube_done_fn done,
                      void *userdata, struct kube_call **ret_call);

/* ---- leases (coordination.k8s.io/v1) ---- */
struct kube_lease {
        char *namespace, *name;
        char *resource_version; /* from a get; sent with update */
        char *holder_identity;
        int lease_duration_seconds;
        uint64_t acquire_time_usec; /* 0 = unset */
        uint64_t renew_time_usec;
        int lease_transitions;
};
int kube_lease_parse(const cJSON *obj, struct kube_lease *ret);
void kube_lease_clear(struct kube_lease *l);
int kube_lease_get(struct kube_client *c, const char *namespace, const char *name, kube_done_fn done,
                   void *userdata, struct kube_call **ret_call);
int kube_lease_create(struct kube_client *c, const struct kube_lease *l, kube_done_fn done, void *userdata,
                      struct kube_call **ret_call);
/* PUT with metadata.resourceVersion: someone else's update in between answers 409 (error -EEXIST/-ESTALE).
 */
int kube_lease_update(struct kube_client *c, const struct kube_lease *l, kube_done_fn done, void *userdata,
                      struct kube_call **ret_call);

/* ==== objects (kube_objects.c): cJSON → small structs ==== */

struct kube_kv {
        char *key;
        char *value;
};
/* The value for key, or NULL. */
const char *kube_kv_get(const struct kube_kv *kv, size_t n, const char *key);
/* Frees the n pairs and the array; NULL-safe. */
void kube_kv_free_array(struct kube_kv *kv, size_t n);

struct kube_pod {
        char *namespace, *name, *uid, *node_name;
        char *phase; /* Pending, Running, Succeeded, Failed, Unknown */
        bool ready;
        uint64_t creation_usec;
        uint64_t deletion_usec;         /* deletionTimestamp; 0 = not deleting */
        int64_t deletion_grace_seconds; /* metadata.deletionGracePeriodSeconds; -1 = absent */
        /* When the delete was asked: deletionTimestamp is the end of the grace period, so that grace
         * (deletionGracePeriodSeconds, else the spec's) before it; 0 = not deleting. */
        uint64_t deleted_usec;
        uint64_t ready_transition_usec; /* Ready condition lastTransitionTime; 0 = unknown */
        /* Every container reported terminated: the last finishedAt; 0 = one still runs or none reported. */
        uint64_t stopped_usec;
        char *owner_kind, *owner_name; /* the controller owner if any, else the first owner */
        bool owner_controller;
        bool has_priority;
        int32_t priority;
        char *priority_class;
        int64_t grace_seconds; /* terminationGracePeriodSeconds, default 30 */
        bool has_emptydir;
        bool mirror; /* kubernetes.io/config.mirror annotation */
        struct kube_kv *labels;
        size_t n_labels;
        struct kube_kv *annotations;
        size_t n_annotations;
};
/* The grace period the pod's graceful delete gave it: deletionGracePeriodSeconds while it is terminating.
 * Once the kubelet confirmed the stop with its delete of grace 0, kube-apiserver sets the grace to 0 and
 * the deletionTimestamp to the first delete's time, or to the confirmation's own time when that is later
 * (it never moves a deletionTimestamp into the past; always so when the stop took any time), so the object
 * that goes (a DELETED event's) no longer tells the first delete: then the spec's
 * terminationGracePeriodSeconds, the grace an eviction or an ordinary delete gives. */
int64_t kube_pod_stop_grace(const struct kube_pod *p);
/* Whether a deleted pod's stop was forced rather than graceful as far as its object tells: deleted with a
 * grace of 0 and gone within a second of that delete (kubectl delete --force, a pod GC's delete) while a
 * container had not reported its end. A kubelet confirms a stop (grace 0, at once) only once every
 * container reported it, so its delete looks the same but for the containers' terminated states. */
bool kube_pod_force_deleted(const struct kube_pod *p, uint64_t gone_usec);
int kube_pod_parse(const cJSON *obj, struct kube_pod *ret);
void kube_pod_clear(struct kube_pod *p);
const char *kube_pod_annotation(const struct kube_pod *p, const char *key);
/* Whether a pod's (last) state says it was killed with its node: the pod garbage collector's
 * DisruptionTarget condition of reason DeletionByPodGC, which it sets on the pods of a node that is no more
 * before it deletes them, with a container that had not stopped (or none reported). */
bool kube_pod_killed_with_node(const cJSON *obj);
/* Whether one of its containers ended killed (exit code 137: SIGKILL, as at the end of a grace period): 1,
 * 0 when they ended otherwise, -1 when no container reported its end. */
int kube_pod_sigkilled(const cJSON *obj);

struct kube_node {
        char *name;
        char *uid;
        char *provider_id;
        char *instance_id; /* from aws:///ZONE/i-..., NULL when not an EC2 instance */
        bool unschedulable;
        bool ready;
        struct kube_taint *taints;
        size_t n_taints;
        struct kube_kv *labels;
        size_t n_labels;
        struct kube_kv *annotations;
        size_t n_annotations;
};
int kube_node_parse(const cJSON *obj, struct kube_node *ret);
/* What kube_node_parse() reads of a Node, for an informer's keep_fields: not the rest of its status, most of
 * a Node's size (images, capacity, the other conditions: half of what is left). */
extern const char *const kube_node_fields[];
void kube_node_clear(struct kube_node *n);

enum kube_selector_op {
        KUBE_SEL_IN,
        KUBE_SEL_NOT_IN,
        KUBE_SEL_EXISTS,
        KUBE_SEL_DOES_NOT_EXIST,
};
struct kube_requirement {
        char *key;
        enum kube_selector_op op;
        char **values;
        size_t n_values;
};
struct kube_selector {
        bool present; /* a nil selector matches nothing; an empty one matches everything */
        struct kube_kv *match_labels;
        size_t n_match_labels;
        struct kube_requirement *exprs;
        size_t n_exprs;
};
int kube_selector_parse(const cJSON *sel, struct kube_selector *ret);
void kube_selector_clear(struct kube_selector *s);
/* A selector in its text form, as kubectl's --selector and a list's labelSelector have it: comma-separated
 * !key, key, key=value (or ==), key!=value, key in (a,b), key notin (a,b). "" matches everything.
 * -EINVAL when it cannot be read, -ENOMEM. */
int kube_selector_parse_text(const char *text, struct kube_selector *ret);
bool kube_selector_matches(const struct kube_selector *s, const struct kube_kv *labels, size_t n_labels);

struct kube_pdb {
        char *namespace, *name;
        struct kube_selector selector;
        struct intorstr min_available;
        struct intorstr max_unavailable;
        char *unhealthy_pod_eviction_policy; /* NULL = IfHealthyBudget */
        int64_t generation;
        int64_t observed_generation;
        int current_healthy, desired_healthy, expected_pods, disruptions_allowed;
};
int kube_pdb_parse(const cJSON *obj, struct kube_pdb *ret);
void kube_pdb_clear(struct kube_pdb *p);
/* Same namespace and the selector matches the pod's labels. */
bool kube_pdb_matches_pod(const struct kube_pdb *pdb, const struct kube_pod *pod);
