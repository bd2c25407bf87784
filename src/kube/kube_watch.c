/* Watches (list, then a stream of line-delimited JSON events from the last resourceVersion; relist on 410
 * Gone and after failures) and the informer built on them (a local store with per-object callbacks). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/kube.h"

/* The events a resumed stream replays come within this of its start (engine clock). */
#define MISSED_AT_ONCE_USEC (1000ULL * 1000ULL)

enum watch_next {
        WATCH_NEXT_LIST,
        WATCH_NEXT_STREAM,
};

struct kube_watch {
        struct kube_client *client;
        char *path, *label_selector, *field_selector;
        const char *const *keep_fields;
        unsigned timeout_seconds;
        bool patient;      /* its streams may be silent up to KUBE_WATCH_IDLE_TIMEOUT_USEC */
        bool streaming;    /* call is a stream */
        uint64_t heard_at; /* the last byte of a stream, or the start of the one under way */
        /* Resumed by its owner (kube_watch_resume): the next stream, started at resumed_at (0: none), tells
         * by its first line whether the old one had missed events (they come at once). */
        bool owner_resumed;
        uint64_t resumed_at;
        char *rv;
        struct kube_watch_ops ops;
        void *userdata;

        struct kube_call *call; /* the list or the stream under way */
        struct timer *timer;    /* waiting before the next try */
        enum watch_next next;
        struct backoff backoff;
        struct kube_line_framer line; /* the stream cut into event lines */
        bool got_event;               /* this stream delivered something */
        bool restart;                 /* an ERROR event or a Status came instead of events: relist */
        bool gone;                    /* ... and it said 410 Gone: relist at once */
        unsigned relists;
        unsigned busy; /* inside our callbacks (the stream's data, or the owner's) */
        bool stopped;  /* stop was asked for inside a callback: free when it returns */
};

static void watch_free(struct kube_watch *w)
{
        kube_call_cancel(w->call);
        timer_cancel(w->timer);
        free(w->path);
        free(w->label_selector);
        free(w->field_selector);
        free(w->rv);
        kube_line_framer_free(&w->line);
        free(w);
}

struct kube_watch *kube_watch_stop(struct kube_watch *w)
{
        if (!w)
                return NULL;
        /* Cancelling from inside the stream's own data callback is fine: core defers the teardown. */
        w->call = kube_call_cancel(w->call);
        w->timer = timer_cancel(w->timer);
        if (w->busy)
                w->stopped = true; /* freed when the outermost callback returns */
        else
                watch_free(w);
        return NULL;
}

/* Runs after each of our callbacks: true when the watch was stopped (freed once the outermost one returns).
 */
static bool watch_leave(struct kube_watch *w)
{
        w->busy--;
        if (!w->stopped)
                return false;
        if (w->busy == 0)
                watch_free(w);
        return true;
}

const char *kube_watch_rv(const struct kube_watch *w)
{
        return w->rv;
}

unsigned kube_watch_relists(const struct kube_watch *w)
{
        return w->relists;
}

static void watch_list(struct kube_watch *w);
static void watch_stream(struct kube_watch *w);

static void watch_timer_fn(void *userdata)
{
        struct kube_watch *w = userdata;
        w->timer = NULL;
        if (w->next == WATCH_NEXT_LIST)
                watch_list(w);
        else
                watch_stream(w);
}

static void watch_schedule(struct kube_watch *w, enum watch_next next, uint64_t delay)
{
        w->next = next;
        int r = timer_start_in(kube_client_loop(w->client), delay, watch_timer_fn, w, &w->timer);
        if (r < 0) {
                /* No timer: report it; the watch stays idle until restarted by its owner. */
                struct kube_result res = { .error = r,
                                           .message = (char *)"watch: cannot arm the retry timer" };
                if (w->ops.error) {
                        w->busy++;
                        w->ops.error(w->userdata, &res);
                        watch_leave(w);
                }
        }
}

