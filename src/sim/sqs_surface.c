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
#include "sim/sqs_query.h"
#include "sim/sqs_surface.h"
#include "sim/stop_wake.h"
#include "sim/sts_surface.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

#define XMLNS             "http://queue.amazonaws.com/doc/2012-11-05/"
#define MAX_MESSAGES      10
#define MAX_WAIT          20
#define MAX_VISIBILITY    43200
#define MAX_BATCH         10
#define WAKE_MAX_USEC     (1000ULL * 1000ULL)
#define RETENTION_SECONDS 345600
#define MAX_MESSAGE_SIZE  1048576

/* ---- errors, as the service answers them (fixtures/sqs/README.txt) ---- */
struct sqs_err {
        unsigned status;
        const char *code; /* the query protocol's code, and x-amzn-query-error */
        const char *type; /* the JSON protocol's __type */
        const char *fault;
};

static const struct sqs_err err_nonexistent = { 400, "AWS.SimpleQueueService.NonExistentQueue",
                                                "com.amazonaws.sqs#QueueDoesNotExist", "Sender" };
static const struct sqs_err err_handle = { 404, "ReceiptHandleIsInvalid",
                                           "com.amazonaws.sqs#ReceiptHandleIsInvalid", "Sender" };
static const struct sqs_err err_not_inflight = { 400, "AWS.SimpleQueueService.MessageNotInflight",
                                                 "com.amazonaws.sqs#MessageNotInflight", "Sender" };
static const struct sqs_err err_invalid_value = { 400, "InvalidParameterValue",
                                                  "com.amazon.coral.service#InvalidParameterValueException",
                                                  "Sender" };
static const struct sqs_err err_missing = { 400, "MissingParameter",
                                            "com.amazon.coral.service#MissingRequiredParameterException",
                                            "Sender" };
static const struct sqs_err err_attribute = { 400, "InvalidAttributeName",
                                              "com.amazonaws.sqs#InvalidAttributeName", "Sender" };
static const struct sqs_err err_action = { 400, "InvalidAction",
                                           "com.amazon.coral.service#UnknownOperationException", "Sender" };
static const struct sqs_err err_serialization = { 400, "SerializationException",
                                                  "com.amazon.coral.service#SerializationException",
                                                  "Sender" };
static const struct sqs_err err_too_many = { 400, "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
                                             "com.amazonaws.sqs#TooManyEntriesInBatchRequest", "Sender" };
static const struct sqs_err err_empty_batch = { 400, "AWS.SimpleQueueService.EmptyBatchRequest",
                                                "com.amazonaws.sqs#EmptyBatchRequest", "Sender" };
static const struct sqs_err err_ids_not_distinct = { 400, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
                                                     "com.amazonaws.sqs#BatchEntryIdsNotDistinct",
                                                     "Sender" };
static const struct sqs_err err_batch_id = { 400, "AWS.SimpleQueueService.InvalidBatchEntryId",
                                             "com.amazonaws.sqs#InvalidBatchEntryId", "Sender" };
static const struct sqs_err err_access_denied = { 403, "AccessDenied",
                                                  "com.amazon.coral.service#AccessDeniedException",
                                                  "Sender" };
static const struct sqs_err err_signature = { 403, "SignatureDoesNotMatch",
                                              "com.amazon.coral.service#InvalidSignatureException",
                                              "Sender" };
static const struct sqs_err err_token = { 403, "InvalidClientTokenId",
                                          "com.amazon.coral.service#UnrecognizedClientException", "Sender" };
static const struct sqs_err err_no_auth = { 403, "MissingAuthenticationToken",
                                            "com.amazon.coral.service#MissingAuthenticationTokenException",
                                            "Sender" };
static const struct sqs_err err_internal = { 500, "InternalError", "com.amazonaws.sqs#InternalError",
                                             "Receiver" };
/* Throttling: SQS's modeled error (awsQueryError RequestThrottled, 403, in the SDKs' models) and the
 * common error every AWS service may answer. */
static const struct sqs_err err_throttled = { 403, "RequestThrottled", "com.amazonaws.sqs#RequestThrottled",
                                              "Sender" };
static const struct sqs_err err_throttling = { 400, "ThrottlingException",
                                               "com.amazon.coral.availability#ThrottlingException",
                                               "Sender" };

/* ---- state ---- */
struct queued {
        char *message_id;
        char *body;
        char md5[33];
        uint64_t sent_ms;
        double visible_at; /* scenario seconds */
        unsigned receive_count;
        uint64_t first_receive_ms;
        char *handle; /* the latest receipt handle; NULL until received */
};

struct node_state {
        /* What was last delivered, so that a later or different event of the node is delivered too. */
        bool rebalance_sent, notice_sent, closed_sent; /* closed: a reboot's Health event, once back */
        double rebalance_at, notice_at;
        char notice_kind[32];
};

struct sim_sqs {
        struct sim *sim;
        bool *launch_sent; /* per launch (sim_launch_hook()): its lifecycle message was queued */
        size_t n_launch_sent;
        struct sim_http *http;
        char *name, *path, *queue_url, *arn, *region, *scenario;
        uint64_t created_s;

        pthread_mutex_t lock;
        pthread_cond_t cond;       /* CLOCK_MONOTONIC: the queue changed, or look at the model again */
        pthread_cond_t polls_cond; /* CLOCK_MONOTONIC: the number of waiting polls changed */
        bool stopping;
        struct queued *msgs; /* sorted by sent_ms */
        size_t n_msgs, cap;
        struct node_state *nodes;
        size_t n_nodes;
        uint64_t handle_seq, request_seq;
        struct sim_sqs_fault fault;
        struct sim_sqs_stats stats;
        sigv4_secret_lookup_fn lookup;
        void *lookup_userdata;
        struct sim_sts *sts; /* checks session tokens when set */
};

/* What an action produced: a result in the JSON protocol's shape (NULL: no output), or an error. */
struct outcome {
        cJSON *result;
        const struct sqs_err *err;
        char *message;
};

