/* spotdrain agent: DaemonSet mode. Polls this instance's IMDS and acts on this node until SIGTERM.
 *
 * Also (hidden, for tests and benchmarks) `spotdrain agent --serve-sim SCENARIO`: serves the simulator's
 * Kubernetes and IMDS surfaces standalone, so that an agent process (or botocore) can be pointed at them. */
#include <arpa/inet.h>
#include <getopt.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <cjson/cJSON.h>
#include <systemd/sd-daemon.h>

#include "cli/cli.h"
#include "sim/imds_surface.h"
#include "sim/model.h"
#include "sim/server.h"
#include "spotdrain/agent.h"
#include "spotdrain/alert.h"
#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/imds.h"
#include "spotdrain/kube.h"
#include "spotdrain/kubeconfig.h"
#include "spotdrain/yaml.h"

#define DEFAULT_METRICS_LISTEN "0.0.0.0:9464"
/* /healthz fails when no poll has been answered for this long (and at least 10 poll intervals). */
#define HEALTH_BUDGET_USEC (30ULL * 1000000ULL)

static void agent_usage(FILE *f)
{
        fprintf(
            f, "usage: spotdrain agent [--node-name NODE] [--kubeconfig FILE] [--config FILE]\n"
               "                       [--metrics-listen HOST:PORT] [--imds-endpoint URL]\n"
               "                       [--poll-interval SECONDS] [--imds-token-ttl SECONDS] "
               "[--imds-v1-fallback]\n"
               "                       [--rebalance-revert SECONDS] [--maintenance-lead SECONDS]\n"
               "                       [--log-level LEVEL] [--log-format FORMAT]\n"
               "\n"
               "Polls this instance's metadata service (IMDSv2) for spot interruptions, rebalance\n"
               "recommendations, scheduled maintenance and Auto Scaling termination, and drains this node.\n"
               "The node is NODE_NAME (downward API) or --node-name, else IMDS local-hostname.\n"
               "Runs until SIGTERM. Serves /metrics, /healthz and /readyz on --metrics-listen\n"
               "(default " DEFAULT_METRICS_LISTEN ", \"off\" for none).\n");
}

/* ---- metrics: a snapshot the loop thread writes and the HTTP thread reads ---- */

struct snapshot {
        struct agent_stats stats;
        struct imds_stats imds;
        bool ready;
        uint64_t interval_usec;
};

struct metrics {
        pthread_mutex_t lock;
        struct snapshot snap;
        struct imds_client *imds;
        struct MHD_Daemon *daemon;
};

static void metrics_snapshot(struct agent *a, void *userdata)
{
        struct metrics *m = userdata;
        struct agent_stats st;
        struct imds_stats is;

        agent_stats(a, &st);
        imds_client_stats(m->imds, &is);
        pthread_mutex_lock(&m->lock);
        m->snap.stats = st;
        m->snap.imds = is;
        m->snap.ready = agent_ready(a);
        pthread_mutex_unlock(&m->lock);
}

static enum MHD_Result metrics_reply(struct MHD_Connection *c, unsigned status, const char *type, char *text)
{
        struct MHD_Response *r;
        enum MHD_Result ret;
        if (!text)
                return MHD_NO;
        r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        if (!r) {
                free(text);
                return MHD_NO;
        }
        MHD_add_response_header(r, "Content-Type", type);
        ret = MHD_queue_response(c, status, r);
        MHD_destroy_response(r);
        return ret;
}

