/* The SQS surface's queue: deterministic ids, the messages EC2, AWS Health and Auto Scaling send as the
 * model reaches their events, and the messages' receipt handles. */
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

/* ---- deterministic ids ---- */

static uint64_t fnv1a(const char *s, uint64_t h)
{
        for (; *s; s++)
                h = (h ^ (unsigned char)*s) * 1099511628211ULL;
        return h;
}

uint64_t sim_sqs_mix64(uint64_t x)
{
        x += 0x9e3779b97f4a7c15ULL;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
        return x ^ (x >> 31);
}

void sim_sqs_uuid_from(const char *key, const char *salt, char out[37])
{
        uint64_t a = sim_sqs_mix64(fnv1a(key, fnv1a(salt, 1469598103934665603ULL)));
        uint64_t b = sim_sqs_mix64(a ^ 0x5bd1e9955bd1e995ULL);
        snprintf(out, 37, "%08" PRIx64 "-%04" PRIx64 "-4%03" PRIx64 "-%04" PRIx64 "-%012" PRIx64, a >> 32,
                 (a >> 16) & 0xffff, a & 0xfff, (b >> 48 & 0x3fff) | 0x8000,
                 (uint64_t)(b & 0xffffffffffffULL));
}

void sim_sqs_md5_hex(const char *data, size_t len, char out[33])
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

        sim_sqs_uuid_from(event, "communication", comm);
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

        sim_sqs_uuid_from(id, "lifecycle-action-token", token);
        sim_sqs_uuid_from(q->name, "auto-scaling-group", group_id);
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
int sim_sqs_enqueue(struct sim_sqs *q, const char *message_id, char *body, uint64_t sent_ms, double at)
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
        sim_sqs_md5_hex(body, strlen(body), m.md5);
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
        sim_sqs_uuid_from(key, "event", event_id);
        sim_sqs_uuid_from(key, "message", message_id);
        /* The Health event's own id: that of the message announcing it, which its closing one shares. */
        if (f->closed) {
                _cleanup_free_ char *first =
                    strprintf("%s|%s|%s|%.6f", q->scenario, f->instance_id, f->kind, f->notice_at);
                if (!first)
                        return -ENOMEM;
                sim_sqs_uuid_from(first, "event", health_event);
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
            (double)(sim_sqs_mix64(fnv1a(key, 7)) >> 11) / 9007199254740992.0 < q->fault.duplicate_rate) {
                char *copy = strdup(body);
                r = sim_sqs_enqueue(q, message_id, copy, f->at_usec / 1000, f->at);
                if (r < 0) {
                        free(body);
                        return r;
                }
        }
        return sim_sqs_enqueue(q, message_id, body, f->at_usec / 1000, f->at);
}

/* Queues what the model did since the last look (q->lock held). Returns the model's next due time. */
double sim_sqs_sync_model(struct sim_sqs *q)
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

double sim_sqs_scenario_now(struct sim_sqs *q, uint64_t *ret_wall_ms)
{
        double now;
        sim_lock(q->sim);
        now = sim_now(q->sim);
        if (ret_wall_ms)
                *ret_wall_ms = sim_wall_usec(q->sim, now) / 1000;
        sim_unlock(q->sim);
        return now;
}

char *sim_sqs_new_handle(struct sim_sqs *q, const struct queued *m)
{
        unsigned char raw[48];
        uint64_t h = sim_sqs_mix64(fnv1a(m->message_id, fnv1a(q->name, ++q->handle_seq)));

        for (size_t i = 0; i < sizeof(raw); i += 8) {
                h = sim_sqs_mix64(h + i);
                memcpy(raw + i, &h, 8);
        }
        _cleanup_free_ char *b64 = base64_encode(raw, sizeof(raw));
        return b64 ? strprintf("AQEB%s", b64) : NULL;
}

struct queued *sim_sqs_find_handle(struct sim_sqs *q, const char *handle)
{
        for (size_t i = 0; handle && i < q->n_msgs; i++)
                if (streq(q->msgs[i].handle, handle))
                        return &q->msgs[i];
        return NULL;
}

void sim_sqs_remove_msg(struct sim_sqs *q, struct queued *m)
{
        size_t i = (size_t)(m - q->msgs);
        free(m->message_id);
        free(m->body);
        free(m->handle);
        memmove(&q->msgs[i], &q->msgs[i + 1], (q->n_msgs - i - 1) * sizeof(*q->msgs));
        q->n_msgs--;
}