static void watch_report(struct kube_watch *w, const struct kube_result *r)
{
        if (!w->ops.error)
                return;
        w->busy++;
        w->ops.error(w->userdata, r);
}

static void watch_list_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct kube_watch *w = userdata;
        w->call = NULL;
        if (r->error < 0) {
                if (w->ops.error) {
                        watch_report(w, r);
                        if (watch_leave(w))
                                return;
                }
                return watch_schedule(w, WATCH_NEXT_LIST, backoff_next(&w->backoff));
        }
        const char *rv = kube_object_rv(r->object);
        if (free_and_strdup(&w->rv, rv) < 0)
                return watch_schedule(w, WATCH_NEXT_LIST, backoff_next(&w->backoff));
        w->relists++;
        if (w->ops.relisted) {
                w->busy++;
                w->ops.relisted(w->userdata, kube_list_items(r->object), w->rv);
                if (watch_leave(w))
                        return;
        }
        watch_stream(w);
}

static void watch_list(struct kube_watch *w)
{
        /* A watch's (re)list is what its owner's decisions wait for (a drain cannot plan before it): it goes
         * ahead of every other request of its class, as the watch stream itself does (heap_before). */
        struct kube_list_options o = {
                .label_selector = w->label_selector,
                .field_selector = w->field_selector,
                .priority = true,
                .sight = true,
                .keep_fields = w->keep_fields,
        };
        int r = kube_list(w->client, w->path, &o, watch_list_done, w, &w->call);
        if (r < 0)
                watch_schedule(w, WATCH_NEXT_LIST, backoff_next(&w->backoff));
}

static int watch_line(struct kube_watch *w, const char *line, size_t len)
{
        struct kube_watch_decoded d;
        int ret = 0;
        switch (kube_watch_decode(line, len, &d)) {
        case KUBE_WATCH_LINE_EMPTY:
        case KUBE_WATCH_LINE_UNKNOWN:
                break;
        case KUBE_WATCH_LINE_UNPARSABLE:
                log_debug("kube: watch %s: unparsable event line, relisting", w->path);
                w->restart = true;
                ret = -EBADMSG;
                break;
        case KUBE_WATCH_LINE_STATUS:
                /* The Status body of a refused watch (e.g. 410 answered directly). */
                w->restart = true;
                w->gone = d.code == 410;
                ret = -EBADMSG;
                break;
        case KUBE_WATCH_LINE_ERROR:
                log_debug("kube: watch %s: ERROR event (code %d), relisting", w->path, d.code);
                w->restart = true;
                w->gone = d.code == 410;
                ret = -ESTALE;
                break;
        case KUBE_WATCH_LINE_BOOKMARK:
        case KUBE_WATCH_LINE_EVENT:
                /* The first line after its owner resumed it: an event at once is one the old stream had
                 * not passed on, on a connection that had stopped (not a kubelet late), and those of the
                 * other watches may have stopped with it. */
                if (w->resumed_at) {
                        if (d.kind == KUBE_WATCH_LINE_EVENT &&
                            clk_now() < w->resumed_at + MISSED_AT_ONCE_USEC)
                                kube_client_streams_silent(w->client, w->resumed_at);
                        w->resumed_at = 0;
                }
                if (d.rv && free_and_strdup(&w->rv, d.rv) < 0)
                        ret = -ENOMEM;
                w->got_event = true;
                if (d.kind == KUBE_WATCH_LINE_EVENT && ret == 0 && w->ops.event &&
                    cJSON_IsObject(d.object)) {
                        w->busy++;
                        w->ops.event(w->userdata, d.type, d.object);
                        if (watch_leave(w))
                                ret = -ECANCELED;
                }
                break;
        }
        kube_watch_decoded_clear(&d);
        return ret;
}

