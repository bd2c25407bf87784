/* drain/lb_targets: the target groups of one draining node's pods (drain_lb_targets, engine.h): the AWS Load
 * Balancer Controller's TargetGroupBindings and the Services they name, read once; each group's
 * deregistration delay, read once; and for instance target groups, the node's instance asked about every
 * poll until it is out of healthy there. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "drain/engine_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/elbv2.h"
#include "spotdrain/engine.h"
#include "spotdrain/kube.h"

#define POLL_USEC     (1000 * 1000ULL)
#define POLL_MAX_USEC (5 * 1000 * 1000ULL)
#define TGB_PATH      "/apis/elbv2.k8s.aws/v1beta1/targetgroupbindings"
#define SERVICES_PATH "/api/v1/services"

struct group {
        struct drain_lb_group pub;
        struct drain_lb_targets *t;
        const cJSON *service; /* in t->services; NULL when the binding's Service is not there */
        bool delay_asked, deregistered, deregistering, health_asked;
        struct timer *poll;
        struct backoff backoff;
};

struct drain_lb_targets {
        struct kube_client *kc;
        struct elbv2_client *elb;
        struct loop *loop;
        char *instance_id;
        bool deregister;
        drain_lb_changed_fn changed;
        void *userdata;
        struct kube_call *tgb_call, *svc_call;
        cJSON *bindings, *services;
        bool tgb_done, svc_done, listed;
        struct group *groups;
        size_t n_groups;
        /* ELBv2 calls in flight: their answers find t through their group, so a freed t lingers (freed)
         * until the last one is answered. */
        unsigned pending;
        bool freed;
};

static void group_clear(struct group *g)
{
        timer_cancel(g->poll);
        free(g->pub.arn);
        free(g->pub.binding);
}

static void release(struct drain_lb_targets *t)
{
        kube_call_cancel(t->tgb_call);
        kube_call_cancel(t->svc_call);
        for (size_t i = 0; i < t->n_groups; i++)
                group_clear(&t->groups[i]);
        free(t->groups);
        cJSON_Delete(t->bindings);
        cJSON_Delete(t->services);
        free(t->instance_id);
        free(t);
}

struct drain_lb_targets *drain_lb_targets_free(struct drain_lb_targets *t)
{
        if (!t)
                return NULL;
        t->freed = true;
        t->changed = NULL;
        for (size_t i = 0; i < t->n_groups; i++)
                t->groups[i].poll = timer_cancel(t->groups[i].poll);
        if (t->pending == 0)
                release(t);
        return NULL;
}

/* An ELBv2 answer came for g: false when its tracker is gone (and was released if this was the last). */
static bool answer_in(struct group *g)
{
        struct drain_lb_targets *t = g->t;
        t->pending--;
        if (!t->freed)
                return true;
        if (t->pending == 0)
                release(t);
        return false;
}

static void changed(struct drain_lb_targets *t)
{
        if (t->changed)
                t->changed(t->userdata);
}

static const cJSON *find_service(const struct drain_lb_targets *t, const char *ns, const char *name)
{
        const cJSON *svc;
        cJSON_ArrayForEach (svc, kube_list_items(t->services))
                if (streq_ptr(kube_object_str(svc, "metadata.namespace"), ns) &&
                    streq_ptr(kube_object_str(svc, "metadata.name"), name))
                        return svc;
        return NULL;
}

static void poll_group(struct group *g);

static void poll_fire(void *userdata)
{
        struct group *g = userdata;
        g->poll = NULL;
        poll_group(g);
}

static void poll_later(struct group *g, uint64_t usec)
{
        if (!g->poll && timer_start_in(g->t->loop, usec, poll_fire, g, &g->poll) < 0)
                g->poll = NULL;
}

