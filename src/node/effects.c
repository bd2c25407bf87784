/* The dispatcher's effects (node.h): the one implementation of struct dispatch_ops's generic members, with
 * one drain per node, and the front end's own members forwarded to its hooks. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/dispatch.h"
#include "spotdrain/engine.h"
#include "spotdrain/keys.h"
#include "spotdrain/node.h"
#include "spotdrain/notice.h"
#include "spotdrain/provision.h"
#include "spotdrain/service.h"

struct effects_drain {
        struct node_effects *e;
        char *node;
        struct drain_exec *x;
        bool finished;
};

struct node_effects {
        struct loop *loop;
        struct node_drainer drainer;
        struct node_effects_hooks hooks;
        struct effects_drain **drains;
        size_t n_drains;
        struct timer *reap_timer;
};

/* ---- drains ---- */

static struct effects_drain *drain_find(struct node_effects *e, const char *node)
{
        for (size_t i = 0; i < e->n_drains; i++)
                if (streq(e->drains[i]->node, node))
                        return e->drains[i];
        return NULL;
}

/* x goes: the front end lets go of it first. */
static void drain_release(struct node_effects *e, const char *node, struct drain_exec *x)
{
        if (x && e->hooks.drain_released)
                e->hooks.drain_released(e->hooks.userdata, node, x);
        drain_exec_free(x);
}

static void drain_remove(struct node_effects *e, struct effects_drain *d)
{
        for (size_t i = 0; i < e->n_drains; i++)
                if (e->drains[i] == d) {
                        e->drains[i] = e->drains[--e->n_drains];
                        break;
                }
        drain_release(e, d->node, d->x);
        free(d->node);
        free(d);
}

static void on_reap(void *userdata)
{
        struct node_effects *e = userdata;
        uint64_t now = clk_now(), next = 0;
        e->reap_timer = NULL;
        for (size_t i = 0; i < e->n_drains;) {
                /* One that ended early keeps its capture of the pods left, shortly before its deadline. */
                uint64_t until = e->drains[i]->finished ? drain_exec_lingers_until(e->drains[i]->x) : 0;
                if (e->drains[i]->finished && until <= now)
                        drain_remove(e, e->drains[i]);
                else {
                        if (until > now && (!next || until < next))
                                next = until;
                        i++;
                }
        }
        if (next && timer_start(e->loop, next, on_reap, e, &e->reap_timer) < 0)
                e->reap_timer = NULL;
}

static void on_drain_done(struct drain_exec *x, const struct drain_exec_result *res, void *userdata)
{
        struct effects_drain *d = userdata;
        struct node_effects *e = d->e;
        _cleanup_free_ char *node = strdup(d->node);

        /* done must not free x: it goes on the next loop iteration. */
        d->finished = true;
        /* It may linger until its deadline (drain_exec_lingers_until): without its plan. */
        drain_exec_release_plan(x);
        if (!e->reap_timer && timer_start_in(e->loop, 0, on_reap, e, &e->reap_timer) < 0)
                log_debug("node: cannot arm the reaper of finished drains");
        if (node && e->hooks.drain_ended)
                e->hooks.drain_ended(e->hooks.userdata, node, x, res);
}