/* Takes the stream's chunks; an event may arrive in several chunks, or several in one. */
static int watch_on_data(const char *data, size_t len, void *userdata)
{
        struct kube_watch *w = userdata;
        if (w->restart)
                return -ECANCELED;
        w->heard_at = clk_now();
        if (kube_line_framer_feed(&w->line, data, len) < 0)
                return -ENOMEM;
        w->busy++;
        const char *line;
        size_t n;
        int r;
        while ((r = kube_line_framer_next(&w->line, &line, &n)) > 0 && (r = watch_line(w, line, n)) == 0)
                ;
        if (watch_leave(w))
                return -ECANCELED;
        if (r < 0) {
                /* Nothing more of this stream is read: not even its last line (an -EFBIG one's start). */
                kube_line_framer_reset(&w->line);
                return r;
        }
        kube_line_framer_release(&w->line);
        return 0;
}

static void watch_stream_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct kube_watch *w = userdata;
        w->call = NULL;
        w->streaming = false;
        const char *rest;
        size_t n = kube_line_framer_rest(&w->line, &rest);
        if (n > 0 && !w->restart) {
                /* A last line without its newline: an event, or the Status of a refused watch. It ends at
                 * its first NUL, if any (as when it was copied as a string). */
                w->busy++;
                (void)watch_line(w, rest, strnlen(rest, n));
                if (watch_leave(w))
                        return;
        }
        kube_line_framer_reset(&w->line);
        if (w->gone || r->http_status == 410) {
                /* Our resourceVersion is too old: a relist is the normal way on, at once. */
                w->gone = w->restart = false;
                return watch_schedule(w, WATCH_NEXT_LIST, 0);
        }
        if (!w->restart && r->error == 0 && r->http_status == 200) {
                /* The server ended the watch (timeoutSeconds): resume from the last resourceVersion. */
                uint64_t delay = w->got_event ? 0 : backoff_next(&w->backoff);
                if (w->got_event)
                        backoff_reset(&w->backoff);
                return watch_schedule(w, WATCH_NEXT_STREAM, delay);
        }
        if (!w->restart && r->error == -ETIMEDOUT) {
                /* Silent for the idle limit: a quiet resource (the answer had begun), or a connection that
                 * stopped passing bytes, which the HTTP client has closed. Either way the events since the
                 * last resourceVersion are still to be had: resume, on a live connection. */
                bool quiet = r->http_status == 200;
                if (!quiet)
                        log_info(
                            "kube: watch %s: no answer within %u s; resuming from resourceVersion %s",
                            w->path,
                            (unsigned)((w->patient ? KUBE_WATCH_IDLE_TIMEOUT_USEC : KUBE_IDLE_TIMEOUT_USEC) /
                                       1000000),
                            w->rv ? w->rv : "");
                return watch_schedule(w, WATCH_NEXT_STREAM, quiet ? 0 : backoff_next(&w->backoff));
        }
        w->restart = false;
        if (w->ops.error) {
                watch_report(w, r);
                if (watch_leave(w))
                        return;
        }
        watch_schedule(w, WATCH_NEXT_LIST, backoff_next(&w->backoff));
}

static void watch_stream(struct kube_watch *w)
{
        _cleanup_free_ char *rv = kube_query_escape(w->rv ? w->rv : "");
        _cleanup_free_ char *ls = w->label_selector ? kube_query_escape(w->label_selector) : NULL;
        _cleanup_free_ char *fs = w->field_selector ? kube_query_escape(w->field_selector) : NULL;
        _cleanup_free_ char *path =
            rv ? strprintf(
                     "%s%cwatch=true&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%u%s%s%s%s",
                     w->path, strchr(w->path, '?') ? '&' : '?', rv, w->timeout_seconds,
                     ls ? "&labelSelector=" : "", ls ? ls : "", fs ? "&fieldSelector=" : "", fs ? fs : "")
               : NULL;
        w->got_event = false;
        w->restart = w->gone = false;
        kube_line_framer_reset(&w->line);
        int r =
            path ? kube_request_stream(w->client, path, KUBE_REQ_SIGHT | (w->patient ? KUBE_REQ_PATIENT : 0),
                                       watch_on_data, watch_stream_done, w, &w->call)
                 : -ENOMEM;
        if (r < 0)
                watch_schedule(w, WATCH_NEXT_STREAM, backoff_next(&w->backoff));
        else {
                w->streaming = true;
                w->heard_at = clk_now();
                /* Only the stream that follows the owner's resume: not one after a relist or a failure. */
                w->resumed_at = w->owner_resumed ? w->heard_at : 0;
                w->owner_resumed = false;
        }
}

