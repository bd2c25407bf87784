/* spotdrain agent: DaemonSet mode. Polls this instance's IMDS and acts on this node until SIGTERM.
 * Flags override the configuration (file, SPOTDRAIN_* environment). */
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "cli/frontend.h"
#include "cli/help.h"
#include "spotdrain/agent.h"
#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/httpd.h"
#include "spotdrain/imds.h"
#include "spotdrain/kube.h"
#include "spotdrain/metrics.h"
#include "spotdrain/ops.h"
#include "spotdrain/provision.h"

static void agent_usage(FILE *f)
{
        fprintf(
            f, "usage: spotdrain agent [--node-name NODE] [--kubeconfig FILE] [--config FILE]\n"
               "                       [--metrics-listen HOST:PORT] [--imds-endpoint URL]\n"
               "                       [--poll-interval SECONDS] [--imds-token-ttl SECONDS] "
               "[--imds-v1-fallback]\n"
               "                       [--rebalance-revert SECONDS] [--maintenance-lead SECONDS] "
               "[--asg-deadline SECONDS]\n"
               "                       [--log-level LEVEL] [--log-format FORMAT] [--dry-run]\n"
               "\n"
               "Polls this instance's metadata service (IMDSv2) for spot interruptions, rebalance\n"
               "recommendations, scheduled maintenance and Auto Scaling termination, and drains this node.\n"
               "The node is NODE_NAME (downward API) or --node-name, else IMDS local-hostname.\n"
               "Runs until SIGTERM. Serves /metrics, /healthz and /readyz on --metrics-listen\n"
               "(default " HTTPD_DEFAULT_LISTEN ", \"off\" for none).\n");
}

/* ---- operations: metrics, readiness, health, sd_notify ---- */

/* Loop-thread state behind the metrics (the registry takes counter increments: agent_metrics_count() turns
 * the agent's totals into deltas), readiness and health. */
struct ops {
        struct metrics *metrics;
        struct imds_client *imds;
        struct httpd *httpd;
        struct error_budget *budget;
        struct agent_engine *engine; /* learns from the node's pods once it is known; NULL: no engine */
        bool learning;
        struct agent_metrics_last last;
        uint64_t next_trim; /* clk usec of the next heap trim; 0 = not yet scheduled */
};

/* The agent idles for hours between drains. After start-up (the first lists, TLS handshakes) and after a
 * drain, glibc keeps the freed pages inside the heap: they stay dirty (Private_Dirty in smaps) until
 * malloc_trim() hands whole free pages back. Every 10 s costs microseconds on a heap of a few hundred KiB
 * and keeps the idle footprint at what the agent holds, not at what it last needed (docs/agent.md, Memory):
 * the IMDS polls and the pod watch's events between two trims leave pages dirty too.
 */
#define HEAP_TRIM_INTERVAL_USEC (UINT64_C(10) * 1000000)
#define HEAP_TRIM_FIRST_USEC    (UINT64_C(10) * 1000000)

static void heap_trim_tick(struct ops *o)
{
        uint64_t now = clk_now();

        if (!o->next_trim) {
                o->next_trim = now + HEAP_TRIM_FIRST_USEC;
                return;
        }
        if (now < o->next_trim)
                return;
        (void)malloc_trim(0);
        o->next_trim = now + HEAP_TRIM_INTERVAL_USEC;
}

static void on_tick(struct agent *a, void *userdata)
{
        struct ops *o = userdata;

        /* Health: IMDS answers within the recent error budget. */
        error_budget_record(o->budget, agent_metrics_count(a, o->imds, o->metrics, &o->last));
        heap_trim_tick(o);
        /* The node's pods' ordinary life (rollouts, scale-downs, evictions by others) feeds the stop and
         * startup estimates its drains are planned with. Once the start-up calls have answered: their
         * connection to the API server is free then, and the pod watch takes it rather than open another
         * (an HTTP/1.1 server's connection carries one call at a time). */
        if (o->engine && !o->learning && agent_settled(a)) {
                int r = agent_engine_learn(o->engine, agent_node_name(a), NULL);
                o->learning = true;
                if (r >= 0)
                        log_info("agent: learning stop and startup times from the pods of node %s",
                                 agent_node_name(a));
                else
                        log_warning_errno(r,
                                          "agent: cannot learn stop and startup times from the pods of "
                                          "node %s, ignoring",
                                          agent_node_name(a));
        }
}

