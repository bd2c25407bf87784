/* The provisioner: notices in, replacement instances out, tracked until their nodes are Ready. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/alert.h"
#include "spotdrain/core.h"
#include "spotdrain/keys.h"
#include "spotdrain/kube.h"
#include "spotdrain/notice.h"
#include "spotdrain/provision.h"

#define PROV_MAX_ATTEMPTS     8
#define PROV_MAX_THROTTLE     6
#define PROV_DEFAULT_WINDOW   (600ULL * 1000000ULL)
#define PROV_DEFAULT_READY    (600ULL * 1000000ULL)
#define PROV_MAX_REPLACEMENTS 4096

struct ice_entry {
        char type[PROV_NAME_SIZE], zone[PROV_NAME_SIZE], capacity[16];
        uint64_t until;
};

struct vcpu_entry {
        uint64_t at;
        int vcpu;
        size_t rep; /* the replacement it was counted for */
};

/* One notice being served: the inputs of the selection, kept for retries. */
struct job {
        struct provisioner *p;
        struct notice notice;
        char node[256];
        char zone[PROV_NAME_SIZE];
        struct prov_request *pods;
        size_t n_pods;
        struct prov_select_input in;
        struct prov_selection sel;
        unsigned refs; /* replacements still in flight on this job */
};

/* Private state of a replacement, beside the public struct (same index). */
struct rep_priv {
        struct job *job;
        size_t bin;
        unsigned attempt;
        unsigned throttled;
        const char *capacity;       /* PROV_CAPACITY_* being tried */
        struct call_ref *call;      /* the EC2 call under way, if any */
        struct timer *timer;        /* throttling retry or Ready timeout */
        struct call_ref *timer_ref; /* the timer's userdata */
        char **known_nodes;         /* Auto Scaling mode: the nodes that existed when it was requested */
        size_t n_known_nodes;
        bool known;     /* known_nodes taken (the node informer had synced) */
        size_t n_adopt; /* the first replacement of a notice: how many were asked with it */
        struct backoff backoff;
};

struct provisioner {
        struct loop *loop;
        struct kube_client *kube;
        struct ec2_client *ec2;
        struct alert_bus *alerts;
        struct provisioner_options o;
        struct kube_informer *nodes;

        struct provisioner_replacement *reps;
        struct rep_priv *priv;
        size_t n_reps;

        struct job **jobs;
        size_t n_jobs;

        struct ice_entry *ice;
        size_t n_ice;
        struct vcpu_entry *vcpus;
        size_t n_vcpus;
};

/* A callback's handle on a replacement (an index: the array may grow meanwhile). When the provisioner is
 * freed with an EC2 call under way, p becomes NULL and the answer is dropped; the EC2 client frees the ref
 * if it is freed first. */
struct call_ref {
        struct provisioner *p;
        size_t rep;
};

static struct call_ref *ref_new(struct provisioner *p, size_t rep)
{
        struct call_ref *ref = malloc(sizeof(*ref));
        if (ref)
                *ref = (struct call_ref){ .p = p, .rep = rep };
        return ref;
}

static void timer_stop(struct rep_priv *v)
{
        v->timer = timer_cancel(v->timer);
        free(v->timer_ref);
        v->timer_ref = NULL;
}

static int timer_arm(struct provisioner *p, size_t i, uint64_t after, timer_fn fn)
{
        struct rep_priv *v = &p->priv[i];
        int r;

        timer_stop(v);
        v->timer_ref = ref_new(p, i);
        if (!v->timer_ref)
                return -ENOMEM;
        r = timer_start_in(p->loop, after, fn, v->timer_ref, &v->timer);
        if (r < 0) {
                free(v->timer_ref);
                v->timer_ref = NULL;
        }
        return r;
}

/* In a timer callback: the timer is released already; takes the ref back. */
static struct provisioner *timer_fired(void *userdata, size_t *ret_rep)
{
        struct call_ref *ref = userdata;
        struct provisioner *p = ref->p;
        *ret_rep = ref->rep;
        p->priv[ref->rep].timer = NULL;
        p->priv[ref->rep].timer_ref = NULL;
        free(ref);
        return p;
}

/* In an EC2 callback: NULL when the provisioner is gone. */
static struct provisioner *call_answered(void *userdata, size_t *ret_rep)
{
        struct call_ref *ref = userdata;
        struct provisioner *p = ref->p;
        *ret_rep = ref->rep;
        if (p)
                p->priv[ref->rep].call = NULL;
        free(ref);
        return p;
}

const char *prov_state_to_string(enum prov_state s)
{
        static const char *const names[] = { "launching", "launched", "ready", "failed" };
        return (unsigned)s < ARRAY_SIZE(names) ? names[s] : "unknown";
}

static void copy(char *dst, size_t size, const char *src)
{
        snprintf(dst, size, "%s", src ? src : "");
}