int kube_watch_start(struct kube_client *c, const struct kube_watch_options *o,
                     const struct kube_watch_ops *ops, void *userdata, struct kube_watch **ret)
{
        if (!c || !o || !o->path || !ops)
                return -EINVAL;
        struct kube_watch *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->client = c;
        w->ops = *ops;
        w->userdata = userdata;
        w->timeout_seconds = o->timeout_seconds ? o->timeout_seconds : 300;
        w->patient = o->patient;
        w->backoff = BACKOFF_INIT(500 * 1000, 30 * 1000 * 1000);
        w->keep_fields = o->keep_fields;
        w->path = strdup(o->path);
        if (!w->path || free_and_strdup(&w->label_selector, o->label_selector) < 0 ||
            free_and_strdup(&w->field_selector, o->field_selector) < 0 ||
            free_and_strdup(&w->rv, o->resource_version) < 0) {
                watch_free(w);
                return -ENOMEM;
        }
        /* Start from the loop, so that no callback runs before the caller has its handle. */
        watch_schedule(w, o->resource_version ? WATCH_NEXT_STREAM : WATCH_NEXT_LIST, 0);
        if (!w->timer) {
                watch_free(w);
                return -ENOMEM;
        }
        *ret = w;
        return 0;
}

/* ---- informer ---- */

struct store_entry {
        char *key;
        /* A compact informer's entry has its object as JSON text, parsed into obj on demand and released
         * at the loop's next turn (store_release()); an entry without text keeps obj. */
        cJSON *obj;
        char *text, *rv; /* rv: a compact entry's resourceVersion, read without a parse */
        bool seen;
};

struct kube_informer {
        struct kube_watch *watch;
        struct kube_informer_ops ops;
        void *userdata;
        struct store_entry *items;
        size_t n, cap;
        size_t *slots; /* index into items, see store_slot() */
        size_t n_slots;
        bool synced;
        unsigned busy;
        bool stopped;
        unsigned long generation; /* moves with every change of the store */
        const char *const *keep_fields;
        bool compact;          /* kube_watch_options.compact */
        struct loop *loop;     /* for release */
        struct timer *release; /* armed while an entry with text holds a parse */
};

static char *object_key(const cJSON *obj)
{
        const char *ns = kube_object_str(obj, "metadata.namespace");
        const char *name = kube_object_str(obj, "metadata.name");
        if (!name)
                return NULL;
        return strprintf("%s/%s", ns ? ns : "", name);
}

/* The store: entries in an array (stable order for kube_informer_at), found through an open-addressing
 * index of array positions (+1; 0 = empty slot), so a cluster-wide informer stays O(1) per event. */
static size_t store_hash(const char *key)
{
        size_t h = 1469598103934665603ULL;
        for (const unsigned char *p = (const unsigned char *)key; *p; p++)
                h = (h ^ *p) * 1099511628211ULL;
        return h;
}

static size_t *store_slot(const struct kube_informer *inf, const char *key)
{
        if (inf->n_slots == 0)
                return NULL;
        size_t mask = inf->n_slots - 1;
        for (size_t i = store_hash(key) & mask;; i = (i + 1) & mask) {
                size_t *slot = &inf->slots[i];
                if (*slot == 0 || streq(inf->items[*slot - 1].key, key))
                        return slot;
        }
}

static struct store_entry *store_find(const struct kube_informer *inf, const char *key)
{
        size_t *slot = store_slot(inf, key);
        return slot && *slot ? &inf->items[*slot - 1] : NULL;
}

