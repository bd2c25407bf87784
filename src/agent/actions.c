/* The agent's actions, the dispatcher's effects for its node: the node actions alone (agent_kube_actions: a
 * drain is the cordon and the drain taint), and with the in-process drain engine (agent_engine_actions:
 * drains with their load-balancer credentials, the soft taint, cordon, uncordon, replacement), whose end
 * is told to the agent that follows it. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/hook.h"
#include "spotdrain/agent.h"
#include "spotdrain/alert.h"
#include "spotdrain/awscreds.h"
#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/dispatch.h"
#include "spotdrain/elbv2.h"
#include "spotdrain/engine.h"
#include "spotdrain/imds.h"
#include "spotdrain/keys.h"
#include "spotdrain/kube.h"
#include "spotdrain/node.h"
#include "spotdrain/notice.h"
#include "spotdrain/service.h"
#include "spotdrain/surge.h"

/* ---- actions on Kubernetes ---- */

static int kube_drain(void *userdata, const struct agent_drain_request *req)
{
        int r = node_cordon(userdata, req->node, true, NULL, (void *)"cordon", NULL);
        if (r < 0)
                return r;
        return node_drain_taint(userdata, req->node, NULL, notice_kind_to_string(req->notice->kind), false,
                                true, NULL, (void *)"interruption taint", NULL);
}

static int kube_soft_taint(void *userdata, const char *node, bool add)
{
        return node_rebalance(userdata, node, add);
}

static int kube_uncordon(void *userdata, const char *node)
{
        return node_undrain(userdata, node, NULL);
}

static int kube_cordon(void *userdata, const char *node)
{
        return node_cordon(userdata, node, true, NULL, (void *)"cordon", NULL);
}

static int kube_replacement(void *userdata, const char *node, const struct notice *n)
{
        /* The provisioning core (a later issue) plugs in here; asking for nothing is the honest answer. */
        log_debug("agent: replacement capacity for %s is not requested: no provisioning core", node);
        return 0;
}

const struct agent_actions agent_kube_actions = {
        .drain = kube_drain,
        .soft_taint = kube_soft_taint,
        .replacement_request = kube_replacement,
        .uncordon = kube_uncordon,
        .cordon = kube_cordon,
};

/* ---- actions through the drain engine ---- */

/* The drains and the node actions are the node effects' (node/effects.c), as in the controller and
 * simulate: what the engine adds is what one agent on one node needs around them. */
struct agent_engine {
        struct kube_client *kube;
        struct alert_bus *bus;
        const struct spotdrain_config *cfg;
        struct node_effects *fx;
        struct dispatch_ops fx_ops; /* fx's effects, userdata fx */
        struct drain_exec *running;
        /* The last drain that ended: its result, the message its own copy (the drain may be freed). */
        struct drain_exec_result last;
        char *last_message;
        bool ended;
        struct drain_estimates *estimates; /* agent_engine_learn; NULL: not learning */
        char *self_ns, *self_name;         /* the agent's own pod, from the drain request */
        uint64_t deadline;
        unsigned started, finished;
        void (*done)(void *userdata, bool drained);
        void *done_userdata;
        struct agent_engine_watch watch;
        /* drain.target_groups: ELBv2, signed with the instance role's credentials (made at the first drain,
         * when the notice names the region) */
        struct aws_creds_provider *creds;
        struct aws_credentials creds_copy;
        struct elbv2_client *elbv2;
};

static const char *const engine_no_env[] = { NULL };

static void engine_creds_refreshed(const struct aws_credentials *c, void *userdata)
{
        struct agent_engine *e = userdata;
        aws_credentials_clear(&e->creds_copy);
        if (aws_credentials_copy(&e->creds_copy, c) < 0)
                log_warning("agent: out of memory keeping the instance role's credentials");
}

static void engine_creds_first(int error, const struct aws_credentials *c, const char *message,
                               void *userdata)
{
        if (error < 0)
                log_warning(
                    "agent: no instance role credentials for ELBv2 (%s): no pod waits for its target group",
                    message ? message : strerror(-error));
}

static const struct aws_credentials *engine_creds(void *userdata)
{
        struct agent_engine *e = userdata;
        return e->creds_copy.access_key_id ? &e->creds_copy : NULL;
}

/* The ELBv2 client of the drains (NULL without drain.target_groups or a region). */
static struct elbv2_client *engine_elbv2(struct agent_engine *e, const struct agent_drain_request *req)
{
        const char *region =
            e->cfg && !isempty(e->cfg->aws.region) ? e->cfg->aws.region : req->notice->region;
        struct loop *l = kube_client_loop(e->kube);
        int r;

