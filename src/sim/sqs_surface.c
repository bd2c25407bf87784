/* The simulator's SQS surface: one standard queue fed by the scenario's events, in both SQS protocols. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "sim/aws_request.h"
#include "sim/model.h"
#include "sim/server.h"
#include "sim/sqs_internal.h"
#include "sim/sqs_query.h"
#include "sim/sqs_surface.h"
#include "sim/stop_wake.h"
#include "sim/sts_surface.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

/* ---- replies ---- */

static int reply(struct MHD_Connection *c, unsigned status, const char *type, char *body,
                 const char *request_id, const char *query_error)
{
        struct MHD_Response *resp;
        enum MHD_Result ret;

        if (!body)
                return -ENOMEM;
        resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(body);
                return -ENOMEM;
        }
        MHD_add_response_header(resp, "Content-Type", type);
        MHD_add_response_header(resp, "x-amzn-RequestId", request_id);
        if (query_error)
                MHD_add_response_header(resp, "x-amzn-query-error", query_error);
        ret = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return ret == MHD_YES ? 0 : -EIO;
}

static int reply_json(struct MHD_Connection *c, const char *request_id, struct outcome *o)
{
        _cleanup_free_ char *qerr = NULL;
        char *text;

        if (o->err) {
                cJSON *e = cJSON_CreateObject();
                qerr = strprintf("%s;%s", o->err->code, o->err->fault);
                if (!e || !cJSON_AddStringToObject(e, "__type", o->err->type) ||
                    !cJSON_AddStringToObject(e, "message", o->message ? o->message : "")) {
                        cJSON_Delete(e);
                        return -ENOMEM;
                }
                text = cJSON_PrintUnformatted(e);
                cJSON_Delete(e);
                return reply(c, o->err->status, "application/x-amz-json-1.0", text, request_id, qerr);
        }
        /* Actions without output answer an empty body. */
        text = o->result ? cJSON_PrintUnformatted(o->result) : strdup("");
        return reply(c, 200, "application/x-amz-json-1.0", text, request_id, NULL);
}

static int reply_xml(struct MHD_Connection *c, const char *action, const char *request_id, struct outcome *o)
{
        struct buf b = {};
        int r;

        if (o->err) {
                r = buf_printf(
                    &b, "<?xml version=\"1.0\"?><ErrorResponse xmlns=\"" XMLNS "\"><Error><Type>%s</Type>",
                    o->err->fault);
                if (r >= 0)
                        r = sim_sqs_xml_element(&b, "Code", o->err->code);
                if (r >= 0)
                        r = sim_sqs_xml_element(&b, "Message", o->message ? o->message : "");
                if (r >= 0)
                        r = buf_printf(&b, "<Detail/></Error><RequestId>%s</RequestId></ErrorResponse>",
                                       request_id);
                if (r < 0 || buf_append(&b, "", 1) < 0) {
                        buf_free(&b);
                        return -ENOMEM;
                }
                return reply(c, o->err->status, "text/xml", b.data, request_id, NULL);
        }
        r = buf_printf(&b, "<?xml version=\"1.0\"?><%sResponse xmlns=\"" XMLNS "\">", action);
        if (r >= 0)
                r = sim_sqs_xml_result(&b, action, o->result);
        if (r >= 0)
                r = buf_printf(&b,
                               "<ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata></%sResponse>",
                               request_id, action);
        if (r < 0 || buf_append(&b, "", 1) < 0) {
                buf_free(&b);
                return -ENOMEM;
        }
        return reply(c, 200, "text/xml", b.data, request_id, NULL);
}

/* ---- signature ---- */

static const char *default_lookup(const char *akid, void *userdata)
{
        return streq(akid, SIM_SQS_ACCESS_KEY_ID) ? SIM_SQS_SECRET_ACCESS_KEY : NULL;
}

/* NULL when the request is signed by a known key, else the error to answer. */
static const struct sqs_err *verify(struct sim_sqs *q, const struct sim_http_request *rq, char **ret_why)
{
        sigv4_secret_lookup_fn lookup;
        void *lookup_userdata;
        struct sim_sts *sts;

        pthread_mutex_lock(&q->lock);
        lookup = q->lookup;
        lookup_userdata = q->lookup_userdata;
        sts = q->sts;
        pthread_mutex_unlock(&q->lock);

        switch (sim_aws_verify(rq, "sqs", lookup ? lookup : default_lookup, lookup ? lookup_userdata : NULL,
                               sts)) {
        case 0:
                return NULL;
        case -ENOMEM:
                return &err_internal;
        case -EPERM:
                *ret_why = strdup("Request is missing Authentication Token");
                return &err_no_auth;
        case -ENOKEY:
                *ret_why = strdup("The security token included in the request is invalid.");
                return &err_token;
        default:
                *ret_why =
                    strdup("The request signature we calculated does not match the signature you "
                           "provided. Check your AWS Secret Access Key and signing method. Consult the "
                           "service documentation for details.");
                return &err_signature;
        }
}

