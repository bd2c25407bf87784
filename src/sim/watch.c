/* Watches: a chunked stream of events from the model's change log, with bookmarks and dropped streams. */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>

#include "sim/server_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

#define WATCH_POLL_USEC        (250 * 1000)
#define WATCH_BOOKMARK_US      (60 * 1000 * 1000)
#define WATCH_LAST_BOOKMARK_US (2 * 1000 * 1000)
#define WATCH_DEFAULT_SEC      1800
/* Pods of a starting list rendered at once: a larger list is rendered (and sent) a part at a time. */
#define WATCH_PART_PODS 500

/* ---- watch ---- */

struct watch {
        struct sim_server *srv;
        const struct resource *res;
        char *ns, *lsel, *fsel;
        uint64_t rv;
        uint64_t deadline;      /* monotonic usec */
        uint64_t next_bookmark; /* monotonic usec; 0 = none asked */
        int fd;
        bool ended;
        bool table;    /* kubectl get -w: each object as a one-row Table */
        char *include; /* includeObject of those tables */
        struct buf out;
        size_t out_pos;
        /* resourceVersion "0" or none: the objects of the list it starts with, each sent as ADDED as the
         * client reads (from the first; sent ones are freed), so that a list of every pod of a large cluster
         * neither waits to be printed whole before its first byte nor is held twice in memory */
        cJSON *initial;
        /* The rest of a large starting list of pods, rendered a part at a time (sim_list_pods_part): those
         * created after part_after up to part_upto, through filter */
        bool parts;
        uint64_t part_after, part_upto;
        struct sim_list_filter filter;
        char node_buf[256];
        /* A watch of one node's pods: the index of that node, whose pods' changes alone wake it
         * (sim_wait_node_change); -1 any change does. */
        long wake_node;
        /* faults.watch_drop_rate: the stream ends after this many events or at this monotonic instant, as
         * when an apiserver restarts or a load balancer cuts an idle connection (0 = never) */
        unsigned drop_after_events;
        unsigned drop_after_more; /* the events after the starting list that drop_after_events counts */
        uint64_t drop_at;
        unsigned events;
};

static void watch_free(void *p)
{
        struct watch *w = p;
        if (!w)
                return;
        free(w->ns);
        free(w->lsel);
        free(w->fsel);
        free(w->include);
        cJSON_Delete(w->initial);
        buf_free(&w->out);
        free(w);
}

static void watch_emit(struct watch *w, const char *type, const cJSON *obj)
{
        _cleanup_free_ char *text = NULL;
        cJSON *copy = NULL;

        if (sim_resource_is_events_v1(w->res) && !streq(type, "ERROR")) {
                copy = cJSON_Duplicate(obj, true);
                if (!copy)
                        return;
                sim_event_convert(copy, true);
                obj = copy;
        }
        if (w->table && !streq(type, "ERROR")) {
                cJSON *items = cJSON_CreateArray(), *t = NULL;
                if (items && cJSON_AddItemReferenceToArray(items, (cJSON *)obj))
                        t = sim_table_new(w->srv->sim, w->res->sim_kind, items, w->include, NULL);
                cJSON_Delete(items);
                text = t ? cJSON_PrintUnformatted(t) : NULL;
                cJSON_Delete(t);
        } else
                text = cJSON_PrintUnformatted(obj);
        cJSON_Delete(copy);
        if (text) {
                buf_printf(&w->out, "{\"type\":\"%s\",\"object\":%s}\n", type, text);
                w->events++;
        }
}

static bool watch_matches(const struct watch *w, const cJSON *obj)
{
        return sim_label_selector_match(w->lsel, sim_json_path(obj, "metadata.labels")) == 1 &&
               sim_field_selector_match(w->fsel, obj) == 1;
}

static void watch_change(const struct sim_change *ch, void *userdata)
{
        struct watch *w = userdata;
        /* Another node's pod: not worth looking into (its nodeName is another). */
        if (w->wake_node >= 0 && ch->kind == SIM_POD && ch->node != w->wake_node)
                return;
        if (watch_matches(w, ch->object))
                watch_emit(w, ch->type, ch->object);
}

/* As kube-apiserver's watch cache: a bookmark every minute, and one shortly before the watch times out so
 * that the client can resume from it. */
static uint64_t watch_next_bookmark(const struct watch *w, uint64_t now)
{
        uint64_t t = now + WATCH_BOOKMARK_US;
        if (w->deadline > now + WATCH_LAST_BOOKMARK_US && w->deadline - WATCH_LAST_BOOKMARK_US < t)
                t = w->deadline - WATCH_LAST_BOOKMARK_US;
        return t;
}

static void watch_bookmark(struct watch *w, uint64_t rv)
{
        _cleanup_free_ char *api_version = sim_resource_api_version(w->res);
        buf_printf(&w->out,
                   "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"%s\",\"apiVersion\":\"%s\",\"metadata\":{"
                   "\"resourceVersion\":\"%" PRIu64 "\"}}}\n",
                   w->res->kind, api_version ? api_version : "v1", rv);
}

