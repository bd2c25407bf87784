/* Writes: create, replace, patch, delete and the eviction subresource. */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>

#include "sim/server_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

static enum MHD_Result reply_answer(struct MHD_Connection *c, struct sim_answer *a, bool events_v1)
{
        if (!a->body)
                return sim_reply_errno(c, -ENOMEM);
        if (events_v1 && a->status < 300 && a->body)
                sim_event_convert(a->body, true);
        return sim_reply_json(c, (unsigned)a->status, a->body);
}

static enum MHD_Result serve_delete_pod(struct sim_server *srv, struct MHD_Connection *c,
                                        const struct api_path *ap, const struct sim_http_request *rq)
{
        char ctbuf[128];
        const char *ct = sim_content_type(c, ctbuf, sizeof(ctbuf));
        _cleanup_free_ char *uid = NULL;
        struct sim_answer a = {};
        int64_t grace = -1;
        bool grace_set = false;
        int r;

        /* As kube-apiserver's DELETE handler: DeleteOptions come from the body when there is one, else from
         * the query. */
        if (rq->body_len == 0) {
                r = sim_arg_int64(c, "gracePeriodSeconds", &grace);
                if (r < 0)
                        return sim_reply_bad_int(c, "gracePeriodSeconds");
                grace_set = r > 0;
        } else if (!sim_content_is_json(ct) && !streq(ct, "application/vnd.kubernetes.protobuf"))
                return sim_reply_status(
                    c, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media "
                    "types include: application/json, application/vnd.kubernetes.protobuf");
        else {
                if (streq(ct, "application/vnd.kubernetes.protobuf") ||
                    (rq->body_len >= 4 && memcmp(rq->body, "k8s\0", 4) == 0)) {
                        int64_t g;
                        r = sim_protobuf_delete_options(rq->body, rq->body_len, &g, &uid);
                        if (r < 0)
                                return sim_reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest",
                                                        "unable to decode DeleteOptions");
                        if (g >= 0) {
                                grace = g;
                                grace_set = true;
                        }
                } else {
                        cJSON *opts = sim_parse_body(rq);
                        const cJSON *g;
                        const char *u;
                        if (!opts)
                                return sim_reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest",
                                                        "unable to decode DeleteOptions");
                        g = cJSON_GetObjectItemCaseSensitive(opts, "gracePeriodSeconds");
                        if (cJSON_IsNumber(g)) {
                                grace = (int64_t)g->valuedouble;
                                grace_set = true;
                        }
                        u = sim_json_str(opts, "preconditions.uid");
                        if (u)
                                uid = strdup(u);
                        cJSON_Delete(opts);
                        if (u && !uid)
                                return MHD_NO;
                }
        }
        /* As the pod strategy: a negative grace period asked for is 1 s (-1 here is "the pod's own"). */
        if (grace_set && grace < 0)
                grace = 1;
        else if (!grace_set)
                grace = -1;
        r = sim_delete_pod(srv->sim, ap->ns, ap->name, grace, uid, sim_user_agent(c), &a);
        if (r < 0)
                return sim_reply_errno(c, r);
        return reply_answer(c, &a, false);
}

enum MHD_Result sim_serve_scale_get(struct sim_server *srv, struct MHD_Connection *c,
                                    const struct api_path *ap)
{
        struct sim_answer a = {};
        int r = sim_scale_get(srv->sim, ap->ns, ap->name, &a);
        if (r < 0)
                return sim_reply_errno(c, r);
        return reply_answer(c, &a, false);
}

