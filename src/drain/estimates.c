/* Stop and startup estimates learnt from the cluster's ordinary life, kept across restarts and shared: a
 * pod watch (one node's pods for the agent, every pod for the controller) counts every graceful stop it
 * sees end (delete → gone) and every pod it sees Ready (creation → Ready) for the pod's owner, into the
 * store the drains plan with (struct drain_shutdowns); the store is read at the start from one ConfigMap in
 * the release namespace (the agent: only at a notice and before its writes, read_on_demand) and written
 * back when it changed, merged with what other processes wrote there (optimistic concurrency on its
 * resourceVersion). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "drain/engine_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/engine.h"
#include "spotdrain/kube.h"

#define USEC_PER_SEC      UINT64_C(1000000)
#define DEFAULT_NAME      "spotdrain-estimates"
#define DATA_KEY          "estimates.json"
#define DEFAULT_SAVE_USEC (10 * USEC_PER_SEC)
#define DEFAULT_FRACTION  0.5
/* The API server refuses a ConfigMap over 1 MiB; what does not fit is not written (the log says so). */
#define MAX_DOCUMENT_BYTES (900 * 1024)
/* Pods seen terminating whose delete's time is kept for their end: enough for the stops under way at once
 * on any node, and for a mass reclaim's through the controller's watch (the oldest is dropped first). */
#define TERMINATING_KEPT 1024

/* A terminating pod's first delete, as its deletionTimestamp less its grace told while it was terminating:
 * the object that goes no longer tells it (kube_pod_stop_grace()). */
struct terminating {
        char *uid;
        uint64_t deleted_usec;
};

struct drain_estimates {
        struct kube_client *c;
        struct loop *loop;
        struct drain_shutdowns *store;
        char *namespace, *name, *path, *collection;
        uint64_t save_interval, save_jitter;
        double fraction;
        /* The agent's way (read_on_demand): the ConfigMap is read only when a drain asks for it
         * (drain_estimates_refresh) and before each write, and what was only read goes after the write
         * unless a drain holds it: the idle agent keeps the samples it saw itself, no timer, no document. */
        bool on_demand, held;
        void (*on_read)(void *userdata);
        void *on_read_userdata;

        struct kube_watch *pods;
        struct terminating terminating[TERMINATING_KEPT];
        size_t next_terminating;
        struct kube_call *call;
        struct timer *timer;
        struct backoff backoff;
        char *rv; /* the ConfigMap's resourceVersion as last read or written; NULL: none yet */
        bool keep;
        bool loaded;      /* read once (or found absent); on demand: read since the last forgetting */
        bool reading;     /* the call under way is a read */
        bool refresh;     /* a write was refused as stale: read and merge before the next */
        unsigned saved;   /* drain_shutdowns_changes() of the store as last written or read */
        unsigned writing; /* ... of the write under way */
};

static void arm(struct drain_estimates *e, uint64_t delay);
static void changed(struct drain_estimates *e);

static void json_freep(cJSON **j)
{
        cJSON_Delete(*j);
}

/* ---- learning ---- */

static void learn_startup(struct drain_estimates *e, const struct kube_pod *p)
{
        _cleanup_free_ char *key = NULL;
        if (!p->ready || p->deletion_usec || !p->creation_usec ||
            p->ready_transition_usec <= p->creation_usec || !(key = drain_owner_key(p)))
                return;
        if (drain_shutdowns_observe_startup(e->store, key, p->uid,
                                            p->ready_transition_usec - p->creation_usec) < 0)
                log_debug("out of memory keeping a startup estimate");
        changed(e);
}

static struct terminating *terminating_find(struct drain_estimates *e, const char *uid)
{
        for (size_t i = 0; uid && i < TERMINATING_KEPT; i++)
                if (e->terminating[i].uid && streq(e->terminating[i].uid, uid))
                        return &e->terminating[i];
        return NULL;
}

/* A pod seen terminating under its graceful delete: when that delete came, kept for its end. */
static void remember_delete(struct drain_estimates *e, const struct kube_pod *p)
{
        if (!p->uid || !p->deleted_usec || p->deletion_grace_seconds <= 0 || terminating_find(e, p->uid))
                return;
        char *uid = strdup(p->uid);
        if (!uid)
                return;
        struct terminating *t = &e->terminating[e->next_terminating];
        free(t->uid);
        *t = (struct terminating){ uid, p->deleted_usec };
        e->next_terminating = (e->next_terminating + 1) % TERMINATING_KEPT;
}

/* A pod that was stopping is gone: delete → gone, unless its grace period cut it short (a kill says
 * nothing of how long the stop takes, only that it took longer) or it had ended before it was deleted. */
