/* spotdrain drain NODE, plan NODE, audit: the one-shot drain commands (docs/contracts.md §1). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "cli/drain_cli.h"
#include "cli/elbv2_sync.h"
#include "cli/help.h"
#include "cli/report.h"
#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/engine.h"
#include "spotdrain/kube.h"
#include "spotdrain/service.h"
#include "spotdrain/surge.h"
#include "spotdrain/term.h"

#define SYNC_TIMEOUT (60 * USEC_PER_SEC)
#define REFRESH_USEC USEC_PER_SEC
/* How long a one-shot command waits for the API server's first answer (its retries included) before it
 * says that the server cannot be reached: well under the 5 s a person at a terminal should wait. */
#define REACH_TIMEOUT (4 * USEC_PER_SEC)
/* A drain without a deadline (neither --budget, --deadline nor a notice on the node) waits for its pods as
 * kubectl drain does: the plan is made against an end this far away, which nothing reaches. */
#define NO_DEADLINE_USEC (30 * 24 * 3600 * USEC_PER_SEC)

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
int drain_cli_parse_args(struct drain_cli *d, int argc, char **argv)
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
int drain_cli_setup(struct drain_cli *d, unsigned flags)
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
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        struct kube_list_options o = { .label_selector = label_selector, .field_selector = field_selector };
        int r = kube_list(d->client, path, &o, kube_sync_done, &s, &call);
        r = kube_sync_wait(d->client, r, call, &s, d->sync_timeout ? d->sync_timeout : SYNC_TIMEOUT);
        if (r < 0) {
                log_error_reason(r, s.result.message, "cannot list %s", path);
                d->reported = true;
                kube_result_clear(&s.result);
                return r;
        }
        *ret = TAKE_PTR(s.result.object);
        kube_result_clear(&s.result);
        return 0;
}

struct strv {
        char **v;
        size_t n;
};

static void strv_done(struct strv *s)
{
        for (size_t i = 0; i < s->n; i++)
                free(s->v[i]);
        free(s->v);
}

static bool strv_has(const struct strv *s, const char *x)
{
        for (size_t i = 0; i < s->n; i++)
                if (streq(s->v[i], x))
                        return true;
        return false;
}

/* Startup estimates for the owners of the pods in items: one list of each owner's siblings. A list that
 * fails leaves that owner to the default estimate. */
static int node_startups(struct drain_cli *d, const cJSON *items, struct drain_startup **ret, size_t *ret_n)
{
        _cleanup_(strv_done) struct strv asked = { 0 };
        struct drain_startup *all = NULL;
        size_t n_all = 0;
        const cJSON *obj;

        cJSON_ArrayForEach (obj, items) {
                _cleanup_(kube_pod_clear) struct kube_pod p = { 0 };
                _cleanup_free_ char *key = NULL, *selector = NULL, *path = NULL;
                cJSON *list = NULL;
                struct drain_startup *s = NULL;
                size_t n = 0;

                if (kube_pod_parse(obj, &p) < 0 || !(key = drain_owner_key(&p)) || strv_has(&asked, key) ||
                    !(selector = drain_sibling_selector(&p)) ||
                    !(path = kube_path(NULL, "v1", p.namespace, "pods", NULL, NULL)))
                        continue;
                char **v = realloc(asked.v, (asked.n + 1) * sizeof(*v));
                if (!v)
                        continue;
                asked.v = v;
                asked.v[asked.n++] = TAKE_PTR(key);
                if (drain_cli_list_sync(d, path, selector, NULL, &list) < 0)
                        continue;
                int r = drain_startups_measure(kube_list_items(list), &s, &n);
                cJSON_Delete(list);
                if (r < 0)
                        continue;
                for (size_t i = 0; i < n; i++) {
                        bool dup = false;
                        for (size_t j = 0; j < n_all && !dup; j++)
                                dup = streq(all[j].owner_key, s[i].owner_key);
                        struct drain_startup *a = dup ? NULL : realloc(all, (n_all + 1) * sizeof(*a));
                        if (!a)
                                continue;
                        all = a;
                        all[n_all++] = s[i];
                        s[i].owner_key = NULL; /* moved */
                }
                drain_startups_free(s, n);
        }
        *ret = all;
        *ret_n = n_all;
        return 0;
}

struct drain_inputs_options drain_cli_inputs_options(const struct drain_cli *d)
{
        size_t n = 0;
        for (char **s = d->cfg->drain.critical_priority_classes; s && *s; s++)
                n++;
        return (struct drain_inputs_options){
                .now_usec = d->now,
                .policy =
                    d->cfg->drain.policy == DRAIN_POLICY_RESPECT ? DRAIN_POLICY_RESPECT : DRAIN_POLICY_FORCE,
                .surge = (enum drain_surge_mode)d->cfg->drain.surge,
                .evict_daemonsets = !d->cfg->drain.ignore_daemonsets,
                .default_startup_usec = d->cfg->drain.default_startup_usec,
                .critical_classes = (const char *const *)d->cfg->drain.critical_priority_classes,
                .n_critical_classes = n,
                /* What the graded verdict goes by (drain_grade_node): the stops seen, else the expected
                 * share of each grace period, which the grade does not take as a fact. */
                .shutdown_basis = DRAIN_SHUTDOWN_EXPECTED,
                .expected_shutdown_fraction = d->cfg->drain.expected_shutdown_fraction,
        };
}