enum MHD_Result sim_serve_write(struct sim_server *srv, struct MHD_Connection *c, const char *method,
                                const struct api_path *ap, const struct sim_http_request *rq)
{
        struct sim *s = srv->sim;
        bool ev1 = sim_resource_is_events_v1(ap->res);
        struct sim_answer a = {};
        cJSON *body;
        char ctbuf[128];
        int r;

        if (rq->body_too_large)
                return sim_reply_status(c, MHD_HTTP_CONTENT_TOO_LARGE, "RequestEntityTooLarge",
                                        "the request body is too large");
        if (streq(method, "DELETE")) {
                if (ap->res->sim_kind == SIM_POD && ap->name && !ap->sub)
                        return serve_delete_pod(srv, c, ap, rq);
                return sim_reply_status(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed",
                                        "the simulator does not delete this resource");
        }
        if (streq(method, "PATCH")) {
                const char *ct = sim_content_type(c, ctbuf, sizeof(ctbuf));
                if (!ap->name)
                        return sim_reply_status(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed",
                                                "PATCH needs an object");
                bool apply = streq(ct, "application/apply-patch+yaml");
                if (!apply && !streq(ct, "application/strategic-merge-patch+json") &&
                    !streq(ct, "application/merge-patch+json") && !streq(ct, "application/json-patch+json"))
                        return sim_reply_status(
                            c, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "UnsupportedMediaType",
                            "the body of the request was in an unknown format - accepted media "
                            "types include: application/json-patch+json, application/merge-patch+json, "
                            "application/apply-patch+yaml, application/strategic-merge-patch+json");
                if (apply && isempty(sim_arg(c, "fieldManager")))
                        return sim_reply_status(c, MHD_HTTP_UNPROCESSABLE_CONTENT, "Invalid",
                                                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: "
                                                "Required value: is required for apply patch");
                body = sim_parse_body(rq);
                if (!body)
                        return sim_reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest",
                                                "the patch is not JSON");
                /* Server-side apply without field ownership: the applied configuration is merged in (the
                 * simulator reads YAML bodies only in their JSON form, which kubectl and the clients send).
                 */
                if (apply)
                        ct = "application/merge-patch+json";
                if (streq(ap->sub, "scale"))
                        r = sim_scale_write(s, ap->ns, ap->name, ct, body, &a);
                else if (ap->sub) {
                        cJSON_Delete(body);
                        return sim_reply_status(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed",
                                                "the simulator does not patch this subresource");
                } else
                        r = sim_patch(s, ap->res->sim_kind, ap->ns, ap->name, ct, body, &a);
                cJSON_Delete(body);
                if (r < 0)
                        return sim_reply_errno(c, r);
                return reply_answer(c, &a, ev1);
        }
        if (!sim_content_is_json(sim_content_type(c, ctbuf, sizeof(ctbuf))))
                return sim_reply_status(c, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "UnsupportedMediaType",
                                        "the body of the request was in an unknown format - accepted media "
                                        "types include: application/json");
        body = sim_parse_body(rq);
        if (!body)
                return sim_reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest", "the body is not JSON");
        if (streq(method, "POST") && ap->name && streq(ap->sub, "eviction") && ap->res->sim_kind == SIM_POD)
                r = sim_evict(s, ap->ns, ap->name, body, sim_user_agent(c), &a);
        else if (streq(method, "PUT") && ap->name && streq(ap->sub, "scale"))
                r = sim_scale_write(s, ap->ns, ap->name, NULL, body, &a);
        else if (ap->res->sim_kind != SIM_EVENT && ap->res->sim_kind != SIM_LEASE &&
                 ap->res->sim_kind != SIM_CONFIGMAP && !streq(method, "PUT")) {
                cJSON_Delete(body);
                return sim_reply_status(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed",
                                        "the simulator does not create this resource");
        } else if (ap->sub || (ap->res->namespaced && !ap->ns)) {
                cJSON_Delete(body);
                return sim_reply_status(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed",
                                        "the server does not allow this method on the requested resource");
        } else {
                if (ev1)
                        sim_event_convert(body, false);
                if (streq(method, "POST") && !ap->name)
                        r = sim_create(s, ap->res->sim_kind, ap->ns, body, &a);
                else if (streq(method, "PUT") && ap->name)
                        r = sim_replace(s, ap->res->sim_kind, ap->ns, ap->name, body, &a);
                else {
                        cJSON_Delete(body);
                        return sim_reply_status(
                            c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed",
                            "the server does not allow this method on the requested resource");
                }
        }
        cJSON_Delete(body);
        if (r < 0)
                return sim_reply_errno(c, r);
        return reply_answer(c, &a, ev1);
}
