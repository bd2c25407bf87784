/* spotdrain simulate SCENARIO: the built-in simulator plays the cluster and AWS in this process, the real
 * drain engine acts on it through the simulator's Kubernetes API, and the run ends with a timeline (or the
 * docs/contracts.md §4 result with --json).
 *
 * Clocks: the model's clock and the engine clock are started together with the same scale, so an engine
 * instant is the simulator's wall-clock instant of a scenario time (sim_wall_usec) and every deadline keeps
 * its meaning at any --time-scale.
 *
 * Notices reach the engine the same way whatever delivered them (notice_received() tells, start_drain()
 * acts), each through the one dispatcher (dispatch.h) — the agent's, the controller's, or direct's own:
 *  - "imds" (agent mode): one real agent poll loop (agent.h) per scenario node, each reading that node's
 *    metadata service on the simulator's IMDS surface (imds_surface.h) and acting through spotdrain
 *    agent's own actions (agent_engine_actions: the drain, the soft taint, the undo) with a client (and
 *    rate limit) of its own, exactly as the DaemonSet would; its drains are followed for the timeline;
 *  - "sqs" (controller mode): the real controller (controller.h) long-polls the simulator's SQS queue, where
 *    each notice arrives as the EventBridge event EC2 would send; the controller drains through the engine
 *    itself, so its drains are followed through their alerts;
 *  - "direct" (--delivery direct): a short timer on the engine clock reads the model's notices
 *    (sim_node_notice), turns each new one into a struct notice and submits it to a dispatcher that
 *    knows every scenario node's instance.
 * Rebalance recommendations are told (notice-received) and ask for capacity; the agents and the controller
 * also set the soft taint (and revert it), direct delivery does not. */
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

#define USEC_PER_SEC UINT64_C(1000000)
/* How often (engine clock, i.e. scenario time) the direct source looks at the model: well inside the 1 s in
 * which drain-infeasible must follow a notice. */
#define POLL_USEC (100 * UINT64_C(1000))
/* Real time allowed beyond the scenario's own length before the run is declared stuck. */
#define SLACK_REAL_USEC (30 * USEC_PER_SEC)

static void cjson_freep(cJSON **p)
{
        cJSON_Delete(*p);
}

struct sim_drain {
        struct simulate *sm;
        char *node;
        struct drain_exec *x;
        bool borrowed; /* x is an agent engine's (it frees it) */
        bool done;
        bool cordon_shown, plan_shown;
        unsigned left_shown; /* pods left at the last progress line; UINT_MAX before the first */
        unsigned evicted_shown, forced_shown;
        /* The two estimates of its first judgement, as its drain-completed or deadline-missed gave them:
         * forced and killed, each with every stop never seen at once [0] and at its whole grace [1]. */
        bool estimated;
        long forced_est[2], killed_est[2];
};

struct sim_node_seen {
        bool interruption;
        bool rebalance;
};

/* The IMDS delivery: an agent per scenario node, with a Kubernetes client (and rate limit) of its own as
 * the DaemonSet's pods have. */
struct sim_agent {
        struct simulate *sm;
        const char *node;
        struct imds_client *imds;
        struct kube_client *client;
        struct agent_engine *engine; /* the actions of spotdrain agent, on this agent's client */
        struct agent *agent;
};

struct simulate {
        struct cli_common common;
        const char *delivery_flag;
        const char *scenario_path;
        const char *metrics_listen; /* --metrics-listen: /metrics while the scenario runs */
        /* The engines' services: the client, the alert bus, with --metrics-listen the registry of every
         * engine of the run and /metrics, and provisioning. sm's loop and kubeconfig, borrowed. */
        struct service *svc;
        struct metrics *metrics; /* the service's */
        double scale;
        const char *mode;

        struct spotdrain_config *cfg;
        struct ynode *tree;
        struct sim *sim;
        struct sim_server *srv;
        struct kube_config *kcfg;
        struct loop *loop;
        struct kube_client *client; /* the service's */
        struct alert_bus *bus;      /* the service's */
        /* Direct delivery stands for one process draining every node: its drains share PDB slots. Agents
         * are one process per node, so each of their drains keeps a private ledger, following the drains
         * of the other nodes through the API. */
        struct drain_ledger *ledger;
        struct dispatch *dispatch; /* direct delivery */
        struct timer *poll;
        struct sim_imds *imds;
        struct sim_agent *agents;
        struct sim_sqs *sqs;
        struct controller *controller;
        struct aws_credentials sqs_credentials;
        /* Provisioning (the scenario's provisioning: section): the simulator's EC2 surface, and the
         * provisioner of the agent and direct deliveries (the controller builds its own). */
        struct sim_ec2 *ec2;
        struct prov_frontend *prov; /* the service's */
        struct aws_credentials ec2_credentials;
        /* drain.target_groups: ELBv2 on the EC2 surface, signed with the simulator's key. */
        struct elbv2_client *elbv2;

        const char *delivery;
        uint64_t wall0;           /* engine instant of scenario time 0 */
        double last_event_at;     /* the scenario's last event; -1 when it has none */
        double model_progress_at; /* next look at the controller's drains in the model */
        struct sim_node_seen *seen;
        size_t n_nodes;
        struct sim_drain **drains;
        size_t n_drains;
        bool finished;
        int error;
        /* --report FILE: the timeline page, from what the engine's client and bus saw. */
        const char *report_path;
        struct report *report;
        struct report_rec *rec;
};

static void usage(FILE *f)
{
        fprintf(f,
                "usage: spotdrain simulate SCENARIO [--time-scale N] [--mode agent|controller] [--json]\n"
                "                          [--delivery imds|sqs|direct] [--metrics-listen HOST:PORT]\n"
                "                          [--report FILE.html]\n"
                "                          [--config FILE] [--log-level LEVEL] [--log-format FORMAT]\n"
                "Runs the scenario on the built-in simulator with the real drain engine; prints a timeline\n"
                "(or the simulation result as JSON). Times are scenario seconds.\n"
                "exit status: 0 every interrupted node drained in time, 3 otherwise, 1 error, 2 usage\n");
}

static double scenario_seconds(const struct simulate *sm, uint64_t engine_usec)
{
        return ((double)engine_usec - (double)sm->wall0) / (double)USEC_PER_SEC;
}

