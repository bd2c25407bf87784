/* One node's plan as it stands now, as a drain would act on it (drain_node_now()): the planner's input
 * assembled from the API (the node's pods, the PDBs, its owners' startups, the Services and target groups
 * that hold pods, the Deployments that can surge), its graded verdict, and the room its surged pods find
 * elsewhere. For the one-shot commands (plan, drain), which only parse their flags and print. Blocking: it
 * runs the client's loop until each answer. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "drain/engine_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/engine.h"
#include "spotdrain/kube.h"
#include "spotdrain/surge.h"

#define USEC_PER_SEC UINT64_C(1000000)
#define SYNC_TIMEOUT (60 * USEC_PER_SEC)

int drain_list_sync(struct kube_client *c, const char *path, const char *label_selector,
                    const char *field_selector, uint64_t timeout_usec, cJSON **ret)
{
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        struct kube_list_options o = { .label_selector = label_selector, .field_selector = field_selector };
        int r = kube_list(c, path, &o, kube_sync_done, &s, &call);
        r = kube_sync_wait(c, r, call, &s, timeout_usec ? timeout_usec : SYNC_TIMEOUT);
        if (r < 0) {
                log_error_reason(r, s.result.message, "cannot list %s", path);
                kube_result_clear(&s.result);
                return r;
        }
        *ret = TAKE_PTR(s.result.object);
        kube_result_clear(&s.result);
        return 0;
}

/* A list of the plan's, whose failure is said in a sentence of its own (*o->reported). */
static int list_of(const struct drain_node_now_options *o, const char *path, const char *label_selector,
                   const char *field_selector, cJSON **ret)
{
        int r = drain_list_sync(o->client, path, label_selector, field_selector, o->list_timeout_usec, ret);
        if (r < 0 && o->reported)
                *o->reported = true;
        return r;
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
static int node_startups(const struct drain_node_now_options *o, const cJSON *items,
                         struct drain_startup **ret, size_t *ret_n)
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
                if (list_of(o, path, selector, NULL, &list) < 0)
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

struct drain_inputs_options drain_inputs_options_from_settings(const struct drain_settings *settings,
                                                               uint64_t now_usec)
{
        size_t n = 0;
        for (char **c = settings->critical_priority_classes; c && *c; c++)
                n++;
        return (struct drain_inputs_options){
                .now_usec = now_usec,
                .policy =
                    settings->policy == DRAIN_POLICY_RESPECT ? DRAIN_POLICY_RESPECT : DRAIN_POLICY_FORCE,
                .surge = (enum drain_surge_mode)settings->surge,
                .evict_daemonsets = !settings->ignore_daemonsets,
                .default_startup_usec = settings->default_startup_usec,
                .critical_classes = (const char *const *)settings->critical_priority_classes,
                .n_critical_classes = n,
                /* What the graded verdict goes by (drain_grade_node): the stops seen, else the expected
                 * share of each grace period, which the grade does not take as a fact. */
                .shutdown_basis = DRAIN_SHUTDOWN_EXPECTED,
                .expected_shutdown_fraction = settings->expected_shutdown_fraction,
        };
}

static void surge_learnt(void *userdata)
{
        *(bool *)userdata = true;
}

/* Which pods can surge (drain.surge): their Deployments read as a drain reads them (surge.h), once, for
 * both inputs (the same pods on another shutdown basis). */
static int plan_surge(const struct drain_node_now_options *o, struct drain_inputs *safe,
                      struct drain_inputs *expected)
{
        _cleanup_(drain_surge_freep) struct drain_surge *sg = NULL;
        bool changed = false;
        int r;
        if (o->settings->surge == DRAIN_SURGE_OFF)
                return 0;
        r = drain_surge_new(o->client, o->node, (enum drain_surge_mode)o->settings->surge, NULL,
                            surge_learnt, &changed, &sg);
        /* The first pass starts the reads and waits for them; the second marks the pods as learnt. */
        for (size_t i = 0; r >= 0 && i < drain_inputs_n_pods(safe); i++)
                r = drain_surge_input(sg, safe, i);
        while (r >= 0 && drain_surge_learning(sg)) {
                changed = false;
                if (loop_run_until(kube_client_loop(o->client), &changed, SYNC_TIMEOUT) < 0 || !changed)
                        break;
        }
        for (size_t i = 0; r >= 0 && i < drain_inputs_n_pods(safe); i++)
                r = drain_surge_input(sg, safe, i);
        for (size_t i = 0; r >= 0 && i < drain_inputs_n_pods(expected); i++)
                r = drain_surge_input(sg, expected, i);
        return r;
}

/* The TargetGroupBindings (*ret), 1; 0 without any or without the CRD (404); a failure is a warning. */
int drain_list_tgbs(struct kube_client *c, uint64_t timeout_usec, cJSON **ret)
{
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        int r = kube_list(c, "/apis/elbv2.k8s.aws/v1beta1/targetgroupbindings",
                          &(struct kube_list_options){}, kube_sync_done, &s, &call);
        r = kube_sync_wait(c, r, call, &s, timeout_usec ? timeout_usec : SYNC_TIMEOUT);
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

/* The planner's input of node, its owners' startups and every PDB of pdbs (a list's items): what is added
 * before its pods. */
static int inputs_begin(const struct drain_inputs_options *io, const char *node, uint64_t deadline_usec,
                        uint64_t margin_usec, const struct drain_startup *startups, size_t n_startups,
                        const cJSON *pdbs, struct drain_inputs **ret)
{
        _cleanup_(drain_inputs_freep) struct drain_inputs *di = NULL;
        const cJSON *obj;
        int r = drain_inputs_new(io, &di);
        if (r >= 0)
                r = drain_inputs_add_node(di, node, deadline_usec, margin_usec, NULL);
        if (r >= 0)
                r = drain_inputs_add_startups(di, startups, n_startups);
        if (r < 0)
                return r;
        cJSON_ArrayForEach (obj, pdbs) {
                if (drain_inputs_add_pdb(di, obj) == -ENOMEM)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(di);
        return 0;
}

int drain_node_plan_listed(const struct drain_node_listed *l, struct drain_plan **ret,
                           struct drain_grade_result *ret_grade)
{
        _cleanup_(drain_inputs_freep) struct drain_inputs *di = NULL;
        int r = inputs_begin(&l->options, l->node, l->deadline_usec, l->margin_usec, l->startups,
                             l->n_startups, l->pdbs, &di);
        if (r < 0)
                return r;
        for (size_t i = 0; i < l->n_pods; i++)
                if (drain_inputs_add_pod(di, 0, l->pods[i], NULL) == -ENOMEM)
                        return -ENOMEM;
        r = drain_grade_node(drain_inputs_get(di), 0, ret_grade);
        if (r < 0)
                return r;
        /* The slow estimate's plan, as plan's table: predicted_seconds is its PDB's. */
        return drain_plan_whole_grace(drain_inputs_get(di), ret);
}

/* The planner's input of the node on basis. */
static int node_input(const struct drain_node_now_options *o, const struct node_objects *no,
                      enum drain_shutdown_basis basis, struct drain_inputs **ret)
{
        _cleanup_(drain_inputs_freep) struct drain_inputs *di = NULL;
        struct drain_inputs_options io = drain_inputs_options_from_settings(o->settings, o->now_usec);
        const cJSON *obj;
        io.shutdown_basis = basis;
        int r = inputs_begin(&io, o->node, o->deadline_usec, o->settings->safety_margin_usec, no->startups,
                             no->n_startups, kube_list_items(no->pdbs), &di);
        const char *self_ns = o->self_namespace, *self = o->self_name;
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
                r = drain_inputs_set_node_lb_hold(di, 0, clk_now() + o->settings->lb_deregistration_usec);
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
static int plan_room(const struct drain_node_now_options *o, const struct node_objects *no,
                     const struct drain_plan *plan, struct drain_room *ret)
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
        if (list_of(o, "/api/v1/nodes", NULL, NULL, &nodes) < 0 ||
            list_of(o, "/api/v1/pods", NULL, NULL, &pods) < 0) {
                log_warning("cannot tell whether other nodes have room for the %zu surged pod%s", n,
                            n == 1 ? "" : "s");
                r = 0;
        } else
                r = drain_room_fit(kube_list_items(nodes), kube_list_items(pods), o->node, want, n, ret);
        cJSON_Delete(nodes);
        cJSON_Delete(pods);
        return r;
}

/* The plan of one node as it stands now, as a drain would act on it, its graded verdict, and the room its
 * surged pods find elsewhere. */
int drain_node_now(const struct drain_node_now_options *o, struct drain_plan **ret,
                   struct drain_grade_result *ret_grade, struct drain_room *ret_room)
{
        _cleanup_free_ char *field = strprintf("spec.nodeName=%s", o->node);
        _cleanup_(drain_inputs_freep) struct drain_inputs *safe = NULL, *expected = NULL;
        _cleanup_(node_objects_done) struct node_objects no = { 0 };
        int r;

        if (!field)
                return -ENOMEM;
        r = list_of(o, "/api/v1/pods", NULL, field, &no.pods);
        if (r >= 0)
                r = list_of(o, "/apis/policy/v1/poddisruptionbudgets", NULL, NULL, &no.pdbs);
        if (r >= 0 && o->settings->exclude_from_load_balancers && o->settings->lb_deregistration_usec &&
            list_of(o, "/api/v1/services", NULL, NULL, &no.services) < 0)
                log_warning("cannot list Services: no pod is held for the load balancers in the plan");
        if (r >= 0 && o->settings->target_groups && !o->settings->cordon_only &&
            drain_list_tgbs(o->client, o->list_timeout_usec, &no.tgbs) > 0 &&
            list_of(o, "/api/v1/services", NULL, NULL, &no.tg_services) < 0)
                log_warning("cannot list Services: no pod is held for its target group in the plan");
        if (r >= 0)
                r = node_startups(o, kube_list_items(no.pods), &no.startups, &no.n_startups);
        if (r >= 0)
                r = node_input(o, &no, DRAIN_SHUTDOWN_SAFE, &safe);
        if (r >= 0)
                r = node_input(o, &no, DRAIN_SHUTDOWN_EXPECTED, &expected);
        /* Surge (drain.surge) changes what the PDBs allow: the grade and the plan both see it. */
        if (r >= 0)
                r = plan_surge(o, safe, expected);
        if (r >= 0)
                r = drain_grade_node(drain_inputs_get(expected), 0, ret_grade);
        if (r >= 0)
                r = drain_plan_make(drain_inputs_get(safe), ret);
        if (r >= 0)
                r = plan_room(o, &no, *ret, ret_room);
        return r;
}
