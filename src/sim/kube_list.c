/* GET of a collection (selectors, limit and continue, Table output) and of one object. */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>

#include "sim/server_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

/* ---- continue tokens: base64 of "RV:OFFSET" ---- */

char *sim_continue_encode(uint64_t rv, size_t offset)
{
        char raw[64];
        int n = snprintf(raw, sizeof(raw), "%" PRIu64 ":%zu", rv, offset);
        return base64_encode((const unsigned char *)raw, (size_t)n);
}

int sim_continue_decode(const char *token, uint64_t *ret_rv, size_t *ret_offset)
{
        _cleanup_free_ unsigned char *raw = NULL;
        _cleanup_free_ char *text = NULL;
        unsigned long long rv, off;
        size_t len;
        char tail;
        int r;

        if (isempty(token))
                return -EINVAL;
        r = base64_decode(token, strlen(token), &raw, &len);
        if (r < 0)
                return -EINVAL;
        text = strndup((const char *)raw, len);
        if (!text)
                return -ENOMEM;
        if (strlen(text) != len || sscanf(text, "%llu:%llu%c", &rv, &off, &tail) != 2)
                return -EINVAL;
        *ret_rv = rv;
        *ret_offset = off;
        return 0;
}

/* Copies kept items of a list into the response, honouring limit and continue. */
enum MHD_Result sim_serve_list(struct sim_server *srv, struct MHD_Connection *c, const struct api_path *ap)
{
        struct sim *s = srv->sim;
        const char *lsel = sim_arg(c, "labelSelector"), *fsel = sim_arg(c, "fieldSelector");
        const char *cont = sim_arg(c, "continue");
        cJSON *all = NULL, *kept, *it, *next, *meta, *list;
        uint64_t rv = sim_resource_version(s);
        size_t offset = 0, limit = 0, idx = 0, n_kept = 0;
        int64_t limit_q = 0;
        _cleanup_free_ char *api_version = NULL, *kind = NULL, *rvs = NULL;
        int r;

        if (sim_label_selector_match(lsel, NULL) < 0 || sim_field_selector_match(fsel, NULL) < 0)
                return sim_reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest",
                                        "unable to parse requirement");
        if (isempty(cont))
                cont = NULL; /* "continue=" is no token */
        if (sim_arg_int64(c, "limit", &limit_q) < 0)
                return sim_reply_bad_int(c, "limit");
        if (cont && sim_continue_decode(cont, &rv, &offset) < 0)
                return sim_reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest", "invalid continue token");
        /* faults.watch_gone_rate: a list from a resourceVersion (or a continue token) the server no longer
         * has; "0" and none mean any version and are always served. */
        if ((cont ||
             (!isempty(sim_arg(c, "resourceVersion")) && !streq(sim_arg(c, "resourceVersion"), "0"))) &&
            sim_fault_draw(srv, srv->watch_gone_rate, FAULT_LIST_GONE)) {
                srv->n_list_gone++;
                return sim_reply_status(
                    c, 410, "Expired",
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter. "
                    "(simulated fault)");
        }
        /* As the storage layer: a limit of 0 or less is no limit. */
        if (limit_q > 0)
                limit = (size_t)limit_q;
        struct sim_list_filter filter;
        char node_buf[256];
        sim_list_filter_for(lsel, fsel, node_buf, sizeof(node_buf), &filter);
        /* A page of every pod (nothing filtered after): only that page is rendered, and one more to say
         * whether another follows. */
        if (ap->res->sim_kind == SIM_POD && limit && !filter.node_name && isempty(lsel) && isempty(fsel)) {
                filter.skip = offset;
                filter.max = limit + 1;
                idx = offset;
                offset = 0;
        }
        r = sim_list_filtered(s, ap->res->sim_kind, ap->ns, &filter, &all);
        if (r < 0)
                return sim_reply_errno(c, r);
        kept = cJSON_CreateArray();
        list = cJSON_CreateObject();
        api_version = sim_resource_api_version(ap->res);
        kind = strprintf("%sList", ap->res->kind);
        rvs = strprintf("%" PRIu64, rv);
        if (!kept || !list || !api_version || !kind || !rvs) {
                cJSON_Delete(all);
                cJSON_Delete(kept);
                cJSON_Delete(list);
                return MHD_NO;
        }
        for (it = all ? all->child : NULL; it; it = next) {
                next = it->next;
                if (sim_label_selector_match(lsel, sim_json_path(it, "metadata.labels")) != 1 ||
                    sim_field_selector_match(fsel, it) != 1)
                        continue;
                if (idx++ < offset)
                        continue;
                if (limit && n_kept >= limit) {
                        _cleanup_free_ char *tok = sim_continue_encode(rv, idx - 1);
                        meta = cJSON_AddObjectToObject(list, "metadata");
                        cJSON_AddStringToObject(meta, "continue", tok ? tok : "");
                        break;
                }
                cJSON_DetachItemViaPointer(all, it);
                if (sim_resource_is_events_v1(ap->res))
                        sim_event_convert(it, true);
                cJSON_AddItemToArray(kept, it);
                n_kept++;
        }
        cJSON_Delete(all);
        meta = cJSON_GetObjectItemCaseSensitive(list, "metadata");
        if (!meta)
                meta = cJSON_AddObjectToObject(list, "metadata");
        cJSON_AddStringToObject(meta, "resourceVersion", rvs);
        if (sim_wants_table(c)) {
                cJSON *t = sim_table_new(s, ap->res->sim_kind, kept, sim_arg(c, "includeObject"), meta);
                cJSON_Delete(kept);
                cJSON_Delete(list);
                return sim_reply_json(c, MHD_HTTP_OK, t);
        }
        cJSON_AddStringToObject(list, "kind", kind);
        cJSON_AddStringToObject(list, "apiVersion", api_version);
        cJSON_AddItemToObject(list, "items", kept);
        return sim_reply_json(c, MHD_HTTP_OK, list);
}

enum MHD_Result sim_serve_get(struct sim_server *srv, struct MHD_Connection *c, const struct api_path *ap)
{
        cJSON *obj = NULL;
        int r;

        r = sim_get(srv->sim, ap->res->sim_kind, ap->ns, ap->name, &obj);
        if (r == -ENOENT) {
                _cleanup_free_ char *msg = sim_not_found_message(ap);
                return sim_reply_json(
                    c, MHD_HTTP_NOT_FOUND,
                    sim_status_new(MHD_HTTP_NOT_FOUND, "NotFound", msg, ap->res->name, ap->name));
        }
        if (r < 0)
                return sim_reply_errno(c, r);
        if (sim_resource_is_events_v1(ap->res))
                sim_event_convert(obj, true);
        if (sim_wants_table(c)) {
                cJSON *items = cJSON_CreateArray(), *t;
                cJSON_AddItemToArray(items, obj);
                t = sim_table_new(srv->sim, ap->res->sim_kind, items, sim_arg(c, "includeObject"), NULL);
                cJSON_Delete(items);
                return sim_reply_json(c, MHD_HTTP_OK, t);
        }
        return sim_reply_json(c, MHD_HTTP_OK, obj);
}