/* One line of the timeline, printed as it happens (not with --json). */
static void timeline(const struct simulate *sm, double at, const char *node, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void timeline(const struct simulate *sm, double at, const char *node, const char *fmt, ...)
{
        va_list ap;

        if (sm->common.json)
                return;
        printf("t=%7.1fs  %-14s ", at, node ? node : "");
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
        fflush(stdout);
}

/* ---- alerts: the simulator's result and the timeline ---- */

static void show_progress(struct simulate *sm, struct sim_drain *d);
static struct sim_drain *find_drain(const struct simulate *sm, const char *node);
static void follow_controller_drain(struct simulate *sm, const struct alert *a);

/* The pair of estimates an ending drain's alert carries (drain_outlook_add_fields), kept for the result. */
static void keep_estimates(struct sim_drain *d, const struct alert *a)
{
        static const char *const keys[] = { "forced_at_once", "forced_whole_grace", "killed_at_once",
                                            "killed_whole_grace" };
        long v[4];
        size_t found = 0;

        if (!d)
                return;
        for (size_t k = 0; k < 4; k++)
                for (const char *const *f = a->fields; f && f[0] && f[1]; f += 2)
                        if (streq(f[0], keys[k])) {
                                char *end;
                                errno = 0;
                                v[k] = strtol(f[1], &end, 10);
                                found += errno == 0 && end != f[1] && *end == '\0' && v[k] >= 0;
                                break;
                        }
        if (found < 4)
                return;
        d->estimated = true;
        d->forced_est[0] = v[0];
        d->forced_est[1] = v[1];
        d->killed_est[0] = v[2];
        d->killed_est[1] = v[3];
}

/* Each node's drain's two estimates beside what happened (docs/contracts.md, "The two estimates"): null
 * when its drain was never judged against a deadline. */
static bool add_estimates(const struct simulate *sm, cJSON *result)
{
        cJSON *node;
        cJSON_ArrayForEach (node, cJSON_GetObjectItem(result, "nodes")) {
                const struct sim_drain *d =
                    find_drain(sm, cJSON_GetStringValue(cJSON_GetObjectItem(node, "name")) ?: "");
                if (!d || !d->estimated) {
                        if (!cJSON_AddNullToObject(node, "estimates_at_start"))
                                return false;
                        continue;
                }
                cJSON *e = cJSON_AddObjectToObject(node, "estimates_at_start");
                for (size_t i = 0; e && i < 2; i++) {
                        cJSON *one =
                            cJSON_AddObjectToObject(e, i == 0 ? "stops_at_once" : "stops_at_whole_grace");
                        if (!one || !cJSON_AddNumberToObject(one, "forced", (double)d->forced_est[i]) ||
                            !cJSON_AddNumberToObject(one, "killed", (double)d->killed_est[i]))
                                return false;
                }
                if (!e)
                        return false;
        }
        return true;
}

static void alert_to_result(const struct alert *a, void *userdata)
{
        struct simulate *sm = userdata;
        struct sim_drain *d = a->node ? find_drain(sm, a->node) : NULL;

        sim_lock(sm->sim);
        sim_record_alert(sm->sim, alert_kind_to_string(a->kind), a->node, a->message, a->postmortem);
        sim_unlock(sm->sim);
        if (sm->controller && a->node)
                follow_controller_drain(sm, a);
        if (a->kind == ALERT_DRAIN_COMPLETED || a->kind == ALERT_DEADLINE_MISSED)
                keep_estimates(a->node ? find_drain(sm, a->node) : NULL, a);
        /* A pod evicted as planned is in the drain's progress line; a post-mortem's lines stay in the
         * result. */
        if (a->kind == ALERT_POD_EVICTED && !a->postmortem)
                return;
        /* What the drain did before the alert (cordon, plan) goes first on the timeline. */
        if (d && d->x)
                show_progress(sm, d);
        const char *m = a->message ? a->message : "";
        timeline(sm, scenario_seconds(sm, a->at_usec), a->node, "[%s] %.*s%s", alert_kind_to_string(a->kind),
                 (int)strcspn(m, "\n"), m, m[strcspn(m, "\n")] ? " (post-mortem in the result)" : "");
}

/* ---- drains ---- */

static struct sim_drain *sim_drain_free(struct sim_drain *d)
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
                timeline(d->sm, scenario_seconds(d->sm, clk_now()), d->node, "drain failed: %s",
                         r->message ? r->message : strerror(-r->error));
}

static struct sim_drain *find_drain(const struct simulate *sm, const char *node)
{
        for (size_t i = 0; i < sm->n_drains; i++)
                if (streq(sm->drains[i]->node, node))
                        return sm->drains[i];
        return NULL;
}

/* A drain of node to follow, with room for it in sm->drains (the caller adds it). */
static struct sim_drain *sim_drain_new(struct simulate *sm, const char *node)
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

static int start_drain(struct simulate *sm, struct kube_client *client, const char *node,
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
        if (find_drain(sm, node))
                return 0;
        d = sim_drain_new(sm, node);
        if (!d)
                return -ENOMEM;
        r = node_drain_start(&nd, d->node, n, deadline, drain_done, d, &d->x);
        if (r >= 0 && sm->rec)
                r = report_rec_follow(sm->rec, sm->loop, d->x);
        if (r < 0) {
                sim_drain_free(d);
                return r;
        }
        sm->drains[sm->n_drains++] = d;
        return 0;
}

static void notice_received(struct simulate *sm, const char *node, const struct notice *n)
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
        notice_received(userdata, node, n);
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
        int r = start_drain(sm, client, node, n, deadline);
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

static int start_direct(struct simulate *sm)
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
        struct sim_drain *d = find_drain(sm, sa->node);

        if (!d) {
                d = sim_drain_new(sm, sa->node);
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
        struct sim_drain *d = find_drain(sa->sm, sa->node);

        if (!d || d->x != x)
                return;
        d->done = true;
        if (r->outcome == DRAIN_EXEC_ERROR)
                timeline(sa->sm, scenario_seconds(sa->sm, clk_now()), d->node, "drain failed: %s",
                         r->message ? r->message : strerror(-r->error));
}

/* The engine frees x (replaced by an earlier deadline, or stopped): nothing waits for it any more. */
static void sim_agent_drain_released(void *userdata, struct drain_exec *x)
{
        struct sim_agent *sa = userdata;
        struct sim_drain *d = find_drain(sa->sm, sa->node);

        report_rec_unfollow(sa->sm->rec, x);
        if (d && d->x == x) {
                d->x = NULL;
                d->done = true;
        }
}

static int start_agents(struct simulate *sm)
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

/* ---- the SQS delivery: the controller ---- */

/* The controller runs its drains itself: a drain is known from its notice (or its first alert) and ends with
 * drain-completed or deadline-missed. */