static int store_reindex(struct kube_informer *inf, size_t n_slots)
{
        size_t *slots = calloc(n_slots, sizeof(*slots));
        if (!slots)
                return -ENOMEM;
        free(inf->slots);
        inf->slots = slots;
        inf->n_slots = n_slots;
        for (size_t i = 0; i < inf->n; i++)
                *store_slot(inf, inf->items[i].key) = i + 1;
        return 0;
}

static int store_add(struct kube_informer *inf, char *key, cJSON *obj, char *text, char *rv)
{
        if (inf->n == inf->cap) {
                size_t cap = inf->cap ? inf->cap * 2 : 16;
                struct store_entry *n = realloc(inf->items, cap * sizeof(*n));
                if (!n)
                        return -ENOMEM;
                inf->items = n;
                inf->cap = cap;
        }
        /* Keep the index at most half full. */
        if ((inf->n + 1) * 2 > inf->n_slots) {
                int r = store_reindex(inf, inf->n_slots ? inf->n_slots * 2 : 32);
                if (r < 0)
                        return r;
        }
        inf->items[inf->n++] =
            (struct store_entry){ .key = key, .obj = obj, .text = text, .rv = rv, .seen = true };
        *store_slot(inf, key) = inf->n;
        return 0;
}

/* Empties one index slot, shifting back the entries of its probe run (linear-probing deletion). */
static void store_unslot(struct kube_informer *inf, size_t *slot)
{
        size_t mask = inf->n_slots - 1;
        size_t hole = (size_t)(slot - inf->slots);
        for (size_t j = (hole + 1) & mask; inf->slots[j] != 0; j = (j + 1) & mask) {
                size_t home = store_hash(inf->items[inf->slots[j] - 1].key) & mask;
                /* The entry at j may move into the hole unless its home lies cyclically in (hole, j]. */
                bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
                if (stays)
                        continue;
                inf->slots[hole] = inf->slots[j];
                hole = j;
        }
        inf->slots[hole] = 0;
}

static void store_remove(struct kube_informer *inf, struct store_entry *e)
{
        size_t idx = (size_t)(e - inf->items);
        store_unslot(inf, store_slot(inf, e->key));
        free(e->key);
        cJSON_Delete(e->obj);
        free(e->text);
        free(e->rv);
        inf->n--;
        if (idx != inf->n) {
                /* The last entry fills the gap; its index slot follows it. */
                inf->items[idx] = inf->items[inf->n];
                *store_slot(inf, inf->items[idx].key) = idx + 1;
        }
}

static void informer_free(struct kube_informer *inf)
{
        kube_watch_stop(inf->watch);
        timer_cancel(inf->release);
        for (size_t i = 0; i < inf->n; i++) {
                free(inf->items[i].key);
                cJSON_Delete(inf->items[i].obj);
                free(inf->items[i].text);
                free(inf->items[i].rv);
        }
        free(inf->items);
        free(inf->slots);
        free(inf);
}

struct kube_informer *kube_informer_stop(struct kube_informer *inf)
{
        if (!inf)
                return NULL;
        if (inf->busy) {
                inf->stopped = true;
                inf->watch = kube_watch_stop(inf->watch);
        } else
                informer_free(inf);
        return NULL;
}

/* The loop's next turn: what was parsed of the compact entries is released; their text stays. */
static void store_release(void *userdata)
{
        struct kube_informer *inf = userdata;
        inf->release = NULL; /* released by the loop as it fired */
        for (size_t i = 0; i < inf->n; i++)
                if (inf->items[i].text) {
                        cJSON_Delete(inf->items[i].obj);
                        inf->items[i].obj = NULL;
                }
}

/* An entry with text holds a parse: released at the loop's next turn. Without a timer (no memory) it
 * stays until a later one. */
static void store_parsed(struct kube_informer *inf)
{
        if (!inf->release && timer_start_in(inf->loop, 0, store_release, inf, &inf->release) < 0)
                inf->release = NULL;
}