static void surge_learnt(void *userdata)
{
        *(bool *)userdata = true;
}

/* Which pods can surge (drain.surge): their Deployments read as a drain reads them (surge.h), once, for
 * both inputs (the same pods on another shutdown basis). */
static int plan_surge(struct drain_cli *d, struct drain_inputs *safe, struct drain_inputs *expected)
{
        _cleanup_(drain_surge_freep) struct drain_surge *sg = NULL;
        bool changed = false;
        int r;
        if (d->cfg->drain.surge == DRAIN_SURGE_OFF)
                return 0;
        r = drain_surge_new(d->client, d->node, (enum drain_surge_mode)d->cfg->drain.surge, NULL,
                            surge_learnt, &changed, &sg);
        /* The first pass starts the reads and waits for them; the second marks the pods as learnt. */
        for (size_t i = 0; r >= 0 && i < drain_inputs_n_pods(safe); i++)
                r = drain_surge_input(sg, safe, i);
        while (r >= 0 && drain_surge_learning(sg)) {
                changed = false;
                if (loop_run_until(kube_client_loop(d->client), &changed, SYNC_TIMEOUT) < 0 || !changed)
                        break;
        }
        for (size_t i = 0; r >= 0 && i < drain_inputs_n_pods(safe); i++)
                r = drain_surge_input(sg, safe, i);
        for (size_t i = 0; r >= 0 && i < drain_inputs_n_pods(expected); i++)
                r = drain_surge_input(sg, expected, i);
        return r;
}

/* The TargetGroupBindings (*ret), 1; 0 without any or without the CRD (404); a failure is a warning. */
int drain_cli_list_tgbs(struct drain_cli *d, cJSON **ret)
{
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        int r = kube_list(d->client, "/apis/elbv2.k8s.aws/v1beta1/targetgroupbindings",
                          &(struct kube_list_options){}, kube_sync_done, &s, &call);
        r = kube_sync_wait(d->client, r, call, &s, d->sync_timeout ? d->sync_timeout : SYNC_TIMEOUT);
        if (r < 0 && r != -ENOENT)
                log_warning(
                    "cannot list TargetGroupBindings (%s): no pod is held for its target group in the plan",
                    s.result.message ? s.result.message : strerror(-r));
        if (r >= 0 && cJSON_GetArraySize(kube_list_items(s.result.object)) > 0) {
                *ret = TAKE_PTR(s.result.object);
                r = 1;
        } else
                r = 0;
        kube_result_clear(&s.result);
        return r;
}

/* What one node's plan is made of, as listed from the API. */
struct node_objects {
        cJSON *pods, *pdbs;
        cJSON *services; /* drain.lb_deregistration_seconds: the pods behind them are held */
        /* drain.target_groups: the bindings, and the Services they name (all of them) */
        cJSON *tgbs, *tg_services;
        struct drain_startup *startups;
        size_t n_startups;
};

static void node_objects_done(struct node_objects *no)
{
        cJSON_Delete(no->pods);
        cJSON_Delete(no->pdbs);
        cJSON_Delete(no->services);
        cJSON_Delete(no->tgbs);
        cJSON_Delete(no->tg_services);
        drain_startups_free(no->startups, no->n_startups);
}

/* Whether an instance target group's binding names a Service that selects the pod. */
static bool tgb_selects(const struct node_objects *no, const struct kube_pod *kp)
{
        const cJSON *b, *svc;
        cJSON_ArrayForEach (b, kube_list_items(no->tgbs)) {
                if (streq_ptr(kube_object_str(b, "spec.targetType"), "ip"))
                        continue;
                cJSON_ArrayForEach (svc, kube_list_items(no->tg_services))
                        if (streq_ptr(kube_object_str(svc, "metadata.namespace"),
                                      kube_object_str(b, "metadata.namespace")) &&
                            streq_ptr(kube_object_str(svc, "metadata.name"),
                                      kube_object_str(b, "spec.serviceRef.name")) &&
                            drain_service_selects(svc, kp))
                                return true;
        }
        return false;
}