static void outcome_error(struct outcome *o, const struct sqs_err *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void outcome_error(struct outcome *o, const struct sqs_err *e, const char *fmt, ...)
{
        va_list ap;

        cJSON_Delete(o->result);
        o->result = NULL;
        o->err = e;
        free(o->message);
        va_start(ap, fmt);
        if (vasprintf(&o->message, fmt, ap) < 0)
                o->message = NULL;
        va_end(ap);
}

/* ---- deterministic ids ---- */

static uint64_t fnv1a(const char *s, uint64_t h)
{
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 1099511628211ULL;
        return h;
}

static uint64_t mix64(uint64_t x)
{
        x += 0x9e3779b97f4a7c15ULL;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
        return x ^ (x >> 31);
}

static void uuid_from(const char *key, const char *salt, char out[37])
{
        uint64_t a = mix64(fnv1a(key, fnv1a(salt, 1469598103934665603ULL)));
        uint64_t b = mix64(a ^ 0x5bd1e9955bd1e995ULL);
        snprintf(out, 37, "%08" PRIx64 "-%04" PRIx64 "-4%03" PRIx64 "-%04" PRIx64 "-%012" PRIx64, a >> 32,
                 (a >> 16) & 0xffff, a & 0xfff, (b >> 48 & 0x3fff) | 0x8000,
                 (uint64_t)(b & 0xffffffffffffULL));
}

static void md5_hex(const char *data, size_t len, char out[33])
{
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned n = 0;

        out[0] = 0;
        if (!EVP_Digest(data, len, md, &n, EVP_md5(), NULL) || n != 16)
                return;
        for (unsigned i = 0; i < n; i++)
                snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* ---- the messages EC2, AWS Health and Auto Scaling send ---- */

struct event_facts {
        const char *kind;
        const char *instance_id;
        const char *zone;
        double at; /* scenario seconds */
        uint64_t at_usec, deadline_usec;
        const char *code; /* a scheduled change's IMDS Code */
        double notice_at; /* the notice's scenario time (a closing message's at is its own) */
        bool closed;      /* a scheduled change's Health event closing (a reboot that is back), at at_usec */
};

/* The AWS Health eventTypeCode of an IMDS maintenance Code. */
static const char *health_code(const char *code)
{
        static const struct {
                const char *imds, *health;
        } map[] = {
                { "instance-stop", "AWS_EC2_INSTANCE_STOP_SCHEDULED" },
                { "system-maintenance", "AWS_EC2_SYSTEM_MAINTENANCE_EVENT" },
                { "system-reboot", "AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED" },
                { "instance-reboot", "AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(map); i++)
                if (streq(code, map[i].imds))
                        return map[i].health;
        return "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED";
}

static cJSON *envelope(struct sim_sqs *q, const char *id, const char *detail_type, const char *source,
                       uint64_t time_usec)
{
        char t[32];
        cJSON *o = cJSON_CreateObject();

        if (format_rfc3339(time_usec, t, sizeof(t)) < 0 || !cJSON_AddStringToObject(o, "version", "0") ||
            !cJSON_AddStringToObject(o, "id", id) ||
            !cJSON_AddStringToObject(o, "detail-type", detail_type) ||
            !cJSON_AddStringToObject(o, "source", source) ||
            !cJSON_AddStringToObject(o, "account", SIM_SQS_ACCOUNT) ||
            !cJSON_AddStringToObject(o, "time", t) || !cJSON_AddStringToObject(o, "region", q->region)) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

static bool add_resources(cJSON *o, const char *resource)
{
        cJSON *a = cJSON_AddArrayToObject(o, "resources");
        return a && cJSON_AddItemToArray(a, cJSON_CreateString(resource));
}

static char *body_ec2(struct sim_sqs *q, const struct event_facts *f, const char *id, bool spot)
{
        _cleanup_free_ char *arn = strprintf("arn:aws:ec2:%s:instance/%s", f->zone, f->instance_id);
        cJSON *o = envelope(
            q, id, spot ? "EC2 Spot Instance Interruption Warning" : "EC2 Instance Rebalance Recommendation",
            "aws.ec2", f->at_usec);
        cJSON *d = NULL;
        char *text = NULL;

        if (o && arn && add_resources(o, arn) && (d = cJSON_AddObjectToObject(o, "detail")) &&
            cJSON_AddStringToObject(d, "instance-id", f->instance_id) &&
            (!spot || cJSON_AddStringToObject(d, "instance-action", "terminate")))
                text = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        return text;
}

/* id: this message's; event: the Health event's, the same in its closing message. */
static char *body_health(struct sim_sqs *q, const struct event_facts *f, const char *id, const char *event)
{
        char start[48], end[48], updated[48], comm[37];
        _cleanup_free_ char *arn = NULL, *desc = NULL;
        const char *type = health_code(f->code);
        cJSON *o = envelope(q, id, "AWS Health Event", "aws.health", f->at_usec), *d = NULL, *a, *e;
        char *text = NULL;

        uuid_from(event, "communication", comm);
        arn = strprintf("arn:aws:health:%s::event/EC2/%s/%s_%s", q->region, type, type, event);
        if (sim_http_date(f->deadline_usec, true, start, sizeof(start)) < 0 ||
            sim_http_date(f->deadline_usec + 3600ULL * 1000000ULL, true, end, sizeof(end)) < 0 ||
            sim_http_date(f->at_usec, true, updated, sizeof(updated)) < 0)
                goto out;
        desc = strprintf("EC2 has detected degradation of the underlying hardware hosting your Amazon EC2 "
                         "instance associated with this event in the %s region. We will stop your instance "
                         "after %s.",
                         q->region, start);
        if (!o || !arn || !desc || !add_resources(o, f->instance_id) ||
            !(d = cJSON_AddObjectToObject(o, "detail")) || !cJSON_AddStringToObject(d, "eventArn", arn) ||
            !cJSON_AddStringToObject(d, "service", "EC2") ||
            !cJSON_AddStringToObject(d, "eventTypeCode", type) ||
            !cJSON_AddStringToObject(d, "eventTypeCategory", "scheduledChange") ||
            !cJSON_AddStringToObject(d, "eventScopeCode", "ACCOUNT_SPECIFIC") ||
            !cJSON_AddStringToObject(d, "communicationId", comm) ||
            !cJSON_AddStringToObject(d, "startTime", start) || !cJSON_AddStringToObject(d, "endTime", end) ||
            !cJSON_AddStringToObject(d, "lastUpdatedTime", updated) ||
            !cJSON_AddStringToObject(d, "statusCode", f->closed ? "closed" : "upcoming") ||
            !cJSON_AddStringToObject(d, "eventRegion", q->region) ||
            !(a = cJSON_AddArrayToObject(d, "eventDescription")) || !(e = cJSON_CreateObject()) ||
            !cJSON_AddItemToArray(a, e) || !cJSON_AddStringToObject(e, "language", "en_US") ||
            !cJSON_AddStringToObject(e, "latestDescription", desc) ||
            !(a = cJSON_AddArrayToObject(d, "affectedEntities")) || !(e = cJSON_CreateObject()) ||
            !cJSON_AddItemToArray(a, e) || !cJSON_AddStringToObject(e, "entityValue", f->instance_id) ||
            !cJSON_AddStringToObject(d, "affectedAccount", SIM_SQS_ACCOUNT))
                goto out;
        text = cJSON_PrintUnformatted(o);
out:
        cJSON_Delete(o);
        return text;
}

/* The terminate hook's message, or (launch) the launch hook's. */
static char *body_asg(struct sim_sqs *q, const struct event_facts *f, const char *id, bool launch)
{
        char token[37], group_id[37];
        _cleanup_free_ char *arn = NULL;
        cJSON *o = envelope(q, id,
                            launch ? "EC2 Instance-launch Lifecycle Action"
                                   : "EC2 Instance-terminate Lifecycle Action",
                            "aws.autoscaling", f->at_usec);
        cJSON *d = NULL;
        char *text = NULL;

        uuid_from(id, "lifecycle-action-token", token);
        uuid_from(q->name, "auto-scaling-group", group_id);
        arn = strprintf("arn:aws:autoscaling:%s:%s:autoScalingGroup:%s:autoScalingGroupName/%s", q->region,
                        SIM_SQS_ACCOUNT, group_id, q->name);
        if (o && arn && add_resources(o, arn) && (d = cJSON_AddObjectToObject(o, "detail")) &&
            cJSON_AddStringToObject(d, "LifecycleActionToken", token) &&
            cJSON_AddStringToObject(d, "AutoScalingGroupName", q->name) &&
            cJSON_AddStringToObject(d, "LifecycleHookName",
                                    launch ? SIM_SQS_LAUNCH_HOOK : SIM_SQS_LIFECYCLE_HOOK) &&
            cJSON_AddStringToObject(d, "EC2InstanceId", f->instance_id) &&
            cJSON_AddStringToObject(d, "LifecycleTransition",
                                    launch ? "autoscaling:EC2_INSTANCE_LAUNCHING"
                                           : "autoscaling:EC2_INSTANCE_TERMINATING") &&
            cJSON_AddStringToObject(d, "Origin", launch ? "EC2" : "AutoScalingGroup") &&
            cJSON_AddStringToObject(d, "Destination", launch ? "AutoScalingGroup" : "EC2"))
                text = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        return text;
}

/* Inserts a message in sent order (q->lock held). Takes body. */
static int enqueue(struct sim_sqs *q, const char *message_id, char *body, uint64_t sent_ms, double at)
{
        struct queued m = { .sent_ms = sent_ms, .visible_at = at };
        size_t pos;

        if (!body)
                return -ENOMEM;
        if (q->n_msgs == q->cap) {
                size_t cap = q->cap ? q->cap * 2 : 16;
                struct queued *n = realloc(q->msgs, cap * sizeof(*n));
                if (!n) {
                        free(body);
                        return -ENOMEM;
                }
                q->msgs = n;
                q->cap = cap;
        }
        m.message_id = strdup(message_id);
        if (!m.message_id) {
                free(body);
                return -ENOMEM;
        }
        m.body = body;
        md5_hex(body, strlen(body), m.md5);
        for (pos = q->n_msgs; pos > 0 && q->msgs[pos - 1].sent_ms > sent_ms; pos--)
                ;
        memmove(&q->msgs[pos + 1], &q->msgs[pos], (q->n_msgs - pos) * sizeof(*q->msgs));
        q->msgs[pos] = m;
        q->n_msgs++;
        return 0;
}

/* Builds and queues the message of one event, twice when the duplicate fault picks it. */
static int deliver(struct sim_sqs *q, const struct event_facts *f)
{
        _cleanup_free_ char *key = strprintf("%s|%s|%s|%.6f%s", q->scenario, f->instance_id, f->kind, f->at,
                                             f->closed ? "|closed" : "");
        char event_id[37], message_id[37], health_event[37];
        char *body;
        int r;

        if (!key)
                return -ENOMEM;
        uuid_from(key, "event", event_id);
        uuid_from(key, "message", message_id);
        /* The Health event's own id: that of the message announcing it, which its closing one shares. */
        if (f->closed) {
                _cleanup_free_ char *first =
                    strprintf("%s|%s|%s|%.6f", q->scenario, f->instance_id, f->kind, f->notice_at);
                if (!first)
                        return -ENOMEM;
                uuid_from(first, "event", health_event);
        } else
                memcpy(health_event, event_id, sizeof(health_event));
        if (streq(f->kind, "spot-interruption"))
                body = body_ec2(q, f, event_id, true);
        else if (streq(f->kind, "rebalance-recommendation"))
                body = body_ec2(q, f, event_id, false);
        else if (streq(f->kind, "scheduled-change"))
                body = body_health(q, f, event_id, health_event);
        else if (streq(f->kind, "asg-lifecycle-terminate"))
                body = body_asg(q, f, event_id, false);
        else if (streq(f->kind, "asg-launch"))
                body = body_asg(q, f, event_id, true);
        else
                return 0;
        if (!body)
                return -ENOMEM;
        log_debug("sim sqs: %s of %s queued", f->kind, f->instance_id);
        if (q->fault.duplicate_rate > 0 &&
            (double)(mix64(fnv1a(key, 7)) >> 11) / 9007199254740992.0 < q->fault.duplicate_rate) {
                char *copy = strdup(body);
                r = enqueue(q, message_id, copy, f->at_usec / 1000, f->at);
                if (r < 0) {
                        free(body);
                        return r;
                }
        }
        return enqueue(q, message_id, body, f->at_usec / 1000, f->at);
}

/* Queues what the model did since the last look (q->lock held). Returns the model's next due time. */
static double sync_model(struct sim_sqs *q)
{
        struct sim *s = q->sim;
        double next;
        size_t n;

        sim_lock(s);
        next = sim_advance(s);
        n = sim_node_count(s);
        if (n > q->n_nodes) {
                struct node_state *ns = realloc(q->nodes, n * sizeof(*ns));
                if (ns) {
                        memset(ns + q->n_nodes, 0, (n - q->n_nodes) * sizeof(*ns));
                        q->nodes = ns;
                        q->n_nodes = n;
                }
        }
        for (size_t i = 0; i < q->n_nodes; i++) {
                struct event_facts f = {
                        .instance_id = sim_node_instance_id(s, i),
                        .zone = sim_node_zone(s, i) ? sim_node_zone(s, i) : "us-east-1a",
                };
                double reb = sim_node_rebalance_at(s, i), deadline;
                if (!f.instance_id)
                        continue;
                struct node_state *st = &q->nodes[i];
                if (reb >= 0 && (!st->rebalance_sent || st->rebalance_at != reb)) {
                        f.kind = "rebalance-recommendation";
                        f.at = reb;
                        f.at_usec = sim_wall_usec(s, reb);
                        if (deliver(q, &f) >= 0) {
                                st->rebalance_sent = true;
                                st->rebalance_at = reb;
                        }
                }
                if (sim_node_notice(s, i, &f.kind, &f.at, &deadline) == 0 &&
                    (!st->notice_sent || st->notice_at != f.at || !streq(st->notice_kind, f.kind))) {
                        f.at_usec = sim_wall_usec(s, f.at);
                        f.deadline_usec = sim_wall_usec(s, deadline);
                        bool back;
                        if (streq(f.kind, "scheduled-change"))
                                (void)sim_node_maintenance(s, i, &f.code, &back);
                        f.notice_at = f.at;
                        if (deliver(q, &f) >= 0) {
                                st->notice_sent = true;
                                st->closed_sent = false;
                                st->notice_at = f.at;
                                snprintf(st->notice_kind, sizeof(st->notice_kind), "%s", f.kind);
                        }
                }
                /* A reboot that is back: its Health event closes. */
                bool completed = false;
                if (st->notice_sent && !st->closed_sent && streq(st->notice_kind, "scheduled-change") &&
                    sim_node_maintenance(s, i, &f.code, &completed) == 0 && completed) {
                        f.kind = "scheduled-change";
                        f.closed = true;
                        f.notice_at = st->notice_at;
                        f.at = sim_now(s);
                        f.at_usec = sim_wall_usec(s, f.at);
                        if (sim_node_notice(s, i, NULL, NULL, &deadline) == 0)
                                f.deadline_usec = sim_wall_usec(s, deadline);
                        if (deliver(q, &f) >= 0)
                                st->closed_sent = true;
                }
        }
        /* Launches under the group's launch hook: one message each, at the launch. */
        size_t nl = sim_launch_count(s);
        if (nl > q->n_launch_sent) {
                bool *v = realloc(q->launch_sent, nl * sizeof(*v));
                if (v) {
                        memset(v + q->n_launch_sent, 0, (nl - q->n_launch_sent) * sizeof(*v));
                        q->launch_sent = v;
                        q->n_launch_sent = nl;
                }
        }
        for (size_t i = 0; i < q->n_launch_sent; i++) {
                struct event_facts f = { .kind = "asg-launch" };
                if (q->launch_sent[i] || sim_launch_hook(s, i, &f.instance_id, &f.at) < 0)
                        continue;
                f.at_usec = sim_wall_usec(s, f.at);
                if (deliver(q, &f) >= 0)
                        q->launch_sent[i] = true;
        }
        sim_unlock(s);
        return next;
}

static double scenario_now(struct sim_sqs *q, uint64_t *ret_wall_ms)
{
        double now;
        sim_lock(q->sim);
        now = sim_now(q->sim);
        if (ret_wall_ms)
                *ret_wall_ms = sim_wall_usec(q->sim, now) / 1000;
        sim_unlock(q->sim);
        return now;
}

static char *new_handle(struct sim_sqs *q, const struct queued *m)
{
        unsigned char raw[48];
        uint64_t h = mix64(fnv1a(m->message_id, fnv1a(q->name, ++q->handle_seq)));

        for (size_t i = 0; i < sizeof(raw); i += 8) {
                h = mix64(h + i);
                memcpy(raw + i, &h, 8);
        }
        _cleanup_free_ char *b64 = base64_encode(raw, sizeof(raw));
        return b64 ? strprintf("AQEB%s", b64) : NULL;
}

static struct queued *find_handle(struct sim_sqs *q, const char *handle)
{
        for (size_t i = 0; handle && i < q->n_msgs; i++)
                if (streq(q->msgs[i].handle, handle))
                        return &q->msgs[i];
        return NULL;
}

static void remove_msg(struct sim_sqs *q, struct queued *m)
{
        size_t i = (size_t)(m - q->msgs);
        free(m->message_id);
        free(m->body);
        free(m->handle);
        memmove(&q->msgs[i], &q->msgs[i + 1], (q->n_msgs - i - 1) * sizeof(*q->msgs));
        q->n_msgs--;
}

/* ---- request parameters ---- */

static bool param_int(const cJSON *p, const char *key, long lo, long hi, long def, long *ret,
                      struct outcome *o)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, key);

        if (!v || cJSON_IsNull(v)) {
                *ret = def;
                return true;
        }
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo ||
            v->valuedouble > hi) {
                if (cJSON_IsNumber(v))
                        outcome_error(
                            o, &err_invalid_value,
                            "Value %g for parameter %s is invalid. Reason: Must be >= %ld and <= %ld, "
                            "if provided.",
                            v->valuedouble, key, lo, hi);
                else
                        outcome_error(o, &err_invalid_value, "Value for parameter %s is invalid.", key);
                return false;
        }
        *ret = (long)v->valuedouble;
        return true;
}

/* The queue a request names must be ours; compared by its path (/ACCOUNT/NAME), as the host may be any
 * alias of the endpoint. */
static bool queue_matches(struct sim_sqs *q, const char *url, const char *request_path)
{
        const char *p = url;

        if (isempty(url))
                return streq(request_path, q->path);
        if (startswith(p, "http://") || startswith(p, "https://")) {
                p = strstr(p, "://") + 3;
                p = strchr(p, '/');
                if (!p)
                        return false;
        }
        return streq(p, q->path);
}

static bool check_queue(struct sim_sqs *q, const cJSON *p, const char *request_path, struct outcome *o)
{
        const char *url = sim_sqs_param(p, "QueueUrl");
        if (!url && !streq(request_path, q->path)) {
                outcome_error(o, &err_missing, "The request must contain the parameter QueueUrl.");
                return false;
        }
        if (!queue_matches(q, url, request_path)) {
                outcome_error(o, &err_nonexistent, "The specified queue does not exist.");
                return false;
        }
        return true;
}

static const char *const message_attributes[] = { "SenderId", "ApproximateFirstReceiveTimestamp",
                                                  "ApproximateReceiveCount", "SentTimestamp" };

/* Which system attributes a receive asked for: a bit per message_attributes[] entry. */
static unsigned wanted_attributes(const cJSON *p)
{
        static const char *const keys[] = { "AttributeNames", "MessageSystemAttributeNames" };
        unsigned mask = 0;

        for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
                const cJSON *a = cJSON_GetObjectItemCaseSensitive(p, keys[k]), *v;
                cJSON_ArrayForEach (v, (cJSON_IsArray(a) ? a : NULL)) {
                        const char *n = cJSON_GetStringValue(v);
                        if (streq(n, "All"))
                                mask = (1u << ARRAY_SIZE(message_attributes)) - 1;
                        for (size_t i = 0; i < ARRAY_SIZE(message_attributes); i++)
                                if (streq(n, message_attributes[i]))
                                        mask |= 1u << i;
                }
        }
        return mask;
}

/* ---- actions (q->lock held) ---- */

static void monotonic_deadline(uint64_t mono_usec, struct timespec *ts)
{
        ts->tv_sec = (time_t)(mono_usec / 1000000ULL);
        ts->tv_nsec = (long)(mono_usec % 1000000ULL) * 1000L;
}

static int add_message(cJSON *list, const struct queued *m, unsigned mask)
{
        cJSON *o = cJSON_CreateObject(), *attrs;
        char buf[32];

        if (!cJSON_AddItemToArray(list, o) || !cJSON_AddStringToObject(o, "MessageId", m->message_id) ||
            !cJSON_AddStringToObject(o, "ReceiptHandle", m->handle) ||
            !cJSON_AddStringToObject(o, "MD5OfBody", m->md5) || !cJSON_AddStringToObject(o, "Body", m->body))
                return -ENOMEM;
        if (mask == 0)
                return 0;
        attrs = cJSON_AddObjectToObject(o, "Attributes");
        if (!attrs)
                return -ENOMEM;
        for (size_t i = 0; i < ARRAY_SIZE(message_attributes); i++) {
                if (!(mask & (1u << i)))
                        continue;
                if (i == 0)
                        snprintf(buf, sizeof(buf), "AIDAIT2UOQQY3AUEKVGXU");
                else if (i == 1)
                        snprintf(buf, sizeof(buf), "%" PRIu64, m->first_receive_ms);
                else if (i == 2)
                        snprintf(buf, sizeof(buf), "%u", m->receive_count);
                else
                        snprintf(buf, sizeof(buf), "%" PRIu64, m->sent_ms);
                if (!cJSON_AddStringToObject(attrs, message_attributes[i], buf))
                        return -ENOMEM;
        }
        return 0;
}

static void act_receive(struct sim_sqs *q, const cJSON *p, const char *path, struct outcome *o)
{
        long max, wait, vis;
        unsigned mask = wanted_attributes(p);
        double scale, now, deadline_scn, next;
        uint64_t start = now_monotonic_usec(), real_deadline, wall_ms;
        cJSON *list;

        if (!check_queue(q, p, path, o) ||
            !param_int(p, "MaxNumberOfMessages", 1, MAX_MESSAGES, 1, &max, o) ||
            !param_int(p, "WaitTimeSeconds", 0, MAX_WAIT, 0, &wait, o) ||
            !param_int(p, "VisibilityTimeout", 0, MAX_VISIBILITY, SIM_SQS_VISIBILITY, &vis, o))
                return;
        q->stats.receives++;
        q->stats.receive_visibility = (unsigned)vis;
        sim_lock(q->sim);
        scale = sim_time_scale(q->sim);
        sim_unlock(q->sim);
        now = scenario_now(q, NULL);
        deadline_scn = now + (double)wait;
        real_deadline = start + (uint64_t)((double)wait / scale * 1e6);

        for (;;) {
                size_t found = 0;
                uint64_t wake, mono;
                struct timespec ts;

                next = sync_model(q);
                now = scenario_now(q, NULL);
                for (size_t i = 0; i < q->n_msgs; i++)
                        if (q->msgs[i].visible_at <= now)
                                found++;
                mono = now_monotonic_usec();
                if (found > 0 || q->stopping || now >= deadline_scn || mono >= real_deadline)
                        break;
                /* Sleep until the model's next due action, the next message turning visible again, or the
                 * end of the poll, whichever comes first (and look again at least every second). */
                wake = real_deadline;
                if (mono + WAKE_MAX_USEC < wake)
                        wake = mono + WAKE_MAX_USEC;
                for (size_t i = 0; i < q->n_msgs; i++) {
                        uint64_t at = mono + (uint64_t)((q->msgs[i].visible_at - now) / scale * 1e6) + 1;
                        if (at < wake)
                                wake = at;
                }
                if (next >= 0 && next > now) {
                        uint64_t at = mono + (uint64_t)((next - now) / scale * 1e6) + 1;
                        if (at < wake)
                                wake = at;
                }
                monotonic_deadline(wake, &ts);
                q->stats.waiting++;
                pthread_cond_broadcast(&q->polls_cond);
                pthread_cond_timedwait(&q->cond, &q->lock, &ts);
                q->stats.waiting--;
        }

        o->result = cJSON_CreateObject();
        if (!o->result)
                return;
        now = scenario_now(q, &wall_ms);
        list = NULL;
        for (size_t i = 0; i < q->n_msgs && max > 0; i++) {
                struct queued *m = &q->msgs[i];
                char *h;
                if (m->visible_at > now)
                        continue;
                h = new_handle(q, m);
                if (!h)
                        break;
                free(m->handle);
                m->handle = h;
                m->receive_count++;
                if (m->first_receive_ms == 0)
                        m->first_receive_ms = wall_ms;
                m->visible_at = now + (double)vis;
                if (!list)
                        list = cJSON_AddArrayToObject(o->result, "Messages");
                if (!list || add_message(list, m, mask) < 0) {
                        cJSON_Delete(o->result);
                        o->result = NULL;
                        return;
                }
                q->stats.delivered++;
                max--;
        }
}

static void handle_error(struct outcome *o, const char *handle)
{
        outcome_error(o, &err_handle, "The input receipt handle \"%.12s...\" is not a valid receipt handle.",
                      handle ? handle : "");
}

static void act_delete(struct sim_sqs *q, const cJSON *p, const char *path, struct outcome *o)
{
        const char *handle = sim_sqs_param(p, "ReceiptHandle");
        struct queued *m;

        if (!check_queue(q, p, path, o))
                return;
        if (isempty(handle)) {
                outcome_error(o, &err_missing, "The request must contain the parameter ReceiptHandle.");
                return;
        }
        m = find_handle(q, handle);
        if (!m) {
                handle_error(o, handle);
                return;
        }
        remove_msg(q, m);
        q->stats.deleted++;
}

static bool batch_id_valid(const char *id)
{
        size_t len = id ? strlen(id) : 0;
        if (len < 1 || len > 80)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!isalnum((unsigned char)id[i]) && id[i] != '-' && id[i] != '_')
                        return false;
        return true;
}

