/* spotdrain simulate: the drains it follows, and the dispatcher's effects: direct delivery's node effects
 * (node.h, as the controller's) and each agent's through its actions. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "cli/help.h"
#include "cli/report.h"
#include "cli/simulate.h"
#include "spotdrain/agent.h"
#include "spotdrain/alert.h"
#include "spotdrain/config.h"
#include "spotdrain/controller.h"
#include "spotdrain/core.h"
#include "spotdrain/dispatch.h"
#include "spotdrain/elbv2.h"
#include "spotdrain/engine.h"
#include "spotdrain/httpd.h"
#include "spotdrain/imds.h"
#include "spotdrain/kube.h"
#include "spotdrain/kubeconfig.h"
#include "spotdrain/metrics.h"
#include "spotdrain/node.h"
#include "spotdrain/notice.h"
#include "spotdrain/provision.h"
#include "spotdrain/service.h"
#include "spotdrain/sigv4.h"
#include "spotdrain/sim.h"
#include "spotdrain/yaml.h"

/* ---- drains ---- */

struct sim_drain *simulate_drain_free(struct sim_drain *d)
{
        if (!d)
                return NULL;
        free(d->node);
        free(d);
        return NULL;
}

struct sim_drain *simulate_find_drain(const struct simulate *sm, const char *node)
{
        for (size_t i = 0; i < sm->n_drains; i++)
                if (streq(sm->drains[i]->node, node))
                        return sm->drains[i];
        return NULL;
}

/* A drain of node to follow, with room for it in sm->drains (the caller adds it). */
struct sim_drain *simulate_drain_get(struct simulate *sm, const char *node)
{
        struct sim_drain *d = simulate_find_drain(sm, node), **a;

        if (d)
                return d;
        d = calloc(1, sizeof(*d));
        a = realloc(sm->drains, (sm->n_drains + 1) * sizeof(*a));
        if (a)
                sm->drains = a;
        if (!d || !a || !(d->node = strdup(node))) {
                free(d);
                sm->error = log_error_errno(-ENOMEM, "out of memory");
                loop_exit(sm->loop, EXIT_ERROR);
                return NULL;
        }
        d->sm = sm;
        d->left_shown = UINT_MAX;
        sm->drains[sm->n_drains++] = d;
        return d;
}

void simulate_notice_received(struct simulate *sm, const char *node, const struct notice *n)
{
        _cleanup_free_ char *human = NULL;

        (void)dispatch_notice_summary(n, clk_now(), &human);
        (void)alert_emit(
            sm->bus, ALERT_NOTICE_RECEIVED, node,
            (const char *const[]){ "kind", notice_kind_to_string(n->kind), "delivery", sm->delivery, NULL },
            "%s", human ? human : notice_kind_to_string(n->kind));
}

/* ---- the dispatcher's effects: the node effects of direct delivery and each agent's engine ---- */

/* The drains are followed here for the timeline and the report: each drain as it starts, as it ends (not
 * one replaced or stopped) and before it is freed. */
static void follow_started(struct simulate *sm, const char *node, struct drain_exec *x)
{
        struct sim_drain *d = simulate_drain_get(sm, node);

        if (!d)
                return;
        d->x = x;
        d->done = false;
        if (sm->rec && report_rec_follow(sm->rec, sm->loop, x) < 0)
                log_warning("simulate: the report does not follow the drain of %s", node);
}

static void follow_ended(struct simulate *sm, const char *node, struct drain_exec *x,
                         const struct drain_exec_result *r)
{
        struct sim_drain *d = simulate_find_drain(sm, node);

        if (!d || d->x != x)
                return;
        d->done = true;
        if (r->outcome == DRAIN_EXEC_ERROR)
                simulate_timeline(sm, simulate_scenario_seconds(sm, clk_now()), d->node, "drain failed: %s",
                                  r->message ? r->message : strerror(-r->error));
}

/* x is freed (replaced by an earlier deadline, stopped, or reaped after its end): nothing waits for it any
 * more. */
static void follow_released(struct simulate *sm, const char *node, struct drain_exec *x)
{
        struct sim_drain *d = simulate_find_drain(sm, node);

        report_rec_unfollow(sm->rec, x);
        if (d && d->x == x) {
                d->x = NULL;
                d->done = true;
        }
}

/* Direct delivery stands for one process draining every node: the node effects the controller acts
 * through, its drains sharing one ledger. */
static void direct_started(void *userdata, const char *node, const struct notice *n, struct drain_exec *x)
{
        follow_started(userdata, node, x);
}