static void learn_stop(struct drain_estimates *e, const struct kube_pod *p)
{
        _cleanup_free_ char *key = NULL;
        uint64_t now = clk_now(), start = p->deleted_usec;
        struct terminating *t = terminating_find(e, p->uid);
        if (t) {
                start = t->deleted_usec;
                free(t->uid);
                t->uid = NULL;
        }
        if (!p->deletion_usec || !start || now <= start || (p->stopped_usec && p->stopped_usec < start) ||
            !(key = drain_owner_key(p)))
                return;
        int64_t grace = kube_pod_stop_grace(p);
        uint64_t took = now - start;
        if (grace <= 0 || (!t && kube_pod_force_deleted(p, now)) ||
            took + USEC_PER_SEC >= (uint64_t)grace * USEC_PER_SEC)
                return;
        uint64_t unseen = (uint64_t)((double)p->grace_seconds * 1e6 * e->fraction);
        if (drain_shutdowns_observe_pod(e->store, key, p->uid, took, unseen) < 0)
                log_debug("out of memory keeping a shutdown estimate");
        changed(e);
}

/* A watch, not an informer: nothing is kept of the pods (every pod of a large cluster would be) but the
 * delete times of those terminating, each event is read once; a pod seen again (MODIFIED, a relist) counts
 * once by its UID. */
static void pod_event(void *userdata, enum kube_event_type type, const cJSON *obj)
{
        struct drain_estimates *e = userdata;
        _cleanup_(kube_pod_clear) struct kube_pod p = { 0 };
        if (kube_pod_parse(obj, &p) < 0)
                return;
        if (type == KUBE_EVENT_DELETED)
                learn_stop(e, &p);
        else {
                remember_delete(e, &p);
                learn_startup(e, &p);
        }
}

static void pods_relisted(void *userdata, const cJSON *items, const char *rv)
{
        const cJSON *obj;
        cJSON_ArrayForEach (obj, items) {
                _cleanup_(kube_pod_clear) struct kube_pod p = { 0 };
                if (kube_pod_parse(obj, &p) >= 0) {
                        remember_delete(userdata, &p);
                        learn_startup(userdata, &p);
                }
        }
}

/* ---- keeping ---- */

static void call_done(struct kube_client *c, struct kube_result *r, void *userdata);
static uint64_t next_save(struct drain_estimates *e);

static int start_read(struct drain_estimates *e)
{
        e->reading = true;
        return kube_request(e->c, "GET", e->path, NULL, NULL, KUBE_REQ_IDEMPOTENT, call_done, e, &e->call);
}

static int start_write(struct drain_estimates *e)
{
        _cleanup_(json_freep) cJSON *doc = NULL;
        _cleanup_free_ char *text = NULL, *body = NULL;
        unsigned changes = drain_shutdowns_changes(e->store);
        int r = drain_shutdowns_to_json(e->store, &doc);
        if (r < 0)
                return r;
        if (!(text = cJSON_PrintUnformatted(doc)))
                return -ENOMEM;
        if (strlen(text) > MAX_DOCUMENT_BYTES) {
                log_warning("estimates of %zu bytes do not fit in ConfigMap %s/%s; not kept", strlen(text),
                            e->namespace, e->name);
                e->saved = changes;
                return 0;
        }
        cJSON *cm = cJSON_CreateObject(), *md = NULL, *data = NULL;
        bool ok =
            cm && cJSON_AddStringToObject(cm, "apiVersion", "v1") &&
            cJSON_AddStringToObject(cm, "kind", "ConfigMap") &&
            (md = cJSON_AddObjectToObject(cm, "metadata")) && cJSON_AddStringToObject(md, "name", e->name) &&
            cJSON_AddStringToObject(md, "namespace", e->namespace) &&
            (!e->rv || cJSON_AddStringToObject(md, "resourceVersion", e->rv)) &&
            (data = cJSON_AddObjectToObject(cm, "data")) && cJSON_AddStringToObject(data, DATA_KEY, text);
        if (ok)
                body = cJSON_PrintUnformatted(cm);
        cJSON_Delete(cm);
        if (!body)
                return -ENOMEM;
        e->writing = changes;
        e->reading = false;
        /* With a resourceVersion the write is refused (409) when another process wrote in between. */
        return kube_request(e->c, e->rv ? "PUT" : "POST", e->rv ? e->path : e->collection,
                            "application/json", body, 0, call_done, e, &e->call);
}