/* The planner's input of the node on basis. */
static int node_input(struct drain_cli *d, const struct node_objects *no, enum drain_shutdown_basis basis,
                      struct drain_inputs **ret)
{
        _cleanup_(drain_inputs_freep) struct drain_inputs *di = NULL;
        struct drain_inputs_options io = drain_cli_inputs_options(d);
        const cJSON *obj;
        io.shutdown_basis = basis;
        int r = drain_inputs_new(&io, &di);
        if (r >= 0)
                r = drain_inputs_add_node(di, d->node, d->deadline_usec, d->cfg->drain.safety_margin_usec,
                                          NULL);
        if (r >= 0)
                r = drain_inputs_add_startups(di, no->startups, no->n_startups);
        cJSON_ArrayForEach (obj, kube_list_items(no->pdbs)) {
                if (r >= 0 && drain_inputs_add_pdb(di, obj) == -ENOMEM)
                        r = -ENOMEM;
        }
        const char *self_ns = getenv("POD_NAMESPACE"), *self = getenv("POD_NAME");
        cJSON_ArrayForEach (obj, kube_list_items(no->pods)) {
                if (self && streq_ptr(kube_object_str(obj, "metadata.name"), self) &&
                    (!self_ns || streq_ptr(kube_object_str(obj, "metadata.namespace"), self_ns)))
                        continue;
                if (r >= 0 && drain_inputs_add_pod(di, 0, obj, NULL) == -ENOMEM)
                        r = -ENOMEM;
        }
        /* The label goes out at the notice: the load balancers' time is reserved from now. */
        if (r >= 0 && no->services) {
                drain_inputs_mark_services(di, 0, kube_list_items(no->services));
                r = drain_inputs_set_node_lb_hold(di, 0, clk_now() + d->cfg->drain.lb_deregistration_usec);
        }
        /* Behind an instance target group: held until the instance is out of healthy there, which the
         * drain learns at its first answer after the label, a second on (as the executor plans it). */
        for (size_t i = 0; r >= 0 && no->tgbs && i < drain_inputs_n_pods(di); i++)
                if (tgb_selects(no, drain_inputs_pod(di, i)))
                        r = drain_inputs_set_lb_target(di, i, clk_now() + USEC_PER_SEC);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(di);
        return 0;
}

/* Whether other nodes have room for the pods the plan surges (drain_room_fit). A cluster-wide read the
 * identity may not be allowed: without it the room is left unknown (n_want 0), not the plan. */
static int plan_room(struct drain_cli *d, const struct node_objects *no, const struct drain_plan *plan,
                     struct drain_room *ret)
{
        _cleanup_free_ const cJSON **want = NULL;
        cJSON *nodes = NULL, *pods = NULL;
        size_t n = 0;
        const cJSON *obj;
        int r;

        *ret = (struct drain_room){ 0 };
        want = calloc(plan->n_pods ? plan->n_pods : 1, sizeof(*want));
        if (!want)
                return -ENOMEM;
        for (size_t i = 0; i < plan->n_pods; i++) {
                if (!plan->pods[i].surge)
                        continue;
                cJSON_ArrayForEach (obj, kube_list_items(no->pods))
                        if (streq_ptr(kube_object_str(obj, "metadata.name"), plan->pods[i].name) &&
                            streq_ptr(kube_object_str(obj, "metadata.namespace"), plan->pods[i].namespace)) {
                                want[n++] = obj;
                                break;
                        }
        }
        if (n == 0)
                return 0;
        if (drain_cli_list_sync(d, "/api/v1/nodes", NULL, NULL, &nodes) < 0 ||
            drain_cli_list_sync(d, "/api/v1/pods", NULL, NULL, &pods) < 0) {
                log_warning("cannot tell whether other nodes have room for the %zu surged pod%s", n,
                            n == 1 ? "" : "s");
                r = 0;
        } else
                r = drain_room_fit(kube_list_items(nodes), kube_list_items(pods), d->node, want, n, ret);
        cJSON_Delete(nodes);
        cJSON_Delete(pods);
        return r;
}

/* The plan of one node as it stands now, as a drain would act on it, its graded verdict, and the room its
 * surged pods find elsewhere. */
static int plan_node(struct drain_cli *d, struct drain_plan **ret, struct drain_grade_result *ret_grade,
                     struct drain_room *ret_room)
{
        _cleanup_free_ char *field = strprintf("spec.nodeName=%s", d->node);
        _cleanup_(drain_inputs_freep) struct drain_inputs *safe = NULL, *expected = NULL;
        _cleanup_(node_objects_done) struct node_objects no = { 0 };
        int r;

        if (!field)
                return -ENOMEM;
        _cleanup_free_ char *node_path = kube_path(NULL, "v1", NULL, "nodes", d->node, NULL);
        if (!node_path)
                return -ENOMEM;
        r = drain_cli_api_first(d, node_path, d->node, NULL);
        if (r < 0)
                return r;
        /* It exists: that was the question. */