/* One entry of a batch: NULL when it went through (its result fields added to r), else why it failed. */
typedef const struct sqs_err *(*entry_fn)(struct sim_sqs *q, const cJSON *e, size_t index, cJSON *r,
                                          char **ret_why);

/* DeleteMessageBatch, ChangeMessageVisibilityBatch, SendMessageBatch: 1..10 entries with distinct valid
 * ids, each answered in Successful or Failed. */
static void act_batch(struct sim_sqs *q, const cJSON *p, const char *path, const char *action, entry_fn fn,
                      struct outcome *o)
{
        const cJSON *entries = cJSON_GetObjectItemCaseSensitive(p, "Entries"), *e, *e2;
        cJSON *ok, *failed;
        int n = cJSON_IsArray(entries) ? cJSON_GetArraySize(entries) : 0;
        size_t index = 0;

        if (!check_queue(q, p, path, o))
                return;
        if (n == 0) {
                outcome_error(o, &err_empty_batch,
                              "There should be at least one %sRequestEntry in the request.", action);
                return;
        }
        if (n > MAX_BATCH) {
                outcome_error(o, &err_too_many,
                              "Maximum number of entries per request are 10. You have sent %d.", n);
                return;
        }
        cJSON_ArrayForEach (e, entries) {
                const char *id = sim_sqs_param(e, "Id");
                if (!batch_id_valid(id)) {
                        outcome_error(
                            o, &err_batch_id,
                            "A batch entry id can only contain alphanumeric characters, hyphens and "
                            "underscores. It can be at most 80 letters long.");
                        return;
                }
                for (e2 = entries->child; e2 != e; e2 = e2->next)
                        if (streq(sim_sqs_param(e2, "Id"), id)) {
                                outcome_error(o, &err_ids_not_distinct, "Id %s repeated.", id);
                                return;
                        }
        }
        o->result = cJSON_CreateObject();
        ok = cJSON_AddArrayToObject(o->result, "Successful");
        failed = cJSON_AddArrayToObject(o->result, "Failed");
        if (!ok || !failed) {
                cJSON_Delete(o->result);
                o->result = NULL;
                return;
        }
        cJSON_ArrayForEach (e, entries) {
                cJSON *r = cJSON_CreateObject();
                _cleanup_free_ char *why = NULL;
                const struct sqs_err *err = r ? fn(q, e, index++, r, &why) : &err_internal;

                if (!r || !cJSON_AddItemToArray(err ? failed : ok, r) ||
                    !cJSON_AddStringToObject(r, "Id", sim_sqs_param(e, "Id")) ||
                    (err && (!cJSON_AddBoolToObject(r, "SenderFault", streq(err->fault, "Sender")) ||
                             !cJSON_AddStringToObject(r, "Code", err->code) ||
                             !cJSON_AddStringToObject(r, "Message", why ? why : "")))) {
                        cJSON_Delete(o->result);
                        o->result = NULL;
                        return;
                }
        }
        /* The real service leaves out empty lists. */
        if (cJSON_GetArraySize(ok) == 0)
                cJSON_DeleteItemFromObjectCaseSensitive(o->result, "Successful");
        if (cJSON_GetArraySize(failed) == 0)
                cJSON_DeleteItemFromObjectCaseSensitive(o->result, "Failed");
}