/* The next ADDED events of the starting list, up to about max bytes (at least one); false once none is
 * left. */
static bool watch_emit_initial(struct watch *w, size_t max)
{
        cJSON *it;
        for (;;) {
                while (w->initial && (it = w->initial->child)) {
                        cJSON_DetachItemViaPointer(w->initial, it);
                        if (watch_matches(w, it))
                                watch_emit(w, "ADDED", it);
                        cJSON_Delete(it);
                        if (w->out.len >= max)
                                return true;
                }
                cJSON_Delete(w->initial);
                w->initial = NULL;
                if (!w->parts)
                        return w->out.len > 0;
                struct sim *s = w->srv->sim;
                uint64_t last = w->part_after;
                sim_lock(s);
                int r = sim_list_pods_part(s, w->ns, &w->filter, w->part_after, w->part_upto,
                                           WATCH_PART_PODS, &w->initial, &last);
                sim_unlock(s);
                /* Out of memory ends the stream; the client lists again. */
                if (r < 0)
                        w->ended = true;
                if (r < 0 || last == w->part_after)
                        w->parts = false;
                w->part_after = last;
        }
}

/* The client hung up: a watch with nothing to send would otherwise hold its thread until its timeout. */
bool sim_peer_gone(int fd)
{
        struct pollfd pfd = { .fd = fd, .events = POLLIN | POLLRDHUP };
        char b;

        if (fd < 0 || poll(&pfd, 1, 0) <= 0)
                return false;
        if (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR))
                return true;
        return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

static ssize_t watch_read(void *cls, uint64_t pos, char *out, size_t max)
{
        struct watch *w = cls;
        struct sim *s = w->srv->sim;

        for (;;) {
                uint64_t now, store_rv, wait;
                int r;

                if (w->out_pos < w->out.len) {
                        size_t n = w->out.len - w->out_pos;
                        if (n > max)
                                n = max;
                        memcpy(out, w->out.data + w->out_pos, n);
                        w->out_pos += n;
                        return (ssize_t)n;
                }
                w->out.len = 0;
                w->out_pos = 0;
                if (w->ended || atomic_load(&w->srv->stopping))
                        return MHD_CONTENT_READER_END_OF_STREAM;
                if (sim_peer_gone(w->fd))
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                if (w->initial && watch_emit_initial(w, max))
                        continue;

                sim_lock(s);
                /* What falls due is the ticker's to run (it wakes the watchers when that changes anything):
                 * with hundreds of watchers, each looking for it at every wake-up was most of the
                 * simulator's time. */
                store_rv = sim_resource_version(s);
                r = sim_changes_since(s, w->res->sim_kind, w->ns, w->rv, watch_change, w);
                if (r == -ESTALE) {
                        _cleanup_free_ char *msg = strprintf(
                            "too old resource version: %" PRIu64 " (%" PRIu64 ")", w->rv, store_rv);
                        cJSON *st = sim_status_new(410, "Expired", msg, NULL, NULL);
                        if (st)
                                watch_emit(w, "ERROR", st);
                        cJSON_Delete(st);
                        w->ended = true;
                } else if (r < 0)
                        w->ended = true;
                else if (w->rv < store_rv)
                        w->rv = store_rv;
                now = now_monotonic_usec();
                if (w->drop_after_more && !w->drop_after_events)
                        w->drop_after_events = w->events + w->drop_after_more;
                if ((w->drop_after_events && w->events >= w->drop_after_events) ||
                    (w->drop_at && now >= w->drop_at))
                        w->ended = true;
                if (w->out.len == 0 && !w->ended) {
                        if (now >= w->deadline) {
                                w->ended = true;
                        } else if (w->next_bookmark && now >= w->next_bookmark) {
                                watch_bookmark(w, w->rv);
                                w->next_bookmark = watch_next_bookmark(w, now);
                        } else {
                                wait = w->deadline - now;
                                if (wait > WATCH_POLL_USEC)
                                        wait = WATCH_POLL_USEC;
                                if (w->drop_at && w->drop_at - now < wait)
                                        wait = w->drop_at - now;
                                sim_wait_node_change(s, w->wake_node, store_rv, wait);
                        }
                }
                sim_unlock(s);
        }
}

enum MHD_Result sim_serve_watch(struct sim_server *srv, struct MHD_Connection *c, const struct api_path *ap)
{
        struct sim *s = srv->sim;
        const char *rv_s = sim_arg(c, "resourceVersion");
        const union MHD_ConnectionInfo *ci;
        struct MHD_Response *resp;
        struct watch *w;
        enum MHD_Result ret;
        int64_t timeout = WATCH_DEFAULT_SEC;