/* ---- the listener ---- */

static int on_request(void *userdata, const struct sim_http_request *rq)
{
        struct sim_sqs *q = userdata;
        const char *target = MHD_lookup_connection_value(rq->connection, MHD_HEADER_KIND, "X-Amz-Target");
        bool json = startswith(target, "AmazonSQS.");
        cJSON *p = NULL;
        _cleanup_free_ char *action = NULL;
        char request_id[37], seq[32];
        struct outcome o = {};
        int r;

        pthread_mutex_lock(&q->lock);
        snprintf(seq, sizeof(seq), "%" PRIu64, ++q->request_seq);
        pthread_mutex_unlock(&q->lock);
        sim_sqs_uuid_from(seq, q->name, request_id);

        if (json) {
                action = strdup(target + strlen("AmazonSQS."));
                p = rq->body_len > 0 ? cJSON_ParseWithLength(rq->body, rq->body_len) : cJSON_CreateObject();
                if (!cJSON_IsObject(p))
                        sim_sqs_outcome_error(&o, &err_serialization,
                                              "The request body is not a JSON object.");
        } else {
                p = cJSON_CreateObject();
                if (p && streq(rq->method, "POST") &&
                    sim_aws_form_parse(rq->body, rq->body_len, sim_sqs_form_param, p) < 0)
                        sim_sqs_outcome_error(&o, &err_internal, "Out of memory.");
                if (p)
                        MHD_get_connection_values(rq->connection, MHD_GET_ARGUMENT_KIND, sim_sqs_collect_arg,
                                                  p);
                action = p && sim_sqs_param(p, "Action") ? strdup(sim_sqs_param(p, "Action")) : NULL;
                if (!action && !o.err)
                        sim_sqs_outcome_error(&o, &err_action, "The request must contain an Action.");
        }
        if (!o.err && (!p || !action))
                sim_sqs_outcome_error(&o, &err_internal, "Out of memory.");
        if (!o.err && rq->body_too_large)
                sim_sqs_outcome_error(&o, &err_invalid_value, "The request is too large.");
        if (!o.err) {
                char *why = NULL;
                const struct sqs_err *e = verify(q, rq, &why);
                if (e) {
                        pthread_mutex_lock(&q->lock);
                        q->stats.requests++;
                        q->stats.auth_failures++;
                        pthread_mutex_unlock(&q->lock);
                        sim_sqs_outcome_error(&o, e, "%s", why ? why : "");
                }
                free(why);
        }
        if (!o.err && !streq(action, "ReceiveMessage") && !streq(action, "GetQueueUrl") &&
            !streq(action, "GetQueueAttributes")) {
                sim_lock(q->sim);
                sim_record_write(q->sim, "sqs", action);
                sim_unlock(q->sim);
        }
        if (!o.err) {
                pthread_mutex_lock(&q->lock);
                sim_sqs_act(q, action, p, rq->url, &o);
                pthread_mutex_unlock(&q->lock);
                if (!o.err && !o.result &&
                    (streq(action, "ReceiveMessage") || streq(action, "GetQueueUrl") ||
                     streq(action, "GetQueueAttributes") || sim_sqs_is_batch(action) ||
                     streq(action, "SendMessage")))
                        sim_sqs_outcome_error(&o, &err_internal, "Out of memory.");
        }
        log_debug("sim sqs: %s %s → %u", json ? "json" : "query", action ? action : "?",
                  o.err ? o.err->status : 200);
        r = json ? reply_json(rq->connection, request_id, &o)
                 : reply_xml(rq->connection, action ? action : "Unknown", request_id, &o);
        cJSON_Delete(o.result);
        free(o.message);
        cJSON_Delete(p);
        return r;
}

/* ---- life cycle ---- */