static const struct sqs_err *entry_handle(struct sim_sqs *q, const cJSON *e, struct queued **ret,
                                          char **ret_why)
{
        const char *handle = sim_sqs_param(e, "ReceiptHandle");

        *ret = find_handle(q, handle);
        if (*ret)
                return NULL;
        *ret_why = strprintf("The input receipt handle \"%.12s...\" is not a valid receipt handle.",
                             handle ? handle : "");
        return &err_handle;
}

static const struct sqs_err *entry_delete(struct sim_sqs *q, const cJSON *e, size_t index, cJSON *r,
                                          char **ret_why)
{
        struct queued *m;
        const struct sqs_err *err = entry_handle(q, e, &m, ret_why);

        if (err)
                return err;
        remove_msg(q, m);
        q->stats.deleted++;
        return NULL;
}

static void act_delete_batch(struct sim_sqs *q, const cJSON *p, const char *path, struct outcome *o)
{
        act_batch(q, p, path, "DeleteMessageBatch", entry_delete, o);
}

/* An entry's number (the JSON protocol's number, or the query protocol's digits): false when malformed or
 * out of lo..hi; def when absent. */
static bool entry_int(const cJSON *e, const char *key, long lo, long hi, long def, long *ret)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);

        *ret = def;
        if (!v || cJSON_IsNull(v))
                return true;
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
                return false;
        *ret = (long)v->valuedouble;
        return *ret >= lo && *ret <= hi;
}

