/* Responses of the Kubernetes API surface: JSON bodies and metav1 Status errors. */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>

#include "sim/server_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

/* ---- responses ---- */

enum MHD_Result sim_reply_text_retry(struct MHD_Connection *c, unsigned status, const char *type, char *text,
                                     const char *retry_after)
{
        struct MHD_Response *resp;
        enum MHD_Result ret;

        if (!text)
                return MHD_NO;
        resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", type);
        MHD_add_response_header(resp, "Cache-Control", "no-cache, private");
        if (retry_after)
                MHD_add_response_header(resp, "Retry-After", retry_after);
        ret = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return ret;
}

enum MHD_Result sim_reply_text(struct MHD_Connection *c, unsigned status, const char *type, char *text)
{
        return sim_reply_text_retry(c, status, type, text, NULL);
}

_Thread_local struct deferred_reply *sim_deferred;

/* Sends and frees body. */
enum MHD_Result sim_reply_json(struct MHD_Connection *c, unsigned status, cJSON *body)
{
        char *text;

        if (!body)
                return MHD_NO;
        if (sim_deferred && !sim_deferred->set && sim_deferred->c == c) {
                *sim_deferred =
                    (struct deferred_reply){ .c = c, .status = status, .body = body, .set = true };
                return MHD_YES;
        }
        text = cJSON_PrintUnformatted(body);
        cJSON_Delete(body);
        return sim_reply_text(c, status, "application/json", text);
}

cJSON *sim_status_new(unsigned code, const char *reason, const char *message, const char *kind,
                      const char *name)
{
        cJSON *st = cJSON_CreateObject(), *details;

        if (!st)
                return NULL;
        cJSON_AddStringToObject(st, "kind", "Status");
        cJSON_AddStringToObject(st, "apiVersion", "v1");
        cJSON_AddObjectToObject(st, "metadata");
        cJSON_AddStringToObject(st, "status", "Failure");
        cJSON_AddStringToObject(st, "message", message ? message : "");
        cJSON_AddStringToObject(st, "reason", reason);
        if (kind || name) {
                details = cJSON_AddObjectToObject(st, "details");
                if (details && name)
                        cJSON_AddStringToObject(details, "name", name);
                if (details && kind)
                        cJSON_AddStringToObject(details, "kind", kind);
        }
        cJSON_AddNumberToObject(st, "code", code);
        return st;
}

enum MHD_Result sim_reply_status(struct MHD_Connection *c, unsigned code, const char *reason,
                                 const char *message)
{
        return sim_reply_json(c, code, sim_status_new(code, reason, message, NULL, NULL));
}

enum MHD_Result sim_reply_not_found(struct MHD_Connection *c)
{
        return sim_reply_status(c, MHD_HTTP_NOT_FOUND, "NotFound",
                                "the server could not find the requested resource");
}

enum MHD_Result sim_reply_errno(struct MHD_Connection *c, int r)
{
        _cleanup_free_ char *msg = strprintf("internal error: %s", strerror(-r));
        return sim_reply_status(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "InternalError",
                                msg ? msg : "internal error");
}