static void direct_ended(void *userdata, const char *node, struct drain_exec *x,
                         const struct drain_exec_result *r)
{
        struct simulate *sm = userdata;

        follow_ended(sm, node, x, r);
        if (sm->dispatch)
                dispatch_drain_finished(sm->dispatch, node, r->outcome == DRAIN_EXEC_DRAINED);
}

static void direct_released(void *userdata, const char *node, struct drain_exec *x)
{
        follow_released(userdata, node, x);
}

static void direct_notice_seen(void *userdata, const char *node, const struct notice *n)
{
        simulate_notice_received(userdata, node, n);
}

int simulate_start_direct(struct simulate *sm)
{
        struct node_drainer nd = { .kube = sm->client,
                                   .bus = sm->bus,
                                   .cfg = sm->cfg,
                                   .metrics = sm->metrics,
                                   .prov = sm->prov,
                                   .shared_ledger = &sm->ledger,
                                   .elbv2 = sm->elbv2 };
        struct node_effects_hooks hooks = { .drain_started = direct_started,
                                            .drain_ended = direct_ended,
                                            .drain_released = direct_released,
                                            .ops = { .notice_seen = direct_notice_seen },
                                            .userdata = sm };
        struct dispatch_options dopt = {};
        struct dispatch_ops ops;
        int r;

        dispatch_options_from_config(sm->cfg, &dopt);
        r = node_effects_new(sm->loop, &nd, &hooks, &sm->effects);
        if (r < 0)
                return log_error_errno(r, "cannot set up the dispatcher's effects");
        node_effects_dispatch_ops(sm->effects, &ops);
        r = dispatch_new(sm->loop, &dopt, &ops, sm->effects, &sm->dispatch);
        if (r < 0)
                return log_error_errno(r, "cannot set up the dispatcher");
        for (size_t i = 0; i < sm->n_nodes; i++)
                if ((r = dispatch_node_set(sm->dispatch, sim_node_name(sm->sim, i),
                                           sim_node_instance_id(sm->sim, i))) < 0)
                        return log_error_errno(r, "cannot index node %s", sim_node_name(sm->sim, i));
        return 0;
}

/* Each agent acts through the engine's actions, as spotdrain agent does. */
static void sim_agent_drain_started(void *userdata, struct drain_exec *x)
{
        struct sim_agent *sa = userdata;
        follow_started(sa->sm, sa->node, x);
}

static void sim_agent_drain_ended(void *userdata, struct drain_exec *x, const struct drain_exec_result *r)
{
        struct sim_agent *sa = userdata;
        follow_ended(sa->sm, sa->node, x, r);
}

static void sim_agent_drain_released(void *userdata, struct drain_exec *x)
{
        struct sim_agent *sa = userdata;
        follow_released(sa->sm, sa->node, x);
}

int simulate_start_agents(struct simulate *sm)
{
        int r;

        r = sim_imds_start(sm->sim, "127.0.0.1", &sm->imds);
        if (r < 0)
                return log_error_errno(r, "cannot start the simulator's IMDS surface");
        sm->agents = calloc(sm->n_nodes + 1, sizeof(*sm->agents));
        if (!sm->agents)
                return log_error_errno(-ENOMEM, "out of memory");
        for (size_t i = 0; i < sm->n_nodes; i++) {
                struct sim_agent *sa = &sm->agents[i];
                struct imds_options io = { .endpoint = sim_imds_url(sm->imds, i) };
                struct agent_options ao = { .node_name = sim_node_name(sm->sim, i),
                                            .poll_interval_usec = sm->cfg->imds.poll_interval_usec };

                /* The dispatcher of `spotdrain agent`, from the same configuration. */
                dispatch_options_from_config(sm->cfg, &ao.dispatch);
                sa->sm = sm;
                sa->node = sim_node_name(sm->sim, i);
                r = imds_client_new(sm->loop, &io, &sa->imds);
                if (r >= 0)
                        r = service_kube_new(sm->svc, &sa->client);
                if (r >= 0)
                        r = agent_engine_new(sa->client, sm->bus, sm->cfg, sm->metrics, &sa->engine);
                if (r >= 0) {
                        agent_engine_set_provision(sa->engine, sm->prov);
                        agent_engine_watch(
                            sa->engine, &(struct agent_engine_watch){ .started = sim_agent_drain_started,
                                                                      .ended = sim_agent_drain_ended,
                                                                      .released = sim_agent_drain_released,
                                                                      .userdata = sa });
                        r = agent_new(sm->loop, sa->imds, sa->client, &ao, &agent_engine_actions, sa->engine,
                                      &sa->agent);
                }
                if (r >= 0)
                        r = agent_start(sa->agent);
                if (r < 0)
                        return log_error_errno(r, "cannot start the agent of %s", sim_node_name(sm->sim, i));
        }
        return 0;
}