/* Takes what the ConfigMap holds; -EINVAL when it holds no estimates document. */
static int take(struct drain_estimates *e, const cJSON *cm)
{
        const char *rv = kube_object_str(cm, "metadata.resourceVersion");
        const char *text = cJSON_GetStringValue(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cm, "data"), DATA_KEY));
        char *copy = rv ? strdup(rv) : NULL;
        if (rv && !copy)
                return -ENOMEM;
        free(e->rv);
        e->rv = copy;
        if (!text) /* made empty (the chart makes it, so that no one needs to create it): none yet */
                return cJSON_GetObjectItemCaseSensitive(cm, "data") ? -EINVAL : 0;
        cJSON *doc = cJSON_Parse(text);
        size_t taken = 0;
        int r = doc ? drain_shutdowns_merge_json(e->store, doc, &taken) : -EINVAL;
        cJSON_Delete(doc);
        if (r >= 0)
                log_debug("estimates of %zu owners taken from ConfigMap %s/%s", taken, e->namespace,
                          e->name);
        return r;
}

static void call_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct drain_estimates *e = userdata;
        bool was_read = e->reading;
        e->call = NULL;
        e->reading = false;
        if (was_read) {
                if (r->error >= 0 || r->http_status == 404) {
                        if (r->error >= 0 && take(e, r->object) < 0)
                                log_warning(
                                    "ConfigMap %s/%s holds no estimates this version reads; they are "
                                    "written anew",
                                    e->namespace, e->name);
                        /* On demand, what was seen before the read is this process's own, still to be
                         * written; at a start, what was read is kept already. */
                        if (!e->loaded && !e->on_demand)
                                e->saved = drain_shutdowns_changes(e->store);
                        e->loaded = true;
                        e->refresh = false;
                        backoff_reset(&e->backoff);
                        if (e->on_read)
                                e->on_read(e->on_read_userdata);
                        /* Stale: what was refused goes out again at once, merged. */
                        if (drain_shutdowns_changes(e->store) != e->saved)
                                arm(e, 0);
                        else if (!e->on_demand)
                                arm(e, e->save_interval);
                        else if (!e->held) { /* the drain that asked ended meanwhile */
                                drain_shutdowns_forget_foreign(e->store);
                                e->loaded = false;
                        }
                        return;
                }
        } else if (r->error >= 0) {
                (void)take(e, r->object);
                e->saved = e->writing;
                backoff_reset(&e->backoff);
                if (!e->on_demand) {
                        arm(e, e->save_interval);
                        return;
                }
                /* Written: what this process only read is in the ConfigMap, read again when a drain
                 * needs it, and so before the next write, which must not drop it. */
                if (!e->held) {
                        drain_shutdowns_forget_foreign(e->store);
                        e->loaded = false;
                } else if (!e->loaded) {
                        /* A drain asked for a read while this write was under way: the ConfigMap as
                         * written, merged, is what it would have read. */
                        e->loaded = true;
                        if (e->on_read)
                                e->on_read(e->on_read_userdata);
                }
                if (drain_shutdowns_changes(e->store) != e->saved)
                        arm(e, next_save(e));
                return;
        } else if (r->http_status == 409) {
                /* Another process wrote first (or created it): read, merge, write again. */
                e->refresh = true;
                arm(e, 0);
                return;
        }
        uint64_t delay = backoff_next(&e->backoff);
        log_debug("cannot %s ConfigMap %s/%s (%s), again in %.1f s", was_read ? "read" : "write",
                  e->namespace, e->name, r->message ? r->message : "no answer", (double)delay / 1e6);
        arm(e, delay);
}

static void tick(void *userdata)
{
        struct drain_estimates *e = userdata;
        int r;
        e->timer = NULL; /* released by the loop as it fired */
        if (e->call)
                return;
        if (!e->loaded || e->refresh)
                r = start_read(e);
        else if (drain_shutdowns_changes(e->store) != e->saved)
                r = start_write(e);
        else {
                if (!e->on_demand)
                        arm(e, e->save_interval);
                return;
        }
        if (r < 0) {
                e->call = NULL;
                e->reading = false;
                arm(e, backoff_next(&e->backoff));
        } else if (!e->call && !e->on_demand)
                arm(e, e->save_interval); /* nothing went out (too large to keep) */
}

/* The next write of what changed: the interval, with jitter so that a thousand agents that saw one rollout
 * do not write at once. */
static uint64_t next_save(struct drain_estimates *e)
{
        struct backoff jitter = BACKOFF_INIT(e->save_jitter, e->save_jitter);
        return e->save_interval + backoff_next(&jitter);
}

/* A sample was taken: on demand, a write is due within the interval (kept mode writes on its own timer). */
static void changed(struct drain_estimates *e)
{
        if (e->on_demand && e->keep && !e->timer && !e->call &&
            drain_shutdowns_changes(e->store) != e->saved)
                arm(e, next_save(e));
}

