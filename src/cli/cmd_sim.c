/* spotdrain sim serve SCENARIO: serves the simulator to outside clients (kubectl, the aws CLI, another
 * spotdrain) until SIGTERM or SIGINT. */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/random.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "cli/help.h"
#include "spotdrain/core.h"
#include "spotdrain/sim.h"
#include "spotdrain/yaml.h"

static void sim_usage(FILE *f)
{
        fprintf(
            f,
            "usage: spotdrain sim serve SCENARIO [--listen HOST:PORT] [--kubeconfig-out FILE]\n"
            "                           [--endpoints-out FILE] [--time-scale N] [--mode agent|controller]\n"
            "                           [--seed N] [--apf-qps N] [--apf-burst N]\n"
            "                           [--log-level LEVEL] [--log-format FORMAT]\n"
            "  --apf-qps N    the API server's priority and fairness: N requests a second per client, "
            "beyond\n"
            "                 which it answers 429 with Retry-After (overrides the scenario's\n"
            "                 api_priority_fairness.qps; 0 turns it off)\n");
}

static void sim_freep(struct sim **s)
{
        sim_free(*s);
}

/* A token for the kubeconfig; the simulator accepts any, but clients expect credentials to exist. */
static int random_token(char *buf, size_t len)
{
        unsigned char raw[16];

        if (len < 2 * sizeof(raw) + 5 || getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
                return -EIO;
        memcpy(buf, "sim-", 4);
        for (size_t i = 0; i < sizeof(raw); i++)
                snprintf(buf + 4 + 2 * i, 3, "%02x", raw[i]);
        return 0;
}

static int write_outputs(const struct sim_surfaces *x, const char *kubeconfig_out, const char *endpoints_out)
{
        int r;

        if (kubeconfig_out) {
                char token[64];
                _cleanup_free_ char *kc = NULL;

                r = random_token(token, sizeof(token));
                if (r < 0)
                        return log_error_errno(r, "cannot make a token");
                kc = sim_server_kubeconfig(sim_surfaces_kubernetes_url(x), token);
                if (!kc)
                        return log_error_errno(-ENOMEM, "out of memory");
                r = write_file_atomic(kubeconfig_out, kc, strlen(kc), 0600);
                if (r < 0)
                        return log_error_errno(r, "cannot write %s", kubeconfig_out);
        }
        if (endpoints_out) {
                cJSON *o = sim_surfaces_endpoints(x);
                _cleanup_free_ char *text = o ? cJSON_Print(o) : NULL;

                cJSON_Delete(o);
                if (!text)
                        return log_error_errno(-ENOMEM, "out of memory");
                r = write_file_atomic(endpoints_out, text, strlen(text), 0644);
                if (r < 0)
                        return log_error_errno(r, "cannot write %s", endpoints_out);
        }
        return 0;
}

static int sim_serve(int argc, char **argv)
{
        static const struct option options[] = {
                { "listen", required_argument, NULL, 'l' },
                { "kubeconfig-out", required_argument, NULL, 'k' },
                { "endpoints-out", required_argument, NULL, 'e' },
                { "time-scale", required_argument, NULL, 't' },
                { "mode", required_argument, NULL, 'm' },
                { "seed", required_argument, NULL, 's' },
                { "apf-qps", required_argument, NULL, 'Q' },
                { "apf-burst", required_argument, NULL, 'B' },
                { "log-level", required_argument, NULL, 'L' },
                { "log-format", required_argument, NULL, 'F' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *listen = "127.0.0.1:0", *kubeconfig_out = NULL, *endpoints_out = NULL;
        struct sim_options opt = { .time_scale = 1 };
        struct sim_server_options sopt = {};
        int level = LOG_INFO, format = LOG_FORMAT_AUTO, c, r, sig;
        double apf_qps = -1, apf_burst = -1;
        _cleanup_(ynode_freep) struct ynode *tree = NULL;
        _cleanup_(sim_freep) struct sim *s = NULL;
        _cleanup_free_ char *error = NULL;
        struct sim_surfaces *srv = NULL;
        sigset_t mask;
        char *end;

        optind = 1;
        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                switch (c) {
                case 'l':
                        listen = optarg;
                        break;
                case 'k':
                        kubeconfig_out = optarg;
                        break;
                case 'e':
                        endpoints_out = optarg;
                        break;
                case 't':
                        opt.time_scale = strtod(optarg, &end);
                        if (*end || !(opt.time_scale > 0)) {
                                fprintf(stderr,
                                        "spotdrain sim serve: --time-scale needs a positive number\n");
                                return EXIT_USAGE;
                        }
                        break;
                case 'm':
                        if (!streq(optarg, "agent") && !streq(optarg, "controller")) {
                                fprintf(stderr, "spotdrain sim serve: --mode is agent or controller\n");
                                return EXIT_USAGE;
                        }
                        opt.mode = optarg;
                        break;
                case 's':
                        opt.seed = strtoull(optarg, &end, 10);
                        if (*end) {
                                fprintf(stderr, "spotdrain sim serve: --seed needs a number\n");
                                return EXIT_USAGE;
                        }
                        break;
                case 'Q':
                case 'B': {
                        double v = strtod(optarg, &end);
                        if (*end || !(v >= 0) || v > 1e6) {
                                fprintf(stderr,
                                        "spotdrain sim serve: --apf-%s needs a number from 0 to 1000000\n",
                                        c == 'Q' ? "qps" : "burst");
                                return EXIT_USAGE;
                        }
                        *(c == 'Q' ? &apf_qps : &apf_burst) = v;
                        break;
                }
                case 'L':
                        level = log_parse_level(optarg);
                        if (level < 0) {
                                fprintf(stderr, "spotdrain sim serve: unknown log level '%s'\n", optarg);
                                return EXIT_USAGE;
                        }
                        break;
                case 'F':
                        format = log_parse_format(optarg);
                        if (format < 0) {
                                fprintf(stderr, "spotdrain sim serve: unknown log format '%s'\n", optarg);
                                return EXIT_USAGE;
                        }
                        break;
                case 'h':
                        return cli_help(stdout, "sim");
                default:
                        sim_usage(stderr);
                        return EXIT_USAGE;
                }
        }
        if (optind + 1 != argc) {
                sim_usage(stderr);
                return EXIT_USAGE;
        }
        log_setup((enum log_format)format, level);

        r = sim_scenario_load(argv[optind], &tree, &error);
        if (r < 0) {
                fprintf(stderr, "spotdrain sim serve: %s\n", error ? error : strerror(-r));
                return EXIT_ERROR;
        }
        r = sim_new(tree, &opt, &s, &error);
        if (r < 0) {
                fprintf(stderr, "spotdrain sim serve: %s\n", error ? error : strerror(-r));
                return EXIT_ERROR;
        }

        /* Every thread the server starts inherits this mask, so the signals reach sigwait() below. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        pthread_sigmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);

        sopt.listen = listen;
        sim_server_options_from_scenario(tree, &sopt);
        if (opt.seed)
                sopt.seed = opt.seed;
        if (apf_qps >= 0)
                sopt.apf_qps = apf_qps;
        if (apf_burst >= 1)
                sopt.apf_burst = apf_burst;
        r = sim_surfaces_start(s, &sopt, &srv);
        if (r < 0) {
                log_error_errno(r, "cannot listen on %s", listen);
                return EXIT_ERROR;
        }
        /* The scenario's t=0 is when every surface serves, and before anyone has been told where they are
         * (the outputs below): no event fires while the simulator is still starting. */
        sim_lock(s);
        sim_start(s);
        sim_broadcast(s);
        sim_unlock(s);
        r = write_outputs(srv, kubeconfig_out, endpoints_out);
        if (r < 0) {
                sim_surfaces_stop(srv);
                return EXIT_ERROR;
        }
        log_info("simulator for scenario %s serving the Kubernetes API at %s", sim_scenario_name(s),
                 sim_surfaces_kubernetes_url(srv));

        while (sigwait(&mask, &sig) != 0)
                ;
        log_info("stopping on signal %d", sig);
        sim_surfaces_stop(srv);
        return EXIT_OK;
}

int cmd_sim(int argc, char **argv)
{
        if (argc < 2) {
                sim_usage(stderr);
                return EXIT_USAGE;
        }
        if (streq(argv[1], "--help") || streq(argv[1], "-h")) {
                return cli_help(stdout, "sim");
        }
        if (streq(argv[1], "serve"))
                return sim_serve(argc - 1, argv + 1);
        fprintf(stderr, "spotdrain sim: unknown subcommand '%s'\n", argv[1]);
        sim_usage(stderr);
        return EXIT_USAGE;
}