        r = drain_cli_list_sync(d, "/api/v1/pods", NULL, field, &no.pods);
        if (r >= 0)
                r = drain_cli_list_sync(d, "/apis/policy/v1/poddisruptionbudgets", NULL, NULL, &no.pdbs);
        if (r >= 0 && d->cfg->drain.exclude_from_load_balancers && d->cfg->drain.lb_deregistration_usec &&
            drain_cli_list_sync(d, "/api/v1/services", NULL, NULL, &no.services) < 0)
                log_warning("cannot list Services: no pod is held for the load balancers in the plan");
        if (r >= 0 && d->cfg->drain.target_groups && !d->cfg->drain.cordon_only &&
            drain_cli_list_tgbs(d, &no.tgbs) > 0 &&
            drain_cli_list_sync(d, "/api/v1/services", NULL, NULL, &no.tg_services) < 0)
                log_warning("cannot list Services: no pod is held for its target group in the plan");
        if (r >= 0)
                r = node_startups(d, kube_list_items(no.pods), &no.startups, &no.n_startups);
        if (r >= 0)
                r = node_input(d, &no, DRAIN_SHUTDOWN_SAFE, &safe);
        if (r >= 0)
                r = node_input(d, &no, DRAIN_SHUTDOWN_EXPECTED, &expected);
        /* Surge (drain.surge) changes what the PDBs allow: the grade and the plan both see it. */
        if (r >= 0)
                r = plan_surge(d, safe, expected);
        if (r >= 0)
                r = drain_grade_node(drain_inputs_get(expected), 0, ret_grade);
        if (r >= 0)
                r = drain_plan_make(drain_inputs_get(safe), ret);
        if (r >= 0)
                r = plan_room(d, &no, *ret, ret_room);
        return r;
}

/* "cpu 500m, memory 512Mi" of what the surged pods lack. */
static void room_missing(const struct drain_room *room, char *cpu, char *memory, size_t len)
{
        format_cpu_millis(room->missing_cpu_millis, cpu, len);
        format_bytes(room->missing_memory_bytes, memory, len);
}

/* The grade beside the plan: "GRADE at-risk: fits if ...", or in the JSON the node's grade, grade_reason
 * and stop_within (seconds, null unless at risk). */
static int print_plan(struct drain_cli *d, const struct drain_plan *plan, const struct drain_grade_result *g,
                      const struct drain_room *room)
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

int cmd_plan(int argc, char **argv)
{
        struct drain_cli d = { .verb = "plan" };
        _cleanup_(drain_plan_freep) struct drain_plan *plan = NULL;
        _cleanup_(drain_grade_result_clear) struct drain_grade_result grade = { 0 };
        struct drain_room room = { 0 };
        int r;

        r = drain_cli_parse_args(&d, argc, argv);
        if (r < 0)
                r = drain_cli_setup(&d, 0);
        if (r >= 0) {
                drain_cli_done(&d);
                return r;
        }
        r = plan_node(&d, &plan, &grade, &room);
        if (r >= 0)
                r = print_plan(&d, plan, &grade, &room);
        drain_cli_done(&d);
        if (r < 0) {
                if (!d.reported)
                        fprintf(stderr, "spotdrain plan: cannot plan the drain of %s: %s\n", d.node,
                                strerror(-r));
                return EXIT_ERROR;
        }
        /* At risk is no certainty: the exit status says infeasible only when it is. */
        return grade.grade == DRAIN_GRADE_INFEASIBLE ? EXIT_INFEASIBLE : EXIT_OK;
}

/* ---- drain ---- */

struct drain_run {
        struct drain_cli *d;
        struct drain_exec *x;
        struct timer *refresh;
        bool live;  /* the status block is redrawn in place (term.h) */
        bool color; /* and may be coloured */
        bool done;
        char *shown;          /* not live: the last plain status line printed */
        bool predicted_shown; /* a status line showed the first judgement's estimates */
        bool first_outlook;   /* the line being drawn shows them: the drain's first judgement */
};

static void on_done(struct drain_exec *x, const struct drain_exec_result *res, void *userdata)
{
        struct drain_run *run = userdata;
        run->done = true;
}

/* At most this many PDB lines under the first: the block must stay small enough to read at a glance. */
#define STATUS_PDB_LINES 8