static int op_drain(void *userdata, const char *node, const struct notice *n, uint64_t deadline)
{
        struct node_effects *e = userdata;
        struct effects_drain *d = drain_find(e, node), **v;
        struct drain_exec *x = NULL;
        int r;

        if (!d) {
                v = realloc(e->drains, (e->n_drains + 1) * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                e->drains = v;
                d = calloc(1, sizeof(*d));
                if (!d || !(d->node = strdup(node))) {
                        free(d);
                        return -ENOMEM;
                }
                d->e = e;
                e->drains[e->n_drains++] = d;
        }
        r = node_drain_start(&e->drainer, node, n, deadline, on_drain_done, d, &x);
        if (r < 0) {
                if (!d->x)
                        drain_remove(e, d);
                return r;
        }
        /* A restart (earlier deadline) replaces the drain under way; the new one plans from the node as
         * it is now. */
        drain_release(e, d->node, d->x);
        d->x = x;
        d->finished = false;
        if (e->hooks.drain_started)
                e->hooks.drain_started(e->hooks.userdata, d->node, n, x);
        return 0;
}

static void op_drain_stop(void *userdata, const char *node)
{
        struct node_effects *e = userdata;
        struct effects_drain *d = drain_find(e, node);
        if (d)
                drain_remove(e, d);
}

/* ---- node actions ---- */

static int op_soft_taint(void *userdata, const char *node, bool add)
{
        struct node_effects *e = userdata;
        if (add)
                log_notice("rebalance recommendation for %s: tainting it %s:PreferNoSchedule", node,
                           SPOTDRAIN_TAINT_REBALANCE);
        return node_rebalance(e->drainer.kube, node, add);
}

/* A canceled scheduled change whose drain had begun (the drain is stopped already). */
static int op_uncordon(void *userdata, const char *node)
{
        struct node_effects *e = userdata;
        const struct spotdrain_config *cfg = e->drainer.cfg;
        return node_undrain(e->drainer.kube, node,
                            cfg && !isempty(cfg->drain.taint_key) ? cfg->drain.taint_key : NULL);
}

static int op_cordon(void *userdata, const char *node)
{
        struct node_effects *e = userdata;
        return node_cordon(e->drainer.kube, node, true, NULL, (void *)"cordon", NULL);
}

static int op_replacement_request(void *userdata, const char *node, const struct notice *n)
{
        struct node_effects *e = userdata;

        if (!e->drainer.prov) {
                log_debug("replacement capacity for %s not requested: provisioning is off", node);
                return 0;
        }
        /* The provisioner knows its triggers and whether a replacement is under way for the instance. */
        return prov_frontend_request(e->drainer.prov, node, n);
}

/* ---- the front end's own ops ---- */

#define HOOKS(userdata)          (&((struct node_effects *)(userdata))->hooks.ops)
#define HOOKS_USERDATA(userdata) (((struct node_effects *)(userdata))->hooks.userdata)

static void fwd_notice_seen(void *userdata, const char *node, const struct notice *n)
{
        HOOKS(userdata)->notice_seen(HOOKS_USERDATA(userdata), node, n);
}

static void fwd_node_refresh(void *userdata, const char *node)
{
        HOOKS(userdata)->node_refresh(HOOKS_USERDATA(userdata), node);
}

static int fwd_lifecycle_heartbeat(void *userdata, const struct notice *n)
{
        return HOOKS(userdata)->lifecycle_heartbeat(HOOKS_USERDATA(userdata), n);
}

static int fwd_lifecycle_complete(void *userdata, const struct notice *n)
{
        return HOOKS(userdata)->lifecycle_complete(HOOKS_USERDATA(userdata), n);
}

static uint64_t fwd_lifecycle_interval(void *userdata, const struct notice *n)
{
        return HOOKS(userdata)->lifecycle_interval(HOOKS_USERDATA(userdata), n);
}

static uint64_t fwd_lifecycle_deadline(void *userdata, const struct notice *n)
{
        return HOOKS(userdata)->lifecycle_deadline(HOOKS_USERDATA(userdata), n);
}

static int fwd_lifecycle_launch(void *userdata, const struct notice *n, uint64_t ticket)
{
        return HOOKS(userdata)->lifecycle_launch(HOOKS_USERDATA(userdata), n, ticket);
}

static void fwd_ticket_done(void *userdata, uint64_t ticket, int error)
{
        HOOKS(userdata)->ticket_done(HOOKS_USERDATA(userdata), ticket, error);
}

void node_effects_dispatch_ops(const struct node_effects *e, struct dispatch_ops *ret)
{
        const struct dispatch_ops *h = &e->hooks.ops;

        *ret = (struct dispatch_ops){
                .drain = op_drain,
                .drain_stop = op_drain_stop,
                .soft_taint = op_soft_taint,
                .replacement_request = op_replacement_request,
                .uncordon = op_uncordon,
                .cordon = op_cordon,
                .node_refresh = h->node_refresh ? fwd_node_refresh : NULL,
                .notice_seen = h->notice_seen ? fwd_notice_seen : NULL,
                .lifecycle_heartbeat = h->lifecycle_heartbeat ? fwd_lifecycle_heartbeat : NULL,
                .lifecycle_complete = h->lifecycle_complete ? fwd_lifecycle_complete : NULL,
                .lifecycle_interval = h->lifecycle_interval ? fwd_lifecycle_interval : NULL,
                .lifecycle_deadline = h->lifecycle_deadline ? fwd_lifecycle_deadline : NULL,
                .lifecycle_launch = h->lifecycle_launch ? fwd_lifecycle_launch : NULL,
                .ticket_done = h->ticket_done ? fwd_ticket_done : NULL,
        };
}

/* ---- life cycle ---- */

int node_effects_new(struct loop *l, const struct node_drainer *drainer,
                     const struct node_effects_hooks *hooks, struct node_effects **ret)
{
        struct node_effects *e;

        if (!l || !drainer || !ret)
                return -EINVAL;
        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->loop = l;
        e->drainer = *drainer;
        if (hooks)
                e->hooks = *hooks;
        *ret = e;
        return 0;
}

struct node_effects *node_effects_free(struct node_effects *e)
{
        if (!e)
                return NULL;
        timer_cancel(e->reap_timer);
        while (e->n_drains > 0)
                drain_remove(e, e->drains[e->n_drains - 1]);
        free(e->drains);
        free(e);
        return NULL;
}

struct node_drainer *node_effects_drainer(struct node_effects *e)
{
        return &e->drainer;
}