static void on_ready(struct agent *a, void *userdata)
{
        struct ops *o = userdata;
        _cleanup_free_ char *status =
            strprintf("polling IMDS for node %s (instance %s)", agent_node_name(a), agent_instance_id(a));

        (void)httpd_set_ready(o->httpd, "imds", true, NULL);
        (void)ops_notify_ready(status ? status : "polling IMDS");
}

static int parse_seconds(const char *s, uint64_t *ret)
{
        char *end;
        double v;
        errno = 0;
        v = strtod(s, &end);
        if (errno || *end || !(v > 0) || v > 1e7)
                return -EINVAL;
        *ret = (uint64_t)(v * 1e6);
        return 0;
}

#define NO_TCACHE "glibc.malloc.tcache_count=0"

void agent_malloc_tunables(char **argv)
{
        const char *set = getenv("GLIBC_TUNABLES");
        if (set) {
                /* This process's own setting (below), not the operator's: its children go without it. */
                if (streq(set, NO_TCACHE))
                        (void)unsetenv("GLIBC_TUNABLES");
                return;
        }
        if (setenv("GLIBC_TUNABLES", NO_TCACHE, 1) < 0)
                return;
        (void)execv("/proc/self/exe", argv);
        (void)unsetenv("GLIBC_TUNABLES"); /* no exec: as it is */
}

/* SIGTERM or SIGINT: the alerts raised last still go out before the loop ends; a second signal ends it at
 * once. */
static void on_stop_signal(struct loop *l, void *userdata)
{
        log_info("stopping");
        service_exit(userdata, 0);
}

