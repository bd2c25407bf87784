/* The part the one-shot drain commands (drain, plan, audit) share: their arguments and setup, the API
 * server's first answer explained, blocking lists, and one node's plan as it stands now (asked of the
 * drain engine, drain_node_now()) and its printing. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/drain_cli.h"
#include "cli/elbv2_sync.h"
#include "cli/help.h"
#include "cli/report.h"
#include "spotdrain/core.h"
#include "spotdrain/surge.h"
#include "spotdrain/term.h"

void drain_cli_done(struct drain_cli *d)
{
        d->svc = service_free(d->svc);
        d->cfg = config_free(d->cfg);
        free(d->notice_kind);
        free(d->notice_instance);
        d->notice_kind = d->notice_instance = NULL;
}

static void usage(FILE *f, const char *verb)
{
        if (streq(verb, "drain"))
                fprintf(
                    f,
                    "usage: spotdrain drain NODE [--budget S | --deadline RFC3339] [--policy "
                    "force|respect]\n"
                    "                       [--json] [--dry-run] [--report FILE.html] [--kubeconfig F]\n"
                    "                       [--config F]\n"
                    "exit status: 0 drained in time, 3 deadline missed or a pod killed, 1 error, 2 usage\n");
        else if (streq(verb, "plan"))
                fprintf(f, "usage: spotdrain plan NODE [--budget S] [--json] [--kubeconfig F] [--config F]\n"
                           "exit status: 0 fits or at risk, 4 infeasible, 1 error, 2 usage\n");
        else
                fprintf(f, "usage: spotdrain audit [--budget S] [--all-nodes] [--json] [--kubeconfig F] "
                           "[--config F]\n"
                           "  spot nodes are judged (and those of unknown capacity type); --all-nodes adds "
                           "on-demand ones\n"
                           "exit status: 0 no findings, 4 findings, 1 error, 2 usage\n");
}

/* Parses the options shared by the three verbs. Returns -1 to go on, else an exit status. */
static int parse_args(struct drain_cli *d, int argc, char **argv)
{
        static const struct option options[] = {
                { "budget", required_argument, NULL, 'b' },
                { "deadline", required_argument, NULL, 'd' },
                { "policy", required_argument, NULL, 'p' },
                { "report", required_argument, NULL, 'R' },
                { "json", no_argument, NULL, 'j' },
                { "dry-run", no_argument, NULL, 'n' },
                { "kubeconfig", required_argument, NULL, 'k' },
                { "config", required_argument, NULL, 'c' },
                { "log-format", required_argument, NULL, 'F' },
                { "log-level", required_argument, NULL, 'L' },
                { "all-nodes", no_argument, NULL, 'a' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        bool takes_node = !streq(d->verb, "audit");
        int c;

        optind = 1;
        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                if (cli_common_option(&d->common, c, optarg))
                        continue;
                switch (c) {
                case 'b':
                        d->budget = optarg;
                        break;
                case 'd':
                        d->deadline = optarg;
                        break;
                case 'p':
                        d->policy = optarg;
                        break;
                case 'R':
                        d->report = optarg;
                        break;
                case 'n':
                        d->common.dry_run = true;
                        break;
                case 'a':
                        d->all_nodes = true;
                        break;
                case 'h':
                        return cli_help(stdout, d->verb);
                default:
                        usage(stderr, d->verb);
                        return EXIT_USAGE;
                }
        }
        if (argc - optind != (takes_node ? 1 : 0)) {
                usage(stderr, d->verb);
                return EXIT_USAGE;
        }
        if (takes_node)
                d->node = argv[optind];
        if (d->budget && d->deadline) {
                fprintf(stderr, "spotdrain %s: --budget and --deadline exclude each other\n", d->verb);
                return EXIT_USAGE;
        }
        if ((d->deadline || d->policy || d->common.dry_run || d->report) && !streq(d->verb, "drain")) {
                fprintf(stderr,
                        "spotdrain %s: --deadline, --policy, --report and --dry-run are drain options\n",
                        d->verb);
                return EXIT_USAGE;
        }
        if (d->all_nodes && !streq(d->verb, "audit")) {
                fprintf(stderr, "spotdrain %s: --all-nodes is an audit option\n", d->verb);
                return EXIT_USAGE;
        }
        if (d->policy && !streq(d->policy, "force") && !streq(d->policy, "respect")) {
                fprintf(stderr, "spotdrain %s: --policy is force or respect\n", d->verb);
                return EXIT_USAGE;
        }
        return -1;
}

/* Logging, configuration, deadline, and the services flags asks for (service.h) over the loop and the
 * client. Returns -1 to go on, else an exit status. */
static int setup(struct drain_cli *d, unsigned flags)
{
        _cleanup_free_ char *error = NULL;
        int r = cli_common_log_setup(&d->common, d->verb, LOG_INFO);

        if (r >= 0)
                return r;

        r = config_load(d->common.config, NULL, &d->cfg, &error);
        if (r < 0) {
                fprintf(stderr, "spotdrain %s: %s\n", d->verb, error ? error : strerror(-r));
                return EXIT_ERROR;
        }
        d->now = clk_now();
        if (d->deadline) {
                if (parse_rfc3339(d->deadline, &d->deadline_usec) < 0) {
                        fprintf(stderr, "spotdrain %s: --deadline needs an RFC 3339 time, got '%s'\n",
                                d->verb, d->deadline);
                        return EXIT_USAGE;
                }
        } else if (streq(d->verb, "drain") && !d->budget) {
                /* Unless the node has a notice (drain_target()), none: as kubectl drain. */
                d->no_deadline = true;
                d->deadline_usec = d->now + NO_DEADLINE_USEC;
        } else {
                uint64_t budget = d->cfg->drain.budget_usec;
                if (d->budget) {
                        char *end;
                        double s = strtod(d->budget, &end);
                        if (*end || !(s > 0) || s > 1e7) {
                                fprintf(stderr,
                                        "spotdrain %s: --budget needs a positive number of seconds\n",
                                        d->verb);
                                return EXIT_USAGE;
                        }
                        budget = (uint64_t)llround(s * 1e6);
                }
                d->deadline_usec = d->now + budget;
        }
        d->notice_policy = d->cfg->drain.policy;
        if (d->policy)
                d->cfg->drain.policy =
                    streq(d->policy, "respect") ? DRAIN_POLICY_RESPECT : DRAIN_POLICY_FORCE;
        else if (streq(d->verb, "drain"))
                /* A manual drain goes around no PDB unless told to (--policy force), as kubectl drain;
                 * one for a notice goes by the configuration, as the agent's would (drain_target()). */
                d->cfg->drain.policy = DRAIN_POLICY_RESPECT;

        r = service_new(d->cfg,
                        &(struct service_options){ .flags = flags, .kubeconfig = d->common.kubeconfig },
                        &d->svc);
        if (r < 0)
                return EXIT_ERROR;
        d->loop = service_loop(d->svc);
        d->client = service_kube(d->svc);
        return -1;
}

int drain_cli_begin(struct drain_cli *d, int argc, char **argv, unsigned flags)
{
        int r = parse_args(d, argc, argv);
        if (r < 0)
                r = setup(d, d->common.dry_run ? 0 : flags);
        if (r >= 0)
                drain_cli_done(d);
        return r;
}

/* Says in one sentence why the API server's first answer failed, with its URL and what to check. node:
 * the node asked for (a 404 means it does not exist), or NULL. */
static void api_explain(struct drain_cli *d, const char *node, int r, const struct kube_result *res)
{
        const struct kube_config *kc = service_kube_config(d->svc);
        const char *url = kc && kc->server ? kc->server : "(no server)";
        _cleanup_free_ char *where =
            kc && kc->context ? strprintf("context %s of %s", kc->context, kc->source ? kc->source : "")
                              : strdup(kc && kc->source ? kc->source : "the kubeconfig");
        const char *in = where ? where : "the kubeconfig";
        long st = res->http_status;

        d->reported = true;
        if (st == 404 && node)
                fprintf(stderr, "spotdrain %s: there is no node %s at %s (kubectl get nodes lists them)\n",
                        d->verb, node, url);
        else if (st == 401)
                fprintf(stderr,
                        "spotdrain %s: the Kubernetes API server at %s refused the credentials (401 "
                        "Unauthorized); check the token, client certificate or exec plugin of %s, and that "
                        "the token has not expired\n",
                        d->verb, url, in);
        else if (st == 403)
                fprintf(stderr,
                        "spotdrain %s: the Kubernetes API server at %s said %s; check the RBAC of the user "
                        "of %s\n",
                        d->verb, url, error_reason(r, res->message), in);
        else if (st == 0 && r == -EBADMSG)
                fprintf(stderr,
                        "spotdrain %s: no trusted TLS connection to the Kubernetes API server at %s (%s); "
                        "check the certificate-authority of %s and the server's name\n",
                        d->verb, url, error_reason(r, res->message), in);
        else if (st == 0)
                fprintf(stderr,
                        "spotdrain %s: cannot reach the Kubernetes API server at %s (%s); check the server "
                        "address of %s, that the server is up, and any proxy between (HTTPS_PROXY, "
                        "NO_PROXY)\n",
                        d->verb, url,
                        r == -ETIMEDOUT && !res->message ? "no answer within 4 s"
                                                         : error_reason(r, res->message),
                        in);
        else
                fprintf(stderr, "spotdrain %s: the Kubernetes API server at %s answered: %s\n", d->verb, url,
                        error_reason(r, res->message));
}

/* A one-shot command's first question to the API server, with a short bound: a server that cannot be
 * reached, or refuses the credentials, is reported at once (api_explain) rather than retried for the whole
 * budget. ret (may be NULL) takes the answer. */
int drain_cli_api_first(struct drain_cli *d, const char *path, const char *node, cJSON **ret)
{
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        int r = kube_get(d->client, path, kube_sync_done, &s, &call);
        r = kube_sync_wait(d->client, r, call, &s, REACH_TIMEOUT);
        if (r < 0)
                api_explain(d, node, r, &s.result);
        else if (ret)
                *ret = TAKE_PTR(s.result.object);
        kube_result_clear(&s.result);
        return r;
}

/* A blocking list; the answer is the caller's. */
int drain_cli_list_sync(struct drain_cli *d, const char *path, const char *label_selector,
                        const char *field_selector, cJSON **ret)
{
        int r = drain_list_sync(d->client, path, label_selector, field_selector, d->sync_timeout, ret);
        if (r < 0)
                d->reported = true;
        return r;
}

/* The plan of one node as it stands now, as a drain would act on it, its graded verdict, and the room its
 * surged pods find elsewhere (drain_node_now()); the node is asked first, with a short bound. */
int drain_cli_plan_node(struct drain_cli *d, struct drain_plan **ret, struct drain_grade_result *ret_grade,
                        struct drain_room *ret_room)
{
        _cleanup_free_ char *node_path = kube_path(NULL, "v1", NULL, "nodes", d->node, NULL);
        if (!node_path)
                return -ENOMEM;
        int r = drain_cli_api_first(d, node_path, d->node, NULL);
        if (r < 0)
                return r;
        /* It exists: that was the question. */
        struct drain_node_now_options o = { .client = d->client,
                                            .settings = &d->cfg->drain,
                                            .node = d->node,
                                            .now_usec = d->now,
                                            .deadline_usec = d->deadline_usec,
                                            .list_timeout_usec = d->sync_timeout,
                                            /* this process's own pod, when it runs in one */
                                            .self_namespace = getenv("POD_NAMESPACE"),
                                            .self_name = getenv("POD_NAME"),
                                            .reported = &d->reported };
        return drain_node_now(&o, ret, ret_grade, ret_room);
}

/* "cpu 500m, memory 512Mi" of what the surged pods lack. */
static void room_missing(const struct drain_room *room, char *cpu, char *memory, size_t len)
{
        format_cpu_millis(room->missing_cpu_millis, cpu, len);
        format_bytes(room->missing_memory_bytes, memory, len);
}

/* The grade beside the plan: "GRADE at-risk: fits if ...", or in the JSON the node's grade, grade_reason
 * and stop_within (seconds, null unless at risk). */
int drain_cli_print_plan(struct drain_cli *d, const struct drain_plan *plan,
                         const struct drain_grade_result *g, const struct drain_room *room)
{
        char cpu[32], memory[32];
        room_missing(room, cpu, memory, sizeof(cpu));
        if (d->common.json) {
                cJSON *j = NULL;
                _cleanup_free_ char *text = NULL;
                int r = drain_plan_to_json(plan, &j);
                if (r < 0)
                        return r;
                cJSON *node = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "nodes"), 0);
                bool ok = node && cJSON_AddStringToObject(node, "grade", drain_grade_to_string(g->grade)) &&
                          drain_outlook_to_json(&g->outlook, node, "estimates") &&
                          (g->reason ? cJSON_AddStringToObject(node, "grade_reason", g->reason)
                                     : cJSON_AddNullToObject(node, "grade_reason")) &&
                          (g->grade == DRAIN_GRADE_AT_RISK
                               ? cJSON_AddNumberToObject(node, "stop_within",
                                                         (double)g->stop_within_usec / (double)USEC_PER_SEC)
                               : cJSON_AddNullToObject(node, "stop_within"));
                cJSON *sr = room->n_want ? cJSON_AddObjectToObject(node, "surge_room")
                                         : cJSON_AddNullToObject(node, "surge_room");
                ok = ok && sr &&
                     (!room->n_want || (cJSON_AddNumberToObject(sr, "pods", room->n_want) &&
                                        cJSON_AddNumberToObject(sr, "missing_pods", room->n_missing) &&
                                        cJSON_AddStringToObject(sr, "missing_cpu", cpu) &&
                                        cJSON_AddStringToObject(sr, "missing_memory", memory)));
                if (ok)
                        text = cJSON_Print(j);
                cJSON_Delete(j);
                if (!text)
                        return -ENOMEM;
                printf("%s\n", text);
                return 0;
        }
        _cleanup_free_ char *text = NULL;
        int r = drain_plan_format(plan, &text);
        if (r < 0)
                return r;
        _cleanup_free_ char *outlook = drain_outlook_format(&g->outlook);
        if (!outlook)
                return -ENOMEM;
        printf("GRADE %s%s%s\n", drain_grade_to_string(g->grade), g->reason ? ": " : "",
               g->reason ? g->reason : "");
        /* The tables are the plan acted on: its last safe moments give a pod never seen stopping its whole
         * grace when that fits (then they are the slow estimate), else drain.expected_shutdown_fraction. */
        printf("ESTIMATE %s; the tables below are the plan acted on\n", outlook);
        if (room->n_missing)
                printf("ROOM surge needs room for %u of its %u pod%s (cpu %s, memory %s) that no other node "
                       "has: %s for replacement capacity\n",
                       room->n_missing, room->n_want, room->n_want == 1 ? "" : "s", cpu, memory,
                       room->n_missing == 1 ? "it waits" : "they wait");
        else if (room->n_want)
                printf("ROOM the %u surged pod%s fit%s on other nodes\n", room->n_want,
                       room->n_want == 1 ? "" : "s", room->n_want == 1 ? "s" : "");
        fputs(text, stdout);
        return 0;
}