/* The entry's object: a compact entry's text parsed, until the loop's next turn. NULL without memory. */
static cJSON *entry_obj(struct kube_informer *inf, struct store_entry *e)
{
        if (!e->obj && e->text && (e->obj = cJSON_Parse(e->text)))
                store_parsed(inf);
        return e->obj;
}

/* The entry's resourceVersion, without a parse. */
static const char *entry_rv(const struct store_entry *e)
{
        return e->text ? e->rv : kube_object_rv(e->obj);
}

static bool informer_leave(struct kube_informer *inf)
{
        inf->busy--;
        if (inf->busy == 0 && inf->stopped) {
                informer_free(inf);
                return true;
        }
        return inf->stopped;
}

/* Drops an entry and tells the owner. Returns true when the informer was stopped. */
static bool informer_delete(struct kube_informer *inf, struct store_entry *e)
{
        entry_obj(inf, e);
        cJSON *old = TAKE_PTR(e->obj);
        store_remove(inf, e);
        inf->generation++;
        bool stopped = false;
        if (inf->ops.deleted) {
                inf->busy++;
                inf->ops.deleted(inf->userdata, old);
                stopped = informer_leave(inf);
        }
        cJSON_Delete(old);
        return stopped;
}

/* Applies one object to the store and tells the owner. Returns true when the informer was stopped. */
static bool informer_apply(struct kube_informer *inf, enum kube_event_type type, const cJSON *obj)
{
        _cleanup_free_ char *key = object_key(obj);
        if (!key)
                return false;
        struct store_entry *e = store_find(inf, key);
        if (type == KUBE_EVENT_DELETED && e && cJSON_GetObjectItemCaseSensitive(obj, "status")) {
                /* The owner is told of the object's last state, as the event has it (how it ended: a pod
                 * the garbage collector took with its node says so only there), not the one stored. */
                cJSON *last =
                    inf->keep_fields ? kube_object_prune(obj, inf->keep_fields) : cJSON_Duplicate(obj, true);
                if (last) {
                        cJSON_Delete(e->obj);
                        e->obj = last;
                }
        }
        if (type == KUBE_EVENT_DELETED)
                return e ? informer_delete(inf, e) : false;
        cJSON *dup =
            inf->keep_fields ? kube_object_prune(obj, inf->keep_fields) : cJSON_Duplicate(obj, true);
        if (!dup)
                return false;
        /* A compact informer keeps the text; without memory for it, the object. */
        char *text = inf->compact ? cJSON_PrintUnformatted(dup) : NULL;
        const char *dup_rv = kube_object_rv(dup);
        char *rv = text && dup_rv ? strdup(dup_rv) : NULL;
        if (text && dup_rv && !rv) {
                free(text);
                text = NULL;
        }
        inf->generation++;
        if (e) {
                /* The old object is parsed again only for an owner to be told of the change. */
                bool tell = inf->ops.modified && !streq_ptr(entry_rv(e), kube_object_rv(dup));
                cJSON *old = tell ? entry_obj(inf, e) : e->obj;
                e->obj = dup;
                free(e->text);
                e->text = text;
                free(e->rv);
                e->rv = rv;
                if (text)
                        store_parsed(inf);
                e->seen = true;
                bool stopped = false;
                if (tell) {
                        inf->busy++;
                        inf->ops.modified(inf->userdata, old, dup);
                        stopped = informer_leave(inf);
                }
                cJSON_Delete(old);
                return stopped;
        }
        if (store_add(inf, key, dup, text, rv) < 0) {
                cJSON_Delete(dup);
                free(text);
                free(rv);
                return false;
        }
        key = NULL;
        if (text)
                store_parsed(inf);
        if (!inf->ops.added)
                return false;
        inf->busy++;
        inf->ops.added(inf->userdata, dup);
        return informer_leave(inf);
}