static void delay_done(int error, const char *message, unsigned seconds, void *userdata)
{
        struct group *g = userdata;
        if (!answer_in(g) || error == -ECANCELED)
                return;
        if (error < 0) {
                log_warning("cannot read the deregistration delay of target group %s (%s)", g->pub.arn,
                            message ? message : "no answer");
                g->delay_asked = false;    /* asked again at the next poll */
                g->pub.delay_seconds = -2; /* its pods no longer wait for it */
                poll_later(g, backoff_next(&g->backoff));
                return;
        }
        g->pub.delay_seconds = (long)seconds;
        changed(g->t);
}

static void health_done(int error, const char *message, const struct elbv2_target_health *th, size_t n,
                        void *userdata)
{
        struct group *g = userdata;
        if (!answer_in(g) || error == -ECANCELED)
                return;
        g->health_asked = false;
        if (error < 0) {
                log_warning("cannot read the health of %s in target group %s (%s)", g->t->instance_id,
                            g->pub.arn, message ? message : "no answer");
                poll_later(g, backoff_next(&g->backoff));
                return;
        }
        g->backoff = BACKOFF_INIT(POLL_USEC, POLL_MAX_USEC);
        const char *state = "unused";
        for (size_t i = 0; i < n; i++)
                if (streq(th[i].id, g->t->instance_id))
                        state = th[i].state;
        snprintf(g->pub.state, sizeof(g->pub.state), "%s", state);
        if (!streq(state, "healthy")) {
                g->pub.out = true;
                g->pub.out_usec = clk_now();
                log_info("instance %s is %s in target group %s: the pods behind it may go",
                         g->t->instance_id, state, g->pub.arn);
                changed(g->t);
                return;
        }
        poll_later(g, POLL_USEC);
}

static void deregister_done(int error, const char *message, void *userdata)
{
        struct group *g = userdata;
        if (!answer_in(g) || error == -ECANCELED)
                return;
        g->deregistering = false;
        /* InvalidTarget: not registered (any more), which is what was asked. */
        if (error >= 0 || (message && startswith(message, "InvalidTarget"))) {
                g->deregistered = true;
                log_info("deregistered %s from target group %s", g->t->instance_id, g->pub.arn);
        } else
                log_warning("cannot deregister %s from target group %s (%s), trying again",
                            g->t->instance_id, g->pub.arn, message ? message : "no answer");
        poll_group(g);
}

static void poll_group(struct group *g)
{
        struct drain_lb_targets *t = g->t;
        const char *ids[] = { t->instance_id };
        if (!g->delay_asked) {
                g->delay_asked = true;
                if (elbv2_describe_delay(t->elb, g->pub.arn, delay_done, g) < 0)
                        g->delay_asked = false;
                else
                        t->pending++;
        }
        if (g->pub.ip || g->pub.out)
                return;
        if (t->deregister && !g->deregistered && !g->deregistering) {
                g->deregistering = true;
                if (elbv2_deregister(t->elb, g->pub.arn, ids, 1, deregister_done, g) < 0)
                        g->deregistering = false;
                else {
                        t->pending++;
                        return; /* the health is asked once it is answered */
                }
        }
        if (g->health_asked)
                return;
        g->health_asked = true;
        if (elbv2_describe_health(t->elb, g->pub.arn, ids, 1, health_done, g) < 0) {
                g->health_asked = false;
                poll_later(g, backoff_next(&g->backoff));
        } else
                t->pending++;
}

/* Both lists are in: one group per binding whose Service exists. */
static void listed(struct drain_lb_targets *t)
{
        const cJSON *b;
        size_t n = 0;

        if (!t->tgb_done || !t->svc_done)
                return;
        t->listed = true;
        cJSON_ArrayForEach (b, kube_list_items(t->bindings))
                n++;
        t->groups = calloc(n ? n : 1, sizeof(*t->groups));
        if (!t->groups) {
                log_warning("out of memory reading target groups");
                changed(t);
                return;
        }
        cJSON_ArrayForEach (b, kube_list_items(t->bindings)) {
                const char *arn = kube_object_str(b, "spec.targetGroupARN"),
                           *type = kube_object_str(b, "spec.targetType"),
                           *ns = kube_object_str(b, "metadata.namespace"),
                           *svc = kube_object_str(b, "spec.serviceRef.name");
                const cJSON *service = find_service(t, ns, svc);
                if (isempty(arn) || !service)
                        continue;
                struct group *g = &t->groups[t->n_groups];
                *g = (struct group){ .t = t, .service = service };
                g->pub.arn = strdup(arn);
                g->pub.binding = strprintf("%s/%s", ns, kube_object_str(b, "metadata.name"));
                /* The controller's default is instance. */
                g->pub.ip = streq_ptr(type, "ip");
                g->pub.delay_seconds = -1;
                g->backoff = BACKOFF_INIT(POLL_USEC, POLL_MAX_USEC);
                if (!g->pub.arn || !g->pub.binding) {
                        group_clear(g);
                        log_warning("out of memory reading target groups");
                        continue;
                }
                t->n_groups++;
        }
        for (size_t i = 0; i < t->n_groups; i++)
                poll_group(&t->groups[i]);
        changed(t);
}