        if (e->elbv2 || !e->cfg || !e->cfg->drain.target_groups || isempty(region))
                return e->elbv2;
        if (!e->creds) {
                r = aws_creds_provider_new(l,
                                           &(struct aws_creds_options){ .env = engine_no_env,
                                                                        .imds_endpoint = req->imds_endpoint,
                                                                        .on_refresh = engine_creds_refreshed,
                                                                        .userdata = e },
                                           &e->creds);
                if (r < 0 || aws_creds_get(e->creds, engine_creds_first, e) < 0) {
                        log_warning_errno(r, "agent: no instance role credentials for ELBv2");
                        return NULL;
                }
        }
        r = elbv2_client_new(l, NULL, region, engine_creds, e, &e->elbv2);
        if (r < 0)
                log_warning_errno(r, "agent: no ELBv2 client: no pod waits for its target group");
        return e->elbv2;
}

/* ---- the node effects' hooks ---- */

static void fx_started(void *userdata, const char *node, const struct notice *n, struct drain_exec *x)
{
        struct agent_engine *e = userdata;

        e->running = x;
        e->started++;
        if (e->watch.started)
                e->watch.started(e->watch.userdata, x);
}

static void fx_ended(void *userdata, const char *node, struct drain_exec *x,
                     const struct drain_exec_result *res)
{
        struct agent_engine *e = userdata;
        const char *outcome = drain_exec_outcome_to_string(res->outcome);

        if (x != e->running)
                return;
        e->finished++;
        log_full(res->outcome == DRAIN_EXEC_DRAINED ? LOG_NOTICE : LOG_WARNING, res->error, NULL,
                 "agent: drain ended: %s (%u evicted, %u forced, %u left)%s%s", outcome, res->evicted,
                 res->forced, res->left, res->message ? ": " : "", res->message ? res->message : "");
        free(e->last_message);
        e->last = *res;
        e->last_message = res->message ? strdup(res->message) : NULL;
        e->last.message = e->last_message;
        e->ended = true;
        e->running = NULL;
        /* The stops this drain saw go out now: the node may be gone soon. */
        drain_estimates_release(e->estimates);
        if (e->watch.ended)
                e->watch.ended(e->watch.userdata, x, res);
        if (e->done)
                e->done(e->done_userdata, res->outcome == DRAIN_EXEC_DRAINED);
}

/* x goes (replaced by an earlier deadline, stopped, reaped once it ended, or with the engine): the
 * watcher lets go of it first. */
static void fx_released(void *userdata, const char *node, struct drain_exec *x)
{
        struct agent_engine *e = userdata;

        if (e->watch.released)
                e->watch.released(e->watch.userdata, x);
        if (x == e->running)
                e->running = NULL;
}

/* ---- the actions ---- */

static int engine_drain(void *userdata, const struct agent_drain_request *req)
{
        struct agent_engine *e = userdata;
        struct node_drainer *d = node_effects_drainer(e->fx);
        int r;

        if (e->running && req->deadline_usec >= e->deadline)
                return 0; /* already draining by an earlier or the same deadline */
        if (free_and_strdup(&e->self_ns, req->self_namespace) < 0 ||
            free_and_strdup(&e->self_name, req->self_name) < 0)
                return -ENOMEM;
        d->self_namespace = e->self_ns;
        d->self_name = e->self_name;
        d->elbv2 = engine_elbv2(e, req);
        d->estimates = e->estimates;
        /* Read now, not while idle: the first verdict waits for it (within a bound). */
        if (e->estimates && (r = drain_estimates_refresh(e->estimates)) < 0)
                log_debug_errno(r, "agent: cannot read the kept estimates");
        /* An earlier deadline replaces the drain under way; the new one re-plans from the node as it is. */
        r = e->fx_ops.drain(e->fx, req->node, req->notice, req->deadline_usec);
        if (r < 0)
                return r;
        e->deadline = req->deadline_usec;
        return 0;
}

static void engine_notice_seen(void *userdata, const char *node, const struct notice *n)
{
        struct agent_engine *e = userdata;
        _cleanup_free_ char *human = NULL;

        if (!e->bus)
                return;
        (void)dispatch_notice_summary(n, clk_now(), &human);
        (void)alert_emit(
            e->bus, ALERT_NOTICE_RECEIVED, node,
            (const char *[]){ "kind", notice_kind_to_string(n->kind), "event_id", n->event_id, NULL }, "%s",
            human ? human : notice_kind_to_string(n->kind));
}

static int engine_soft_taint(void *userdata, const char *node, bool add)
{
        struct agent_engine *e = userdata;
        return e->fx_ops.soft_taint(e->fx, node, add);
}