static double secs(uint64_t a, uint64_t b)
{
        return b > a ? (double)(b - a) / 1e6 : 0.0;
}

/* ---- capacity errors and the vCPU window ---- */

static void ice_prune(struct provisioner *p, uint64_t now)
{
        size_t k = 0;
        for (size_t i = 0; i < p->n_ice; i++)
                if (p->ice[i].until > now)
                        p->ice[k++] = p->ice[i];
        p->n_ice = k;
}

static bool ice_lookup(const struct provisioner *p, const char *type, const char *zone, const char *capacity)
{
        uint64_t now = clk_now();
        for (size_t i = 0; i < p->n_ice; i++)
                if (p->ice[i].until > now && streq(p->ice[i].type, type) && streq(p->ice[i].zone, zone) &&
                    streq(p->ice[i].capacity, capacity))
                        return true;
        return false;
}

static bool ice_cb(const char *type, const char *zone, const char *capacity, void *userdata)
{
        return ice_lookup(userdata, type, zone, capacity);
}

static int ice_mark(struct provisioner *p, const char *type, const char *zone, const char *capacity)
{
        uint64_t now = clk_now();

        ice_prune(p, now);
        for (size_t i = 0; i < p->n_ice; i++)
                if (streq(p->ice[i].type, type) && streq(p->ice[i].zone, zone) &&
                    streq(p->ice[i].capacity, capacity)) {
                        p->ice[i].until = now + PROV_ICE_TTL_USEC;
                        return 0;
                }
        struct ice_entry *v = realloc(p->ice, (p->n_ice + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        p->ice = v;
        struct ice_entry *e = &p->ice[p->n_ice++];
        copy(e->type, sizeof(e->type), type);
        copy(e->zone, sizeof(e->zone), zone);
        copy(e->capacity, sizeof(e->capacity), capacity);
        e->until = now + PROV_ICE_TTL_USEC;
        log_debug("provision: %s %s %s unavailable for %llu s", type, zone, capacity,
                  (unsigned long long)(PROV_ICE_TTL_USEC / 1000000ULL));
        return 0;
}

bool provisioner_unavailable(const struct provisioner *p, const char *instance_type, const char *zone,
                             const char *capacity_type)
{
        return ice_lookup(p, instance_type, zone, capacity_type);
}

int provisioner_vcpus_in_window(const struct provisioner *p)
{
        uint64_t now = clk_now(), window = p->o.vcpu_window_usec;
        int sum = 0;
        for (size_t i = 0; i < p->n_vcpus; i++)
                if (p->vcpus[i].at + window > now)
                        sum += p->vcpus[i].vcpu;
        return sum;
}

static int vcpu_count(struct provisioner *p, size_t rep, int vcpu)
{
        uint64_t now = clk_now();
        size_t k = 0;

        /* Entries out of the window count no more. */
        for (size_t i = 0; i < p->n_vcpus; i++)
                if (p->vcpus[i].at + p->o.vcpu_window_usec > now)
                        p->vcpus[k++] = p->vcpus[i];
        p->n_vcpus = k;
        for (size_t i = 0; i < p->n_vcpus; i++)
                if (p->vcpus[i].rep == rep) {
                        p->vcpus[i].vcpu = vcpu;
                        return 0;
                }
        struct vcpu_entry *v = realloc(p->vcpus, (p->n_vcpus + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        p->vcpus = v;
        p->vcpus[p->n_vcpus++] = (struct vcpu_entry){ .at = now, .vcpu = vcpu, .rep = rep };
        return 0;
}

/* ---- life cycle ---- */

static void job_unref(struct job *j)
{
        if (!j || --j->refs > 0)
                return;
        struct provisioner *p = j->p;
        for (size_t i = 0; i < p->n_jobs; i++)
                if (p->jobs[i] == j) {
                        p->jobs[i] = p->jobs[--p->n_jobs];
                        break;
                }
        for (size_t i = 0; i < p->n_reps; i++)
                if (p->priv[i].job == j)
                        p->priv[i].job = NULL;
        prov_selection_clear(&j->sel);
        free(j->pods);
        free(j);
}

static void node_seen(void *userdata, const cJSON *obj);
static void nodes_synced(void *userdata);
static void node_modified(void *userdata, const cJSON *old_obj, const cJSON *obj)
{
        node_seen(userdata, obj);
}

int provisioner_new(struct loop *l, struct kube_client *kube, struct ec2_client *ec2,
                    const struct provisioner_options *o, struct alert_bus *alerts, struct provisioner **ret)
{
        struct provisioner *p;

        if (!l || !ec2 || !o || !o->catalog ||
            (isempty(o->asg_name) && (o->n_subnets == 0 || !o->subnets)) ||
            (isempty(o->asg_name) && isempty(o->launch_template_id) && isempty(o->launch_template_name)))
                return -EINVAL;
        for (size_t i = 0; i < o->n_subnets; i++)
                if (isempty(o->subnets[i].zone))
                        return -EINVAL;
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->loop = l;
        p->kube = kube;
        p->ec2 = ec2;
        p->alerts = alerts;
        p->o = *o;
        if (!p->o.triggers)
                p->o.triggers = (1u << NOTICE_REBALANCE_RECOMMENDATION) | (1u << NOTICE_SPOT_INTERRUPTION) |
                                (1u << NOTICE_SCHEDULED_CHANGE);
        if (!p->o.vcpu_window_usec)
                p->o.vcpu_window_usec = PROV_DEFAULT_WINDOW;
        if (!p->o.ready_timeout_usec)
                p->o.ready_timeout_usec = PROV_DEFAULT_READY;
        if (kube) {
                static const struct kube_informer_ops ops = { .added = node_seen,
                                                              .modified = node_modified,
                                                              .synced = nodes_synced };
                struct kube_watch_options wo = { .path = "/api/v1/nodes", .patient = true };
                wo.keep_fields = kube_node_fields; /* what node_seen() reads of a Node */
                int r = kube_informer_start(kube, &wo, &ops, p, &p->nodes);
                if (r < 0) {
                        free(p);
                        return r;
                }
        }
        *ret = p;
        return 0;
}

struct provisioner *provisioner_free(struct provisioner *p)
{
        if (!p)
                return NULL;
        kube_informer_stop(p->nodes);
        for (size_t i = 0; i < p->n_reps; i++) {
                timer_stop(&p->priv[i]);
                if (p->priv[i].call)
                        p->priv[i].call->p = NULL;
                for (size_t k = 0; k < p->priv[i].n_known_nodes; k++)
                        free(p->priv[i].known_nodes[k]);
                free(p->priv[i].known_nodes);
        }
        for (size_t i = 0; i < p->n_jobs; i++) {
                prov_selection_clear(&p->jobs[i]->sel);
                free(p->jobs[i]->pods);
                free(p->jobs[i]);
        }
        free(p->jobs);
        free(p->reps);
        free(p->priv);
        free(p->ice);
        free(p->vcpus);
        free(p);
        return NULL;
}

const struct provisioner_replacement *provisioner_replacements(const struct provisioner *p, size_t *ret_n)
{
        *ret_n = p->n_reps;
        return p->reps;
}

bool provisioner_under_way(const struct provisioner *p, const char *instance_id)
{
        for (size_t i = 0; i < p->n_reps; i++)
                if (streq(p->reps[i].replaces, instance_id) && p->reps[i].state != PROV_STATE_FAILED)
                        return true;
        return false;
}

/* ---- outcomes ---- */

static void rep_fail(struct provisioner *p, size_t i, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void rep_fail(struct provisioner *p, size_t i, const char *fmt, ...)
{
        struct provisioner_replacement *r = &p->reps[i];
        struct rep_priv *v = &p->priv[i];
        va_list ap;
        char after[32];

        va_start(ap, fmt);
        vsnprintf(r->error, sizeof(r->error), fmt, ap);
        va_end(ap);
        r->state = PROV_STATE_FAILED;
        timer_stop(v);
        (void)vcpu_count(p, i, 0);
        snprintf(after, sizeof(after), "%.1f", secs(r->requested_usec, clk_now()));
        if (p->alerts)
                (void)alert_emit(p->alerts, ALERT_REPLACEMENT_FAILED, r->node[0] ? r->node : NULL,
                                 (const char *const[]){ "replaces", r->replaces, "after_seconds", after,
                                                        "error", r->error, NULL },
                                 "replacement for %s failed after %s s: %s", r->replaces, after, r->error);
        struct job *j = v->job;
        v->job = NULL;
        job_unref(j);
}

/* One replacement-launched alert per replacement: when its node is Ready, or at launch when there is no
 * Kubernetes client to watch nodes with. */
static void alert_launched(struct provisioner *p, size_t i)
{
        struct provisioner_replacement *r = &p->reps[i];
        char launch[32], ready[32];

        snprintf(launch, sizeof(launch), "%.1f", secs(r->requested_usec, r->launched_usec));
        snprintf(ready, sizeof(ready), "%.1f", secs(r->requested_usec, r->ready_usec));
        if (!r->ready_usec) {
                if (p->alerts)
                        (void)alert_emit(p->alerts, ALERT_REPLACEMENT_LAUNCHED, r->node[0] ? r->node : NULL,
                                         (const char *const[]){ "replaces", r->replaces, "instance",
                                                                r->instance_id, "instance_type",
                                                                r->instance_type, "zone", r->zone,
                                                                "capacity_type", r->capacity_type,
                                                                "launch_seconds", launch, NULL },
                                         "replacement %s (%s, %s, %s) for %s launched after %s s",
                                         r->instance_id[0] ? r->instance_id : "instance", r->instance_type,
                                         r->zone, r->capacity_type, r->replaces, launch);
                return;
        }
        if (p->alerts)
                (void)alert_emit(
                    p->alerts, ALERT_REPLACEMENT_LAUNCHED, r->node[0] ? r->node : NULL,
                    (const char *const[]){ "replaces", r->replaces, "instance", r->instance_id,
                                           "instance_type", r->instance_type, "zone", r->zone,
                                           "capacity_type", r->capacity_type, "new_node", r->new_node,
                                           "launch_seconds", launch, "ready_seconds", ready, NULL },
                    "replacement %s (%s, %s, %s) for %s Ready as %s: launched after %s s, Ready "
                    "after %s s",
                    r->instance_id[0] ? r->instance_id : "instance", r->instance_type, r->zone,
                    r->capacity_type, r->replaces, r->new_node, launch, ready);
}

static void rep_ready(struct provisioner *p, size_t i, const char *node)
{
        struct provisioner_replacement *r = &p->reps[i];

        r->state = PROV_STATE_READY;
        r->ready_usec = clk_now();
        copy(r->new_node, sizeof(r->new_node), node);
        timer_stop(&p->priv[i]);
        alert_launched(p, i);
}

static void ready_timeout(void *userdata)
{
        size_t i;
        struct provisioner *p = timer_fired(userdata, &i);

        if (p->reps[i].state == PROV_STATE_LAUNCHED)
                rep_fail(p, i, "%s launched but its node was not Ready within %.0f s",
                         p->reps[i].instance_id, (double)p->o.ready_timeout_usec / 1e6);
}

static void rep_launched(struct provisioner *p, size_t i, const struct ec2_fleet_instance *inst)
{
        struct provisioner_replacement *r = &p->reps[i];
        struct rep_priv *v = &p->priv[i];
        const struct prov_itype *t = prov_catalog_find(p->o.catalog, inst->instance_type);

        r->state = PROV_STATE_LAUNCHED;
        r->launched_usec = clk_now();
        copy(r->instance_id, sizeof(r->instance_id), inst->instance_id);
        copy(r->instance_type, sizeof(r->instance_type), inst->instance_type);
        copy(r->capacity_type, sizeof(r->capacity_type),
             streq(inst->lifecycle, "spot") ? PROV_CAPACITY_SPOT : PROV_CAPACITY_ON_DEMAND);
        if (inst->zone[0])
                copy(r->zone, sizeof(r->zone), inst->zone);
        else
                for (size_t k = 0; k < p->o.n_subnets; k++)
                        if (streq(p->o.subnets[k].id, inst->subnet_id))
                                copy(r->zone, sizeof(r->zone), p->o.subnets[k].zone);
        if (t)
                (void)vcpu_count(p, i, t->vcpu);
        log_debug("provision: %s launched %s %s in %s for %s", r->client_token, r->instance_id,
                  r->instance_type, r->zone, r->replaces);
        struct job *j = v->job;
        v->job = NULL;
        job_unref(j);
        if (!p->kube) {
                /* Nothing to watch the node with: the launch is the outcome. */
                alert_launched(p, i);
                return;
        }
        (void)timer_arm(p, i, p->o.ready_timeout_usec, ready_timeout);
        /* The node may have registered before the answer came (a restart, a fast kubelet). */
        for (size_t k = 0; p->nodes && k < kube_informer_size(p->nodes); k++)
                node_seen(p, kube_informer_at(p->nodes, k));
}

/* ---- launching ---- */

static int launch(struct provisioner *p, size_t i);

static void throttle_retry(void *userdata)
{
        size_t i;
        struct provisioner *p = timer_fired(userdata, &i);
        int r;

        r = launch(p, i);
        if (r < 0 && r != -ENOSPC)
                rep_fail(p, i, "CreateFleet could not be sent: %s", strerror(-r));
}

static const char *zone_of_error(const struct provisioner *p, const struct ec2_fleet_error *e)
{
        if (e->zone[0])
                return e->zone;
        for (size_t k = 0; k < p->o.n_subnets; k++)
                if (streq(p->o.subnets[k].id, e->subnet_id))
                        return p->o.subnets[k].zone;
        return NULL;
}

static void fleet_done(const struct ec2_fleet_result *res, void *userdata)
{
        size_t i;
        struct provisioner *p = call_answered(userdata, &i);
        bool capacity = false;
        int r;

        if (!p)
                return;
        struct rep_priv *v = &p->priv[i];
        for (size_t k = 0; k < res->n_errors; k++) {
                const struct ec2_fleet_error *e = &res->errors[k];
                const char *zone = zone_of_error(p, e);
                if (ec2_capacity_error(e->code) && zone) {
                        capacity = true;
                        (void)ice_mark(p, e->instance_type, zone,
                                       streq(e->lifecycle, "on-demand") ? PROV_CAPACITY_ON_DEMAND
                                       : streq(e->lifecycle, "spot")    ? PROV_CAPACITY_SPOT
                                                                        : v->capacity);
                }
        }
        if (res->r.error == 0 && res->n_instances > 0) {
                rep_launched(p, i, &res->instances[0]);
                return;
        }
        if (res->r.error == -EBUSY && v->throttled < PROV_MAX_THROTTLE) {
                /* RequestLimitExceeded: the same call again (same token) after a jittered pause. */
                v->throttled++;
                if (timer_arm(p, i, backoff_next(&v->backoff), throttle_retry) == 0)
                        return;
        }
        if (res->r.error == -ENOSPC)
                capacity = true;
        if (res->r.error < 0 && res->r.error != -ENOSPC) {
                rep_fail(p, i, "CreateFleet: %s%s%s", res->r.code[0] ? res->r.code : strerror(-res->r.error),
                         res->r.message[0] ? ": " : "", res->r.message);
                return;
        }
        if (!capacity) {
                rep_fail(p, i, "CreateFleet launched nothing: %s%s%s",
                         res->n_errors ? res->errors[0].code : "no instance and no error",
                         res->n_errors ? ": " : "", res->n_errors ? res->errors[0].message : "");
                return;
        }
        /* A capacity error: other pools (now that these are marked), then the other capacity type. */
        v->attempt++;
        if (v->attempt >= PROV_MAX_ATTEMPTS) {
                rep_fail(p, i, "no capacity after %u attempts", v->attempt);
                return;
        }
        r = launch(p, i);
        if (r < 0 && r != -ENOSPC)
                rep_fail(p, i, "CreateFleet could not be sent: %s", strerror(-r));
}

static bool capacity_allowed(const struct prov_requirements *req, const char *capacity)
{
        if (!req->spot && !req->on_demand)
                return true;
        return streq(capacity, PROV_CAPACITY_SPOT) ? req->spot : req->on_demand;
}

static int launch(struct provisioner *p, size_t i)
{
        struct provisioner_replacement *rp = &p->reps[i];
        struct rep_priv *v = &p->priv[i];
        struct job *j = v->job;
        struct prov_override ov[64];
        const char *order[] = { PROV_CAPACITY_SPOT, PROV_CAPACITY_ON_DEMAND };
        size_t n = 0;
        int r;

        if (!j)
                return -ESTALE;
        /* Spot first (cheaper; the interrupted node was spot), on-demand once spot has no pool left. */
        for (size_t c = 0; c < ARRAY_SIZE(order) && n == 0; c++) {
                if (!capacity_allowed(&p->o.req, order[c]))
                        continue;
                n = prov_bin_overrides(&j->in, &j->sel.bins[v->bin], order[c], ice_cb, p, ov,
                                       ARRAY_SIZE(ov));
                v->capacity = order[c];
        }
        if (n == 0) {
                rep_fail(p, i, "no instance type with capacity left in the allowed zones");
                return -ENOSPC;
        }
        r = prov_client_token(j->notice.event_id, j->notice.instance_id, v->bin, v->capacity, v->attempt,
                              rp->client_token);
        if (r < 0)
                return r;
        copy(rp->capacity_type, sizeof(rp->capacity_type), v->capacity);
        struct ec2_tag tags[4];
        size_t nt = 0;
        tags[nt++] = (struct ec2_tag){ "Name", "spotdrain-replacement" };
        tags[nt++] = (struct ec2_tag){ SPOTDRAIN_TAG_REPLACES, j->notice.instance_id };
        if (!isempty(p->o.cluster_tag_key))
                tags[nt++] = (struct ec2_tag){ p->o.cluster_tag_key, "owned" };
        struct ec2_fleet_request req = {
                .client_token = rp->client_token,
                .launch_template_id = p->o.launch_template_id,
                .launch_template_name = p->o.launch_template_name,
                .launch_template_version = p->o.launch_template_version,
                .overrides = ov,
                .n_overrides = n,
                .capacity_type = v->capacity,
                .target = 1,
                .tags = tags,
                .n_tags = nt,
        };
        struct call_ref *ref = ref_new(p, i);
        if (!ref)
                return -ENOMEM;
        r = ec2_create_fleet(p->ec2, &req, fleet_done, ref);
        if (r < 0) {
                free(ref);
                return r;
        }
        v->call = ref;
        log_debug("provision: CreateFleet %s for %s bin %zu: %s, %zu override(s), attempt %u",
                  rp->client_token, rp->replaces, v->bin, v->capacity, n, v->attempt);
        return 0;
}

/* The replacements [first, first + n) of one notice: adopts the instances found, launches the others. */
static void launch_all(struct provisioner *p, size_t first, size_t n, const struct ec2_instance *found,
                       size_t n_found)
{
        size_t k = 0;

        for (size_t i = first; i < first + n && i < p->n_reps; i++) {
                if (p->reps[i].state != PROV_STATE_LAUNCHING)
                        continue;
                if (k < n_found) {
                        struct ec2_fleet_instance inst = {};
                        snprintf(inst.instance_id, sizeof(inst.instance_id), "%s", found[k].instance_id);
                        snprintf(inst.instance_type, sizeof(inst.instance_type), "%s",
                                 found[k].instance_type);
                        snprintf(inst.zone, sizeof(inst.zone), "%s", found[k].zone);
                        snprintf(inst.lifecycle, sizeof(inst.lifecycle), "%s",
                                 streq(found[k].lifecycle, "spot") ? "spot" : "on-demand");
                        k++;
                        log_debug("provision: adopting %s, launched earlier for %s", inst.instance_id,
                                  p->reps[i].replaces);
                        rep_launched(p, i, &inst);
                        continue;
                }
                int r = launch(p, i);
                if (r < 0 && r != -ENOSPC)
                        rep_fail(p, i, "CreateFleet could not be sent: %s", strerror(-r));
        }
}

static void adopt_done(const struct ec2_result *res, const struct ec2_instance *v, size_t n, void *userdata)
{
        size_t first;
        struct provisioner *p = call_answered(userdata, &first);

        if (!p)
                return;
        /* A failed lookup (no ec2:DescribeInstances permission, say) is not fatal: the ClientToken still
         * keeps a replayed notice from launching twice. */
        if (res->error < 0)
                log_debug("provision: looking up earlier replacements: %s %s", res->code, res->message);
        launch_all(p, first, p->priv[first].n_adopt, res->error < 0 ? NULL : v, res->error < 0 ? 0 : n);
}

static void asg_done(const struct ec2_result *res, int desired, void *userdata)
{
        size_t i;
        struct provisioner *p = call_answered(userdata, &i);

        if (!p)
                return;
        if (res->error < 0) {
                rep_fail(p, i, "Auto Scaling group %s: %s%s%s", p->o.asg_name,
                         res->code[0] ? res->code : strerror(-res->error), res->message[0] ? ": " : "",
                         res->message);
                return;
        }
        struct ec2_fleet_instance none = {};
        log_debug("provision: group %s desired capacity now %d", p->o.asg_name, desired);
        rep_launched(p, i, &none);
}

/* ---- node tracking ---- */

static void node_seen(void *userdata, const cJSON *obj)
{
        struct provisioner *p = userdata;
        struct kube_node n = {};

        if (kube_node_parse(obj, &n) < 0)
                return;
        for (size_t i = 0; i < p->n_reps && n.ready; i++) {
                struct provisioner_replacement *r = &p->reps[i];
                bool match;
                if (r->state != PROV_STATE_LAUNCHED)
                        continue;
                if (r->instance_id[0])
                        match = streq(r->instance_id, n.instance_id);
                else {
                        /* Auto Scaling mode: the group names no instance. A node that did not exist at the
                         * request and is not taken by another replacement is the new one. */
                        match = p->priv[i].known && !streq(n.instance_id, r->replaces) &&
                                !streq(n.name, r->node);
                        for (size_t k = 0; k < p->priv[i].n_known_nodes && match; k++)
                                match = !streq(p->priv[i].known_nodes[k], n.name);
                        for (size_t k = 0; k < p->n_reps && match; k++)
                                match = !streq(p->reps[k].new_node, n.name);
                }
                if (match) {
                        rep_ready(p, i, n.name);
                        break;
                }
        }
        kube_node_clear(&n);
}

/* ---- pods ---- */

static int requests_of(const cJSON *list, bool max, struct prov_request *acc)
{
        const cJSON *c;

        cJSON_ArrayForEach (c, list) {
                const char *cpu = kube_object_str(c, "resources.requests.cpu");
                const char *mem = kube_object_str(c, "resources.requests.memory");
                int64_t m = 0, b = 0;
                if ((cpu && parse_cpu_millis(cpu, &m) < 0) || (mem && parse_bytes(mem, &b) < 0))
                        return -EINVAL;
                if (max) {
                        acc->cpu_millis = m > acc->cpu_millis ? m : acc->cpu_millis;
                        acc->memory_bytes = b > acc->memory_bytes ? b : acc->memory_bytes;
                } else {
                        acc->cpu_millis += m;
                        acc->memory_bytes += b;
                }
        }
        return 0;
}

int provisioner_pod_from_json(const cJSON *pod, struct provisioner_pod *ret)
{
        struct prov_request sum = {}, init = {};
        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
        const cJSON *owners = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "ownerReferences");
        const cJSON *o;
        bool ds = false;

        if (!cJSON_IsObject(spec))
                return -EINVAL;
        if (requests_of(cJSON_GetObjectItemCaseSensitive(spec, "containers"), false, &sum) < 0 ||
            requests_of(cJSON_GetObjectItemCaseSensitive(spec, "initContainers"), true, &init) < 0)
                return -EINVAL;
        /* Init containers run one at a time before the others: the pod needs the larger of the two. */
        sum.cpu_millis = init.cpu_millis > sum.cpu_millis ? init.cpu_millis : sum.cpu_millis;
        sum.memory_bytes = init.memory_bytes > sum.memory_bytes ? init.memory_bytes : sum.memory_bytes;
        const char *ocpu = kube_object_str(spec, "overhead.cpu"),
                   *omem = kube_object_str(spec, "overhead.memory");
        int64_t m = 0, b = 0;
        if ((ocpu && parse_cpu_millis(ocpu, &m) < 0) || (omem && parse_bytes(omem, &b) < 0))
                return -EINVAL;
        sum.cpu_millis += m;
        sum.memory_bytes += b;
        cJSON_ArrayForEach (o, owners)
                ds = ds || streq(kube_object_str(o, "kind"), "DaemonSet");
        *ret = (struct provisioner_pod){ .name = kube_object_str(pod, "metadata.name"),
                                         .req = sum,
                                         .daemonset = ds };
        return 0;
}

/* ---- notices ---- */

static bool triggers(const struct provisioner *p, enum notice_kind k)
{
        return (unsigned)k < 32 && (p->o.triggers & (1u << k));
}

static int add_rep(struct provisioner *p, struct job *j, size_t bin, size_t *ret)
{
        if (p->n_reps >= PROV_MAX_REPLACEMENTS)
                return -E2BIG;
        struct provisioner_replacement *r = realloc(p->reps, (p->n_reps + 1) * sizeof(*r));
        if (!r)
                return -ENOMEM;
        p->reps = r;
        struct rep_priv *v = realloc(p->priv, (p->n_reps + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        p->priv = v;
        size_t i = p->n_reps++;
        p->reps[i] = (struct provisioner_replacement){ .bin = bin, .requested_usec = clk_now() };
        copy(p->reps[i].replaces, sizeof(p->reps[i].replaces), j->notice.instance_id);
        copy(p->reps[i].node, sizeof(p->reps[i].node), j->node);
        p->priv[i] = (struct rep_priv){ .job = j,
                                        .bin = bin,
                                        .backoff = BACKOFF_INIT(500ULL * 1000, 20ULL * 1000000) };
        j->refs++;
        *ret = i;
        return 0;
}

static int snapshot_nodes(struct provisioner *p, size_t i)
{
        struct rep_priv *v = &p->priv[i];
        size_t n = p->nodes ? kube_informer_size(p->nodes) : 0;

        /* Before the first list the store is incomplete: taken again once synced. */
        if (!p->nodes || !kube_informer_synced(p->nodes))
                return 0;
        v->known = true;
        v->known_nodes = calloc(n ? n : 1, sizeof(char *));
        if (!v->known_nodes)
                return -ENOMEM;
        for (size_t k = 0; k < n; k++) {
                const char *name = kube_object_str(kube_informer_at(p->nodes, k), "metadata.name");
                if (name && !(v->known_nodes[v->n_known_nodes++] = strdup(name)))
                        return -ENOMEM;
        }
        return 0;
}

static void nodes_synced(void *userdata)
{
        struct provisioner *p = userdata;

        for (size_t i = 0; i < p->n_reps; i++)
                if (!isempty(p->o.asg_name) && !p->priv[i].known &&
                    p->reps[i].state <= PROV_STATE_LAUNCHED && snapshot_nodes(p, i) < 0)
                        log_debug("provision: out of memory taking the node list");
}

static void subnet_load(const struct provisioner *p, unsigned *load)
{
        for (size_t i = 0; i < p->n_reps; i++) {
                if (p->reps[i].state == PROV_STATE_FAILED || !p->reps[i].zone[0])
                        continue;
                for (size_t k = 0; k < p->o.n_subnets; k++)
                        if (streq(p->o.subnets[k].zone, p->reps[i].zone)) {
                                load[k]++;
                                break;
                        }
        }
}

int provisioner_on_notice(struct provisioner *p, const struct notice *n, const char *node, const char *zone,
                          const struct provisioner_pod *pods, size_t n_pods)
{
        _cleanup_free_ unsigned *load = NULL;
        struct job *j;
        size_t first;
        int r;

        if (!p || !n || (n_pods > 0 && !pods) || isempty(n->instance_id))
                return -EINVAL;
        if (!triggers(p, n->kind))
                return 0;
        if (provisioner_under_way(p, n->instance_id)) {
                log_debug("provision: replacement for %s already under way", n->instance_id);
                return 0;
        }
        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        j->p = p;
        j->notice = *n;
        copy(j->node, sizeof(j->node), node);
        copy(j->zone, sizeof(j->zone), zone);
        j->pods = calloc(n_pods ? n_pods : 1, sizeof(*j->pods));
        load = calloc(p->o.n_subnets ? p->o.n_subnets : 1, sizeof(*load));
        if (!j->pods || !load) {
                free(j->pods);
                free(j);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n_pods; i++) {
                if (pods[i].daemonset) {
                        j->in.daemonset.cpu_millis += pods[i].req.cpu_millis;
                        j->in.daemonset.memory_bytes += pods[i].req.memory_bytes;
                        j->in.daemonset_pods++;
                } else
                        j->pods[j->n_pods++] = pods[i].req;
        }
        if (j->n_pods == 0) {
                /* Nothing is displaced: nothing to make room for. */
                free(j->pods);
                free(j);
                return 0;
        }
        subnet_load(p, load);
        j->in.catalog = p->o.catalog;
        j->in.req = &p->o.req;
        j->in.pods = j->pods;
        j->in.n_pods = j->n_pods;
        j->in.interrupted_zone = j->zone[0] ? j->zone : NULL;
        j->in.subnets = p->o.subnets;
        j->in.n_subnets = p->o.n_subnets;
        j->in.subnet_load = load;
        j->in.vcpu_budget = p->o.vcpu_limit > 0 ? p->o.vcpu_limit - provisioner_vcpus_in_window(p) : -1;
        if (isempty(p->o.asg_name))
                r = prov_select(&j->in, &j->sel);
        else
                r = 0;
        j->in.subnet_load = NULL;
        if (r < 0) {
                free(j->pods);
                free(j);
                return r;
        }
        struct job **jv = realloc(p->jobs, (p->n_jobs + 1) * sizeof(*jv));
        if (!jv) {
                prov_selection_clear(&j->sel);
                free(j->pods);
                free(j);
                return -ENOMEM;
        }
        p->jobs = jv;
        p->jobs[p->n_jobs++] = j;
        j->refs = 1; /* this function's, dropped at the end */

        if (!isempty(p->o.asg_name)) {
                r = add_rep(p, j, 0, &first);
                if (r < 0) {
                        job_unref(j);
                        return r;
                }
                r = snapshot_nodes(p, first);
                struct call_ref *ref = r < 0 ? NULL : ref_new(p, first);
                if (!ref)
                        r = -ENOMEM;
                else {
                        r = asg_raise_desired(p->ec2, p->o.asg_name, n->instance_id, 1, asg_done, ref);
                        if (r < 0)
                                free(ref);
                        else
                                p->priv[first].call = ref;
                }
                if (r < 0)
                        rep_fail(p, first, "Auto Scaling call could not be sent: %s", strerror(-r));
                job_unref(j);
                return r < 0 ? 0 : 1;
        }

        if (j->sel.n_bins == 0) {
                char pods_s[16];
                snprintf(pods_s, sizeof(pods_s), "%zu", j->n_pods);
                if (p->alerts)
                        (void)alert_emit(
                            p->alerts, ALERT_REPLACEMENT_FAILED, j->node[0] ? j->node : NULL,
                            (const char *const[]){ "replaces", n->instance_id, "pods", pods_s, NULL },
                            "no replacement for %s: %s", n->instance_id,
                            j->sel.bins_over_budget ? "the vCPU limit of the window is reached"
                                                    : "no allowed instance type fits the pods");
                job_unref(j);
                return 0;
        }
        size_t n_reps = 0;
        for (size_t b = 0; b < j->sel.n_bins; b++) {
                size_t i;
                r = add_rep(p, j, b, &i);
                if (r < 0)
                        break;
                if (b == 0)
                        first = i;
                n_reps++;
                (void)vcpu_count(p, i, j->sel.bins[b].vcpu_reserved);
        }
        if (n_reps == 0) {
                job_unref(j);
                return r;
        }
        /* Replacements launched before a restart (under another notice of the same instance, or the same
         * one) are adopted rather than launched again; the ClientToken covers the rest. */
        char filter[64];
        snprintf(filter, sizeof(filter), "tag:%s=%s", SPOTDRAIN_TAG_REPLACES, n->instance_id);
        const char *const filters[] = { filter, "instance-state-name=pending,running", NULL };
        struct call_ref *ref = ref_new(p, first);
        r = ref ? ec2_describe_instances(p->ec2, NULL, filters, adopt_done, ref) : -ENOMEM;
        if (r == 0) {
                p->priv[first].call = ref;
                p->priv[first].n_adopt = n_reps;
                job_unref(j);
                return 1;
        }
        free(ref);
        launch_all(p, first, n_reps, NULL, 0);
        job_unref(j);
        return 1;
}