static char *metrics_text(const struct snapshot *m)
{
        struct buf b = {};
        const struct agent_stats *s = &m->stats;
        int r = 0;

        r |=
            buf_printf(&b,
                       "# HELP spotdrain_imds_polls_total Polls of the four IMDS notice paths.\n"
                       "# TYPE spotdrain_imds_polls_total counter\nspotdrain_imds_polls_total %" PRIu64 "\n",
                       s->ticks);
        r |= buf_printf(
            &b,
            "# HELP spotdrain_imds_poll_failures_total Polls in which IMDS did not answer at all.\n"
            "# TYPE spotdrain_imds_poll_failures_total counter\n"
            "spotdrain_imds_poll_failures_total %" PRIu64 "\n",
            s->tick_errors);
        r |= buf_printf(&b,
                        "# HELP spotdrain_imds_request_errors_total IMDS GETs that failed (not 404).\n"
                        "# TYPE spotdrain_imds_request_errors_total counter\n"
                        "spotdrain_imds_request_errors_total %" PRIu64 "\n",
                        s->path_errors);
        r |= buf_printf(&b,
                        "# HELP spotdrain_imds_parse_errors_total IMDS documents that could not be read.\n"
                        "# TYPE spotdrain_imds_parse_errors_total counter\n"
                        "spotdrain_imds_parse_errors_total %" PRIu64 "\n",
                        s->parse_errors);
        r |= buf_printf(&b,
                        "# HELP spotdrain_imds_token_failures_total IMDSv2 token requests that failed.\n"
                        "# TYPE spotdrain_imds_token_failures_total counter\n"
                        "spotdrain_imds_token_failures_total %" PRIu64 "\n",
                        m->imds.token_failures);
        r |= buf_printf(&b, "# HELP spotdrain_notices_total Notices acted on, by kind.\n"
                            "# TYPE spotdrain_notices_total counter\n");
        for (int k = 0; k < _NOTICE_KIND_MAX; k++)
                r |= buf_printf(&b, "spotdrain_notices_total{kind=\"%s\"} %" PRIu64 "\n",
                                notice_kind_to_string((enum notice_kind)k), s->notice_counts[k]);
        r |= buf_printf(&b,
                        "# HELP spotdrain_drains_started_total Drains the agent started.\n"
                        "# TYPE spotdrain_drains_started_total counter\n"
                        "spotdrain_drains_started_total %" PRIu64 "\n",
                        s->drains);
        r |= buf_printf(&b,
                        "# HELP spotdrain_action_errors_total Actions that could not start.\n"
                        "# TYPE spotdrain_action_errors_total counter\n"
                        "spotdrain_action_errors_total %" PRIu64 "\n",
                        s->action_errors);
        r |= buf_printf(&b,
                        "# HELP spotdrain_imds_last_success_seconds When IMDS last answered (unix time).\n"
                        "# TYPE spotdrain_imds_last_success_seconds gauge\n"
                        "spotdrain_imds_last_success_seconds %.3f\n",
                        (double)s->last_ok_usec / 1e6);
        if (r < 0) {
                buf_free(&b);
                return NULL;
        }
        return b.data;
}

static enum MHD_Result metrics_handler(void *cls, struct MHD_Connection *c, const char *url,
                                       const char *method, const char *version, const char *upload_data,
                                       size_t *upload_data_size, void **con_cls)
{
        struct metrics *m = cls;
        struct snapshot snap;
        uint64_t budget, now = clk_now();

        if (!streq(method, "GET") && !streq(method, "HEAD"))
                return metrics_reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain",
                                     strdup("method not allowed\n"));
        pthread_mutex_lock(&m->lock);
        snap = m->snap;
        pthread_mutex_unlock(&m->lock);
        budget = 10 * snap.interval_usec > HEALTH_BUDGET_USEC ? 10 * snap.interval_usec : HEALTH_BUDGET_USEC;

        if (streq(url, "/metrics"))
                return metrics_reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
                                     metrics_text(&snap));
        if (streq(url, "/readyz"))
                return snap.ready ? metrics_reply(c, MHD_HTTP_OK, "text/plain", strdup("ok\n"))
                                  : metrics_reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain",
                                                  strdup("not polling IMDS yet\n"));
        if (streq(url, "/healthz")) {
                /* Healthy while IMDS answered recently; before the first answer, while still starting. */
                bool ok = snap.stats.last_ok_usec ? now - snap.stats.last_ok_usec <= budget
                                                  : snap.stats.ticks < 10;
                return ok ? metrics_reply(c, MHD_HTTP_OK, "text/plain", strdup("ok\n"))
                          : metrics_reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain",
                                          strdup("IMDS has not answered recently\n"));
        }
        return metrics_reply(c, MHD_HTTP_NOT_FOUND, "text/plain", strdup("not found\n"));
}

static int parse_host_port(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len)
{
        _cleanup_free_ char *host = NULL;
        struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_PASSIVE, .ai_socktype = SOCK_STREAM },
                        *ai = NULL;
        const char *colon = strrchr(s, ':');
        int r;

        if (!colon)
                return -EINVAL;
        host = strndup(s, (size_t)(colon - s));
        if (!host)
                return -ENOMEM;
        if (host[0] == '[' && host[strlen(host) - 1] == ']') {
                memmove(host, host + 1, strlen(host));
                host[strlen(host) - 1] = '\0';
        }
        r = getaddrinfo(isempty(host) ? NULL : host, colon + 1, &hints, &ai);
        if (r != 0 || !ai)
                return -EINVAL;
        memcpy(ret, ai->ai_addr, ai->ai_addrlen);
        *ret_len = ai->ai_addrlen;
        freeaddrinfo(ai);
        return 0;
}