static int engine_replacement(void *userdata, const char *node, const struct notice *n)
{
        struct agent_engine *e = userdata;
        return e->fx_ops.replacement_request(e->fx, node, n);
}

static int engine_uncordon(void *userdata, const char *node)
{
        struct agent_engine *e = userdata;

        e->fx_ops.drain_stop(e->fx, node);
        drain_estimates_release(e->estimates);
        return e->fx_ops.uncordon(e->fx, node);
}

static int engine_cordon(void *userdata, const char *node)
{
        struct agent_engine *e = userdata;
        return e->fx_ops.cordon(e->fx, node);
}

const struct agent_actions agent_engine_actions = {
        .drain = engine_drain,
        .soft_taint = engine_soft_taint,
        .replacement_request = engine_replacement,
        .uncordon = engine_uncordon,
        .cordon = engine_cordon,
        .notice_seen = engine_notice_seen,
};

int agent_engine_new(struct kube_client *kube, struct alert_bus *bus, const struct spotdrain_config *cfg,
                     struct metrics *m, struct agent_engine **ret)
{
        _cleanup_(agent_engine_freep) struct agent_engine *e = NULL;
        int r;

        if (!kube || !ret)
                return -EINVAL;
        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->kube = kube;
        e->bus = bus;
        e->cfg = cfg;
        /* The nodes draining beside this one have agents of their own: their drains go first by deadline,
         * as a controller's one ledger would have them. */
        r = node_effects_new(kube_client_loop(kube),
                             &(struct node_drainer){
                                 .kube = kube, .bus = bus, .cfg = cfg, .metrics = m, .follow_peers = true },
                             &(struct node_effects_hooks){ .drain_started = fx_started,
                                                           .drain_ended = fx_ended,
                                                           .drain_released = fx_released,
                                                           .userdata = e },
                             &e->fx);
        if (r < 0)
                return r;
        node_effects_dispatch_ops(e->fx, &e->fx_ops);
        *ret = TAKE_PTR(e);
        return 0;
}

struct agent_engine *agent_engine_free(struct agent_engine *e)
{
        if (!e)
                return NULL;
        node_effects_free(e->fx);
        drain_estimates_free(e->estimates);
        elbv2_client_free(e->elbv2); /* after the drains that borrowed it */
        aws_creds_provider_free(e->creds);
        aws_credentials_clear(&e->creds_copy);
        free(e->last_message);
        free(e->self_ns);
        free(e->self_name);
        free(e);
        return NULL;
}

int agent_engine_learn(struct agent_engine *e, const char *node, const char *namespace)
{
        if (!e || !node)
                return -EINVAL;
        if (e->estimates)
                return -EALREADY;
        uint64_t every = e->cfg && e->cfg->agent.estimates_write_usec ? e->cfg->agent.estimates_write_usec
                                                                      : 600 * UINT64_C(1000000);
        const char *name = e->cfg ? e->cfg->drain.estimates_configmap : NULL;
        struct drain_estimates_options o = {
                .namespace = namespace,
                .name = isempty(name) ? NULL : name,
                .node = node,
                .keep = e->cfg && !isempty(name),
                .read_on_demand = true,
                .save_interval_usec = every,
                .save_jitter_usec = every / 2,
                .expected_shutdown_fraction = e->cfg ? e->cfg->drain.expected_shutdown_fraction : 0,
        };
        return drain_estimates_start(e->kube, &o, &e->estimates);
}

static void engine_ended(void *userdata, bool drained)
{
        agent_drain_ended(userdata, drained);
}

void agent_follow_engine(struct agent *a, struct agent_engine *e)
{
        if (e)
                agent_engine_on_done(e, a ? engine_ended : NULL, a);
}

void agent_engine_on_done(struct agent_engine *e, void (*done)(void *userdata, bool drained), void *userdata)
{
        e->done = done;
        e->done_userdata = userdata;
}

void agent_engine_set_provision(struct agent_engine *e, struct prov_frontend *prov)
{
        if (e)
                node_effects_drainer(e->fx)->prov = prov;
}

void agent_engine_watch(struct agent_engine *e, const struct agent_engine_watch *w)
{
        e->watch = w ? *w : (struct agent_engine_watch){};
}

const struct drain_exec_result *agent_engine_result(const struct agent_engine *e)
{
        return e->ended ? &e->last : NULL;
}

unsigned agent_engine_started(const struct agent_engine *e)
{
        return e->started;
}

unsigned agent_engine_finished(const struct agent_engine *e)
{
        return e->finished;
}