/* Hides an in-flight message for vis seconds from now (a visible one is not in flight). */
static const struct sqs_err *hide(struct sim_sqs *q, struct queued *m, long vis, char **ret_why)
{
        double now = scenario_now(q, NULL);

        if (m->visible_at <= now) {
                *ret_why =
                    strdup("Message does not exist or is not available for visibility timeout change.");
                return &err_not_inflight;
        }
        m->visible_at = now + (double)vis;
        q->stats.change_visibility = (unsigned)vis;
        /* A message made visible again may be what a waiting poll is waiting for. */
        pthread_cond_broadcast(&q->cond);
        return NULL;
}

static const struct sqs_err *entry_visibility(struct sim_sqs *q, const cJSON *e, size_t index, cJSON *r,
                                              char **ret_why)
{
        struct queued *m;
        const struct sqs_err *err;
        long vis;

        if (!cJSON_GetObjectItemCaseSensitive(e, "VisibilityTimeout")) {
                *ret_why = strdup("The request must contain the parameter VisibilityTimeout.");
                return &err_missing;
        }
        if (!entry_int(e, "VisibilityTimeout", 0, MAX_VISIBILITY, 0, &vis)) {
                *ret_why = strdup("Value for parameter VisibilityTimeout is invalid.");
                return &err_invalid_value;
        }
        err = entry_handle(q, e, &m, ret_why);
        return err ? err : hide(q, m, vis, ret_why);
}