static void follow_controller_drain(struct simulate *sm, const struct alert *a)
{
        struct sim_drain *d = find_drain(sm, a->node), **v;

        if (a->kind == ALERT_REPLACEMENT_LAUNCHED || a->kind == ALERT_REPLACEMENT_FAILED ||
            a->kind == ALERT_LAUNCH_ABANDONED)
                return;
        /* A notice starts a drain, unless it is a recommendation or a launch. */
        if (a->kind == ALERT_NOTICE_RECEIVED) {
                const char *kind = NULL;
                for (const char *const *f = a->fields; f && f[0] && f[1]; f += 2)
                        if (streq(f[0], "kind"))
                                kind = f[1];
                if (!kind || streq(kind, notice_kind_to_string(NOTICE_REBALANCE_RECOMMENDATION)) ||
                    streq(kind, notice_kind_to_string(NOTICE_ASG_TEST_NOTIFICATION)) ||
                    streq(kind, notice_kind_to_string(NOTICE_ASG_LIFECYCLE_LAUNCH)))
                        return;
        }
        if (!d) {
                d = calloc(1, sizeof(*d));
                v = realloc(sm->drains, (sm->n_drains + 1) * sizeof(*v));
                if (v)
                        sm->drains = v;
                if (!d || !v || !(d->node = strdup(a->node))) {
                        sim_drain_free(d);
                        sm->error = log_error_errno(-ENOMEM, "out of memory");
                        loop_exit(sm->loop, EXIT_ERROR);
                        return;
                }
                d->sm = sm;
                d->left_shown = UINT_MAX;
                sm->drains[sm->n_drains++] = d;
        }
        if (a->kind == ALERT_DRAIN_COMPLETED || a->kind == ALERT_DEADLINE_MISSED)
                d->done = true;
}

static const struct aws_credentials *sqs_credentials(void *userdata)
{
        struct simulate *sm = userdata;
        return &sm->sqs_credentials;
}

static int start_controller(struct simulate *sm)
{
        static char key_id[] = SIM_SQS_ACCESS_KEY_ID, secret[] = SIM_SQS_SECRET_ACCESS_KEY,
                    source[] = "simulator";
        const char *zone = sm->n_nodes > 0 ? sim_node_zone(sm->sim, 0) : NULL;
        char region[NOTICE_REGION_SIZE] = "us-east-1";
        int r;

        /* The region is the first node's zone without its letter. */
        if (zone && strlen(zone) > 1 && strlen(zone) < sizeof(region))
                snprintf(region, sizeof(region), "%.*s", (int)strlen(zone) - 1, zone);
        sm->sqs_credentials = (struct aws_credentials){ .access_key_id = key_id,
                                                        .secret_access_key = secret,
                                                        .source = source };
        r = sim_sqs_start(sm->sim, "127.0.0.1", &sm->sqs);
        if (r < 0)
                return log_error_errno(r, "cannot start the simulator's SQS surface");
        /* Launch hooks (asg-launch) are completed against the simulated Auto Scaling, which takes the
         * queue's key too. */
        sim_lock(sm->sim);
        bool launches = sim_has_launch_hook(sm->sim);
        sim_unlock(sm->sim);
        if (launches && !sm->ec2 && (r = sim_ec2_start(sm->sim, "127.0.0.1", &sm->ec2)) < 0)
                return log_error_errno(r, "cannot start the simulator's Auto Scaling surface");
        struct controller_options co = { .queue_url = sim_sqs_queue_url(sm->sqs),
                                         .region = region,
                                         .sqs_endpoint = sim_sqs_url(sm->sqs),
                                         .asg_endpoint = launches ? sim_ec2_url(sm->ec2) : NULL,
                                         .elbv2_endpoint = sm->elbv2 ? sim_ec2_url(sm->ec2) : NULL,
                                         .credentials = sqs_credentials,
                                         .credentials_userdata = sm,
                                         .cfg = sm->cfg,
                                         .metrics = sm->metrics,
                                         .no_leader_election = true };
        r = controller_new(sm->loop, sm->client, sm->bus, &co, &sm->controller);
        if (r >= 0)
                r = controller_start(sm->controller);
        if (r < 0)
                return log_error_errno(r, "cannot start the controller");
        return 0;
}

/* ---- load balancers: the simulator's ELBv2 ---- */

static const struct aws_credentials *ec2_credentials(void *userdata);

/* The target groups of the scenario's workloads are on the EC2 surface's listener; the drains ask it with
 * the simulator's key. */
static int start_elbv2(struct simulate *sm)
{
        static char key_id[] = SIM_EC2_ACCESS_KEY_ID, secret[] = SIM_EC2_SECRET_ACCESS_KEY,
                    source[] = "simulator";
        int r;

        if (!sm->ec2 && (r = sim_ec2_start(sm->sim, "127.0.0.1", &sm->ec2)) < 0)
                return log_error_errno(r, "cannot start the simulator's ELBv2 surface");
        sm->ec2_credentials = (struct aws_credentials){ .access_key_id = key_id,
                                                        .secret_access_key = secret,
                                                        .source = source };
        const char *zone = sm->n_nodes > 0 ? sim_node_zone(sm->sim, 0) : "us-east-1a";
        _cleanup_free_ char *region = strndup(zone, strlen(zone) > 1 ? strlen(zone) - 1 : 0);
        if (!region)
                return log_error_errno(-ENOMEM, "cannot start the ELBv2 client");
        r = elbv2_client_new(sm->loop, sim_ec2_url(sm->ec2), region, ec2_credentials, sm, &sm->elbv2);
        if (r < 0)
                return log_error_errno(r, "cannot start the ELBv2 client");
        return 0;
}

/* ---- provisioning: the simulator's EC2 ---- */

static const struct aws_credentials *ec2_credentials(void *userdata)
{
        struct simulate *sm = userdata;
        return &sm->ec2_credentials;
}

/* Adds value to the list key (whose values are *listp) unless it is there already. */
static int config_list_add(struct simulate *sm, const char *key, char *const *listp, const char *value)
{
        char *const *list = listp;
        _cleanup_(buf_free) struct buf b = { 0 };
        _cleanup_free_ char *error = NULL;

        for (size_t i = 0; list && list[i]; i++) {
                if (streq(list[i], value))
                        return 0;
                if (buf_printf(&b, "%s,", list[i]) < 0)
                        return -ENOMEM;
        }
        if (buf_printf(&b, "%s", value) < 0)
                return -ENOMEM;
        return config_set_value(sm->cfg, key, b.data, &error);
}

