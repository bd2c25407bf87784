/* spotdrain audit: how each spot node's drain would go if its notice came now (docs/contracts.md §1). */
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

/* ---- audit ---- */

struct audit_pod {
        struct kube_pod pod;
        const cJSON *obj;
};

/* A node as the audit judges it: what an interruption would be to it. */
struct audit_node {
        /* name first: str_cmp orders and finds them by it */
        const char *name, *capacity_type, *zone; /* borrowed from audit.nodes; "unknown" when unlabelled */
        bool judged;                             /* spot (or unknown), or every node with --all-nodes */
};

/* A target group of pods on a judged node, its delay (-1: unknown) and a node of those pods. */
struct audit_lb {
        const char *arn, *binding_ns, *binding, *node;
        long delay;
};

struct audit_finding {
        const struct kube_pdb *pdb;
        const char *node; /* its worst node */
        int on_node;      /* its pods there */
        size_t plan;      /* index into audit.plans */
        const struct audit_node *an;
        const struct drain_plan_pdb *pp; /* the PDB in its plan */
        int64_t over_usec;               /* how far its finish is past the deadline; INT64_MAX: never */
};

/* Everything one audit holds; released by audit_done(). */
struct audit {
        cJSON *nodes, *pods, *pdbs;
        struct audit_node *an;
        size_t n_an;
        struct audit_pod *ap; /* running pods, by namespace */
        size_t n_ap;
        struct kube_pdb *kp;
        size_t n_kp;
        struct drain_startup *startups;
        size_t n_startups;
        struct audit_finding *f;
        size_t n_f;
        struct drain_plan **plans;         /* one per distinct worst node */
        struct drain_grade_result *grades; /* of each of those nodes */
        const char **plan_nodes;
        size_t n_plans;
        /* drain.target_groups: the TargetGroupBindings whose Service selects pods on judged nodes */
        cJSON *tgbs, *services;
        struct audit_lb *lb;
        size_t n_lb;
};

static void audit_done(struct audit *a)
{
        for (size_t i = 0; i < a->n_plans; i++) {
                drain_plan_free(a->plans[i]);
                drain_grade_result_clear(&a->grades[i]);
        }
        free(a->plans);
        free(a->grades);
        free(a->plan_nodes);
        free(a->f);
        for (size_t i = 0; i < a->n_kp; i++)
                kube_pdb_clear(&a->kp[i]);
        free(a->kp);
        for (size_t i = 0; i < a->n_ap; i++)
                kube_pod_clear(&a->ap[i].pod);
        free(a->ap);
        drain_startups_free(a->startups, a->n_startups);
        free(a->an);
        cJSON_Delete(a->nodes);
        cJSON_Delete(a->pods);
        cJSON_Delete(a->pdbs);
        cJSON_Delete(a->tgbs);
        cJSON_Delete(a->services);
        free(a->lb);
}

static void json_freep(cJSON **j)
{
        cJSON_Delete(*j);
}

static int audit_pod_cmp(const void *x, const void *y)
{
        const struct audit_pod *p = x, *q = y;
        return strcmp(p->pod.namespace ? p->pod.namespace : "", q->pod.namespace ? q->pod.namespace : "");
}

static int str_cmp(const void *x, const void *y)
{
        return strcmp(*(const char *const *)x, *(const char *const *)y);
}

static const char *node_label(const cJSON *node, const char *key)
{
        const cJSON *labels =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(node, "metadata"), "labels");
        return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(labels, key));
}

/* Spot or on-demand, from Karpenter's label, else EKS managed node groups'; "unknown" without either. */
static const char *node_capacity_type(const cJSON *node)
{
        const char *k = node_label(node, "karpenter.sh/capacity-type");
        const char *e = node_label(node, "eks.amazonaws.com/capacityType");
        if (k)
                return streq(k, "spot") ? "spot" : streq(k, "on-demand") ? "on-demand" : k;
        if (e)
                return streq(e, "SPOT") ? "spot" : streq(e, "ON_DEMAND") ? "on-demand" : e;
        return "unknown";
}