static void informer_event(void *userdata, enum kube_event_type type, const cJSON *obj)
{
        informer_apply(userdata, type, obj);
}

static void informer_relisted(void *userdata, const cJSON *items, const char *rv)
{
        struct kube_informer *inf = userdata;
        for (size_t i = 0; i < inf->n; i++)
                inf->items[i].seen = false;
        const cJSON *obj;
        cJSON_ArrayForEach (obj, items) {
                if (informer_apply(inf, KUBE_EVENT_ADDED, obj))
                        return;
        }
        /* What the list no longer has was deleted while we were not watching. Backwards, because removal
         * moves the last entry into the freed slot. */
        for (size_t i = inf->n; i > 0; i--) {
                if (!inf->items[i - 1].seen)
                        if (informer_delete(inf, &inf->items[i - 1]))
                                return;
        }
        if (!inf->synced) {
                inf->synced = true;
                if (inf->ops.synced) {
                        inf->busy++;
                        inf->ops.synced(inf->userdata);
                        informer_leave(inf);
                }
        }
}

int kube_informer_start(struct kube_client *c, const struct kube_watch_options *o,
                        const struct kube_informer_ops *ops, void *userdata, struct kube_informer **ret)
{
        if (!c || !o || !ops)
                return -EINVAL;
        struct kube_informer *inf = calloc(1, sizeof(*inf));
        if (!inf)
                return -ENOMEM;
        inf->ops = *ops;
        inf->userdata = userdata;
        inf->keep_fields = o->keep_fields;
        inf->compact = o->compact;
        inf->loop = kube_client_loop(c);
        struct kube_watch_options wo = *o;
        wo.resource_version = NULL; /* an informer always starts from a full list */
        static const struct kube_watch_ops wops = {
                .event = informer_event,
                .relisted = informer_relisted,
        };
        int r = kube_watch_start(c, &wo, &wops, inf, &inf->watch);
        if (r < 0) {
                free(inf);
                return r;
        }
        *ret = inf;
        return 0;
}

unsigned long kube_informer_generation(const struct kube_informer *inf)
{
        return inf->generation;
}

uint64_t kube_watch_heard_at(const struct kube_watch *w)
{
        return w ? w->heard_at : 0;
}

void kube_watch_resume(struct kube_watch *w)
{
        /* Not from inside its own callbacks: the stream they run for must not end under them. */
        if (w && w->streaming && w->call && !w->busy) {
                w->owner_resumed = true;
                kube_stream_time_out(w->call, "resumed by its owner: silent while it expected events");
        }
}

uint64_t kube_informer_heard_at(const struct kube_informer *inf)
{
        return inf ? kube_watch_heard_at(inf->watch) : 0;
}

void kube_informer_resume(struct kube_informer *inf)
{
        if (inf)
                kube_watch_resume(inf->watch);
}

bool kube_informer_synced(const struct kube_informer *inf)
{
        return inf->synced;
}

size_t kube_informer_size(const struct kube_informer *inf)
{
        return inf->n;
}

static struct store_entry *entry_named(const struct kube_informer *inf, const char *namespace,
                                       const char *name)
{
        _cleanup_free_ char *key = strprintf("%s/%s", namespace ? namespace : "", name);
        return key ? store_find(inf, key) : NULL;
}

const cJSON *kube_informer_get(const struct kube_informer *inf, const char *namespace, const char *name)
{
        struct store_entry *e = entry_named(inf, namespace, name);
        /* A compact informer's parse is a cache: the informer is const to its readers. */
        return e ? entry_obj((struct kube_informer *)inf, e) : NULL;
}

const char *kube_informer_rv(const struct kube_informer *inf, const char *namespace, const char *name)
{
        const struct store_entry *e = entry_named(inf, namespace, name);
        return e ? entry_rv(e) : NULL;
}

const cJSON *kube_informer_at(const struct kube_informer *inf, size_t i)
{
        return i < inf->n ? entry_obj((struct kube_informer *)inf, &inf->items[i]) : NULL;
}