/* The scenario's provisioning: section turns provisioning on, against the simulator's EC2: its subnets
 * (one per zone of the scenario's nodes), a launch template name, the families of the instance types on
 * offer, unless the configuration says otherwise. Requirements (provision.max_memory, ...) stay the
 * configuration's. */
static int start_provisioning(struct simulate *sm)
{
        static char key_id[] = SIM_EC2_ACCESS_KEY_ID, secret[] = SIM_EC2_SECRET_ACCESS_KEY,
                    source[] = "simulator";
        bool subnets = sm->cfg->provision.subnets && sm->cfg->provision.subnets[0],
             families = sm->cfg->provision.families && sm->cfg->provision.families[0];
        _cleanup_free_ char *error = NULL;
        int r;

        r = sim_ec2_start(sm->sim, "127.0.0.1", &sm->ec2);
        if (r < 0)
                return log_error_errno(r, "cannot start the simulator's EC2 surface");
        r = config_set_value(sm->cfg, "provision.enabled", "true", &error);
        if (r >= 0)
                r = config_set_value(sm->cfg, "provision.endpoint", sim_ec2_url(sm->ec2), &error);
        if (r >= 0 && isempty(sm->cfg->provision.launch_template))
                r = config_set_value(sm->cfg, "provision.launch_template", "spotdrain-simulate", &error);
        for (size_t i = 0; r >= 0 && !subnets && i < sm->n_nodes; i++) {
                _cleanup_free_ char *spec = strprintf("%s%s=%s", SIM_EC2_SUBNET_PREFIX,
                                                      sim_node_zone(sm->sim, i), sim_node_zone(sm->sim, i));
                r = spec ? config_list_add(sm, "provision.subnets", sm->cfg->provision.subnets, spec)
                         : -ENOMEM;
        }
        YNODE_FOREACH (t, ynode_get(ynode_get(sm->tree, "provisioning"), "instance_types")) {
                const char *name = ynode_str(ynode_get(t, "name")), *dot = name ? strchr(name, '.') : NULL;
                _cleanup_free_ char *family = dot ? strndup(name, (size_t)(dot - name)) : NULL;
                if (r >= 0 && !families && dot)
                        r = family ? config_list_add(sm, "provision.families", sm->cfg->provision.families,
                                                     family)
                                   : -ENOMEM;
        }
        if (r >= 0 && isempty(sm->cfg->aws.region) && sm->n_nodes > 0) {
                const char *zone = sim_node_zone(sm->sim, 0);
                _cleanup_free_ char *region = strndup(zone, strlen(zone) > 1 ? strlen(zone) - 1 : 0);
                r = region ? config_set_value(sm->cfg, "aws.region", region, &error) : -ENOMEM;
        }
        if (r < 0)
                return log_error_reason(r, error, "cannot configure provisioning");
        sm->ec2_credentials = (struct aws_credentials){ .access_key_id = key_id,
                                                        .secret_access_key = secret,
                                                        .source = source };
        /* The controller builds its provisioner from the same configuration, with its own credentials. */
        if (streq(sm->delivery, "sqs"))
                return 0;
        struct prov_frontend_options po = { .credentials = ec2_credentials, .credentials_userdata = sm };
        r = service_start_provision(sm->svc, &po);
        sm->prov = service_provision(sm->svc);
        return r;
}

/* ---- the direct notice source ---- */

static void notice_fill(const struct simulate *sm, size_t i, enum notice_kind kind, double at,
                        double deadline_at, struct notice *n)
{
        const char *zone = sim_node_zone(sm->sim, i);

        *n = (struct notice){ .kind = kind,
                              .notice_time = sim_wall_usec(sm->sim, at),
                              .deadline = deadline_at >= 0 ? sim_wall_usec(sm->sim, deadline_at) : 0 };
        snprintf(n->instance_id, sizeof(n->instance_id), "%s", sim_node_instance_id(sm->sim, i));
        snprintf(n->source, sizeof(n->source), "%s", sm->delivery);
        if (kind == NOTICE_SPOT_INTERRUPTION)
                snprintf(n->action, sizeof(n->action), "terminate");
        /* The region is the zone without its letter. */
        if (zone && strlen(zone) > 1)
                snprintf(n->region, sizeof(n->region), "%.*s", (int)strlen(zone) - 1, zone);
        snprintf(n->event_id, sizeof(n->event_id), "sim-%s-%s-%.3f", notice_kind_to_string(kind),
                 sim_node_name(sm->sim, i), at);
}

struct pending_notice {
        size_t node;
        struct notice n;
};

/* Reads the notices that appeared since the last look. Called with the model locked. */
static int collect_notices(struct simulate *sm, struct pending_notice **ret, size_t *ret_n)
{
        struct pending_notice *p = NULL;
        size_t n = 0;

        for (size_t i = 0; i < sm->n_nodes; i++) {
                const char *kind;
                double at, deadline_at, rebalance_at = sim_node_rebalance_at(sm->sim, i);
                bool interruption =
                    !sm->seen[i].interruption && sim_node_notice(sm->sim, i, &kind, &at, &deadline_at) >= 0;
                bool rebalance = !sm->seen[i].rebalance && rebalance_at >= 0;

                if (!interruption && !rebalance)
                        continue;
                struct pending_notice *a = realloc(p, (n + 2) * sizeof(*a));
                if (!a) {
                        free(p);
                        return -ENOMEM;
                }
                p = a;
                /* In time order: a rebalance recommendation comes before the interruption it warns of. */
                if (rebalance) {
                        sm->seen[i].rebalance = true;
                        p[n].node = i;
                        notice_fill(sm, i, NOTICE_REBALANCE_RECOMMENDATION, rebalance_at, -1, &p[n++].n);
                }
                if (interruption) {
                        int k = notice_kind_from_string(kind);
                        sm->seen[i].interruption = true;
                        p[n].node = i;
                        notice_fill(sm, i, k >= 0 ? (enum notice_kind)k : NOTICE_SPOT_INTERRUPTION, at,
                                    deadline_at, &p[n++].n);
                }
        }
        *ret = p;
        *ret_n = n;
        return 0;
}

/* ---- progress of the drains on the timeline ---- */