static int audit_load_nodes(struct audit *a, struct drain_cli *d)
{
        const cJSON *obj;
        /* The first question, with a short bound: an API server that cannot be reached is told at once. */
        int r = drain_cli_api_first(d, "/api/v1/nodes", NULL, &a->nodes);
        if (r < 0)
                return r;
        a->an = calloc((size_t)cJSON_GetArraySize(kube_list_items(a->nodes)) + 1, sizeof(*a->an));
        if (!a->an)
                return -ENOMEM;
        cJSON_ArrayForEach (obj, kube_list_items(a->nodes)) {
                const char *name = kube_object_str(obj, "metadata.name");
                if (!name)
                        continue;
                struct audit_node *n = &a->an[a->n_an++];
                const char *zone = node_label(obj, "topology.kubernetes.io/zone");
                if (!zone)
                        zone = node_label(obj, "failure-domain.beta.kubernetes.io/zone");
                n->name = name;
                n->zone = zone ? zone : "unknown";
                n->capacity_type = node_capacity_type(obj);
                /* On-demand nodes are not interrupted by spot notices; scheduled events reach them too,
                 * which is what --all-nodes is for. */
                n->judged = d->all_nodes || !streq(n->capacity_type, "on-demand");
        }
        /* By name: every pod looks its node up. */
        qsort(a->an, a->n_an, sizeof(*a->an), str_cmp);
        return 0;
}

static const struct audit_node *audit_node(const struct audit *a, const char *name)
{
        if (!name || a->n_an == 0)
                return NULL;
        return bsearch(&name, a->an, a->n_an, sizeof(*a->an), str_cmp);
}

static int audit_load(struct audit *a, struct drain_cli *d)
{
        const cJSON *obj;
        int r;

        r = audit_load_nodes(a, d);
        if (r >= 0)
                r = drain_cli_list_sync(d, "/api/v1/pods", NULL, NULL, &a->pods);
        if (r >= 0)
                r = drain_cli_list_sync(d, "/apis/policy/v1/poddisruptionbudgets", NULL, NULL, &a->pdbs);
        if (r >= 0)
                r = drain_startups_measure(kube_list_items(a->pods), &a->startups, &a->n_startups);
        if (r < 0)
                return r;
        size_t n_pods = (size_t)cJSON_GetArraySize(kube_list_items(a->pods));
        size_t n_pdbs = (size_t)cJSON_GetArraySize(kube_list_items(a->pdbs));
        a->ap = calloc(n_pods + 1, sizeof(*a->ap));
        a->kp = calloc(n_pdbs + 1, sizeof(*a->kp));
        a->f = calloc(n_pdbs + 1, sizeof(*a->f));
        a->plans = calloc(n_pdbs + 1, sizeof(*a->plans));
        a->grades = calloc(n_pdbs + 1, sizeof(*a->grades));
        a->plan_nodes = calloc(n_pdbs + 1, sizeof(*a->plan_nodes));
        if (!a->ap || !a->kp || !a->f || !a->plans || !a->grades || !a->plan_nodes)
                return -ENOMEM;
        cJSON_ArrayForEach (obj, kube_list_items(a->pods)) {
                struct kube_pod *p = &a->ap[a->n_ap].pod;
                if (kube_pod_parse(obj, p) < 0)
                        continue;
                /* Only pods that a node's interruption would touch. */
                if (!p->node_name || streq_ptr(p->phase, "Succeeded") || streq_ptr(p->phase, "Failed")) {
                        kube_pod_clear(p);
                        continue;
                }
                a->ap[a->n_ap++].obj = obj;
        }
        /* By namespace, so that each PDB looks at its own namespace's pods only. */
        qsort(a->ap, a->n_ap, sizeof(*a->ap), audit_pod_cmp);
        cJSON_ArrayForEach (obj, kube_list_items(a->pdbs)) {
                if (kube_pdb_parse(obj, &a->kp[a->n_kp]) >= 0)
                        a->n_kp++;
        }
        return 0;
}