int cmd_agent(int argc, char **argv)
{
        static const struct option options[] = {
                FRONTEND_OPTIONS,
                { "node-name", required_argument, NULL, 'n' },
                { "imds-endpoint", required_argument, NULL, 'i' },
                { "poll-interval", required_argument, NULL, 'p' },
                { "imds-token-ttl", required_argument, NULL, 't' },
                { "imds-v1-fallback", no_argument, NULL, 'v' },
                { "rebalance-revert", required_argument, NULL, 'r' },
                { "maintenance-lead", required_argument, NULL, 'M' },
                { "asg-deadline", required_argument, NULL, 'A' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *node = NULL, *endpoint = NULL;
        uint64_t poll = 0, revert = 0, lead = 0, ttl = 0, asg = 0;
        bool v1 = false;
        /* Before the frontend: its /healthz reads the budget until httpd is gone. */
        _cleanup_(error_budget_freep) struct error_budget *budget = NULL;
        _cleanup_(frontend_done) struct frontend fe = { .name = "agent" };
        struct spotdrain_config *cfg;
        struct service *svc;
        struct loop *l;
        _cleanup_(imds_client_freep) struct imds_client *imds = NULL;
        _cleanup_(agent_freep) struct agent *a = NULL;
        struct ops ops = {};
        uint64_t interval;
        int c, r;

        optind = 1;
        while ((c = frontend_getopt(&fe, argc, argv, options)) >= 0) {
                switch (c) {
                case 'n':
                        node = optarg;
                        break;
                case 'i':
                        endpoint = optarg;
                        break;
                case 'p':
                case 't':
                case 'r':
                case 'M':
                case 'A': {
                        uint64_t v;
                        if (parse_seconds(optarg, &v) < 0) {
                                fprintf(stderr, "spotdrain agent: --%s needs a positive number of seconds\n",
                                        c == 'p'   ? "poll-interval"
                                        : c == 't' ? "imds-token-ttl"
                                        : c == 'r' ? "rebalance-revert"
                                        : c == 'M' ? "maintenance-lead"
                                                   : "asg-deadline");
                                return EXIT_USAGE;
                        }
                        *(c == 'p'   ? &poll
                          : c == 't' ? &ttl
                          : c == 'r' ? &revert
                          : c == 'M' ? &lead
                                     : &asg) = v;
                        break;
                }
                case 'v':
                        v1 = true;
                        break;
                case 'h':
                        return cli_help(stdout, "agent");
                default:
                        agent_usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (optind != argc) {
                agent_usage(stderr);
                return EXIT_USAGE;
        }
        if (ttl > (uint64_t)IMDS_TOKEN_TTL_MAX * 1000000ULL || (ttl && ttl < 1000000)) {
                fprintf(stderr, "spotdrain agent: --imds-token-ttl is 1..21600 seconds\n");
                return EXIT_USAGE;
        }

        r = frontend_load_config(&fe);
        if (r != EXIT_OK)
                return r;
        cfg = fe.cfg;

        /* Flags win over the configuration. */
        if (!ttl)
                ttl = cfg->imds.token_ttl_usec;
        if (!asg)
                asg = cfg->agent.asg_deadline_usec;
        v1 = v1 || cfg->imds.allow_v1;

        /* provision.enabled: replacement capacity from the rebalance recommendation on. */
        r = frontend_start(&fe, &(struct service_options){ .flags = SERVICE_METRICS | SERVICE_ALERTS |
                                                                    SERVICE_WEBHOOK | SERVICE_ENGINE |
                                                                    SERVICE_PROVISION | SERVICE_OPS |
                                                                    SERVICE_WATCHDOG,
                                                           .ready_check = "imds",
                                                           .ready_why = "not polling IMDS yet",
                                                           .watchdog_optional = true,
                                                           .families = agent_metric_families,
                                                           .n_families = agent_n_metric_families });
        if (r != EXIT_OK)
                return r;
        svc = fe.svc;
        l = service_loop(svc);

        r = imds_client_new(l,
                            &(struct imds_options){ .endpoint = endpoint ? endpoint : cfg->imds.endpoint,
                                                    .token_ttl_seconds = (unsigned)(ttl / 1000000ULL),
                                                    .allow_v1 = v1 },
                            &imds);
        if (r < 0)
                return log_error_errno(r, "bad IMDS endpoint"), EXIT_USAGE;

        interval = poll ? poll : cfg->imds.poll_interval_usec;
        /* Unhealthy when most polls of the last minute found IMDS silent. */
        r = error_budget_new(60ULL * 1000000ULL, 0.9, 10, &budget);
        if (r < 0)
                return log_error_errno(r, "cannot set up the IMDS error budget"), EXIT_ERROR;
        if (service_httpd(svc)) {
                r = httpd_add_health_check(service_httpd(svc), "imds", error_budget_check, budget);
                if (r < 0)
                        return log_error_errno(r, "cannot set up /readyz and /healthz"), EXIT_ERROR;
        }
        ops = (struct ops){ .metrics = service_metrics(svc),
                            .imds = imds,
                            .httpd = service_httpd(svc),
                            .budget = budget,
                            .engine = service_engine(svc) };

        /* The flags win over the configuration. */
        struct dispatch_options dopt = { .rebalance_revert_usec = revert, .maintenance_lead_usec = lead };
        dispatch_options_from_config(cfg, &dopt);
        r = agent_new(l, imds, service_kube(svc),
                      &(struct agent_options){ .node_name = node ? node
                                                            : !isempty(getenv("NODE_NAME"))
                                                                ? NULL
                                                                : cfg->agent.node_name,
                                               .region = cfg->aws.region,
                                               .poll_interval_usec = interval,
                                               .dispatch = dopt,
                                               .asg_deadline_usec = asg,
                                               .lifecycle_hook_name = cfg->agent.lifecycle_hook_name,
                                               .asg_name = cfg->agent.asg_name,
                                               .heartbeat_interval_usec = cfg->agent.heartbeat_interval_usec,
                                               .on_ready = on_ready,
                                               .on_tick = on_tick,
                                               .userdata = &ops },
                      &agent_engine_actions, service_engine(svc), &a);
        if (r < 0)
                return log_error_errno(r, "cannot set up the agent"), EXIT_ERROR;
        /* The end of each drain completes the lifecycle action (agent.lifecycle_hook_name). */
        agent_follow_engine(a, service_engine(svc));

        log_info("spotdrain agent starting: IMDS at %s", imds_client_endpoint(imds));
        loop_set_stop_handler(l, on_stop_signal, svc);
        r = agent_start(a);
        if (r >= 0)
                r = loop_run(l);
        else
                log_error_errno(r, "cannot start the agent");
        (void)ops_notify_stopping();
        /* The engine outlives the agent (service_stop): no drain's end may reach it after this. */
        agent_follow_engine(NULL, service_engine(svc));
        a = agent_free(a);
        service_stop(svc);
        log_info("spotdrain agent stopped");
        return r == 0 ? EXIT_OK : EXIT_ERROR;
}

/* ---- hidden: the simulator's surfaces standalone ---- */
