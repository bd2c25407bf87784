/* spotdrain simulate: the drains it follows, and the dispatcher's effects, direct delivery's own and each
 * agent's through its actions. */
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
        if (!d->borrowed)
                drain_exec_free(d->x);
        free(d->node);
        free(d);
        return NULL;
}

static void drain_done(struct drain_exec *x, const struct drain_exec_result *r, void *userdata)
{
        struct sim_drain *d = userdata;

        d->done = true;
        if (d->sm->dispatch)
                dispatch_drain_finished(d->sm->dispatch, d->node, r->outcome == DRAIN_EXEC_DRAINED);
        if (r->outcome == DRAIN_EXEC_ERROR)
                simulate_timeline(d->sm, simulate_scenario_seconds(d->sm, clk_now()), d->node,
                                  "drain failed: %s", r->message ? r->message : strerror(-r->error));
}

struct sim_drain *simulate_find_drain(const struct simulate *sm, const char *node)
{
        for (size_t i = 0; i < sm->n_drains; i++)
                if (streq(sm->drains[i]->node, node))
                        return sm->drains[i];
        return NULL;
}

/* A drain of node to follow, with room for it in sm->drains (the caller adds it). */
struct sim_drain *simulate_drain_new(struct simulate *sm, const char *node)
{
        struct sim_drain *d = calloc(1, sizeof(*d)),
                         **a = realloc(sm->drains, (sm->n_drains + 1) * sizeof(*a));

        if (a)
                sm->drains = a;
        if (!d || !a || !(d->node = strdup(node))) {
                free(d);
                return NULL;
        }
        d->sm = sm;
        d->left_shown = UINT_MAX;
        return d;
}

int simulate_start_drain(struct simulate *sm, struct kube_client *client, const char *node,
                         const struct notice *n, uint64_t deadline)
{
        /* Agents go behind the drains of other nodes, as the DaemonSet's do; direct delivery stands for one
         * process draining every node, its drains sharing one ledger. */
        struct node_drainer nd = { .kube = client,
                                   .bus = sm->bus,
                                   .cfg = sm->cfg,
                                   .metrics = sm->metrics,
                                   .prov = sm->prov,
                                   .shared_ledger = streq(sm->delivery, "direct") ? &sm->ledger : NULL,
                                   .follow_peers = streq(sm->delivery, "imds"),
                                   .elbv2 = sm->elbv2 };
        struct sim_drain *d;
        int r;

        /* A second notice for a node already draining: the drain under way carries on. */
        if (simulate_find_drain(sm, node))
                return 0;
        d = simulate_drain_new(sm, node);
        if (!d)
                return -ENOMEM;
        r = node_drain_start(&nd, d->node, n, deadline, drain_done, d, &d->x);
        if (r >= 0 && sm->rec)
                r = report_rec_follow(sm->rec, sm->loop, d->x);
        if (r < 0) {
                simulate_drain_free(d);
                return r;
        }
        sm->drains[sm->n_drains++] = d;
        return 0;
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

/* ---- the dispatcher's effects: direct delivery's own dispatcher, and each agent's through its actions ----
 */

static void direct_notice_seen(void *userdata, const char *node, const struct notice *n)
{
        simulate_notice_received(userdata, node, n);
}

static int direct_replacement(void *userdata, const char *node, const struct notice *n)
{
        struct simulate *sm = userdata;
        /* The provisioner decides which kinds start a replacement, and launches once per instance. */
        return prov_frontend_request(sm->prov, node, n);
}

static int drain_through(struct simulate *sm, struct kube_client *client, const char *node,
                         const struct notice *n, uint64_t deadline)
{
        /* The dispatcher's deadline rules (e.g. maintenance windows) decide the drain's deadline. */
        int r = simulate_start_drain(sm, client, node, n, deadline);
        if (r < 0)
                log_error_errno(r, "cannot start draining %s", node);
        return r;
}

static int direct_drain(void *userdata, const char *node, const struct notice *n, uint64_t deadline)
{
        struct simulate *sm = userdata;
        return drain_through(sm, sm->client, node, n, deadline);
}

/* A notice whose kind's action is cordon (notices.KIND.action). */
static int cordon_through(struct kube_client *client, const char *node)
{
        return node_cordon(client, node, true, NULL, (void *)"cordon", NULL);
}

static int direct_cordon(void *userdata, const char *node)
{
        return cordon_through(((struct simulate *)userdata)->client, node);
}

static const struct dispatch_ops sim_direct_ops = {
        .drain = direct_drain,
        .cordon = direct_cordon,
        .replacement_request = direct_replacement,
        .notice_seen = direct_notice_seen,
};

int simulate_start_direct(struct simulate *sm)
{
        struct dispatch_options dopt = {};
        dispatch_options_from_config(sm->cfg, &dopt);
        int r = dispatch_new(sm->loop, &dopt, &sim_direct_ops, sm, &sm->dispatch);
        if (r < 0)
                return log_error_errno(r, "cannot set up the dispatcher");
        for (size_t i = 0; i < sm->n_nodes; i++)
                if ((r = dispatch_node_set(sm->dispatch, sim_node_name(sm->sim, i),
                                           sim_node_instance_id(sm->sim, i))) < 0)
                        return log_error_errno(r, "cannot index node %s", sim_node_name(sm->sim, i));
        return 0;
}

/* Each agent acts through the engine's actions, as spotdrain agent does; its drains are followed here for
 * the timeline and the report. */
static void sim_agent_drain_started(void *userdata, struct drain_exec *x)
{
        struct sim_agent *sa = userdata;
        struct simulate *sm = sa->sm;
        struct sim_drain *d = simulate_find_drain(sm, sa->node);

        if (!d) {
                d = simulate_drain_new(sm, sa->node);
                if (!d) {
                        sm->error = log_error_errno(-ENOMEM, "out of memory");
                        loop_exit(sm->loop, EXIT_ERROR);
                        return;
                }
                sm->drains[sm->n_drains++] = d;
        }
        d->x = x;
        d->borrowed = true;
        d->done = false;
        if (sm->rec && report_rec_follow(sm->rec, sm->loop, x) < 0)
                log_warning("simulate: the report does not follow the drain of %s", sa->node);
}

static void sim_agent_drain_ended(void *userdata, struct drain_exec *x, const struct drain_exec_result *r)
{
        struct sim_agent *sa = userdata;
        struct sim_drain *d = simulate_find_drain(sa->sm, sa->node);

        if (!d || d->x != x)
                return;
        d->done = true;
        if (r->outcome == DRAIN_EXEC_ERROR)
                simulate_timeline(sa->sm, simulate_scenario_seconds(sa->sm, clk_now()), d->node,
                                  "drain failed: %s", r->message ? r->message : strerror(-r->error));
}

/* The engine frees x (replaced by an earlier deadline, or stopped): nothing waits for it any more. */
static void sim_agent_drain_released(void *userdata, struct drain_exec *x)
{
        struct sim_agent *sa = userdata;
        struct sim_drain *d = simulate_find_drain(sa->sm, sa->node);

        report_rec_unfollow(sa->sm->rec, x);
        if (d && d->x == x) {
                d->x = NULL;
                d->done = true;
        }
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
