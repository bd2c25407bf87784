/* spotdrain simulate SCENARIO: the built-in simulator plays the cluster and AWS in this process, the real
 * drain engine acts on it through the simulator's Kubernetes API, and the run ends with a simulate_timeline
 * (or the docs/contracts.md §4 result with --json).
 *
 * Clocks: the model's clock and the engine clock are started together with the same scale, so an engine
 * instant is the simulator's wall-clock instant of a scenario time (sim_wall_usec) and every deadline keeps
 * its meaning at any --time-scale.
 *
 * Notices reach the engine the same way whatever delivered them (simulate_notice_received() tells,
 * node_drain_start() acts), each through the one dispatcher (dispatch.h) — the agent's, the controller's,
 * or direct's own:
 *  - "imds" (agent mode): one real agent poll loop (agent.h) per scenario node, each reading that node's
 *    metadata service on the simulator's IMDS surface (imds_surface.h) and acting through spotdrain
 *    agent's own actions (agent_engine_actions: the drain, the soft taint, the undo) with a client (and
 *    rate limit) of its own, exactly as the DaemonSet would; its drains are followed for the timeline;
 *  - "sqs" (controller mode): the real controller (controller.h) long-polls the simulator's SQS queue, where
 *    each notice arrives as the EventBridge event EC2 would send; the controller drains through the engine
 *    itself, so its drains are followed through their alerts;
 *  - "direct" (--delivery direct): a short timer on the engine clock reads the model's notices
 *    (sim_node_notice), turns each new one into a struct notice and submits it to a dispatcher that
 *    knows every scenario node's instance and acts through the node effects the controller has (node.h).
 * Rebalance recommendations are told (notice-received), ask for capacity and set the soft taint (reverted
 * when no interruption follows) in every delivery. */
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
                    !simulate_find_drain(sm, name))
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
        r = streq(sm->delivery, "direct") ? simulate_collect_notices(sm, &p, &n) : 0;
        /* Listing every pod is not cheap: once a scenario second is enough for the timeline. */
        if (r >= 0 && !sm->common.json && sim_now(sm->sim) >= sm->model_progress_at) {
                sm->model_progress_at = sim_now(sm->sim) + 1;
                r = simulate_model_progress(sm, &mp, &n_mp);
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
                        sm->error = log_error_errno(r, "cannot act on the %s notice of %s",
                                                    notice_kind_to_string(p[i].n.kind),
                                                    sim_node_name(sm->sim, p[i].node));
                        loop_exit(sm->loop, EXIT_ERROR);
                        return;
                }
        }
        for (size_t i = 0; i < sm->n_drains; i++)
                if (sm->drains[i]->x)
                        simulate_show_progress(sm, sm->drains[i]);
        simulate_show_model_progress(sm, mp, n_mp);

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
        r = alert_bus_add_sink(sm->bus, simulate_alert_to_result, sm);
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
        if (ynode_get(sm->tree, "provisioning") && simulate_start_provisioning(sm) < 0)
                return EXIT_ERROR;
        if (sm->cfg->drain.target_groups && simulate_start_elbv2(sm) < 0)
                return EXIT_ERROR;
        if (streq(sm->delivery, "imds") && simulate_start_agents(sm) < 0)
                return EXIT_ERROR;
        if (streq(sm->delivery, "direct") && simulate_start_direct(sm) < 0)
                return EXIT_ERROR;
        if (streq(sm->delivery, "sqs") && simulate_start_controller(sm) < 0)
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
        sm->effects = node_effects_free(sm->effects); /* its drains, before the ledger and ELBv2 client */
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
                simulate_drain_free(sm->drains[i]);
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

        simulate_timeline(&sm, 0, NULL, "scenario %s (%s mode, notices delivered %s), time scale %g",
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
            !simulate_add_estimates(&sm, result)) {
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
