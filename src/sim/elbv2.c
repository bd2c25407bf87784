/* The simulator's ELBv2 (Elastic Load Balancing v2, API 2015-12-01, query protocol): the target groups of
 * the workloads with target_group, and what the AWS Load Balancer Controller does to their targets. See
 * sim_elbv2.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sim/elbv2.h"
#include "sim/model_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

#define ELBV2_XMLNS    "http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/"
#define ELBV2_ACCOUNT  "123456789012"
#define NODE_PORT      30080
#define POD_PORT       8080
#define MAX_TARGETS_IN 500

/* A deregistration asked through DeregisterTargets: target id of target group (a workload index), from
 * at (scenario seconds) on. */
struct dereg {
        size_t wl;
        char *id;
        double at;
};

struct sim_elbv2 {
        struct dereg *deregs;
        size_t n_deregs;
        unsigned throttle;
        struct sim_elbv2_stats stats;
};

/* ---- names ---- */

char *sim_region(const struct sim *s)
{
        const char *zone = s->n_nodes > 0 && s->nodes[0]->zone ? s->nodes[0]->zone : "us-east-1a";
        size_t zl = strlen(zone);
        return strndup(zone, zl > 1 && zone[zl - 1] >= 'a' && zone[zl - 1] <= 'z' ? zl - 1 : zl);
}

char *sim_tg_name(const struct sim_workload *w)
{
        char *n = strprintf("k8s-%s-%s", w->sc->ns, w->sc->name);
        if (n && strlen(n) > 32)
                n[32] = 0;
        return n;
}