static void act_change_visibility_batch(struct sim_sqs *q, const cJSON *p, const char *path,
                                        struct outcome *o)
{
        act_batch(q, p, path, "ChangeMessageVisibilityBatch", entry_visibility, o);
}

static void act_change_visibility(struct sim_sqs *q, const cJSON *p, const char *path, struct outcome *o)
{
        const char *handle = sim_sqs_param(p, "ReceiptHandle");
        const struct sqs_err *err;
        _cleanup_free_ char *why = NULL;
        struct queued *m;
        long vis;

        if (!check_queue(q, p, path, o))
                return;
        if (isempty(handle)) {
                outcome_error(o, &err_missing, "The request must contain the parameter ReceiptHandle.");
                return;
        }
        if (!cJSON_GetObjectItemCaseSensitive(p, "VisibilityTimeout")) {
                outcome_error(o, &err_missing, "The request must contain the parameter VisibilityTimeout.");
                return;
        }
        if (!param_int(p, "VisibilityTimeout", 0, MAX_VISIBILITY, 0, &vis, o))
                return;
        m = find_handle(q, handle);
        if (!m) {
                handle_error(o, handle);
                return;
        }
        err = hide(q, m, vis, &why);
        if (err)
                outcome_error(o, err, "%s", why ? why : "");
}