        if (sim_label_selector_match(sim_arg(c, "labelSelector"), NULL) < 0 ||
            sim_field_selector_match(sim_arg(c, "fieldSelector"), NULL) < 0)
                return sim_reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest",
                                        "unable to parse requirement");
        if (sim_arg_int64(c, "timeoutSeconds", &timeout) < 0)
                return sim_reply_bad_int(c, "timeoutSeconds");
        /* 0 (or less) asks for the server's default; clients never need more than a day */
        if (timeout <= 0 || timeout > 86400)
                timeout = timeout <= 0 ? WATCH_DEFAULT_SEC : 86400;
        w = calloc(1, sizeof(*w));
        if (!w)
                return MHD_NO;
        w->srv = srv;
        w->res = ap->res;
        w->fd = -1;
        w->ns = ap->ns ? strdup(ap->ns) : NULL;
        w->lsel = sim_arg(c, "labelSelector") ? strdup(sim_arg(c, "labelSelector")) : NULL;
        w->fsel = sim_arg(c, "fieldSelector") ? strdup(sim_arg(c, "fieldSelector")) : NULL;
        if (ap->name) {
                /* A watch on one object is a watch with a name field selector. */
                free(w->fsel);
                w->fsel = strprintf("metadata.name=%s", ap->name);
        }
        if ((ap->ns && !w->ns) || (sim_arg(c, "labelSelector") && !w->lsel) ||
            ((ap->name || sim_arg(c, "fieldSelector")) && !w->fsel)) {
                watch_free(w);
                return MHD_NO;
        }
        w->deadline = now_monotonic_usec() + (uint64_t)timeout * 1000000;
        if (sim_arg_true(c, "allowWatchBookmarks"))
                w->next_bookmark = watch_next_bookmark(w, now_monotonic_usec());
        ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci)
                w->fd = ci->connect_fd;
        w->table = sim_wants_table(c);
        w->include = sim_arg(c, "includeObject") ? strdup(sim_arg(c, "includeObject")) : NULL;
        if (sim_arg(c, "includeObject") && !w->include) {
                watch_free(w);
                return MHD_NO;
        }

        sim_list_filter_for(w->lsel, w->fsel, w->node_buf, sizeof(w->node_buf), &w->filter);
        w->wake_node = ap->res->sim_kind == SIM_POD && !isempty(w->filter.node_name)
                           ? sim_node_index(s, w->filter.node_name)
                           : -1;
        if (isempty(rv_s) || streq(rv_s, "0")) {
                cJSON *items = NULL;
                int r;
                /* A cluster's pods (not one node's): in parts, from the pods there now, their later changes
                 * following from this version; the parts show the pods as they are when each is rendered,
                 * and the changes since may then repeat what a part showed already, as a relisting
                 * informer sees it. */
                if (ap->res->sim_kind == SIM_POD && !w->filter.node_name) {
                        w->parts = true;
                        w->part_upto = sim_pods_last_created(s);
                        r = sim_list_pods_part(s, w->ns, &w->filter, 0, w->part_upto, WATCH_PART_PODS,
                                               &items, &w->part_after);
                        if (r >= 0 && w->part_after == 0)
                                w->parts = false;
                } else
                        r = sim_list_filtered(s, ap->res->sim_kind, ap->ns, &w->filter, &items);
                if (r < 0) {
                        watch_free(w);
                        return sim_reply_errno(c, r);
                }
                /* Sent as the client reads (watch_emit_initial), not printed whole here. */
                w->initial = items;
                w->rv = sim_resource_version(s);
        } else {
                int64_t rv;
                if (sim_parse_int64(rv_s, &rv) < 0 || rv < 0) {
                        watch_free(w);
                        return sim_reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest",
                                                "invalid resourceVersion");
                }
                w->rv = (uint64_t)rv;
                /* faults.watch_gone_rate: as when the watch cache no longer holds that version — a 200 whose
                 * only event is the 410 ERROR; the client must list again. */
                if (sim_fault_draw(srv, srv->watch_gone_rate, FAULT_WATCH_GONE)) {
                        _cleanup_free_ char *msg = strprintf("too old resource version: %" PRIu64
                                                             " (%" PRIu64 ") (simulated fault)",
                                                             w->rv, sim_resource_version(s));
                        cJSON *st = sim_status_new(410, "Expired", msg, NULL, NULL);
                        if (st)
                                watch_emit(w, "ERROR", st);
                        cJSON_Delete(st);
                        w->ended = true;
                        srv->n_watch_gone++;
                }
        }
        if (!w->ended && sim_fault_draw(srv, srv->watch_drop_rate, FAULT_WATCH_DROP)) {
                uint64_t u = (uint64_t)(sim_fault_uniform(srv, FAULT_WATCH_DROP_WHEN) * 1e6);
                /* Counted from the end of the starting list, still to be sent (watch_read). */
                w->drop_after_more = 1 + (unsigned)(u % 3);
                w->drop_at = now_monotonic_usec() + 200000 + (u % 1800) * 1000;
                srv->n_watch_dropped++;
        }
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, watch_read, w, watch_free);
        if (!resp) {
                watch_free(w);
                return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "application/json");
        MHD_add_response_header(resp, "Cache-Control", "no-cache, private");
        ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return ret;
}