static void show_progress(struct simulate *sm, struct sim_drain *d)
{
        const struct drain_exec_result *r = drain_exec_result(d->x);
        const struct drain_plan *plan = drain_exec_plan(d->x);
        double now = scenario_seconds(sm, clk_now());

        if (!d->cordon_shown && r->cordoned_usec) {
                d->cordon_shown = true;
                timeline(sm, scenario_seconds(sm, r->cordoned_usec), d->node, "cordoned and tainted");
        }
        if (!d->plan_shown && plan && plan->n_nodes > 0) {
                const struct drain_plan_node *pn = drain_exec_plan_node(d->x);
                const struct drain_outlook *o = &r->outlook_first;
                double at = scenario_seconds(sm, r->planned_usec ? r->planned_usec : clk_now());
                d->plan_shown = true;
                if (o->known) {
                        /* Durations from this line's time, as in the alerts; the pair as every surface
                         * prints it. */
                        _cleanup_free_ char *text = drain_outlook_format(o);
                        timeline(sm, at, d->node, "plan: %zu pods to go, %.1f s to the deadline; %s",
                                 pn->n_to_go, scenario_seconds(sm, pn->deadline_usec) - at,
                                 text ? text : "no estimate");
                } else if (pn->finish_usec != DRAIN_NEVER)
                        timeline(sm, scenario_seconds(sm, r->planned_usec ? r->planned_usec : clk_now()),
                                 d->node,
                                 "plan: %zu pods to go, predicted finish t=%.1fs (deadline t=%.1fs)%s%s",
                                 pn->n_to_go, scenario_seconds(sm, pn->finish_usec),
                                 scenario_seconds(sm, pn->deadline_usec), pn->reason ? ": " : "",
                                 pn->reason ? pn->reason : "");
                else
                        timeline(sm, scenario_seconds(sm, r->planned_usec ? r->planned_usec : clk_now()),
                                 d->node, "plan: %zu pods to go, no finish predicted%s%s", pn->n_to_go,
                                 pn->reason ? ": " : "", pn->reason ? pn->reason : "");
        }
        if (!plan || d->done)
                return;
        unsigned left = drain_exec_pods_left(d->x, DRAIN_EXEC_ALL_PDBS);
        if (left == d->left_shown && r->evicted == d->evicted_shown && r->forced == d->forced_shown)
                return;
        d->left_shown = left;
        d->evicted_shown = r->evicted;
        d->forced_shown = r->forced;

        _cleanup_(buf_free) struct buf b = { 0 };
        if (buf_printf(&b, "%u evicted, %u forced, %u pods left", r->evicted, r->forced, left) < 0)
                return;
        bool open = false;
        for (size_t i = 0; i < plan->n_pdbs; i++) {
                unsigned n = drain_exec_pods_left(d->x, (int)i);
                if (n == 0)
                        continue;
                if (buf_printf(&b, "%s%s %u", open ? ", " : " (", plan->pdbs[i].name, n) < 0)
                        return;
                open = true;
        }
        unsigned no_pdb = drain_exec_pods_left(d->x, -1);
        if (no_pdb > 0 && buf_printf(&b, "%swithout PDB %u", open ? ", " : " (", no_pdb) < 0)
                return;
        if ((open || no_pdb > 0) && buf_printf(&b, ")") < 0)
                return;
        timeline(sm, now, d->node, "%s", b.data);
}

/* The controller's drains, as the simulator sees them: when the node was cordoned and how many of its
 * evictable pods are still there. Called with the model locked; prints nothing itself. */
struct model_progress {
        struct sim_drain *d;
        double cordoned_at; /* < 0: not shown now */
        unsigned left;
        bool changed;
};

static int model_progress(struct simulate *sm, struct model_progress **ret, size_t *ret_n)
{
        _cleanup_(cjson_freep) cJSON *result = NULL, *pods = NULL;
        struct model_progress *mp;
        size_t n = 0;
        const cJSON *o;

        mp = calloc(sm->n_drains + 1, sizeof(*mp));
        if (!mp)
                return -ENOMEM;
        for (size_t i = 0; i < sm->n_drains; i++)
                if (!sm->drains[i]->x && !sm->drains[i]->done)
                        mp[n++] = (struct model_progress){ .d = sm->drains[i], .cordoned_at = -1 };
        if (n > 0 && (!(result = sim_result(sm->sim)) || sim_list(sm->sim, SIM_POD, NULL, &pods) < 0)) {
                free(mp);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                struct sim_drain *d = mp[i].d;
                cJSON_ArrayForEach (o, cJSON_GetObjectItem(result, "nodes")) {
                        const cJSON *c = cJSON_GetObjectItem(o, "cordoned_at");
                        if (!d->cordon_shown && cJSON_IsNumber(c) &&
                            streq_ptr(cJSON_GetStringValue(cJSON_GetObjectItem(o, "name")), d->node)) {
                                d->cordon_shown = true;
                                mp[i].cordoned_at = c->valuedouble;
                        }
                }
                cJSON_ArrayForEach (o, pods) {
                        const cJSON *owner = cJSON_GetArrayItem(
                            cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "ownerReferences"), 0);
                        if (streq_ptr(kube_object_str(o, "spec.nodeName"), d->node) &&
                            !streq_ptr(cJSON_GetStringValue(cJSON_GetObjectItem(owner, "kind")),
                                       "DaemonSet"))
                                mp[i].left++;
                }
                mp[i].changed = mp[i].left != d->left_shown;
                d->left_shown = mp[i].left;
        }
        *ret = mp;
        *ret_n = n;
        return 0;
}

static void show_model_progress(struct simulate *sm, const struct model_progress *mp, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                if (mp[i].cordoned_at >= 0)
                        timeline(sm, mp[i].cordoned_at, mp[i].d->node, "cordoned");
                if (mp[i].changed)
                        timeline(sm, scenario_seconds(sm, clk_now()), mp[i].d->node,
                                 "%u pods left on the node", mp[i].left);
        }
}

/* ---- the end ---- */

/* The run is over once the scenario is (every event happened, every interrupted node is gone) and every
 * drain has ended; a drain still waiting for its deadline-missed gets a moment past the last deadline. It is
 * over earlier when nothing more can change in the result: the last event happened and every interrupted
 * node has been drained (its evictable pods are gone, so none can be killed) by a drain that has ended.
 * Called with the model locked. */