static const char *const queue_attributes[] = { "QueueArn",
                                                "ApproximateNumberOfMessages",
                                                "ApproximateNumberOfMessagesNotVisible",
                                                "ApproximateNumberOfMessagesDelayed",
                                                "CreatedTimestamp",
                                                "LastModifiedTimestamp",
                                                "VisibilityTimeout",
                                                "MaximumMessageSize",
                                                "MessageRetentionPeriod",
                                                "DelaySeconds",
                                                "ReceiveMessageWaitTimeSeconds",
                                                "SqsManagedSseEnabled" };

static int attribute_value(struct sim_sqs *q, size_t i, double now, char *buf, size_t len)
{
        size_t visible = 0;

        for (size_t k = 0; k < q->n_msgs; k++)
                if (q->msgs[k].visible_at <= now)
                        visible++;
        switch (i) {
        case 0:
                return snprintf(buf, len, "%s", q->arn);
        case 1:
                return snprintf(buf, len, "%zu", visible);
        case 2:
                return snprintf(buf, len, "%zu", q->n_msgs - visible);
        case 3:
        case 9:
        case 10:
                return snprintf(buf, len, "0");
        case 4:
        case 5:
                return snprintf(buf, len, "%" PRIu64, q->created_s);
        case 6:
                return snprintf(buf, len, "%d", SIM_SQS_VISIBILITY);
        case 7:
                return snprintf(buf, len, "%d", MAX_MESSAGE_SIZE);
        case 8:
                return snprintf(buf, len, "%d", RETENTION_SECONDS);
        default:
                return snprintf(buf, len, "true");
        }
}

static void act_get_attributes(struct sim_sqs *q, const cJSON *p, const char *path, struct outcome *o)
{
        const cJSON *names = cJSON_GetObjectItemCaseSensitive(p, "AttributeNames"), *v;
        bool want[ARRAY_SIZE(queue_attributes)] = {};
        double now;
        cJSON *attrs;
        char buf[256];

        if (!check_queue(q, p, path, o))
                return;
        cJSON_ArrayForEach (v, (cJSON_IsArray(names) ? names : NULL)) {
                const char *n = cJSON_GetStringValue(v);
                bool known = streq(n, "All");
                for (size_t i = 0; i < ARRAY_SIZE(queue_attributes); i++)
                        if (known && streq(n, "All"))
                                want[i] = true;
                        else if (streq(n, queue_attributes[i]))
                                want[i] = known = true;
                if (!known) {
                        outcome_error(o, &err_attribute, "Unknown Attribute %s.", n ? n : "");
                        return;
                }
        }
        (void)sync_model(q);
        now = scenario_now(q, NULL);
        o->result = cJSON_CreateObject();
        attrs = cJSON_AddObjectToObject(o->result, "Attributes");
        for (size_t i = 0; attrs && i < ARRAY_SIZE(queue_attributes); i++) {
                if (!want[i])
                        continue;
                attribute_value(q, i, now, buf, sizeof(buf));
                if (!cJSON_AddStringToObject(attrs, queue_attributes[i], buf))
                        attrs = NULL;
        }
        if (!attrs) {
                cJSON_Delete(o->result);
                o->result = NULL;
        }
}

static void act_get_queue_url(struct sim_sqs *q, const cJSON *p, struct outcome *o)
{
        const char *name = sim_sqs_param(p, "QueueName"),
                   *owner = sim_sqs_param(p, "QueueOwnerAWSAccountId");

        if (isempty(name)) {
                outcome_error(o, &err_missing, "The request must contain the parameter QueueName.");
                return;
        }
        if (!streq(name, q->name) || (owner && !streq(owner, SIM_SQS_ACCOUNT))) {
                outcome_error(o, &err_nonexistent, "The specified queue does not exist.");
                return;
        }
        o->result = cJSON_CreateObject();
        if (o->result && !cJSON_AddStringToObject(o->result, "QueueUrl", q->queue_url)) {
                cJSON_Delete(o->result);
                o->result = NULL;
        }
}

/* SendMessage: anyone holding the queue's credentials can put any body in it (what issue #15's tests play:
 * a sender spotdrain does not control). DelaySeconds 0..900 as SQS allows; message attributes are not kept.
 */
/* Queues one message (its body checked as SendMessage does); NULL when queued, else why not. */
static const struct sqs_err *send_one(struct sim_sqs *q, const char *body, long delay, size_t index,
                                      char message_id[37], char md5[33], char **ret_why)
{
        char salt[48];
        uint64_t wall_ms = 0;
        double now;

        if (!body) {
                *ret_why = strdup("The request must contain the parameter MessageBody.");
                return &err_missing;
        }
        if (!*body || strlen(body) > 256 * 1024) {
                *ret_why = strdup(
                    "One or more parameters are invalid. Reason: Message must be shorter than 262144 bytes "
                    "and not empty.");
                return &err_invalid_value;
        }
        now = scenario_now(q, &wall_ms);
        snprintf(salt, sizeof(salt), "send-%" PRIu64 "-%zu", q->stats.requests, index);
        uuid_from(q->scenario, salt, message_id);
        md5_hex(body, strlen(body), md5);
        if (enqueue(q, message_id, strdup(body), wall_ms, now + (double)delay) < 0) {
                *ret_why = strdup("Out of memory.");
                return &err_internal;
        }
        /* A long poll waiting returns as soon as a message is there, as SQS's does. */
        pthread_cond_broadcast(&q->cond);
        return NULL;
}