int sim_sqs_start(struct sim *s, const char *host, struct sim_sqs **ret)
{
        _cleanup_free_ char *listen = NULL;
        struct sim_sqs *q;
        pthread_condattr_t attr;
        const char *zone;
        size_t zl;
        int r;

        q = calloc(1, sizeof(*q));
        if (!q)
                return -ENOMEM;
        q->sim = s;
        pthread_mutex_init(&q->lock, NULL);
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&q->cond, &attr);
        pthread_cond_init(&q->polls_cond, &attr);
        pthread_condattr_destroy(&attr);

        sim_lock(s);
        q->scenario = strdup(sim_scenario_name(s) ? sim_scenario_name(s) : "scenario");
        zone = sim_node_count(s) > 0 && sim_node_zone(s, 0) ? sim_node_zone(s, 0) : "us-east-1a";
        zl = strlen(zone);
        /* The region is the zone without its letter (us-east-1a → us-east-1). */
        q->region = strndup(zone, zl > 1 && zone[zl - 1] >= 'a' && zone[zl - 1] <= 'z' ? zl - 1 : zl);
        q->created_s = sim_wall_usec(s, 0) / 1000000ULL;
        sim_unlock(s);
        if (!q->scenario || !q->region)
                goto oom;
        q->name = strprintf("spotdrain-%s", q->scenario);
        if (!q->name)
                goto oom;
        q->path = strprintf("/%s/%s", SIM_SQS_ACCOUNT, q->name);
        q->arn = strprintf("arn:aws:sqs:%s:%s:%s", q->region, SIM_SQS_ACCOUNT, q->name);
        host = host ? host : "127.0.0.1";
        listen = strchr(host, ':') && host[0] != '[' ? strprintf("[%s]:0", host) : strprintf("%s:0", host);
        if (!q->path || !q->arn || !listen)
                goto oom;
        r = sim_http_start(listen, on_request, q, &q->http);
        if (r < 0) {
                sim_sqs_stop(q);
                return r;
        }
        q->queue_url = strprintf("%s%s", sim_http_url(q->http), q->path);
        if (!q->queue_url)
                goto oom;
        *ret = q;
        return 0;
oom:
        sim_sqs_stop(q);
        return -ENOMEM;
}

struct sim_sqs *sim_sqs_stop(struct sim_sqs *q)
{
        if (!q)
                return NULL;
        sim_stop_wake(&q->lock, &q->cond, &q->stopping);
        sim_http_stop(q->http);
        for (size_t i = 0; i < q->n_msgs; i++) {
                free(q->msgs[i].message_id);
                free(q->msgs[i].body);
                free(q->msgs[i].handle);
        }
        free(q->msgs);
        free(q->nodes);
        free(q->launch_sent);
        free(q->name);
        free(q->path);
        free(q->queue_url);
        free(q->arn);
        free(q->region);
        free(q->scenario);
        pthread_cond_destroy(&q->cond);
        pthread_cond_destroy(&q->polls_cond);
        pthread_mutex_destroy(&q->lock);
        free(q);
        return NULL;
}

const char *sim_sqs_url(const struct sim_sqs *q)
{
        return sim_http_url(q->http);
}

const char *sim_sqs_queue_url(const struct sim_sqs *q)
{
        return q->queue_url;
}

const char *sim_sqs_queue_name(const struct sim_sqs *q)
{
        return q->name;
}

void sim_sqs_set_secret_lookup(struct sim_sqs *q, sigv4_secret_lookup_fn lookup, void *userdata)
{
        pthread_mutex_lock(&q->lock);
        q->lookup = lookup;
        q->lookup_userdata = userdata;
        q->sts = NULL;
        pthread_mutex_unlock(&q->lock);
}

void sim_sqs_use_sts(struct sim_sqs *q, struct sim_sts *t)
{
        pthread_mutex_lock(&q->lock);
        q->lookup = t ? sim_sts_secret_lookup : NULL;
        q->lookup_userdata = t;
        q->sts = t;
        pthread_mutex_unlock(&q->lock);
}

void sim_sqs_kick(struct sim_sqs *q)
{
        pthread_mutex_lock(&q->lock);
        pthread_cond_broadcast(&q->cond);
        pthread_mutex_unlock(&q->lock);
}

int sim_sqs_set_fault(struct sim_sqs *q, const struct sim_sqs_fault *f)
{
        if (!f || !(f->duplicate_rate >= 0 && f->duplicate_rate <= 1) ||
            !(f->throttle_rate >= 0 && f->throttle_rate <= 1))
                return -EINVAL;
        pthread_mutex_lock(&q->lock);
        q->fault = *f;
        pthread_cond_broadcast(&q->cond);
        pthread_mutex_unlock(&q->lock);
        return 0;
}

int sim_sqs_stats(struct sim_sqs *q, struct sim_sqs_stats *ret)
{
        pthread_mutex_lock(&q->lock);
        (void)sim_sqs_sync_model(q);
        *ret = q->stats;
        ret->messages = q->n_msgs;
        pthread_mutex_unlock(&q->lock);
        return 0;
}

int sim_sqs_wait_polls(struct sim_sqs *q, unsigned n, uint64_t timeout_usec)
{
        uint64_t deadline = now_monotonic_usec() + timeout_usec;
        struct timespec ts;
        int r = 0;

        sim_sqs_monotonic_deadline(deadline, &ts);
        pthread_mutex_lock(&q->lock);
        while (q->stats.waiting < n) {
                if (now_monotonic_usec() >= deadline) {
                        r = -ETIMEDOUT;
                        break;
                }
                pthread_cond_timedwait(&q->polls_cond, &q->lock, &ts);
        }
        pthread_mutex_unlock(&q->lock);
        return r;
}