static bool nothing_left(struct simulate *sm)
{
        bool drains_done = true;

        for (size_t i = 0; i < sm->n_drains; i++)
                drains_done = drains_done && sm->drains[i]->done;
        /* The controller completes launch hooks (at the latest at controller.launch_ready_timeout_seconds):
         * their results belong in the result too. */
        if (streq(sm->delivery, "sqs") && sim_launch_hooks_pending(sm->sim) > 0)
                return false;
        if (sim_finished(sm->sim))
                return drains_done ||
                       sim_now(sm->sim) > fmax(sm->last_event_at, 0) + sim_budget_seconds(sm->sim) + 2;
        if (!drains_done || (sm->last_event_at >= 0 && sim_now(sm->sim) < sm->last_event_at))
                return false;

        _cleanup_(cjson_freep) cJSON *result = sim_result(sm->sim);
        const cJSON *node;
        if (!result)
                return false;
        cJSON_ArrayForEach (node, cJSON_GetObjectItem(result, "nodes")) {
                const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(node, "name"));
                if (!cJSON_IsNumber(cJSON_GetObjectItem(node, "drained_at")) || !name ||
                    !find_drain(sm, name))
                        return false;
        }
        return true;
}

static void poll_tick(void *userdata)
{
        struct simulate *sm = userdata;
        _cleanup_free_ struct pending_notice *p = NULL;
        _cleanup_free_ struct model_progress *mp = NULL;
        size_t n = 0, n_mp = 0;
        int r;

        sm->poll = NULL; /* released by the loop as it fired */

        sim_lock(sm->sim);
        uint64_t before = sim_resource_version(sm->sim);
        (void)sim_advance(sm->sim);
        if (sim_resource_version(sm->sim) != before)
                sim_broadcast(sm->sim);
        r = streq(sm->delivery, "direct") ? collect_notices(sm, &p, &n) : 0;
        /* Listing every pod is not cheap: once a scenario second is enough for the timeline. */
        if (r >= 0 && !sm->common.json && sim_now(sm->sim) >= sm->model_progress_at) {
                sm->model_progress_at = sim_now(sm->sim) + 1;
                r = model_progress(sm, &mp, &n_mp);
        }
        sim_unlock(sm->sim);
        if (r < 0) {
                sm->error = log_error_errno(r, "cannot read the simulator's state");
                loop_exit(sm->loop, EXIT_ERROR);
                return;
        }
        /* Outside the lock: the alert sinks take it themselves. */
        for (size_t i = 0; i < n; i++) {
                r = dispatch_submit(sm->dispatch, &p[i].n, DISPATCH_NO_TICKET, NULL);
                if (r < 0) {
                        sm->error = r;
                        loop_exit(sm->loop, EXIT_ERROR);
                        return;
                }
        }
        for (size_t i = 0; i < sm->n_drains; i++)
                if (sm->drains[i]->x)
                        show_progress(sm, sm->drains[i]);
        show_model_progress(sm, mp, n_mp);

        sim_lock(sm->sim);
        sm->finished = nothing_left(sm);
        sim_unlock(sm->sim);
        if (sm->finished)
                return;
        r = timer_start_in(sm->loop, POLL_USEC, poll_tick, sm, &sm->poll);
        if (r < 0) {
                sm->error = log_error_errno(r, "cannot arm the notice timer");
                loop_exit(sm->loop, EXIT_ERROR);
        }
}

/* ---- setup ---- */

/* The time of the scenario's last event (-1 when none), so that the run knows when no notice can come. */
static double last_event_at(const struct ynode *tree)
{
        double last = -1;
        YNODE_FOREACH (e, ynode_get(tree, "events")) {
                double at;
                if (ynode_double(ynode_get(e, "at"), &at) >= 0 && at > last)
                        last = at;
        }
        return last;
}

/* A kubeconfig reaching the listener, through a private file that is gone once read. */
static int load_kubeconfig(struct simulate *sm, char **ret_error)
{
        _cleanup_free_ char *text = sim_server_kubeconfig(sim_server_url(sm->srv), "simulate");
        const char *dir = getenv("TMPDIR");
        _cleanup_free_ char *path = strprintf("%s/spotdrain-simulate-XXXXXX", dir && *dir ? dir : "/tmp");
        int fd, r;

        if (!text || !path)
                return -ENOMEM;
        fd = mkstemp(path);
        if (fd < 0)
                return -errno;
        size_t len = strlen(text), off = 0;
        while (off < len) {
                ssize_t w = write(fd, text + off, len - off);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0) {
                        r = w < 0 ? -errno : -EIO;
                        close(fd);
                        unlink(path);
                        return r;
                }
                off += (size_t)w;
        }
        close(fd);
        r = kube_config_load_file(path, NULL, &sm->kcfg, ret_error);
        unlink(path);
        return r;
}