/* The node with the most of the PDB's pods, and how many; ret_node NULL when it selects none. */
static int audit_worst(const struct audit *a, const struct kube_pdb *pdb, const char **ret_node, int *ret_n)
{
        struct audit_pod key = { .pod = { .namespace = pdb->namespace } };
        size_t lo = 0, hi = a->n_ap, n = 0;

        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (audit_pod_cmp(&a->ap[mid], &key) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        for (hi = lo; hi < a->n_ap && audit_pod_cmp(&a->ap[hi], &key) == 0; hi++)
                ;
        _cleanup_free_ const char **nodes = calloc(hi - lo + 1, sizeof(*nodes));
        if (!nodes)
                return -ENOMEM;
        for (size_t i = lo; i < hi; i++) {
                const struct audit_node *an = audit_node(a, a->ap[i].pod.node_name);
                /* Only the nodes judged (a node not listed, e.g. created since, is judged too). */
                if (kube_pdb_matches_pod(pdb, &a->ap[i].pod) && (!an || an->judged))
                        nodes[n++] = a->ap[i].pod.node_name;
        }
        /* Sorted, the longest run of one name is the worst node. */
        qsort(nodes, n, sizeof(*nodes), str_cmp);
        *ret_node = NULL;
        *ret_n = 0;
        for (size_t i = 0, j; i < n; i = j) {
                for (j = i; j < n && streq(nodes[j], nodes[i]); j++)
                        ;
                if ((int)(j - i) > *ret_n) {
                        *ret_n = (int)(j - i);
                        *ret_node = nodes[i];
                }
        }
        return 0;
}

/* The plan of a node's interruption now (every pod on it, every PDB) and its graded verdict. */
static int audit_plan(const struct audit *a, const struct drain_cli *d, const char *node,
                      struct drain_plan **ret, struct drain_grade_result *ret_grade)
{
        _cleanup_free_ const cJSON **pods = calloc(a->n_ap ? a->n_ap : 1, sizeof(*pods));
        size_t n = 0;

        if (!pods)
                return -ENOMEM;
        for (size_t i = 0; i < a->n_ap; i++)
                if (streq_ptr(a->ap[i].pod.node_name, node))
                        pods[n++] = a->ap[i].obj;
        struct drain_node_listed l = { .options = drain_inputs_options_from_settings(&d->cfg->drain, d->now),
                                       .node = node,
                                       .deadline_usec = d->deadline_usec,
                                       .margin_usec = d->cfg->drain.safety_margin_usec,
                                       .startups = a->startups,
                                       .n_startups = a->n_startups,
                                       .pdbs = kube_list_items(a->pdbs),
                                       .pods = pods,
                                       .n_pods = n };
        return drain_node_plan_listed(&l, ret, ret_grade);
}

static int audit_analyze(struct audit *a, const struct drain_cli *d)
{
        for (size_t b = 0; b < a->n_kp; b++) {
                const char *worst;
                int n;
                int r = audit_worst(a, &a->kp[b], &worst, &n);
                if (r < 0)
                        return r;
                if (!worst)
                        continue;
                size_t pn = 0;
                while (pn < a->n_plans && !streq(a->plan_nodes[pn], worst))
                        pn++;
                if (pn == a->n_plans) {
                        r = audit_plan(a, d, worst, &a->plans[pn], &a->grades[pn]);
                        if (r < 0)
                                return r;
                        a->plan_nodes[a->n_plans++] = worst;
                }
                const struct drain_plan *plan = a->plans[pn];
                const struct drain_plan_pdb *pp = NULL;
                for (size_t j = 0; j < plan->n_pdbs && !pp; j++)
                        if (streq_ptr(plan->pdbs[j].namespace, a->kp[b].namespace) &&
                            streq_ptr(plan->pdbs[j].name, a->kp[b].name))
                                pp = &plan->pdbs[j];
                if (!pp)
                        continue;
                uint64_t deadline = plan->n_nodes > 0 ? plan->nodes[0].deadline_usec : d->deadline_usec;
                a->f[a->n_f++] = (struct audit_finding){
                        .pdb = &a->kp[b],
                        .node = worst,
                        .on_node = n,
                        .plan = pn,
                        .an = audit_node(a, worst),
                        .pp = pp,
                        .over_usec = pp->unforced_finish_usec == DRAIN_NEVER
                                         ? INT64_MAX
                                         : (int64_t)pp->unforced_finish_usec - (int64_t)deadline,
                };
        }
        return 0;
}

/* Findings first, the furthest over the budget first (never finishing is furthest); then the PDBs that
 * fit. Ties by name, so that the order is stable. */
static int audit_finding_cmp(const void *x, const void *y)
{
        const struct audit_finding *p = x, *q = y;
        if (p->pp->feasible != q->pp->feasible)
                return p->pp->feasible ? 1 : -1;
        if (p->over_usec != q->over_usec)
                return p->over_usec > q->over_usec ? -1 : 1;
        int c = strcmp(p->pp->namespace ? p->pp->namespace : "", q->pp->namespace ? q->pp->namespace : "");
        return c ? c : strcmp(p->pp->name ? p->pp->name : "", q->pp->name ? q->pp->name : "");
}

/* Whether the PDB named as pp is infeasible in plan (NULL: none is). */
static bool pdb_infeasible(const struct drain_plan *plan, const struct drain_plan_pdb *pp)
{
        for (size_t j = 0; plan && j < plan->n_pdbs; j++)
                if (streq_ptr(plan->pdbs[j].namespace, pp->namespace) &&
                    streq_ptr(plan->pdbs[j].name, pp->name))
                        return !plan->pdbs[j].feasible;
        return false;
}

/* drain.target_groups: every TargetGroupBinding whose Service selects running pods on a judged node, and
 * its target group's deregistration delay from ELBv2. Without the CRD (404) there are none. */
static int audit_target_groups(struct audit *a, struct drain_cli *d)
{
        const cJSON *b;
        int r;

        if (!d->cfg->drain.target_groups || drain_list_tgbs(d->client, d->sync_timeout, &a->tgbs) <= 0)
                return 0;
        r = drain_cli_list_sync(d, "/api/v1/services", NULL, NULL, &a->services);
        if (r < 0)
                return r;
        a->lb = calloc((size_t)cJSON_GetArraySize(kube_list_items(a->tgbs)) + 1, sizeof(*a->lb));
        if (!a->lb)
                return -ENOMEM;
        cJSON_ArrayForEach (b, kube_list_items(a->tgbs)) {
                const char *ns = kube_object_str(b, "metadata.namespace"),
                           *svc_name = kube_object_str(b, "spec.serviceRef.name"),
                           *arn = kube_object_str(b, "spec.targetGroupARN");
                const cJSON *svc = NULL, *o;
                cJSON_ArrayForEach (o, kube_list_items(a->services))
                        if (streq_ptr(kube_object_str(o, "metadata.namespace"), ns) &&
                            streq_ptr(kube_object_str(o, "metadata.name"), svc_name))
                                svc = o;
                if (!svc || isempty(arn))
                        continue;
                const char *node = NULL;
                for (size_t i = 0; i < a->n_ap && !node; i++) {
                        const struct audit_node *an = audit_node(a, a->ap[i].pod.node_name);
                        if (an && an->judged && drain_service_selects(svc, &a->ap[i].pod))
                                node = an->name;
                }
                if (node)
                        a->lb[a->n_lb++] = (struct audit_lb){ .arn = arn,
                                                              .binding_ns = ns,
                                                              .binding = kube_object_str(b, "metadata.name"),
                                                              .node = node };
        }
        if (a->n_lb == 0)
                return 0;
        _cleanup_free_ const char **arns = calloc(a->n_lb, sizeof(*arns));
        _cleanup_free_ long *delays = calloc(a->n_lb, sizeof(*delays));
        if (!arns || !delays)
                return -ENOMEM;
        for (size_t i = 0; i < a->n_lb; i++)
                arns[i] = a->lb[i].arn;
        r = elbv2_sync_delays(kube_client_loop(d->client), d->cfg->aws.region, arns, a->n_lb, delays);
        if (r == -ENOMEM)
                return r;
        for (size_t i = 0; i < a->n_lb; i++)
                a->lb[i].delay = delays[i];
        return 0;
}

/* The target groups' part of the report: a table after the PDBs', or "target_groups" in the JSON. The
 * budget a delay must fit: the audit's budget less the safety margin, what a drain would have left. */
static int audit_report_lb(const struct audit *a, const struct drain_cli *d, cJSON *top, int *findings)
{
        uint64_t budget = d->deadline_usec - d->now, margin = d->cfg->drain.safety_margin_usec;
        long fits = (long)((budget > margin ? budget - margin : 0) / USEC_PER_SEC);
        cJSON *list = top ? cJSON_AddArrayToObject(top, "target_groups") : NULL;
        if (d->common.json && !list)
                return -ENOMEM;
        if (!d->common.json && a->n_lb > 0)
                printf("\n%-90s %-24s %-24s %7s %s\n", "TARGET GROUP", "BINDING", "NODE", "DELAY",
                       "WOULD FIT");
        for (size_t i = 0; i < a->n_lb; i++) {
                const struct audit_lb *l = &a->lb[i];
                bool slow = l->delay > fits;
                *findings += slow;
                if (!d->common.json) {
                        _cleanup_free_ char *binding = strprintf("%s/%s", l->binding_ns, l->binding);
                        char delay[24] = "unknown", fit[48] = "";
                        if (l->delay >= 0)
                                snprintf(delay, sizeof(delay), "%ld s", l->delay);
                        if (slow)
                                snprintf(fit, sizeof(fit), "deregistration delay %ld s or less", fits);
                        printf("%-90s %-24s %-24s %7s %s\n", l->arn, binding ? binding : l->binding, l->node,
                               delay, fit);
                        continue;
                }
                cJSON *o = cJSON_CreateObject();
                if (!o || !cJSON_AddItemToArray(list, o)) {
                        cJSON_Delete(o);
                        return -ENOMEM;
                }
                if (!cJSON_AddStringToObject(o, "target_group", l->arn) ||
                    !cJSON_AddStringToObject(o, "namespace", l->binding_ns) ||
                    !cJSON_AddStringToObject(o, "binding", l->binding) ||
                    !cJSON_AddStringToObject(o, "node", l->node) ||
                    !(l->delay >= 0 ? cJSON_AddNumberToObject(o, "delay_seconds", (double)l->delay)
                                    : cJSON_AddNullToObject(o, "delay_seconds")) ||
                    !cJSON_AddBoolToObject(o, "too_slow", slow) ||
                    !(slow ? cJSON_AddNumberToObject(o, "fit_delay_seconds", (double)fits)
                           : cJSON_AddNullToObject(o, "fit_delay_seconds")))
                        return -ENOMEM;
        }
        return 0;
}

/* Prints the table or the JSON; returns the number of findings, or -ENOMEM. */
static int audit_report(const struct audit *a, const struct drain_cli *d)
{
        _cleanup_(json_freep) cJSON *top = cJSON_CreateObject();
        cJSON *list = top ? cJSON_AddArrayToObject(top, "pdbs") : NULL;
        int findings = 0;

        if (!list)
                return -ENOMEM;
        if (!d->common.json)
                printf("%-40s %-24s %-9s %-12s %5s %7s %8s %9s %s\n", "PDB", "WORST NODE", "CAPACITY",
                       "ZONE", "PODS", "ALLOWED", "OVER", "VERDICT", "WOULD FIT");
        for (size_t i = 0; i < a->n_f; i++) {
                const struct drain_plan *plan = a->plans[a->f[i].plan];
                const struct drain_plan_pdb *pp = a->f[i].pp;
                const char *capacity = a->f[i].an ? a->f[i].an->capacity_type : "unknown";
                const char *zone = a->f[i].an ? a->f[i].an->zone : "unknown";
                bool finding = !pp->feasible;
                findings += finding;
                /* Too slow even if its pods stopped at once (certain), or only on the expected stops. */
                bool certain = finding && pdb_infeasible(a->grades[a->f[i].plan].plan, pp);
                if (!d->common.json) {
                        char fit[96] = "";
                        if (finding && pp->fit_max_unavailable >= 0)
                                snprintf(fit, sizeof(fit), "maxUnavailable %d or minAvailable %d",
                                         pp->fit_max_unavailable, pp->fit_min_available);
                        else if (finding)
                                snprintf(fit, sizeof(fit), "no value fits");
                        _cleanup_free_ char *name = strprintf("%s/%s", pp->namespace, pp->name);
                        char over[24] = "-";
                        if (a->f[i].over_usec == INT64_MAX)
                                snprintf(over, sizeof(over), "never");
                        else if (a->f[i].over_usec > 0)
                                snprintf(over, sizeof(over), "+%.0f s",
                                         (double)a->f[i].over_usec / (double)USEC_PER_SEC);
                        printf("%-40s %-24s %-9s %-12s %5d %7d %8s %9s %s\n", name ? name : pp->name,
                               a->f[i].node, capacity, zone, a->f[i].on_node, pp->k, over,
                               certain   ? "too-slow"
                               : finding ? "at-risk"
                                         : "ok",
                               fit);
                        continue;
                }
                cJSON *o = cJSON_CreateObject();
                if (!o || !cJSON_AddItemToArray(list, o)) {
                        cJSON_Delete(o);
                        return -ENOMEM;
                }
                bool ok = cJSON_AddStringToObject(o, "namespace", pp->namespace) &&
                          cJSON_AddStringToObject(o, "pdb", pp->name) &&
                          cJSON_AddStringToObject(o, "worst_node", a->f[i].node) &&
                          cJSON_AddStringToObject(o, "capacity_type", capacity) &&
                          cJSON_AddStringToObject(o, "zone", zone) &&
                          cJSON_AddNumberToObject(o, "pods_on_node", a->f[i].on_node) &&
                          cJSON_AddNumberToObject(o, "allowed", pp->k) &&
                          cJSON_AddBoolToObject(o, "feasible", pp->feasible) &&
                          cJSON_AddStringToObject(o, "grade",
                                                  drain_grade_to_string(certain   ? DRAIN_GRADE_INFEASIBLE
                                                                        : finding ? DRAIN_GRADE_AT_RISK
                                                                                  : DRAIN_GRADE_FITS));
                if (ok && pp->unforced_finish_usec != DRAIN_NEVER)
                        ok = cJSON_AddNumberToObject(o, "predicted_seconds",
                                                     (double)(pp->unforced_finish_usec - plan->now_usec) /
                                                         (double)USEC_PER_SEC);
                else if (ok)
                        ok = cJSON_AddNullToObject(o, "predicted_seconds");
                if (ok)
                        ok = drain_outlook_to_json(&a->grades[a->f[i].plan].outlook, o, "estimates");
                if (ok && a->f[i].over_usec != INT64_MAX)
                        ok = cJSON_AddNumberToObject(o, "over_budget_seconds",
                                                     (double)a->f[i].over_usec / (double)USEC_PER_SEC);
                else if (ok)
                        ok = cJSON_AddNullToObject(o, "over_budget_seconds");
                if (ok && finding && pp->fit_max_unavailable >= 0)
                        ok = cJSON_AddNumberToObject(o, "fit_max_unavailable", pp->fit_max_unavailable) &&
                             cJSON_AddNumberToObject(o, "fit_min_available", pp->fit_min_available);
                if (!ok)
                        return -ENOMEM;
        }
        if (audit_report_lb(a, d, d->common.json ? top : NULL, &findings) < 0)
                return -ENOMEM;
        /* Each worst node's pair of estimates, as plan prints it; OVER is the whole grace's. */
        for (size_t pn = 0; !d->common.json && pn < a->n_plans; pn++) {
                _cleanup_free_ char *text = drain_outlook_format(&a->grades[pn].outlook);
                if (!text)
                        return -ENOMEM;
                printf("ESTIMATE %s: %s\n", a->plan_nodes[pn], text);
        }
        if (d->common.json) {
                if (!cJSON_AddNumberToObject(top, "budget_seconds",
                                             (double)(d->deadline_usec - d->now) / (double)USEC_PER_SEC) ||
                    !cJSON_AddNumberToObject(top, "findings", findings))
                        return -ENOMEM;
                _cleanup_free_ char *text = cJSON_Print(top);
                if (!text)
                        return -ENOMEM;
                printf("%s\n", text);
        }
        return findings;
}

int cmd_audit(int argc, char **argv)
{
        struct drain_cli d = { .verb = "audit" };
        _cleanup_(audit_done) struct audit a = { 0 };
        int r;

        r = drain_cli_begin(&d, argc, argv, 0);
        if (r >= 0)
                return r;
        r = audit_load(&a, &d);
        if (r >= 0)
                r = audit_analyze(&a, &d);
        if (r >= 0)
                r = audit_target_groups(&a, &d);
        if (r >= 0) {
                qsort(a.f, a.n_f, sizeof(*a.f), audit_finding_cmp);
                r = audit_report(&a, &d);
        }
        drain_cli_done(&d);
        if (r < 0) {
                if (!d.reported)
                        fprintf(stderr, "spotdrain audit: %s\n", strerror(-r));
                return EXIT_ERROR;
        }
        return r > 0 ? EXIT_INFEASIBLE : EXIT_OK;
}