static void arm(struct drain_estimates *e, uint64_t delay)
{
        e->timer = timer_cancel(e->timer);
        if (timer_start_in(e->loop, delay, tick, e, &e->timer) < 0)
                e->timer = NULL;
}

/* ---- life cycle ---- */

struct drain_estimates *drain_estimates_free(struct drain_estimates *e)
{
        if (!e)
                return NULL;
        timer_cancel(e->timer);
        kube_call_cancel(e->call);
        kube_watch_stop(e->pods);
        drain_shutdowns_free(e->store);
        for (size_t i = 0; i < TERMINATING_KEPT; i++)
                free(e->terminating[i].uid);
        free(e->namespace);
        free(e->name);
        free(e->path);
        free(e->collection);
        free(e->rv);
        free(e);
        return NULL;
}

int drain_estimates_start(struct kube_client *c, const struct drain_estimates_options *o,
                          struct drain_estimates **ret)
{
        _cleanup_(drain_estimates_freep) struct drain_estimates *e = NULL;
        _cleanup_free_ char *field = NULL;
        const char *ns = o->namespace ? o->namespace : getenv("POD_NAMESPACE");
        int r;

        if (!c || !ret)
                return -EINVAL;
        if (!(e = calloc(1, sizeof(*e))))
                return -ENOMEM;
        e->c = c;
        e->loop = kube_client_loop(c);
        e->save_interval = o->save_interval_usec ? o->save_interval_usec : DEFAULT_SAVE_USEC;
        e->save_jitter = o->save_jitter_usec;
        e->on_demand = o->read_on_demand;
        e->keep = o->keep;
        e->fraction = o->expected_shutdown_fraction > 0 ? o->expected_shutdown_fraction : DEFAULT_FRACTION;
        e->backoff = BACKOFF_INIT(500 * 1000ULL, 60 * USEC_PER_SEC);
        r = drain_shutdowns_new(&e->store);
        if (r < 0)
                return r;
        if (!(e->namespace = strdup(isempty(ns) ? "default" : ns)) ||
            !(e->name = strdup(o->name ? o->name : DEFAULT_NAME)) ||
            !(e->path = kube_path(NULL, "v1", e->namespace, "configmaps", e->name, NULL)) ||
            !(e->collection = kube_path(NULL, "v1", e->namespace, "configmaps", NULL, NULL)))
                return -ENOMEM;
        if (o->node && !(field = strprintf("spec.nodeName=%s", o->node)))
                return -ENOMEM;
        static const struct kube_watch_ops ops = { .event = pod_event, .relisted = pods_relisted };
        /* From "0": the current pods come as ADDED events, one line each, rather than as one list of every
         * pod of the cluster parsed at once. */
        struct kube_watch_options w = { .path = "/api/v1/pods",
                                        .field_selector = field,
                                        .resource_version = "0",
                                        /* learning: a quiet node's pods cost no request every 10 s */
                                        .patient = true };
        r = kube_watch_start(c, &w, &ops, e, &e->pods);
        if (r < 0)
                return r;
        if (o->keep && !o->read_on_demand)
                arm(e, 0);
        else if (!o->keep)
                e->loaded = true;
        *ret = TAKE_PTR(e);
        return 0;
}

struct drain_shutdowns *drain_estimates_store(const struct drain_estimates *e)
{
        return e ? e->store : NULL;
}

bool drain_estimates_loaded(const struct drain_estimates *e)
{
        return e && e->loaded;
}

void drain_estimates_on_read(struct drain_estimates *e, void (*fn)(void *userdata), void *userdata)
{
        if (!e || (!fn && e->on_read_userdata != userdata))
                return;
        e->on_read = fn;
        e->on_read_userdata = fn ? userdata : NULL;
}

int drain_estimates_refresh(struct drain_estimates *e)
{
        if (!e)
                return -EINVAL;
        e->held = true;
        if (!e->keep || !e->on_demand)
                return 0;
        e->loaded = false;
        /* A write under way answers with the ConfigMap as written: that is the read. */
        if (!e->call)
                arm(e, 0);
        return 0;
}

void drain_estimates_release(struct drain_estimates *e)
{
        if (!e || !e->held)
                return;
        e->held = false;
        if (!e->keep || !e->on_demand || e->call)
                return;
        /* The drain's own stops go out now, the node may be gone soon; else what was read goes. */
        if (drain_shutdowns_changes(e->store) != e->saved)
                arm(e, 0);
        else {
                e->timer = timer_cancel(e->timer);
                drain_shutdowns_forget_foreign(e->store);
                e->loaded = false;
        }
}