static int metrics_start(struct metrics *m, const char *listen)
{
        struct sockaddr_storage sa;
        socklen_t len;
        int r;

        if (streq(listen, "off") || isempty(listen))
                return 0;
        r = parse_host_port(listen, &sa, &len);
        if (r < 0)
                return r;
        m->daemon = MHD_start_daemon(
            MHD_USE_INTERNAL_POLLING_THREAD | (sa.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0), 0, NULL, NULL,
            metrics_handler, m, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_CONNECTION_LIMIT, 16u,
            MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
        return m->daemon ? 0 : -EADDRINUSE;
}

/* ---- the agent ---- */

static void on_ready(struct agent *a, void *userdata)
{
        metrics_snapshot(a, userdata);
        (void)sd_notify(0, "READY=1\nSTATUS=polling IMDS");
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

static int serve_sim(const char *scenario, const char *host, const char *endpoints_out,
                     const char *kubeconfig_out, double time_scale);

int cmd_agent(int argc, char **argv)
{
        static const struct option options[] = {
                { "node-name", required_argument, NULL, 'n' },
                { "kubeconfig", required_argument, NULL, 'k' },
                { "config", required_argument, NULL, 'c' },
                { "metrics-listen", required_argument, NULL, 'm' },
                { "imds-endpoint", required_argument, NULL, 'i' },
                { "poll-interval", required_argument, NULL, 'p' },
                { "imds-token-ttl", required_argument, NULL, 't' },
                { "imds-v1-fallback", no_argument, NULL, 'v' },
                { "rebalance-revert", required_argument, NULL, 'r' },
                { "maintenance-lead", required_argument, NULL, 'M' },
                { "log-level", required_argument, NULL, 'L' },
                { "log-format", required_argument, NULL, 'F' },
                { "help", no_argument, NULL, 'h' },
                /* hidden: the simulator's surfaces, standalone */
                { "serve-sim", required_argument, NULL, 'S' },
                { "listen", required_argument, NULL, 'l' },
                { "endpoints-out", required_argument, NULL, 'e' },
                { "kubeconfig-out", required_argument, NULL, 'K' },
                { "time-scale", required_argument, NULL, 'T' },
                {},
        };
        const char *node = NULL, *kubeconfig = NULL, *config = NULL, *metrics_listen = NULL,
                   *endpoint = NULL;
        const char *level_s = NULL, *format_s = NULL, *sim_scenario = NULL, *sim_host = "127.0.0.1";
        const char *endpoints_out = NULL, *kubeconfig_out = NULL;
        uint64_t poll = 0, revert = 0, lead = 0, ttl = 0;
        double time_scale = 1;
        bool v1 = false;
        _cleanup_(config_freep) struct spotdrain_config *cfg = NULL;
        _cleanup_(kube_config_freep) struct kube_config *kcfg = NULL;
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_(kube_client_freep) struct kube_client *kube = NULL;
        _cleanup_(imds_client_freep) struct imds_client *imds = NULL;
        _cleanup_(alert_bus_freep) struct alert_bus *bus = NULL;
        _cleanup_(agent_engine_freep) struct agent_engine *engine = NULL;
        _cleanup_(agent_freep) struct agent *a = NULL;
        _cleanup_free_ char *error = NULL;
        struct metrics m = { .lock = PTHREAD_MUTEX_INITIALIZER };
        int c, r, level, format;
        char *end;

        optind = 1;
        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                switch (c) {
                case 'n':
                        node = optarg;
                        break;
                case 'k':
                        kubeconfig = optarg;
                        break;
                case 'c':
                        config = optarg;
                        break;
                case 'm':
                        metrics_listen = optarg;
                        break;
                case 'i':
                        endpoint = optarg;
                        break;
                case 'p':
                case 't':
                case 'r':
                case 'M': {
                        uint64_t v;
                        if (parse_seconds(optarg, &v) < 0) {
                                fprintf(stderr, "spotdrain agent: --%s needs a positive number of seconds\n",
                                        c == 'p'   ? "poll-interval"
                                        : c == 't' ? "imds-token-ttl"
                                        : c == 'r' ? "rebalance-revert"
                                                   : "maintenance-lead");
                                return EXIT_USAGE;
                        }
                        *(c == 'p' ? &poll : c == 't' ? &ttl : c == 'r' ? &revert : &lead) = v;
                        break;
                }
                case 'v':
                        v1 = true;
                        break;
                case 'L':
                        level_s = optarg;
                        break;
                case 'F':
                        format_s = optarg;
                        break;
                case 'S':
                        sim_scenario = optarg;
                        break;
                case 'l':
                        sim_host = optarg;
                        break;
                case 'e':
                        endpoints_out = optarg;
                        break;
                case 'K':
                        kubeconfig_out = optarg;
                        break;
                case 'T':
                        time_scale = strtod(optarg, &end);
                        if (*end || !(time_scale > 0)) {
                                fprintf(stderr, "spotdrain agent: --time-scale needs a positive number\n");
                                return EXIT_USAGE;
                        }
                        break;
                case 'h':
                        agent_usage(stdout);
                        return EXIT_OK;
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

        r = config_load(config, NULL, &cfg, &error);
        if (r < 0) {
                fprintf(stderr, "spotdrain agent: %s\n", error ? error : strerror(-r));
                return EXIT_ERROR;
        }
        level = level_s ? log_parse_level(level_s) : cfg->log_level;
        format = format_s ? log_parse_format(format_s) : cfg->log_format;
        if (level < 0 || format < 0) {
                fprintf(stderr, "spotdrain agent: unknown log %s '%s'\n", level < 0 ? "level" : "format",
                        level < 0 ? level_s : format_s);
                return EXIT_USAGE;
        }
        log_setup((enum log_format)format, level);

        if (sim_scenario)
                return serve_sim(sim_scenario, sim_host, endpoints_out, kubeconfig_out, time_scale);

        signal(SIGPIPE, SIG_IGN);
        r = loop_new(&l);
        if (r < 0)
                return log_error_errno(r, "cannot set up the event loop"), EXIT_ERROR;

        r = kube_config_load_auto(kubeconfig ? kubeconfig : cfg->kubeconfig, cfg->kube_context, &kcfg,
                                  &error);
        if (r < 0) {
                if (error)
                        log_error("cannot load the Kubernetes configuration: %s", error);
                else
                        log_error_errno(r, "cannot load the Kubernetes configuration");
                return EXIT_ERROR;
        }
        r = kube_client_new(
            l, kcfg,
            &(struct kube_client_options){ .qps = cfg->kube_qps,
                                           .burst = cfg->kube_burst > 0 ? (unsigned)cfg->kube_burst : 0 },
            &kube);
        if (r < 0)
                return log_error_errno(r, "cannot set up the Kubernetes client"), EXIT_ERROR;

        r = imds_client_new(l,
                            &(struct imds_options){ .endpoint = endpoint ? endpoint : cfg->imds_endpoint,
                                                    .token_ttl_seconds = (unsigned)(ttl / 1000000ULL),
                                                    .allow_v1 = v1 },
                            &imds);
        if (r < 0)
                return log_error_errno(r, "bad IMDS endpoint"), EXIT_USAGE;

        r = alert_bus_new(&bus);
        if (r >= 0)
                r = alert_bus_add_log_sink(bus);
        if (r >= 0)
                r = alert_bus_add_kube_event_sink(bus, kube);
        if (r >= 0)
                r = agent_engine_new(kube, bus, cfg, &engine);
        if (r < 0)
                return log_error_errno(r, "cannot set up the drain engine"), EXIT_ERROR;

        m.imds = imds;
        m.snap.interval_usec = poll ? poll : cfg->imds_poll_interval_usec;
        r = agent_new(l, imds, kube,
                      &(struct agent_options){ .node_name = node                            ? node
                                                            : !isempty(getenv("NODE_NAME")) ? NULL
                                                                                            : cfg->node_name,
                                               .region = cfg->aws_region,
                                               .poll_interval_usec = m.snap.interval_usec,
                                               .rebalance_revert_usec = revert,
                                               .maintenance_lead_usec = lead,
                                               .on_ready = on_ready,
                                               .on_tick = metrics_snapshot,
                                               .userdata = &m },
                      &agent_engine_actions, engine, &a);
        if (r < 0)
                return log_error_errno(r, "cannot set up the agent"), EXIT_ERROR;

        metrics_listen = metrics_listen        ? metrics_listen
                         : cfg->metrics_listen ? cfg->metrics_listen
                                               : DEFAULT_METRICS_LISTEN;
        r = metrics_start(&m, metrics_listen);
        if (r < 0)
                return log_error_errno(r, "cannot serve metrics on %s", metrics_listen), EXIT_ERROR;

        log_info("spotdrain agent starting: IMDS at %s", imds_client_endpoint(imds));
        r = agent_start(a);
        if (r >= 0)
                r = loop_run(l);
        else
                log_error_errno(r, "cannot start the agent");
        (void)sd_notify(0, "STOPPING=1");
        a = agent_free(a);
        engine = agent_engine_free(engine);
        if (m.daemon)
                MHD_stop_daemon(m.daemon);
        log_info("spotdrain agent stopped");
        return r == 0 ? EXIT_OK : EXIT_ERROR;
}

/* ---- hidden: the simulator's surfaces standalone ---- */

static int write_endpoints(struct sim *s, const char *kube_url, struct sim_imds *imds, const char *path)
{
        cJSON *o = cJSON_CreateObject(), *by = cJSON_CreateObject();
        _cleanup_free_ char *text = NULL;
        bool ok = o && by && cJSON_AddStringToObject(o, "kubernetes", kube_url) &&
                  (sim_imds_count(imds) == 0 || cJSON_AddStringToObject(o, "imds", sim_imds_url(imds, 0)));

        sim_lock(s);
        for (size_t i = 0; ok && i < sim_imds_count(imds); i++)
                ok = cJSON_AddStringToObject(by, sim_node_name(s, i), sim_imds_url(imds, i)) != NULL;
        sim_unlock(s);
        if (ok && cJSON_AddItemToObject(o, "imds_by_node", by))
                by = NULL;
        else
                ok = false;
        if (ok)
                text = cJSON_Print(o);
        cJSON_Delete(by);
        cJSON_Delete(o);
        if (!text)
                return -ENOMEM;
        return write_file_atomic(path, text, strlen(text), 0644);
}

static void sim_freep_local(struct sim **s)
{
        sim_free(*s);
}

static int serve_sim(const char *scenario, const char *host, const char *endpoints_out,
                     const char *kubeconfig_out, double time_scale)
{
        _cleanup_(ynode_freep) struct ynode *tree = NULL;
        _cleanup_(sim_freep_local) struct sim *s = NULL;
        _cleanup_free_ char *error = NULL, *listen = NULL;
        struct sim_server *srv = NULL;
        struct sim_imds *imds = NULL;
        sigset_t mask;
        int r, sig;

        r = sim_scenario_load(scenario, &tree, &error);
        if (r >= 0)
                r = sim_new(tree, &(struct sim_options){ .time_scale = time_scale }, &s, &error);
        if (r < 0) {
                fprintf(stderr, "spotdrain agent: %s\n", error ? error : strerror(-r));
                return EXIT_ERROR;
        }
        listen = strprintf("%s:0", host);
        if (!listen)
                return EXIT_ERROR;

        /* Threads inherit the mask, so the signals reach sigwait() below. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        pthread_sigmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);

        sim_lock(s);
        sim_start(s);
        sim_unlock(s);
        r = sim_server_start(s, listen, &srv);
        if (r >= 0)
                r = sim_imds_start(s, host, &imds);
        if (r < 0) {
                log_error_errno(r, "cannot serve the simulator on %s", host);
                sim_server_stop(srv);
                return EXIT_ERROR;
        }
        if (kubeconfig_out) {
                _cleanup_free_ char *kc = sim_server_kubeconfig(sim_server_url(srv), "sim-agent-token");
                r = kc ? write_file_atomic(kubeconfig_out, kc, strlen(kc), 0600) : -ENOMEM;
        }
        if (r >= 0 && endpoints_out)
                r = write_endpoints(s, sim_server_url(srv), imds, endpoints_out);
        if (r < 0) {
                log_error_errno(r, "cannot write the simulator's endpoints");
                sim_imds_stop(imds);
                sim_server_stop(srv);
                return EXIT_ERROR;
        }
        log_info("simulator for scenario %s: Kubernetes API at %s, IMDS of the first node at %s",
                 sim_scenario_name(s), sim_server_url(srv),
                 sim_imds_url(imds, 0) ? sim_imds_url(imds, 0) : "-");

        while (sigwait(&mask, &sig) != 0)
                ;
        sim_imds_stop(imds);
        sim_server_stop(srv);
        return EXIT_OK;
}