/* s with colour sgr (an SGR parameter string, "1;31") when colour is on. */
static int status_printf(struct buf *b, const struct drain_run *run, const char *sgr, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int status_printf(struct buf *b, const struct drain_run *run, const char *sgr, const char *fmt, ...)
{
        va_list ap;
        _cleanup_free_ char *text = NULL;
        va_start(ap, fmt);
        if (vasprintf(&text, fmt, ap) < 0)
                text = NULL;
        va_end(ap);
        if (!text)
                return -ENOMEM;
        if (run->color && sgr)
                return buf_printf(b, "\033[%sm%s\033[0m", sgr, text);
        return buf_printf(b, "%s", text);
}

/* The first status line: countdown, pods left, predicted finish, forced, predicted killed. */
static int status_head(const struct drain_run *run, uint64_t now, bool plain, struct buf *b)
{
        const struct drain_plan *plan = drain_exec_plan(run->x);
        const struct drain_plan_node *pn = drain_exec_plan_node(run->x);
        const struct drain_exec_result *res = drain_exec_result(run->x);
        int64_t left = (int64_t)run->d->deadline_usec - (int64_t)now;
        int64_t secs = left > 0 ? left / (int64_t)USEC_PER_SEC : 0;
        int r = buf_printf(b, "%s: ", run->d->node);

        /* A plain line is printed when something changed: the countdown, which always does, is left out. */
        if (r >= 0 && !plain && run->d->no_deadline)
                r = buf_printf(b, "no deadline");
        else if (r >= 0 && !plain)
                r = status_printf(b, run, secs < 30 ? "1;31" : "1", "%" PRIi64 " s to deadline", secs);
        if (r >= 0 && !plain)
                r = buf_printf(b, ", ");
        if (r < 0 || !plan)
                return r < 0 ? r : buf_printf(b, "planning");
        r = buf_printf(b, "%u pods left", drain_exec_pods_left(run->x, DRAIN_EXEC_ALL_PDBS));
        const struct drain_outlook *o = run->first_outlook ? &res->outlook_first : &res->outlook;
        /* Without a deadline the plan's "killed" at its far end are the pods a PDB holds: they wait. */
        if (run->d->no_deadline || !o->known) {
                if (r >= 0 && pn && pn->finish_usec != DRAIN_NEVER && !plain)
                        r = buf_printf(b, ", predicted finish in %.0f s",
                                       pn->finish_usec > now
                                           ? (double)(pn->finish_usec - now) / (double)USEC_PER_SEC
                                           : 0.0);
                if (r >= 0 && pn && pn->finish_usec == DRAIN_NEVER)
                        r = status_printf(b, run, "31", ", no finish predicted");
                if (r >= 0)
                        r = status_printf(b, run, res->forced > 0 ? "33" : NULL, ", %u forced", res->forced);
                if (r >= 0 && run->d->no_deadline)
                        r = buf_printf(b, ", %zu waiting for a PDB", pn ? pn->n_killed : (size_t)0);
                return r;
        }
        /* The pair of estimates of the latest grade (drain_exec_update_outlook), as plan, audit and the
         * alerts print it. */
        _cleanup_free_ char *text = drain_outlook_format(o);
        if (r >= 0)
                r = status_printf(b, run, res->forced > 0 ? "33" : NULL, ", %u forced", res->forced);
        if (r >= 0)
                r = status_printf(b, run,
                                  o->quick.n_killed + o->slow.n_killed > 0   ? "1;31"
                                  : o->quick.n_forced + o->slow.n_forced > 0 ? "33"
                                                                             : NULL,
                                  "; predicted: %s", text ? text : "no estimate");
        return r;
}

/* The live view: the head line, then pods left per PDB (the PDBs with pods left, and those without a PDB).
 * On a terminal it is redrawn in place under the log records; elsewhere a plain line whenever it changes. */
static void refresh(void *userdata)
{
        struct drain_run *run = userdata;
        const struct drain_plan *plan = drain_exec_plan(run->x);
        uint64_t now = clk_now();
        _cleanup_(buf_free) struct buf head = { 0 };
        char *lines[STATUS_PDB_LINES + 3] = { 0 };
        size_t n = 0, more = 0;

        run->refresh = NULL; /* released by the loop as it fired */
        if (run->done)
                return;
        /* The predicted counts as they change, from the drain's first judgement on: that one shown first. */
        /* The drain judges again as pods go, so by the first line (a second in, many in a faster world) its
         * latest outlook may already be a later one: the first line shows the first judgement's. */
        run->first_outlook = !run->predicted_shown && drain_exec_result(run->x)->outlook_first.known;
        if (run->predicted_shown)
                (void)drain_exec_update_outlook(run->x);
        else
                run->predicted_shown = run->first_outlook;
        if (status_head(run, now, !run->live, &head) < 0)
                goto again;
        if (!run->live) {
                /* A record in the log's own format (text or JSON lines, the journal), at each change. */
                if (!streq_ptr(run->shown, head.data)) {
                        free(run->shown);
                        run->shown = strdup(head.data);
                        log_full(LOG_INFO, 0, (const char *const[]){ "node", run->d->node, NULL }, "%s",
                                 head.data);
                }
                goto again;
        }
        lines[n++] = head.data;
        for (int i = -1; plan && i < (int)plan->n_pdbs; i++) {
                unsigned k = drain_exec_pods_left(run->x, i);
                if (k == 0)
                        continue;
                if (n > STATUS_PDB_LINES) {
                        more++;
                        continue;
                }
                lines[n++] = i < 0 ? strprintf("  without PDB: %u left", k)
                                   : strprintf("  PDB %s/%s: %u left", plan->pdbs[i].namespace,
                                               plan->pdbs[i].name, k);
        }
        if (more > 0)
                lines[n++] = strprintf("  and %zu more PDB%s with pods left", more, more == 1 ? "" : "s");
        term_status_set((const char *const *)lines, n);
        for (size_t i = 1; i < n; i++)
                free(lines[i]);
again:
        timer_start_in(run->d->loop, REFRESH_USEC, refresh, run, &run->refresh);
}

/* The summary at the end, under the result's sentence: one row for the node, one per PDB with pods left. */
static void print_summary(const struct drain_run *run, const struct drain_exec_result *res)
{
        const struct drain_plan *plan = drain_exec_plan(run->x);
        char left[16];

        if (res->pods_unseen)
                snprintf(left, sizeof(left), "unknown");
        else
                snprintf(left, sizeof(left), "%u", res->left);
        /* KILLED is what happened (killed with the node or at the end of a grace period), PREDICTED what the
         * first plan expected to be killed. */
        char predicted_forced[32], predicted_killed[32];
        const struct drain_outlook *o = &res->outlook_first;
        if (o->known) {
                snprintf(predicted_forced, sizeof(predicted_forced), "%zu / %zu", o->quick.n_forced,
                         o->slow.n_forced);
                snprintf(predicted_killed, sizeof(predicted_killed), "%zu / %zu", o->quick.n_killed,
                         o->slow.n_killed);
        } else {
                snprintf(predicted_forced, sizeof(predicted_forced), "-");
                snprintf(predicted_killed, sizeof(predicted_killed), "%u", res->killed_predicted);
        }
        printf("\n%-24s %-16s %8s %8s %7s %7s %7s %16s %16s\n", "NODE", "OUTCOME", "SECONDS", "EVICTED",
               "FORCED", "LEFT", "KILLED", "FORCED PREDICTED", "KILLED PREDICTED");
        printf("%-24s %-16s %8.1f %8u %7u %7s %7u %16s %16s\n", run->d->node,
               drain_exec_outcome_to_string(res->outcome),
               (double)(res->finished_usec - res->notice_usec) / (double)USEC_PER_SEC, res->evicted,
               res->forced, left, res->killed, predicted_forced, predicted_killed);
        if (o->known)
                printf("(predicted at the start: stops never seen taken at once / at their whole grace)\n");
        for (int i = -1; plan && i < (int)plan->n_pdbs; i++) {
                unsigned k = drain_exec_pods_left(run->x, i);
                _cleanup_free_ char *name =
                    i < 0 ? strdup("(no PDB)")
                          : strprintf("%s/%s", plan->pdbs[i].namespace, plan->pdbs[i].name);
                if (k > 0 && name)
                        printf("  %-22s %-16s %8s %8s %7s %7u\n", name, "left", "", "", "", k);
        }
}

static void print_result(const struct drain_run *run, const struct drain_exec_result *res)
{
        const struct drain_cli *d = run->d;
        char deadline[64] = "";
        format_rfc3339(d->deadline_usec, deadline, sizeof(deadline));
        if (!d->common.json) {
                printf("%s\n", res->message ? res->message : drain_exec_outcome_to_string(res->outcome));
                print_summary(run, res);
                return;
        }
        cJSON *o = cJSON_CreateObject();
        if (!o)
                return;
        cJSON_AddStringToObject(o, "node", d->node);
        cJSON_AddStringToObject(o, "outcome", drain_exec_outcome_to_string(res->outcome));
        if (d->no_deadline)
                cJSON_AddNullToObject(o, "deadline");
        else
                cJSON_AddStringToObject(o, "deadline", deadline);
        cJSON_AddNumberToObject(o, "seconds",
                                (double)(res->finished_usec - res->notice_usec) / (double)USEC_PER_SEC);
        cJSON_AddNumberToObject(o, "evicted", res->evicted);
        cJSON_AddNumberToObject(o, "forced", res->forced);
        if (res->pods_unseen)
                cJSON_AddNullToObject(o, "left");
        else
                cJSON_AddNumberToObject(o, "left", res->left);
        cJSON_AddNumberToObject(o, "blocked", res->blocked);
        cJSON_AddNumberToObject(o, "multi_pdb", res->multi_pdb);
        cJSON_AddBoolToObject(o, "infeasible", res->infeasible);
        cJSON_AddBoolToObject(o, "at_risk", res->at_risk);
        cJSON_AddNumberToObject(o, "killed", res->killed);
        cJSON_AddNumberToObject(o, "killed_predicted", res->killed_predicted);
        if (res->predicted_finish_usec && res->predicted_finish_usec != DRAIN_NEVER)
                cJSON_AddNumberToObject(o, "predicted_seconds",
                                        (double)(res->predicted_finish_usec - res->started_usec) /
                                            (double)USEC_PER_SEC);
        else
                cJSON_AddNullToObject(o, "predicted_seconds");
        drain_outlook_to_json(&res->outlook_first, o, "estimates_at_start");
        cJSON_AddStringToObject(o, "message", res->message ? res->message : "");
        char *text = cJSON_Print(o);
        if (text)
                printf("%s\n", text);
        free(text);
        cJSON_Delete(o);
}

/* --report: the recorder watches the node's pods and the PDBs, and takes the alerts, from the notice on. */
static int report_start(struct drain_cli *d, struct report **ret, struct report_rec **ret_rec)
{
        _cleanup_free_ char *title = strprintf("drain %s", d->node);
        int r = title ? report_new(title, ret) : -ENOMEM;
        if (r >= 0)
                r = report_rec_start(*ret, d->client, service_alerts(d->svc), d->node, d->now, ret_rec);
        if (r < 0)
                log_error_errno(r, "cannot record the drain for the report");
        return r;
}

static double since_notice(const struct drain_cli *d, uint64_t usec)
{
        return usec ? ((double)usec - (double)d->now) / (double)USEC_PER_SEC : NAN;
}

/* The node's facts from the result, then the pods the recorder saw; the page goes to --report. */
static int report_finish(struct drain_cli *d, const struct drain_exec_result *res, struct report *rp,
                         struct report_rec *rec)
{
        double deadline = since_notice(d, d->deadline_usec);
        /* A drain that ended in time saw its last pod go: so will the recorder, in a moment. */
        if (res->outcome == DRAIN_EXEC_DRAINED)
                (void)report_rec_settle(rec, d->loop, 2 * USEC_PER_SEC);
        int r =
            report_add_node(rp, d->node, 0, since_notice(d, res->cordoned_usec), deadline,
                            deadline - (double)d->cfg->drain.safety_margin_usec / (double)USEC_PER_SEC,
                            res->outcome == DRAIN_EXEC_DRAINED ? since_notice(d, res->finished_usec) : NAN);
        /* The pair of estimates at the start, as the other surfaces print it, on the report's timeline. */
        if (r >= 0 && res->outlook_first.known) {
                _cleanup_free_ char *text = drain_outlook_format(&res->outlook_first);
                r = text ? report_add_alert(rp, "estimates", d->node, since_notice(d, res->planned_usec),
                                            text)
                         : -ENOMEM;
        }
        if (r >= 0)
                r = report_rec_finish(rec);
        if (r >= 0)
                r = report_write(rp, d->report);
        if (r < 0)
                log_error_errno(r, "cannot write the report %s", d->report);
        return r;
}

/* Without --budget or --deadline, a node whose drain record names a notice (the agent's or the controller's)
 * is drained by that notice's deadline and the policy configured, as they would drain it; any other keeps no
 * deadline and respects every PDB (drain_cli_setup()). */
static void drain_target(struct drain_cli *d, const cJSON *node)
{
        _cleanup_free_ char *kind = NULL, *instance = NULL;
        uint64_t deadline;
        if (d->budget || d->deadline || drain_record_read(node, &kind, &deadline, &instance) < 0 ||
            streq(kind, "manual") || deadline <= d->now)
                return;
        d->no_deadline = false;
        d->deadline_usec = deadline;
        if (!d->policy)
                d->cfg->drain.policy = d->notice_policy;
        d->notice_kind = TAKE_PTR(kind);
        d->notice_instance = TAKE_PTR(instance);
}

/* Before it acts, the drain says in one line what it is about to do, as kubectl drain says
 * "node/NAME cordoned": the pods it moves, when it expects them gone, how many it expects to force. */
static void print_intent(const struct drain_cli *d, const struct drain_plan *plan,
                         const struct drain_grade_result *g)
{
        const struct drain_plan_node *pn = plan->n_nodes > 0 ? &plan->nodes[0] : NULL;
        FILE *f = d->common.json ? stderr : stdout;
        char when[96] = "never (a PDB lets none of them go)", deadline[64] = "";
        size_t to_go = pn ? pn->n_to_go : 0, forced = pn ? pn->n_forced : 0;
        /* Without a deadline, pods the plan sees killed at its far end are those no PDB lets go. */
        if (pn && d->no_deadline && pn->n_killed > 0)
                snprintf(when, sizeof(when), "never (%zu wait for a PDB that allows no disruption now)",
                         pn->n_killed);
        else if (pn && pn->finish_usec != DRAIN_NEVER)
                snprintf(when, sizeof(when), "in %.0f s",
                         pn->finish_usec > d->now ? (double)(pn->finish_usec - d->now) / (double)USEC_PER_SEC
                                                  : 0.0);
        format_rfc3339(d->deadline_usec, deadline, sizeof(deadline));
        /* With a deadline, the two estimates as every other surface prints them. */
        _cleanup_free_ char *outlook =
            !d->no_deadline && g->outlook.known ? drain_outlook_format(&g->outlook) : NULL;
        if (outlook)
                fprintf(f, "node/%s: %zu pod%s to move; %s; ", d->node, to_go, to_go == 1 ? "" : "s",
                        outlook);
        else
                fprintf(f, "node/%s: %zu pod%s to move, predicted finish %s, %zu expected forced; ", d->node,
                        to_go, to_go == 1 ? "" : "s", when, forced);
        if (d->no_deadline)
                fprintf(f,
                        "no deadline, every PDB respected (--budget or --deadline sets one, --policy force "
                        "deletes around the PDBs at the last safe moment)\n");
        else if (d->notice_kind)
                fprintf(f, "deadline %s of its %s notice, policy %s\n", deadline, d->notice_kind,
                        d->cfg->drain.policy == DRAIN_POLICY_RESPECT ? "respect" : "force");
        else
                fprintf(f, "deadline %s, policy %s\n", deadline,
                        d->cfg->drain.policy == DRAIN_POLICY_RESPECT ? "respect" : "force");
        fflush(f);
}

int cmd_drain(int argc, char **argv)
{
        struct drain_cli d = { .verb = "drain" };
        struct drain_run run = { .d = &d };
        int r, status;

        r = drain_cli_parse_args(&d, argc, argv);
        if (r < 0)
                r = drain_cli_setup(&d, d.common.dry_run ? 0 : SERVICE_ALERTS | SERVICE_WEBHOOK);
        if (r >= 0) {
                drain_cli_done(&d);
                return r;
        }
        /* The node, asked once with a short bound: a missing node or a server that cannot be reached is
         * told at once, not after the whole budget. Its notice, if any, gives the deadline. */
        _cleanup_free_ char *node_path = kube_path(NULL, "v1", NULL, "nodes", d.node, NULL);
        cJSON *node = NULL;
        if (!node_path || drain_cli_api_first(&d, node_path, d.node, &node) < 0) {
                if (!node_path)
                        fprintf(stderr, "spotdrain drain: %s\n", strerror(ENOMEM));
                drain_cli_done(&d);
                return EXIT_ERROR;
        }
        drain_target(&d, node);
        cJSON_Delete(node);
        {
                _cleanup_(drain_plan_freep) struct drain_plan *plan = NULL;
                _cleanup_(drain_grade_result_clear) struct drain_grade_result grade = { 0 };
                struct drain_room room = { 0 };
                /* The line before the drain is told at once or not at all: the drain does not wait on a
                 * server that lists slowly, and finds its own way around one that fails. */
                if (!d.common.dry_run) {
                        uint64_t left = d.deadline_usec > clk_now() ? d.deadline_usec - clk_now() : 0;
                        d.sync_timeout = left / 10 < REACH_TIMEOUT ? left / 10 + 1 : REACH_TIMEOUT;
                }
                r = plan_node(&d, &plan, &grade, &room);
                d.sync_timeout = 0;
                /* The plan's tables show the far end it was made against: say that it is none. */
                if (r >= 0 && d.common.dry_run && d.no_deadline && !d.common.json)
                        printf("DEADLINE none: planned against one %.0f days away (--budget or --deadline "
                               "sets one)\n",
                               (double)NO_DEADLINE_USEC / (double)(24 * 3600 * USEC_PER_SEC));
                if (r >= 0 && d.common.dry_run)
                        r = print_plan(&d, plan, &grade, &room);
                else if (r >= 0)
                        print_intent(&d, plan, &grade);
                else if (!d.common.dry_run) {
                        log_warning_errno(r, "cannot plan the drain of %s before it starts; draining it",
                                          d.node);
                        d.reported = false;
                        r = 0;
                }
                if (r < 0 || d.common.dry_run) {
                        drain_cli_done(&d);
                        if (r >= 0)
                                return EXIT_OK;
                        if (!d.reported)
                                fprintf(stderr, "spotdrain drain: cannot plan the drain of %s: %s\n", d.node,
                                        strerror(-r));
                        return EXIT_ERROR;
                }
        }

        struct drain_exec_options o = { 0 };
        drain_exec_options_from_config(d.cfg, &o);
        o.node = d.node;
        o.kind = d.notice_kind ? d.notice_kind : "manual";
        o.instance_id = d.notice_instance;
        o.notice_usec = d.now;
        o.deadline_usec = d.deadline_usec;
        /* A notice's deadline is the instance's end; one of --budget or --deadline is the user's. */
        o.deadline_chosen = !d.notice_kind;
        o.no_deadline = d.no_deadline;
        _cleanup_(report_freep) struct report *rp = NULL;
        _cleanup_(report_rec_freep) struct report_rec *rec = NULL;
        r = d.report ? report_start(&d, &rp, &rec) : 0;
        if (r >= 0 && (r = drain_exec_start(d.client, service_alerts(d.svc), &o, on_done, &run, &run.x)) < 0)
                log_error_errno(r, "cannot start draining %s", d.node);
        if (r >= 0 && rec && (r = report_rec_follow(rec, d.loop, run.x)) < 0)
                log_error_errno(r, "cannot record the drain for the report");
        if (r < 0) {
                if (rec)
                        (void)report_rec_finish(rec);
                drain_exec_free(run.x);
                drain_cli_done(&d);
                return EXIT_ERROR;
        }
        run.live = term_status_start(STDERR_FILENO);
        run.color = run.live && term_color(STDERR_FILENO);
        refresh(&run);
        r = loop_run_until(d.loop, &run.done, UINT64_MAX);
        run.refresh = timer_cancel(run.refresh);
        term_status_stop();
        free(run.shown);
        if (r < 0) {
                log_error_errno(r, "drain of %s interrupted", d.node);
                status = EXIT_ERROR;
        } else {
                const struct drain_exec_result *res = drain_exec_result(run.x);
                print_result(&run, res);
                /* A pod killed is a drain that did not make it, as simulate counts it. */
                status = res->outcome == DRAIN_EXEC_ERROR ? EXIT_ERROR
                         : res->outcome == DRAIN_EXEC_DEADLINE_MISSED || res->killed > 0
                             ? EXIT_DEADLINE_MISSED
                             : EXIT_OK;
                if (rp && report_finish(&d, res, rp, rec) < 0 && status == EXIT_OK)
                        status = EXIT_ERROR;
        }
        if (rec)
                (void)report_rec_finish(rec); /* its watches, before the client goes */
        drain_exec_free(run.x);
        /* The alerts' Kubernetes Events and the webhook: drain-completed (or deadline-missed) was raised
         * just now. */
        service_flush(d.svc);
        drain_cli_done(&d);
        return status;
}