char *sim_tg_arn(const struct sim *s, const struct sim_workload *w)
{
        _cleanup_free_ char *region = sim_region(s), *name = sim_tg_name(w);
        uint64_t h = 1469598103934665603ULL; /* FNV-1a of namespace/name: the same ARN every run */
        for (const char *p = w->sc->ns; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        h = (h ^ '/') * 1099511628211ULL;
        for (const char *p = w->sc->name; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        if (!region || !name)
                return NULL;
        return strprintf("arn:aws:elasticloadbalancing:%s:%s:targetgroup/%s/%016" PRIx64, region,
                         ELBV2_ACCOUNT, name, h);
}

/* ---- state ---- */

int sim_elbv2_new(struct sim_elbv2 **ret)
{
        *ret = calloc(1, sizeof(**ret));
        return *ret ? 0 : -ENOMEM;
}

struct sim_elbv2 *sim_elbv2_free(struct sim_elbv2 *e)
{
        if (!e)
                return NULL;
        for (size_t i = 0; i < e->n_deregs; i++)
                free(e->deregs[i].id);
        free(e->deregs);
        free(e);
        return NULL;
}

void sim_elbv2_set_throttle(struct sim_elbv2 *e, unsigned n)
{
        e->throttle = n;
}

void sim_elbv2_stats(const struct sim_elbv2 *e, struct sim_elbv2_stats *ret)
{
        *ret = e->stats;
}

static double dereg_at(const struct sim_elbv2 *e, size_t wl, const char *id)
{
        for (size_t i = 0; i < e->n_deregs; i++)
                if (e->deregs[i].wl == wl && streq(e->deregs[i].id, id))
                        return e->deregs[i].at;
        return -1;
}

static double earliest(double a, double b)
{
        return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

/* One target of a target group as it stands: its deregistration began at start (< 0: registered). */
struct target {
        const char *id;
        int port;
        double start;
};

/* Calls fn for every target the group has or had (instance: the scenario's and launched nodes that joined,
 * ip: the workload's pods that have an IP and a node). */
typedef void (*target_fn)(const struct target *t, void *userdata);
static void each_target(const struct sim_elbv2 *e, struct sim *s, size_t wl, target_fn fn, void *userdata)
{
        struct sim_workload *w = &s->wls[wl];
        if (!w->sc->tg_ip) {
                for (size_t i = 0; i < s->n_nodes; i++) {
                        const struct sim_node *n = s->nodes[i];
                        if (n->not_ready || !n->instance_id)
                                continue;
                        double start =
                            earliest(n->lb_excluded_at < 0 ? -1 : n->lb_excluded_at + w->sc->tg_reaction,
                                     dereg_at(e, wl, n->instance_id));
                        /* The controller deregisters a terminated instance at once. */
                        if (n->removed)
                                start = earliest(start, n->deadline_at >= 0 ? n->deadline_at : sim_now(s));
                        fn(&(struct target){ n->instance_id, NODE_PORT, start }, userdata);
                }
                return;
        }
        for (struct sim_pod *p = w->pods.head; p; p = p->links[SIM_LINK_WL].next) {
                if (!p->ip || p->node < 0)
                        continue;
                double start = dereg_at(e, wl, p->ip);
                /* A terminating pod leaves the Service's endpoints: the controller deregisters its IP. */
                if (p->deleting)
                        start = earliest(start, p->deletion_ts >= 0 ? p->deletion_ts - (double)p->grace
                                                                    : sim_now(s));
                fn(&(struct target){ p->ip, POD_PORT, start }, userdata);
        }
}

enum tstate {
        T_HEALTHY,
        T_DRAINING,
        T_GONE,
};

static enum tstate target_state(const struct sim *s, const struct sim_workload *w, const struct target *t)
{
        if (t->start < 0 || sim_now(s) < t->start)
                return T_HEALTHY;
        return sim_now(s) < t->start + w->sc->tg_delay ? T_DRAINING : T_GONE;
}

/* ---- answers ---- */

struct ans {
        struct buf *body;
        bool oom;
};

static void aprintf(struct ans *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void aprintf(struct ans *a, const char *fmt, ...)
{
        va_list ap;
        char *s;
        va_start(ap, fmt);
        int k = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (k < 0 || buf_append(a->body, s, (size_t)k) < 0)
                a->oom = true;
        if (k >= 0)
                free(s);
}

/* Text for XML (ids and ARNs hold no markup, but a client's input may). */
static void atext(struct ans *a, const char *s)
{
        for (; s && *s; s++) {
                const char *esc = *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : NULL;
                if ((esc ? buf_append(a->body, esc, strlen(esc)) : buf_append(a->body, s, 1)) < 0)
                        a->oom = true;
        }
}

static int error_answer(struct ans *a, unsigned *status, unsigned code, const char *err, const char *rid,
                        const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int error_answer(struct ans *a, unsigned *status, unsigned code, const char *err, const char *rid,
                        const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        *status = code;
        a->body->len = 0;
        aprintf(a, "<ErrorResponse xmlns=\"%s\"><Error><Type>%s</Type><Code>%s</Code><Message>", ELBV2_XMLNS,
                code >= 500 ? "Receiver" : "Sender", err);
        atext(a, msg);
        aprintf(a, "</Message></Error><RequestId>%s</RequestId></ErrorResponse>", rid);
        return a->oom ? -ENOMEM : 0;
}

static const char *param(const cJSON *p, const char *key)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The workload whose target group arn is; -1 when none. */
static long find_group(struct sim *s, const char *arn)
{
        for (size_t i = 0; i < s->n_wls; i++) {
                if (!s->wls[i].sc->has_tg)
                        continue;
                _cleanup_free_ char *a = sim_tg_arn(s, &s->wls[i]);
                if (a && streq(a, arn))
                        return (long)i;
        }
        return -1;
}

/* The target group the request names, or an error answered (TargetGroupNotFound, ValidationError). */
static long group_of(struct sim *s, const cJSON *p, struct ans *a, unsigned *status, const char *rid)
{
        const char *arn = param(p, "TargetGroupArn");
        long wl;
        if (!arn || !*arn) {
                error_answer(a, status, 400, "ValidationError", rid,
                             "1 validation error detected: Value null at 'targetGroupArn' failed to satisfy "
                             "constraint: Member must not be null");
                return -1;
        }
        if ((wl = find_group(s, arn)) < 0)
                error_answer(a, status, 400, "TargetGroupNotFound", rid,
                             "One or more target groups not found");
        return wl;
}

static void head(struct ans *a, const char *action)
{
        aprintf(a, "<%sResponse xmlns=\"%s\"><%sResult>", action, ELBV2_XMLNS, action);
}

static void tail(struct ans *a, const char *action, const char *rid)
{
        aprintf(a, "</%sResult><ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata></%sResponse>",
                action, rid, action);
}

static void render_health(struct ans *a, const char *id, int port, const char *state, const char *reason,
                          const char *description)
{
        aprintf(a, "<member><Target><Id>");
        atext(a, id);
        aprintf(a,
                "</Id><Port>%d</Port></Target><HealthCheckPort>%d</HealthCheckPort><TargetHealth><State>%s"
                "</State>",
                port, port, state);
        if (reason)
                aprintf(a, "<Reason>%s</Reason><Description>%s</Description>", reason, description);
        aprintf(a, "</TargetHealth></member>");
}

struct health_walk {
        struct ans *a;
        struct sim *s;
        const struct sim_workload *w;
        const char *want; /* NULL: every registered target */
        bool found;
        enum tstate state;
        int port;
};

static void health_one(const struct target *t, void *userdata)
{
        struct health_walk *h = userdata;
        enum tstate st = target_state(h->s, h->w, t);
        if (h->want) {
                if (streq(h->want, t->id)) {
                        h->found = true;
                        h->state = st;
                        h->port = t->port;
                }
                return;
        }
        if (st == T_HEALTHY)
                render_health(h->a, t->id, t->port, "healthy", NULL, NULL);
        else if (st == T_DRAINING)
                render_health(h->a, t->id, t->port, "draining", "Target.DeregistrationInProgress",
                              "Target deregistration is in progress");
}

static void act_health(struct sim_elbv2 *e, struct sim *s, const cJSON *p, struct ans *a, unsigned *status,
                       const char *rid)
{
        long wl = group_of(s, p, a, status, rid);
        if (wl < 0)
                return;
        struct health_walk h = { a, s, &s->wls[wl], NULL, false, T_GONE, 0 };
        head(a, "DescribeTargetHealth");
        aprintf(a, "<TargetHealthDescriptions>");
        if (!param(p, "Targets.member.1.Id"))
                each_target(e, s, (size_t)wl, health_one, &h);
        for (unsigned k = 1; k <= MAX_TARGETS_IN; k++) {
                char key[64];
                snprintf(key, sizeof(key), "Targets.member.%u.Id", k);
                const char *id = param(p, key);
                if (!id)
                        break;
                snprintf(key, sizeof(key), "Targets.member.%u.Port", k);
                const char *port = param(p, key);
                h.want = id;
                h.found = false;
                each_target(e, s, (size_t)wl, health_one, &h);
                int pt = port ? atoi(port) : h.found ? h.port : s->wls[wl].sc->tg_ip ? POD_PORT : NODE_PORT;
                if (h.found && h.state == T_HEALTHY)
                        render_health(a, id, pt, "healthy", NULL, NULL);
                else if (h.found && h.state == T_DRAINING)
                        render_health(a, id, pt, "draining", "Target.DeregistrationInProgress",
                                      "Target deregistration is in progress");
                else
                        render_health(a, id, pt, "unused", "Target.NotRegistered",
                                      "Target is not registered to the target group");
        }
        aprintf(a, "</TargetHealthDescriptions>");
        tail(a, "DescribeTargetHealth", rid);
}

static void attribute(struct ans *a, const char *key, const char *value)
{
        aprintf(a, "<member><Key>%s</Key><Value>%s</Value></member>", key, value);
}

static void act_attributes(struct sim *s, const cJSON *p, struct ans *a, unsigned *status, const char *rid)
{
        long wl = group_of(s, p, a, status, rid);
        if (wl < 0)
                return;
        char delay[32];
        snprintf(delay, sizeof(delay), "%.0f", s->wls[wl].sc->tg_delay);
        head(a, "DescribeTargetGroupAttributes");
        aprintf(a, "<Attributes>");
        attribute(a, "deregistration_delay.timeout_seconds", delay);
        attribute(a, "deregistration_delay.connection_termination.enabled", "false");
        attribute(a, "stickiness.enabled", "false");
        attribute(a, "stickiness.type", "source_ip");
        attribute(a, "proxy_protocol_v2.enabled", "false");
        attribute(a, "preserve_client_ip.enabled", s->wls[wl].sc->tg_ip ? "false" : "true");
        aprintf(a, "</Attributes>");
        tail(a, "DescribeTargetGroupAttributes", rid);
}

static void registered_one(const struct target *t, void *userdata)
{
        struct health_walk *h = userdata;
        if (streq(h->want, t->id) && target_state(h->s, h->w, t) == T_HEALTHY)
                h->found = true;
}

static void act_deregister(struct sim_elbv2 *e, struct sim *s, const cJSON *p, struct ans *a,
                           unsigned *status, const char *rid)
{
        long wl = group_of(s, p, a, status, rid);
        unsigned k;
        if (wl < 0)
                return;
        if (!param(p, "Targets.member.1.Id")) {
                error_answer(a, status, 400, "ValidationError", rid,
                             "1 validation error detected: Value null at 'targets' failed to satisfy "
                             "constraint: Member must not be null");
                return;
        }
        /* Every target first: the call deregisters all of them or none. */
        for (k = 1; k <= MAX_TARGETS_IN; k++) {
                char key[64];
                snprintf(key, sizeof(key), "Targets.member.%u.Id", k);
                const char *id = param(p, key);
                if (!id)
                        break;
                struct health_walk h = { a, s, &s->wls[wl], id, false, T_GONE, 0 };
                each_target(e, s, (size_t)wl, registered_one, &h);
                /* Draining already: deregistered, which a second call leaves as it is. */
                if (!h.found && dereg_at(e, (size_t)wl, id) < 0) {
                        bool draining = false;
                        h.found = false;
                        each_target(e, s, (size_t)wl, health_one, &h);
                        draining = h.found && h.state == T_DRAINING;
                        if (!draining) {
                                error_answer(a, status, 400, "InvalidTarget", rid,
                                             "The following targets are not registered in target group "
                                             "'%s': '%s'",
                                             param(p, "TargetGroupArn"), id);
                                return;
                        }
                }
        }
        for (unsigned j = 1; j < k; j++) {
                char key[64];
                snprintf(key, sizeof(key), "Targets.member.%u.Id", j);
                const char *id = param(p, key);
                if (dereg_at(e, (size_t)wl, id) >= 0)
                        continue;
                struct dereg *d = realloc(e->deregs, (e->n_deregs + 1) * sizeof(*d));
                if (!d) {
                        a->oom = true;
                        return;
                }
                e->deregs = d;
                if (!(d[e->n_deregs].id = strdup(id))) {
                        a->oom = true;
                        return;
                }
                d[e->n_deregs].wl = (size_t)wl;
                d[e->n_deregs].at = sim_now(s);
                e->n_deregs++;
                e->stats.deregistered++;
                log_info("sim elbv2: DeregisterTargets %s from %s at %.3f s", id, param(p, "TargetGroupArn"),
                         sim_now(s));
        }
        head(a, "DeregisterTargets");
        tail(a, "DeregisterTargets", rid);
}

bool sim_elbv2_action(const char *action)
{
        return streq_ptr(action, "DescribeTargetHealth") ||
               streq_ptr(action, "DescribeTargetGroupAttributes") || streq_ptr(action, "DeregisterTargets");
}

int sim_elbv2_answer(struct sim_elbv2 *e, struct sim *s, const cJSON *p, const char *rid, unsigned *status,
                     struct buf *body)
{
        struct ans a = { body, false };
        const char *action = param(p, "Action");
        *status = 200;
        e->stats.requests++;
        if (!streq_ptr(param(p, "Version"), "2015-12-01"))
                return error_answer(&a, status, 400, "InvalidAction", rid,
                                    "Could not find operation %s for version %s", action ? action : "",
                                    param(p, "Version") ? param(p, "Version") : "NO_VERSION_SPECIFIED");
        if (e->throttle > 0) {
                e->throttle--;
                return error_answer(&a, status, 400, "Throttling", rid, "Rate exceeded");
        }
        if (streq_ptr(action, "DescribeTargetHealth"))
                act_health(e, s, p, &a, status, rid);
        else if (streq_ptr(action, "DescribeTargetGroupAttributes"))
                act_attributes(s, p, &a, status, rid);
        else if (streq_ptr(action, "DeregisterTargets"))
                act_deregister(e, s, p, &a, status, rid);
        else
                error_answer(&a, status, 400, "InvalidAction", rid,
                             "The action %s is not valid for this web service.", action ? action : "");
        return a.oom ? -ENOMEM : 0;
}
