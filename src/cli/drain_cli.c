/* The part the one-shot drain commands (drain, plan, audit) share: their arguments and setup, the API
 * server's first answer explained, blocking lists, and one node's plan as it stands now (the planner's
 * input assembled from the API, its graded verdict, the room its surged pods find) and its printing. */
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

#define SYNC_TIMEOUT (60 * USEC_PER_SEC)

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
int drain_cli_plan_node(struct drain_cli *d, struct drain_plan **ret, struct drain_grade_result *ret_grade,
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