static void act_send(struct sim_sqs *q, const cJSON *p, const char *path, struct outcome *o)
{
        char message_id[37], md5[33];
        _cleanup_free_ char *why = NULL;
        const struct sqs_err *err;
        long delay = 0;

        if (!check_queue(q, p, path, o) || !param_int(p, "DelaySeconds", 0, 900, 0, &delay, o))
                return;
        err = send_one(q, sim_sqs_param(p, "MessageBody"), delay, 0, message_id, md5, &why);
        if (err) {
                outcome_error(o, err, "%s", why ? why : "");
                return;
        }
        o->result = cJSON_CreateObject();
        if (o->result && (!cJSON_AddStringToObject(o->result, "MessageId", message_id) ||
                          !cJSON_AddStringToObject(o->result, "MD5OfMessageBody", md5))) {
                cJSON_Delete(o->result);
                o->result = NULL;
        }
}

static const struct sqs_err *entry_send(struct sim_sqs *q, const cJSON *e, size_t index, cJSON *r,
                                        char **ret_why)
{
        char message_id[37], md5[33];
        const struct sqs_err *err;
        long delay;

        if (!entry_int(e, "DelaySeconds", 0, 900, 0, &delay)) {
                *ret_why = strdup("Value for parameter DelaySeconds is invalid.");
                return &err_invalid_value;
        }
        err = send_one(q, sim_sqs_param(e, "MessageBody"), delay, index, message_id, md5, ret_why);
        if (err)
                return err;
        if (!cJSON_AddStringToObject(r, "MessageId", message_id) ||
            !cJSON_AddStringToObject(r, "MD5OfMessageBody", md5)) {
                *ret_why = strdup("Out of memory.");
                return &err_internal;
        }
        return NULL;
}

static void act_send_batch(struct sim_sqs *q, const cJSON *p, const char *path, struct outcome *o)
{
        act_batch(q, p, path, "SendMessageBatch", entry_send, o);
}

/* Whether request number k (1-based) is throttled under the fault's rate: a hash of the seed and k. */
static bool throttle_draw(const struct sim_sqs_fault *f, uint64_t k)
{
        if (f->throttle_rate <= 0)
                return false;
        return (double)(mix64(f->seed ^ mix64(k * 0x9e3779b97f4a7c15ULL)) >> 11) / 9007199254740992.0 <
               f->throttle_rate;
}

/* Runs one action (q->lock held). */
static void act(struct sim_sqs *q, const char *action, const cJSON *p, const char *path, struct outcome *o)
{
        q->stats.requests++;
        if (q->fault.error_500 > 0) {
                q->fault.error_500--;
                outcome_error(o, &err_internal, "We encountered an internal error. Please try again.");
                return;
        }
        if (throttle_draw(&q->fault, q->stats.requests)) {
                q->stats.throttled++;
                if (q->stats.throttled % 2)
                        outcome_error(o, &err_throttled, "Request is throttled.");
                else
                        outcome_error(o, &err_throttling, "Rate exceeded");
                return;
        }
        if (q->fault.nonexistent_queue) {
                outcome_error(o, &err_nonexistent, "The specified queue does not exist.");
                return;
        }
        if (q->fault.access_denied) {
                _cleanup_free_ char *lower = strdup(action);
                for (char *c = lower; c && *c; c++)
                        *c = (char)tolower((unsigned char)*c);
                outcome_error(
                    o, &err_access_denied,
                    "User: arn:aws:sts::%s:assumed-role/spotdrain-controller/spotdrain is not "
                    "authorized to perform: sqs:%s on resource: %s because no identity-based policy "
                    "allows the sqs:%s action",
                    SIM_SQS_ACCOUNT, lower ? lower : action, q->arn, lower ? lower : action);
                return;
        }
        if (streq(action, "ReceiveMessage"))
                act_receive(q, p, path, o);
        else if (streq(action, "DeleteMessage"))
                act_delete(q, p, path, o);
        else if (streq(action, "DeleteMessageBatch"))
                act_delete_batch(q, p, path, o);
        else if (streq(action, "ChangeMessageVisibility"))
                act_change_visibility(q, p, path, o);
        else if (streq(action, "ChangeMessageVisibilityBatch"))
                act_change_visibility_batch(q, p, path, o);
        else if (streq(action, "SendMessageBatch"))
                act_send_batch(q, p, path, o);
        else if (streq(action, "GetQueueAttributes"))
                act_get_attributes(q, p, path, o);
        else if (streq(action, "GetQueueUrl"))
                act_get_queue_url(q, p, o);
        else if (streq(action, "SendMessage"))
                act_send(q, p, path, o);
        else
                outcome_error(o, &err_action, "The action %s is not valid for this endpoint.", action);
}

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
        uuid_from(seq, q->name, request_id);

        if (json) {
                action = strdup(target + strlen("AmazonSQS."));
                p = rq->body_len > 0 ? cJSON_ParseWithLength(rq->body, rq->body_len) : cJSON_CreateObject();
                if (!cJSON_IsObject(p))
                        outcome_error(&o, &err_serialization, "The request body is not a JSON object.");
        } else {
                p = cJSON_CreateObject();
                if (p && streq(rq->method, "POST") &&
                    sim_aws_form_parse(rq->body, rq->body_len, sim_sqs_form_param, p) < 0)
                        outcome_error(&o, &err_internal, "Out of memory.");
                if (p)
                        MHD_get_connection_values(rq->connection, MHD_GET_ARGUMENT_KIND, sim_sqs_collect_arg,
                                                  p);
                action = p && sim_sqs_param(p, "Action") ? strdup(sim_sqs_param(p, "Action")) : NULL;
                if (!action && !o.err)
                        outcome_error(&o, &err_action, "The request must contain an Action.");
        }
        if (!o.err && (!p || !action))
                outcome_error(&o, &err_internal, "Out of memory.");
        if (!o.err && rq->body_too_large)
                outcome_error(&o, &err_invalid_value, "The request is too large.");
        if (!o.err) {
                char *why = NULL;
                const struct sqs_err *e = verify(q, rq, &why);
                if (e) {
                        pthread_mutex_lock(&q->lock);
                        q->stats.requests++;
                        q->stats.auth_failures++;
                        pthread_mutex_unlock(&q->lock);
                        outcome_error(&o, e, "%s", why ? why : "");
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
                act(q, action, p, rq->url, &o);
                pthread_mutex_unlock(&q->lock);
                if (!o.err && !o.result &&
                    (streq(action, "ReceiveMessage") || streq(action, "GetQueueUrl") ||
                     streq(action, "GetQueueAttributes") || sim_sqs_is_batch(action) ||
                     streq(action, "SendMessage")))
                        outcome_error(&o, &err_internal, "Out of memory.");
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
        (void)sync_model(q);
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

        monotonic_deadline(deadline, &ts);
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