static int parse_args(struct simulate *sm, int argc, char **argv)
{
        static const struct option options[] = {
                { "time-scale", required_argument, NULL, 't' },
                { "mode", required_argument, NULL, 'm' },
                { "delivery", required_argument, NULL, 'd' },
                { "report", required_argument, NULL, 'R' },
                { "metrics-listen", required_argument, NULL, 'M' },
                { "json", no_argument, NULL, 'j' },
                { "config", required_argument, NULL, 'c' },
                { "log-format", required_argument, NULL, 'F' },
                { "log-level", required_argument, NULL, 'L' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        char *end;
        int c;

        optind = 1;
        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                if (cli_common_option(&sm->common, c, optarg))
                        continue;
                switch (c) {
                case 't':
                        sm->scale = strtod(optarg, &end);
                        if (*end || !(sm->scale > 0) || sm->scale > 1000) {
                                fprintf(stderr,
                                        "spotdrain simulate: --time-scale needs a number in (0, 1000]\n");
                                return EXIT_USAGE;
                        }
                        break;
                case 'm':
                        if (!streq(optarg, "agent") && !streq(optarg, "controller")) {
                                fprintf(stderr, "spotdrain simulate: --mode is agent or controller\n");
                                return EXIT_USAGE;
                        }
                        sm->mode = optarg;
                        break;
                case 'd':
                        if (!streq(optarg, "imds") && !streq(optarg, "sqs") && !streq(optarg, "direct")) {
                                fprintf(stderr, "spotdrain simulate: --delivery is imds, sqs or direct\n");
                                return EXIT_USAGE;
                        }
                        sm->delivery_flag = optarg;
                        break;
                case 'M':
                        sm->metrics_listen = optarg;
                        break;
                case 'R':
                        sm->report_path = optarg;
                        break;
                case 'h':
                        return cli_help(stdout, "simulate");
                default:
                        usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (argc - optind != 1) {
                usage(stderr);
                return EXIT_USAGE;
        }
        sm->scenario_path = argv[optind];
        return -1;
}

/* Everything up to the running simulator and the engine's client. Returns -1 to go on, else an exit status.
 */
static int setup(struct simulate *sm)
{
        _cleanup_free_ char *error = NULL;
        int r = cli_common_log_setup(&sm->common, "simulate", LOG_WARNING);

        if (r >= 0)
                return r;

        r = config_load(sm->common.config, NULL, &sm->cfg, &error);
        if (r >= 0)
                r = sim_scenario_load(sm->scenario_path, &sm->tree, &error);
        struct sim_options opt = { .time_scale = sm->scale, .mode = sm->mode };
        if (r >= 0)
                r = sim_new(sm->tree, &opt, &sm->sim, &error);
        if (r < 0) {
                fprintf(stderr, "spotdrain simulate: %s\n", error ? error : strerror(-r));
                return EXIT_ERROR;
        }
        sm->last_event_at = last_event_at(sm->tree);
        sm->n_nodes = sim_node_count(sm->sim);
        sm->seen = calloc(sm->n_nodes + 1, sizeof(*sm->seen));
        if (!sm->seen)
                return log_error_errno(-ENOMEM, "out of memory"), EXIT_ERROR;

        /* Before any thread starts: the loop blocks SIGTERM/SIGINT for every thread and handles them. */
        r = loop_new(&sm->loop);
        if (r < 0)
                return log_error_errno(r, "cannot set up the event loop"), EXIT_ERROR;
        signal(SIGPIPE, SIG_IGN);

        /* The same moment for both clocks, so that engine time is the simulator's wall time. */
        sim_lock(sm->sim);
        sim_start(sm->sim);
        clk_set_scale(sm->scale);
        sm->wall0 = sim_wall_usec(sm->sim, 0);
        sim_unlock(sm->sim);

        r = sim_server_start(sm->sim, "127.0.0.1:0", &sm->srv);
        if (r < 0)
                return log_error_errno(r, "cannot start the simulator's Kubernetes API"), EXIT_ERROR;
        r = load_kubeconfig(sm, &error);
        if (r < 0) {
                fprintf(stderr, "spotdrain simulate: cannot load the simulator's kubeconfig: %s\n",
                        error ? error : strerror(-r));
                return EXIT_ERROR;
        }
        /* The rate limit is per second of scenario time: the engine should see the API as fast as it would
         * be in real time, whatever the scale. */
        r = service_new(
            sm->cfg,
            &(struct service_options){ .flags = SERVICE_ALERTS |
                                                (sm->metrics_listen ? SERVICE_METRICS | SERVICE_OPS : 0),
                                       .loop = sm->loop,
                                       .kcfg = sm->kcfg,
                                       .qps_scale = sm->scale,
                                       .listen = sm->metrics_listen },
            &sm->svc);
        if (r < 0)
                return EXIT_ERROR;
        sm->metrics = service_metrics(sm->svc);
        sm->client = service_kube(sm->svc);
        sm->bus = service_alerts(sm->svc);
        r = alert_bus_add_sink(sm->bus, alert_to_result, sm);
        if (r >= 0 && sm->report_path) {
                _cleanup_free_ char *title = strprintf("simulate %s", sim_scenario_name(sm->sim));
                r = title ? report_new(title, &sm->report) : -ENOMEM;
                if (r >= 0)
                        r = report_rec_start(sm->report, sm->client, sm->bus, NULL, sm->wall0, &sm->rec);
        }
        if (r < 0)
                return log_error_errno(r, "cannot set up the engine"), EXIT_ERROR;
        /* Agent mode goes through IMDS and the agent, controller mode through SQS and the controller. */
        sm->delivery = sm->delivery_flag                        ? sm->delivery_flag
                       : streq(sim_mode(sm->sim), "controller") ? "sqs"
                                                                : "imds";
        if (ynode_get(sm->tree, "provisioning") && start_provisioning(sm) < 0)
                return EXIT_ERROR;
        if (sm->cfg->drain.target_groups && start_elbv2(sm) < 0)
                return EXIT_ERROR;
        if (streq(sm->delivery, "imds") && start_agents(sm) < 0)
                return EXIT_ERROR;
        if (streq(sm->delivery, "direct") && start_direct(sm) < 0)
                return EXIT_ERROR;
        if (streq(sm->delivery, "sqs") && start_controller(sm) < 0)
                return EXIT_ERROR;
        if (streq(sm->delivery, "sqs") && sim_budget_seconds(sm->sim) != 120)
                log_warning("the EventBridge spot warning carries no deadline (it is always 2 minutes): the "
                            "controller drains by notice + 120 s, not by the scenario's budget of %g s",
                            sim_budget_seconds(sm->sim));
        return -1;
}

static void teardown(struct simulate *sm)
{
        if (sm->rec)
                (void)report_rec_finish(sm->rec);
        sm->poll = timer_cancel(sm->poll);
        sm->dispatch = dispatch_free(sm->dispatch);
        controller_free(sm->controller);
        sim_sqs_stop(sm->sqs);
        for (size_t i = 0; sm->agents && i < sm->n_nodes; i++) {
                agent_free(sm->agents[i].agent);
                imds_client_free(sm->agents[i].imds);
                /* Its drains go with it; the timeline is over. */
                agent_engine_watch(sm->agents[i].engine, NULL);
                agent_engine_free(sm->agents[i].engine);
        }
        sim_imds_stop(sm->imds);
        /* Provisioning and /metrics, before the EC2 surface goes. */
        service_stop(sm->svc);
        sim_ec2_stop(sm->ec2);
        for (size_t i = 0; i < sm->n_drains; i++)
                sim_drain_free(sm->drains[i]);
        free(sm->drains);
        sm->elbv2 = elbv2_client_free(sm->elbv2);
        /* After the drains that used them. */
        for (size_t i = 0; sm->agents && i < sm->n_nodes; i++)
                kube_client_free(sm->agents[i].client);
        free(sm->agents);
        drain_ledger_free(sm->ledger);
        service_free(sm->svc);
        sim_server_stop(sm->srv);
        loop_free(sm->loop);
        kube_config_free(sm->kcfg);
        sim_free(sm->sim);
        ynode_free(sm->tree);
        free(sm->seen);
        config_free(sm->cfg);
        /* After the bus that calls it. */
        report_rec_free(sm->rec);
        report_free(sm->report);
}

static const char *seconds_or_dash(const cJSON *v, char *buf, size_t size)
{
        if (!cJSON_IsNumber(v))
                return "-";
        snprintf(buf, size, "%.1f", v->valuedouble);
        return buf;
}

static double seconds_or_nan(const cJSON *node, const char *key)
{
        const cJSON *v = cJSON_GetObjectItem(node, key);
        return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* --report: the interrupted nodes of the result, then the pods and PDBs the recorder saw. */
static int write_report(struct simulate *sm, const cJSON *result)
{
        const cJSON *node;
        int r = 0;

        cJSON_ArrayForEach (node, cJSON_GetObjectItem(result, "nodes")) {
                double deadline = seconds_or_nan(node, "deadline_at");
                r = report_add_node(sm->report, cJSON_GetStringValue(cJSON_GetObjectItem(node, "name")),
                                    seconds_or_nan(node, "notice_at"), seconds_or_nan(node, "cordoned_at"),
                                    deadline,
                                    deadline - (double)sm->cfg->drain.safety_margin_usec / USEC_PER_SEC,
                                    seconds_or_nan(node, "drained_at"));
                if (r < 0)
                        break;
        }
        if (r >= 0)
                r = report_rec_finish(sm->rec);
        if (r >= 0)
                r = report_write(sm->report, sm->report_path);
        if (r < 0)
                log_error_errno(r, "cannot write the report %s", sm->report_path);
        return r;
}

/* Exit status from the result: every interrupted node drained by its deadline with no pod killed. */
static int result_status(const cJSON *result)
{
        const cJSON *node;
        cJSON_ArrayForEach (node, cJSON_GetObjectItem(result, "nodes")) {
                const cJSON *drained = cJSON_GetObjectItem(node, "drained_at"),
                            *deadline = cJSON_GetObjectItem(node, "deadline_at");
                if (!cJSON_IsNumber(drained) ||
                    (cJSON_IsNumber(deadline) && drained->valuedouble > deadline->valuedouble) ||
                    cJSON_GetNumberValue(cJSON_GetObjectItem(node, "pods_killed")) != 0)
                        return EXIT_DEADLINE_MISSED;
        }
        return EXIT_OK;
}

static void print_summary(const struct simulate *sm, const cJSON *result, int status)
{
        const cJSON *node;
        char b[5][32];

        printf("\n%-16s %8s %8s %8s %8s %9s %8s %6s %6s\n", "NODE", "NOTICE", "DEADLINE", "CORDONED",
               "DRAINED", "EVICTABLE", "GRACEFUL", "FORCED", "KILLED");
        cJSON_ArrayForEach (node, cJSON_GetObjectItem(result, "nodes")) {
                printf("%-16s %8s %8s %8s %8s %9.0f %8.0f %6.0f %6.0f\n",
                       cJSON_GetStringValue(cJSON_GetObjectItem(node, "name")),
                       seconds_or_dash(cJSON_GetObjectItem(node, "notice_at"), b[0], sizeof(b[0])),
                       seconds_or_dash(cJSON_GetObjectItem(node, "deadline_at"), b[1], sizeof(b[1])),
                       seconds_or_dash(cJSON_GetObjectItem(node, "cordoned_at"), b[2], sizeof(b[2])),
                       seconds_or_dash(cJSON_GetObjectItem(node, "drained_at"), b[3], sizeof(b[3])),
                       cJSON_GetNumberValue(cJSON_GetObjectItem(node, "pods_evictable")),
                       cJSON_GetNumberValue(cJSON_GetObjectItem(node, "pods_graceful")),
                       cJSON_GetNumberValue(cJSON_GetObjectItem(node, "pods_forced")),
                       cJSON_GetNumberValue(cJSON_GetObjectItem(node, "pods_killed")));
        }
        printf("\nscenario %s, mode %s, notices delivered %s, time scale %g: %.0f PDB breaches, %d alerts, "
               "%.0f API requests\n",
               cJSON_GetStringValue(cJSON_GetObjectItem(result, "scenario")),
               cJSON_GetStringValue(cJSON_GetObjectItem(result, "mode")), sm->delivery, sm->scale,
               cJSON_GetNumberValue(cJSON_GetObjectItem(result, "pdb_breaches")),
               cJSON_GetArraySize(cJSON_GetObjectItem(result, "alerts")),
               cJSON_GetNumberValue(cJSON_GetObjectItem(result, "api_requests")));
        printf("%s\n", status == EXIT_OK
                           ? "every interrupted node drained in time, no pod killed"
                           : "some interrupted node was not drained in time, or pods were killed");
}

int cmd_simulate(int argc, char **argv)
{
        struct simulate sm = { .scale = 1, .delivery = "direct" };
        _cleanup_(cjson_freep) cJSON *result = NULL;
        int r, status;

        r = parse_args(&sm, argc, argv);
        if (r < 0)
                r = setup(&sm);
        if (r >= 0) {
                teardown(&sm);
                return r;
        }

        timeline(&sm, 0, NULL, "scenario %s (%s mode, notices delivered %s), time scale %g",
                 sim_scenario_name(sm.sim), sim_mode(sm.sim), sm.delivery, sm.scale);
        poll_tick(&sm);
        /* A bound in real time: the scenario's own length (last event, then its deadline) and some slack. */
        double length = fmax(sm.last_event_at, 0) + sim_budget_seconds(sm.sim) + 5;
        uint64_t bound = (uint64_t)(length / sm.scale * (double)USEC_PER_SEC) + SLACK_REAL_USEC;
        if (!sm.finished && sm.error == 0) {
                r = loop_run_until(sm.loop, &sm.finished, bound);
                if (r < 0 && sm.error == 0) {
                        log_error_errno(r, r == -ECANCELED ? "simulation stopped by a signal"
                                                           : "the simulation did not end in time");
                        sm.error = r;
                }
        }
        if (sm.error < 0) {
                teardown(&sm);
                return EXIT_ERROR;
        }

        sim_lock(sm.sim);
        (void)sim_advance(sm.sim);
        result = sim_result(sm.sim);
        sim_unlock(sm.sim);
        if (!result || !cJSON_AddStringToObject(result, "delivery", sm.delivery) ||
            !add_estimates(&sm, result)) {
                log_error_errno(-ENOMEM, "out of memory");
                teardown(&sm);
                return EXIT_ERROR;
        }
        status = result_status(result);
        if (sm.report && write_report(&sm, result) < 0) {
                teardown(&sm);
                return EXIT_ERROR;
        }
        if (sm.common.json) {
                _cleanup_free_ char *text = cJSON_Print(result);
                if (!text) {
                        teardown(&sm);
                        return EXIT_ERROR;
                }
                printf("%s\n", text);
        } else
                print_summary(&sm, result, status);
        teardown(&sm);
        return status;
}