static void svc_done(struct kube_client *c, struct kube_result *r, void *userdata);

static void tgb_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct drain_lb_targets *t = userdata;
        t->tgb_call = NULL;
        t->tgb_done = true;
        if (r->error >= 0)
                t->bindings = TAKE_PTR(r->object);
        else if (r->error != -ENOENT) /* no such resource: no AWS Load Balancer Controller */
                log_warning_errno(r->error,
                                  "cannot list TargetGroupBindings (%s): no pod waits for its target",
                                  r->message ? r->message : "no answer");
        /* The Services only when some binding names one: most clusters' drains list nothing more. */
        if (cJSON_GetArraySize(kube_list_items(t->bindings)) > 0 &&
            kube_list(t->kc, SERVICES_PATH, &(struct kube_list_options){ .priority = true }, svc_done, t,
                      &t->svc_call) >= 0)
                return;
        t->svc_done = true;
        listed(t);
}

static void svc_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct drain_lb_targets *t = userdata;
        t->svc_call = NULL;
        t->svc_done = true;
        if (r->error >= 0)
                t->services = TAKE_PTR(r->object);
        else
                log_warning_errno(r->error, "cannot list Services (%s): no pod waits for its target",
                                  r->message ? r->message : "no answer");
        listed(t);
}

int drain_lb_targets_new(struct kube_client *kc, struct elbv2_client *elb, const char *instance_id,
                         bool deregister, drain_lb_changed_fn fn, void *userdata,
                         struct drain_lb_targets **ret)
{
        struct drain_lb_targets *t;
        int r;

        if (!kc || !elb || isempty(instance_id))
                return -EINVAL;
        t = calloc(1, sizeof(*t));
        if (!t || !(t->instance_id = strdup(instance_id))) {
                free(t);
                return -ENOMEM;
        }
        *t = (struct drain_lb_targets){ .kc = kc,
                                        .elb = elb,
                                        .loop = kube_client_loop(kc),
                                        .instance_id = t->instance_id,
                                        .deregister = deregister,
                                        .changed = fn,
                                        .userdata = userdata };
        r = kube_list(kc, TGB_PATH, &(struct kube_list_options){ .priority = true }, tgb_done, t,
                      &t->tgb_call);
        if (r < 0) {
                drain_lb_targets_free(t);
                return r;
        }
        *ret = t;
        return 0;
}

bool drain_lb_targets_listed(const struct drain_lb_targets *t)
{
        return !t || t->listed;
}

size_t drain_lb_targets_count(const struct drain_lb_targets *t)
{
        return t ? t->n_groups : 0;
}

const struct drain_lb_group *drain_lb_targets_group(const struct drain_lb_targets *t, size_t i)
{
        return t && i < t->n_groups ? &t->groups[i].pub : NULL;
}

long drain_lb_targets_find(const struct drain_lb_targets *t, const struct kube_pod *kp, bool instance_only)
{
        for (size_t i = 0; t && kp && i < t->n_groups; i++)
                if ((!instance_only || !t->groups[i].pub.ip) &&
                    drain_service_selects(t->groups[i].service, kp))
                        return (long)i;
        return -1;
}
