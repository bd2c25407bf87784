/* The simulator's API operations: list/get, eviction and delete exactly as kube-apiserver answers them, node
 * patch/replace, and create/replace of stored objects (events, leases, PDBs). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/disruption.h"
#include "sim/model_internal.h"
#include "spotdrain/keys.h"
#include "spotdrain/util.h"

static int answer_obj(struct sim_answer *ret, int code, cJSON *obj)
{
        if (!obj)
                return -ENOMEM;
        *ret = (struct sim_answer){ .status = code, .body = obj };
        return 0;
}

/* A PUT whose body has a metadata.name other than the name on the URL: kube-apiserver refuses to rename. */
static bool renames(const cJSON *md, const char *name)
{
        const char *bname = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "name"));
        return bname && !streq(bname, name);
}

static int rename_refused(struct sim_answer *ret)
{
        return sim_answer_status(ret, 400, "BadRequest",
                                 "the name of the object does not match the name on the URL", NULL, NULL);
}

static const char *resource_of(enum sim_kind kind, const cJSON *obj)
{
        switch (kind) {
        case SIM_EVENT: {
                const char *api = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(obj, "apiVersion"));
                return startswith(api, "events.k8s.io/") ? "events.events.k8s.io" : "events";
        }
        case SIM_LEASE:
                return "leases.coordination.k8s.io";
        case SIM_CONFIGMAP:
                return "configmaps";
        case SIM_PDB:
                return "poddisruptionbudgets.policy";
        case SIM_NODE:
                return "nodes";
        case SIM_POD:
                return "pods";
        default:
                return sim_kind_resource(kind);
        }
}

/* ---- list / get ---- */
static int push_rendered(cJSON *arr, cJSON *o)
{
        if (!o)
                return -ENOMEM;
        if (!cJSON_AddItemToArray(arr, o)) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        return 0;
}

static bool wl_has_kind(const struct sim_workload *w, enum sim_kind kind)
{
        switch (kind) {
        case SIM_DEPLOYMENT:
        case SIM_REPLICASET:
                return w->sc->kind == SIM_WL_DEPLOYMENT;
        case SIM_STATEFULSET:
                return w->sc->kind == SIM_WL_STATEFULSET;
        case SIM_DAEMONSET:
                return w->sc->kind == SIM_WL_DAEMONSET;
        default:
                return false;
        }
}

static bool labels_kept(const struct sim_list_filter *f, const cJSON *labels)
{
        return !f || !f->labels || f->labels(labels, f->userdata);
}

/* Pods of one node (or the unscheduled ones), in the order of the full list. */
static int list_pods_on_node(struct sim *s, const char *ns, const struct sim_list_filter *f, cJSON *arr)
{
        int r = 0;
        if (isempty(f->node_name)) {
                for (size_t i = 0; i < s->n_pods && r >= 0; i++) {
                        const struct sim_pod *p = s->pods[i];
                        if (p->node < 0 && (!ns || streq(ns, sim_pod_ns(p))) && labels_kept(f, p->labels))
                                r = push_rendered(arr, sim_render_pod(s, p));
                }
                return r;
        }
        const struct sim_node *n = sim_find_node(s, f->node_name);
        for (const struct sim_pod *p = n ? n->pods.head : NULL; p && r >= 0;
             p = p->links[SIM_LINK_NODE].next)
                if ((!ns || streq(ns, sim_pod_ns(p))) && labels_kept(f, p->labels))
                        r = push_rendered(arr, sim_render_pod(s, p));
        return r;
}

int sim_list(struct sim *s, enum sim_kind kind, const char *ns, cJSON **ret_items)
{
        return sim_list_filtered(s, kind, ns, NULL, ret_items);
}

int sim_list_pods_part(struct sim *s, const char *ns, const struct sim_list_filter *f, uint64_t after,
                       uint64_t upto, size_t max, cJSON **ret_items, uint64_t *ret_last)
{
        sim_begin(s);
        _cleanup_(cJSON_Deletep) cJSON *arr = cJSON_CreateArray();
        if (!arr)
                return -ENOMEM;
        /* sim.pods is sorted by creation number: the first one after `after`. */
        size_t lo = 0, hi = s->n_pods, kept = 0;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (s->pods[mid]->seq <= after)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        uint64_t last = after;
        int r = 0;
        for (size_t i = lo; i < s->n_pods && s->pods[i]->seq <= upto && kept < max && r >= 0; i++) {
                const struct sim_pod *p = s->pods[i];
                last = p->seq;
                if ((!ns || streq(ns, sim_pod_ns(p))) && labels_kept(f, p->labels)) {
                        r = push_rendered(arr, sim_render_pod(s, p));
                        kept++;
                }
        }
        if (r < 0)
                return r;
        *ret_items = TAKE_PTR(arr);
        *ret_last = last;
        return 0;
}

uint64_t sim_pods_last_created(const struct sim *s)
{
        return s->n_pods ? s->pods[s->n_pods - 1]->seq : 0;
}

int sim_list_filtered(struct sim *s, enum sim_kind kind, const char *ns, const struct sim_list_filter *f,
                      cJSON **ret_items)
{
        sim_begin(s);
        _cleanup_(cJSON_Deletep) cJSON *arr = cJSON_CreateArray();
        if (!arr)
                return -ENOMEM;
        int r = 0;
        switch (kind) {
        case SIM_NAMESPACE:
                for (size_t i = 0; i < s->n_nss && r >= 0; i++)
                        r = push_rendered(arr, sim_render_ns(s, &s->nss[i]));
                break;
        case SIM_NODE:
                for (size_t i = 0; i < s->n_nodes && r >= 0; i++)
                        if (!s->nodes[i]->removed && labels_kept(f, s->nodes[i]->labels))
                                r = push_rendered(arr, sim_render_node(s, s->nodes[i]));
                break;
        case SIM_POD:
                if (f && f->node_name) {
                        r = list_pods_on_node(s, ns, f, arr);
                        break;
                }
                for (size_t i = 0; i < s->n_pods && r >= 0; i++)
                        if ((!ns || streq(ns, sim_pod_ns(s->pods[i]))) && labels_kept(f, s->pods[i]->labels))
                                r = push_rendered(arr, sim_render_pod(s, s->pods[i]));
                break;
        case SIM_PDB:
                for (size_t i = 0; i < s->n_pdbs && r >= 0; i++)
                        if (!ns || streq(ns, s->pdbs[i]->ns))
                                r = push_rendered(arr, sim_render_pdb(s, s->pdbs[i]));
                break;
        case SIM_REPLICASET:
        case SIM_DEPLOYMENT:
        case SIM_STATEFULSET:
        case SIM_DAEMONSET:
                for (size_t i = 0; i < s->n_wls && r >= 0; i++)
                        if (wl_has_kind(&s->wls[i], kind) && (!ns || streq(ns, s->wls[i].sc->ns)))
                                r = push_rendered(arr, sim_render_workload(s, &s->wls[i], kind));
                break;
        case SIM_HPA:
                for (size_t i = 0; i < s->n_wls && r >= 0; i++)
                        if (s->wls[i].sc->has_hpa && (!ns || streq(ns, s->wls[i].sc->ns)))
                                r = push_rendered(arr, sim_render_hpa(s, &s->wls[i]));
                break;
        case SIM_SERVICE:
                for (size_t i = 0; i < s->n_wls && r >= 0; i++)
                        if (s->wls[i].sc->has_service && (!ns || streq(ns, s->wls[i].sc->ns)))
                                r = push_rendered(arr, sim_render_service(s, &s->wls[i]));
                break;
        case SIM_TARGETGROUPBINDING:
                for (size_t i = 0; i < s->n_wls && r >= 0; i++)
                        if (s->wls[i].sc->has_tg && (!ns || streq(ns, s->wls[i].sc->ns)))
                                r = push_rendered(arr, sim_render_tgb(s, &s->wls[i]));
                break;
        case SIM_VOLUMEATTACHMENT:
                for (size_t i = 0; i < s->n_vas && r >= 0; i++)
                        r = push_rendered(arr, sim_render_va(s, s->vas[i]));
                break;
        case SIM_EVENT:
        case SIM_LEASE:
        case SIM_CONFIGMAP:
                for (size_t i = 0; i < s->n_objs && r >= 0; i++)
                        if (s->objs[i]->kind == kind && (!ns || streq(ns, s->objs[i]->ns)))
                                r = push_rendered(arr, cJSON_Duplicate(s->objs[i]->obj, true));
                break;
        default:
                return -EINVAL;
        }
        if (r < 0)
                return r;
        *ret_items = TAKE_PTR(arr);
        return 0;
}

static struct sim_obj *find_obj(struct sim *s, enum sim_kind kind, const char *ns, const char *name)
{
        for (size_t i = 0; i < s->n_objs; i++)
                if (s->objs[i]->kind == kind && streq(s->objs[i]->name, name) &&
                    streq_ptr(s->objs[i]->ns, ns))
                        return s->objs[i];
        return NULL;
}

static struct sim_pdb *find_pdb(struct sim *s, const char *ns, const char *name)
{
        for (size_t i = 0; i < s->n_pdbs; i++)
                if (streq(s->pdbs[i]->name, name) && streq(s->pdbs[i]->ns, ns))
                        return s->pdbs[i];
        return NULL;
}

int sim_get(struct sim *s, enum sim_kind kind, const char *ns, const char *name, cJSON **ret_obj)
{
        sim_begin(s);
        cJSON *o = NULL;
        switch (kind) {
        case SIM_NAMESPACE:
                for (size_t i = 0; i < s->n_nss && !o; i++)
                        if (streq(s->nss[i].name, name))
                                o = sim_render_ns(s, &s->nss[i]);
                break;
        case SIM_NODE: {
                struct sim_node *n = sim_find_node(s, name);
                if (n)
                        o = sim_render_node(s, n);
                break;
        }
        case SIM_POD: {
                struct sim_pod *p = sim_find_pod(s, ns, name);
                if (p)
                        o = sim_render_pod(s, p);
                break;
        }
        case SIM_PDB: {
                struct sim_pdb *d = find_pdb(s, ns, name);
                if (d)
                        o = sim_render_pdb(s, d);
                break;
        }
        case SIM_REPLICASET:
        case SIM_DEPLOYMENT:
        case SIM_STATEFULSET:
        case SIM_DAEMONSET:
                for (size_t i = 0; i < s->n_wls && !o; i++) {
                        const struct sim_workload *w = &s->wls[i];
                        if (!wl_has_kind(w, kind) || !streq(ns, w->sc->ns))
                                continue;
                        if (streq(name, kind == SIM_REPLICASET ? w->rs_name : w->sc->name))
                                o = sim_render_workload(s, w, kind);
                }
                break;
        case SIM_HPA: {
                struct sim_workload *w = sim_find_deployment(s, ns, name);
                if (w && w->sc->has_hpa)
                        o = sim_render_hpa(s, w);
                break;
        }
        case SIM_SERVICE:
                for (size_t i = 0; i < s->n_wls && !o; i++)
                        if (s->wls[i].sc->has_service && streq(ns, s->wls[i].sc->ns) &&
                            streq(name, s->wls[i].sc->name))
                                o = sim_render_service(s, &s->wls[i]);
                break;
        case SIM_TARGETGROUPBINDING:
                for (size_t i = 0; i < s->n_wls && !o; i++)
                        if (s->wls[i].sc->has_tg && streq(ns, s->wls[i].sc->ns) &&
                            streq(name, s->wls[i].sc->name))
                                o = sim_render_tgb(s, &s->wls[i]);
                break;
        case SIM_VOLUMEATTACHMENT: {
                struct sim_va *va = sim_va_find(s, name);
                if (va)
                        o = sim_render_va(s, va);
                break;
        }
        case SIM_EVENT:
        case SIM_LEASE:
        case SIM_CONFIGMAP: {
                struct sim_obj *g = find_obj(s, kind, ns, name);
                if (g)
                        o = cJSON_Duplicate(g->obj, true);
                else
                        return -ENOENT;
                break;
        }
        default:
                return -EINVAL;
        }
        if (!o)
                return -ENOENT;
        *ret_obj = o;
        return 0;
}

/* ---- eviction and delete ---- */
static int matching_pdbs(struct sim *s, const struct sim_pod *p, struct sim_pdb **ret_first)
{
        int n = 0;
        *ret_first = NULL;
        for (size_t i = 0; i < s->n_pdbs; i++)
                if (sim_pdb_matches(s->pdbs[i], p)) {
                        if (!n)
                                *ret_first = s->pdbs[i];
                        n++;
                }
        return n;
}

static int uid_mismatch(struct sim_answer *ret, const struct sim_pod *p, const char *uid)
{
        _cleanup_free_ char *msg =
            strprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", uid, p->uid);
        if (!msg)
                return -ENOMEM;
        return sim_answer_status(ret, 409, "Conflict", msg, p->name, "pods");
}

static int too_many_requests(struct sim_answer *ret, const struct sim_pdb *d)
{
        _cleanup_free_ char *msg =
            strprintf("The disruption budget %s needs %d healthy pods and has %d currently", d->name,
                      d->desired, d->current);
        if (!msg)
                return -ENOMEM;
        /* No retryAfterSeconds: kubectl's client would retry silently instead of reporting the 429. */
        _cleanup_(cJSON_Deletep) cJSON *body =
            sim_render_status(429, "Failure", "TooManyRequests",
                              "Cannot evict pod as it would violate the pod's disruption budget.");
        if (!body)
                return -ENOMEM;
        cJSON *causes = cJSON_AddArrayToObject(cJSON_AddObjectToObject(body, "details"), "causes");
        cJSON *cause = cJSON_CreateObject();
        if (!causes || !cause || !cJSON_AddItemToArray(causes, cause)) {
                cJSON_Delete(cause);
                return -ENOMEM;
        }
        if (!cJSON_AddStringToObject(cause, "reason", "DisruptionBudget") ||
            !cJSON_AddStringToObject(cause, "message", msg))
                return -ENOMEM;
        *ret = (struct sim_answer){ .status = 429, .body = TAKE_PTR(body) };
        return 0;
}

static int evicted(struct sim *s, struct sim_pod *p, int64_t grace, struct sim_answer *ret)
{
        int r = sim_pod_delete(s, p, grace);
        if (r < 0)
                return r;
        sim_settle(s);
        return sim_answer_status(ret, 201, NULL, NULL, NULL, NULL);
}

int sim_evict(struct sim *s, const char *ns, const char *name, const cJSON *eviction, const char *client,
              struct sim_answer *ret)
{
        sim_begin(s);
        struct sim_pod *p = sim_find_pod(s, ns, name);
        if (!p)
                return sim_answer_not_found(ret, "pods", name);
        const cJSON *opts = cJSON_GetObjectItemCaseSensitive(eviction, "deleteOptions");
        const char *uid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(opts, "preconditions"), "uid"));
        if (uid && !streq(uid, p->uid))
                return uid_mismatch(ret, p, uid);
        const cJSON *g = cJSON_GetObjectItemCaseSensitive(opts, "gracePeriodSeconds");
        int64_t grace = cJSON_IsNumber(g) && g->valuedouble >= 0 ? (int64_t)g->valuedouble : -1;

        /* Pods that are not running, or already going, are deleted without consulting any budget. */
        if (p->phase != SIM_RUNNING || p->deleting)
                return evicted(s, p, grace, ret);
        struct sim_pdb *d;
        int n = matching_pdbs(s, p, &d);
        if (n > 1)
                return sim_answer_status(
                    ret, 500, "InternalError",
                    "This pod has more than one PodDisruptionBudget, which the eviction "
                    "subresource does not support.",
                    NULL, NULL);
        if (n == 0)
                return evicted(s, p, grace, ret);
        struct sim_budget_status st = {
                .expected = d->expected, .desired = d->desired, .current = d->current, .allowed = d->allowed
        };
        if (!p->ready && sim_budget_allows_unhealthy(&st, d->always_allow))
                return evicted(s, p, grace, ret);
        if (d->allowed <= 0)
                return too_many_requests(ret, d);

        struct sim_disrupted *a = realloc(d->disrupted, (d->n_disrupted + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        d->disrupted = a;
        if (!(d->disrupted[d->n_disrupted].pod = strdup(p->name)))
                return -ENOMEM;
        d->disrupted[d->n_disrupted++].at = s->t;
        d->allowed--;
        if (d->allowed == 0)
                d->cond_since = s->t;
        (void)sim_emit(s, SIM_PDB, "MODIFIED", d);
        return evicted(s, p, grace, ret);
}

int sim_delete_pod(struct sim *s, const char *ns, const char *name, int64_t grace_seconds, const char *uid,
                   const char *client, struct sim_answer *ret)
{
        sim_begin(s);
        struct sim_pod *p = sim_find_pod(s, ns, name);
        if (!p)
                return sim_answer_not_found(ret, "pods", name);
        if (uid && !streq(uid, p->uid))
                return uid_mismatch(ret, p, uid);
        if (!p->deleting && p->phase == SIM_RUNNING) {
                bool covered = false;
                for (size_t i = 0; i < s->n_pdbs; i++) {
                        struct sim_pdb *d = s->pdbs[i];
                        if (!sim_pdb_matches(d, p))
                                continue;
                        covered = true;
                        bool healthy = p->ready && !sim_pdb_is_disrupted(d, p->name);
                        if (healthy && d->current - 1 < d->desired)
                                s->pdb_breaches++;
                }
                if (covered && !p->forced) {
                        p->forced = true;
                        s->nodes[p->node]->pods_forced++;
                }
        }
        int r = sim_pod_delete(s, p, grace_seconds);
        if (r < 0)
                return r;
        r = answer_obj(ret, 200, sim_render_pod(s, p));
        sim_settle(s);
        return r;
}

/* ---- nodes: patch and replace ---- */
struct node_edit {
        cJSON *labels, *annotations, *taints;
        bool unschedulable;
        const char *error; /* why the patch is invalid */
        const char *rv;    /* resourceVersion precondition */
};

static void node_edit_done(struct node_edit *e)
{
        cJSON_Delete(e->labels);
        cJSON_Delete(e->annotations);
        cJSON_Delete(e->taints);
}

static int valid_taints(struct sim *s, cJSON *taints, struct node_edit *e)
{
        cJSON *t;
        if (!cJSON_IsArray(taints)) {
                e->error = "spec.taints: must be a list";
                return -EINVAL;
        }
        cJSON_ArrayForEach (t, taints) {
                const char *key = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "key"));
                const char *effect = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "effect"));
                if (isempty(key)) {
                        e->error = "spec.taints.key: Required value";
                        return -EINVAL;
                }
                if (!streq(effect, "NoSchedule") && !streq(effect, "PreferNoSchedule") &&
                    !streq(effect, "NoExecute")) {
                        e->error =
                            "spec.taints.effect: Unsupported value: supported values: \"NoSchedule\", "
                            "\"PreferNoSchedule\", \"NoExecute\"";
                        return -EINVAL;
                }
                if (streq(effect, "NoExecute") && !cJSON_GetObjectItemCaseSensitive(t, "timeAdded")) {
                        char buf[32];
                        if (!cJSON_AddStringToObject(t, "timeAdded", sim_timestamp(s, s->t, buf)))
                                return -ENOMEM;
                }
        }
        return 0;
}

static int merge_strings(cJSON *dst, const cJSON *patch, struct node_edit *e)
{
        return sim_merge_string_map(dst, patch, &e->error);
}

static int set_unschedulable(const cJSON *v, struct node_edit *e)
{
        if (cJSON_IsNull(v) || !v)
                e->unschedulable = false;
        else if (cJSON_IsBool(v))
                e->unschedulable = cJSON_IsTrue(v);
        else {
                e->error = "spec.unschedulable: must be a boolean";
                return -EINVAL;
        }
        return 0;
}

static int set_taints(struct sim *s, const cJSON *v, struct node_edit *e)
{
        cJSON_Delete(e->taints);
        e->taints = NULL;
        if (!v || cJSON_IsNull(v))
                return 0;
        e->taints = cJSON_Duplicate(v, true);
        if (!e->taints)
                return -ENOMEM;
        return valid_taints(s, e->taints, e);
}

static int merge_patch(struct sim *s, const cJSON *patch, struct node_edit *e)
{
        int r;
        if (!cJSON_IsObject(patch)) {
                e->error = "the patch must be a JSON object";
                return -EINVAL;
        }
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(patch, "metadata");
        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(patch, "spec");
        e->rv = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "resourceVersion"));
        const cJSON *v;
        if ((v = cJSON_GetObjectItemCaseSensitive(md, "labels")) && (r = merge_strings(e->labels, v, e)) < 0)
                return r;
        if ((v = cJSON_GetObjectItemCaseSensitive(md, "annotations")) &&
            (r = merge_strings(e->annotations, v, e)) < 0)
                return r;
        if ((v = cJSON_GetObjectItemCaseSensitive(spec, "unschedulable")) &&
            (r = set_unschedulable(v, e)) < 0)
                return r;
        if ((v = cJSON_GetObjectItemCaseSensitive(spec, "taints")) && (r = set_taints(s, v, e)) < 0)
                return r;
        return 0;
}

/* JSON pointer segment, ~1 → / and ~0 → ~. */
static char *pointer_unescape(const char *seg)
{
        char *out = strdup(seg), *w = out;
        if (!out)
                return NULL;
        for (const char *c = seg; *c; c++) {
                if (c[0] == '~' && c[1] == '1') {
                        *w++ = '/';
                        c++;
                } else if (c[0] == '~' && c[1] == '0') {
                        *w++ = '~';
                        c++;
                } else
                        *w++ = *c;
        }
        *w = 0;
        return out;
}

/* Sets o[k] to the string v, in place of any value it had. */
static int obj_set_string(cJSON *o, const char *k, const char *v)
{
        cJSON *item = cJSON_CreateString(v);
        if (!item)
                return -ENOMEM;
        cJSON_DeleteItemFromObjectCaseSensitive(o, k);
        if (!cJSON_AddItemToObject(o, k, item)) {
                cJSON_Delete(item);
                return -ENOMEM;
        }
        return 0;
}

static int json_patch_map(cJSON *map, const char *op, const char *key, const cJSON *value,
                          struct node_edit *e)
{
        _cleanup_free_ char *k = pointer_unescape(key);
        if (!k)
                return -ENOMEM;
        if (streq(op, "remove")) {
                if (!cJSON_GetObjectItemCaseSensitive(map, k)) {
                        e->error = "remove: the key does not exist";
                        return -EINVAL;
                }
                cJSON_DeleteItemFromObjectCaseSensitive(map, k);
                return 0;
        }
        if (!cJSON_IsString(value)) {
                e->error = "metadata: labels and annotations must be strings";
                return -EINVAL;
        }
        return obj_set_string(map, k, value->valuestring);
}

static int json_patch_taint(struct sim *s, const char *op, const char *idx, const cJSON *value,
                            struct node_edit *e)
{
        if (!e->taints && !(e->taints = cJSON_CreateArray()))
                return -ENOMEM;
        int n = cJSON_GetArraySize(e->taints);
        char *end = NULL;
        long i = streq(idx, "-") ? n : strtol(idx, &end, 10);
        if ((end && (*end || end == idx)) || i < 0 || i > n || (!streq(op, "add") && i == n)) {
                e->error = "spec.taints: index out of range";
                return -EINVAL;
        }
        if (streq(op, "remove")) {
                cJSON_DeleteItemFromArray(e->taints, (int)i);
                return 0;
        }
        cJSON *t = cJSON_Duplicate(value, true);
        if (!t)
                return -ENOMEM;
        if (streq(op, "add")) {
                if (i == n ? !cJSON_AddItemToArray(e->taints, t)
                           : !cJSON_InsertItemInArray(e->taints, (int)i, t)) {
                        cJSON_Delete(t);
                        return -ENOMEM;
                }
        } else if (!cJSON_ReplaceItemInArray(e->taints, (int)i, t)) {
                cJSON_Delete(t);
                return -ENOMEM;
        }
        return valid_taints(s, e->taints, e);
}

static int json_patch(struct sim *s, const cJSON *patch, struct node_edit *e)
{
        const cJSON *opj;
        int r;
        if (!cJSON_IsArray(patch)) {
                e->error = "a JSON patch must be a list of operations";
                return -EINVAL;
        }
        cJSON_ArrayForEach (opj, patch) {
                const char *op = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(opj, "op"));
                const char *path = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(opj, "path"));
                const cJSON *value = cJSON_GetObjectItemCaseSensitive(opj, "value");
                if (!path || !(streq(op, "add") || streq(op, "replace") || streq(op, "remove") ||
                               streq(op, "test"))) {
                        e->error = "unsupported JSON patch operation";
                        return -EINVAL;
                }
                bool rm = streq(op, "remove");
                if (streq(op, "test")) {
                        if (!streq(path, "/metadata/resourceVersion") || !cJSON_IsString(value)) {
                                e->error = "test is supported on /metadata/resourceVersion only";
                                return -EINVAL;
                        }
                        e->rv = value->valuestring;
                        continue;
                }
                if (!rm && !value) {
                        e->error = "missing value";
                        return -EINVAL;
                }
                if (streq(path, "/spec/unschedulable"))
                        r = set_unschedulable(rm ? NULL : value, e);
                else if (streq(path, "/spec/taints"))
                        r = set_taints(s, rm ? NULL : value, e);
                else if (startswith(path, "/spec/taints/"))
                        r = json_patch_taint(s, op, path + strlen("/spec/taints/"), value, e);
                else if (streq(path, "/metadata/labels") || streq(path, "/metadata/annotations")) {
                        cJSON *dst = streq(path, "/metadata/labels") ? e->labels : e->annotations;
                        cJSON *null = NULL;
                        if (rm && !(null = cJSON_CreateNull()))
                                return -ENOMEM;
                        while (!rm && dst->child)
                                cJSON_DeleteItemFromObjectCaseSensitive(dst, dst->child->string);
                        r = merge_strings(dst, rm ? null : value, e);
                        cJSON_Delete(null);
                } else if (startswith(path, "/metadata/labels/"))
                        r = json_patch_map(e->labels, op, path + strlen("/metadata/labels/"), value, e);
                else if (startswith(path, "/metadata/annotations/"))
                        r = json_patch_map(e->annotations, op, path + strlen("/metadata/annotations/"),
                                           value, e);
                else {
                        e->error = "unsupported path";
                        return -EINVAL;
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

static int node_edit_begin(const struct sim_node *n, struct node_edit *e)
{
        *e = (struct node_edit){ .unschedulable = n->unschedulable };
        if (!(e->labels = cJSON_Duplicate(n->labels, true)) ||
            !(e->annotations = cJSON_Duplicate(n->annotations, true)) ||
            (n->taints && !(e->taints = cJSON_Duplicate(n->taints, true))))
                return -ENOMEM;
        return 0;
}

/* Applies the edit; a change that changes nothing keeps the resourceVersion, as kube-apiserver does. */
static int node_edit_commit(struct sim *s, struct sim_node *n, struct node_edit *e, struct sim_answer *ret)
{
        if (cJSON_GetArraySize(e->taints) == 0) {
                cJSON_Delete(e->taints);
                e->taints = NULL;
        }
        bool changed = e->unschedulable != n->unschedulable || !cJSON_Compare(e->labels, n->labels, true) ||
                       !cJSON_Compare(e->annotations, n->annotations, true) || (!e->taints != !n->taints) ||
                       (e->taints && !cJSON_Compare(e->taints, n->taints, true));
        if (changed) {
                bool cordon = e->unschedulable && !n->unschedulable;
                bool uncordon = !e->unschedulable && n->unschedulable;
                cJSON_Delete(n->labels);
                cJSON_Delete(n->annotations);
                cJSON_Delete(n->taints);
                n->labels = TAKE_PTR(e->labels);
                n->annotations = TAKE_PTR(e->annotations);
                n->taints = TAKE_PTR(e->taints);
                n->unschedulable = e->unschedulable;
                bool excluded = cJSON_HasObjectItem(n->labels, SPOTDRAIN_LABEL_EXCLUDE_LB);
                if (excluded && n->lb_excluded_at < 0)
                        n->lb_excluded_at = sim_now(s);
                else if (!excluded)
                        n->lb_excluded_at = -1;
                if (cordon)
                        sim_node_cordon_changed(s, n);
                if (uncordon)
                        sim_node_uncordoned(s, n);
                (void)sim_emit(s, SIM_NODE, "MODIFIED", n);
                sim_settle(s);
        }
        return answer_obj(ret, 200, sim_render_node(s, n));
}

int sim_patch(struct sim *s, enum sim_kind kind, const char *ns, const char *name, const char *content_type,
              const cJSON *patch, struct sim_answer *ret)
{
        if (kind == SIM_DEPLOYMENT)
                return sim_deployment_patch(s, ns, name, content_type, patch, ret);
        sim_begin(s);
        if (kind != SIM_NODE) {
                _cleanup_free_ char *msg =
                    strprintf("the simulator does not patch %s", sim_kind_resource(kind));
                if (!msg)
                        return -ENOMEM;
                return sim_answer_status(ret, 405, "MethodNotAllowed", msg, NULL, NULL);
        }
        struct sim_node *n = sim_find_node(s, name);
        if (!n)
                return sim_answer_not_found(ret, "nodes", name);
        _cleanup_(node_edit_done) struct node_edit e;
        int r = node_edit_begin(n, &e);
        if (r < 0)
                return r;
        bool jp = content_type && strstr(content_type, "json-patch");
        r = jp ? json_patch(s, patch, &e) : merge_patch(s, patch, &e);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return sim_answer_invalid(ret, "Node", name, e.error ?: "malformed patch");
        if (sim_rv_stale(e.rv, n->rv))
                return sim_answer_conflict(ret, "nodes", name);
        return node_edit_commit(s, n, &e, ret);
}

static int node_replace(struct sim *s, const char *name, const cJSON *obj, struct sim_answer *ret)
{
        struct sim_node *n = sim_find_node(s, name);
        if (!n)
                return sim_answer_not_found(ret, "nodes", name);
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
        if (renames(md, name))
                return rename_refused(ret);
        _cleanup_(node_edit_done) struct node_edit e;
        int r = node_edit_begin(n, &e);
        if (r < 0)
                return r;
        e.rv = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "resourceVersion"));
        /* PUT replaces: what the body lacks is gone. */
        cJSON_Delete(e.labels);
        cJSON_Delete(e.annotations);
        if (!(e.labels = cJSON_CreateObject()) || !(e.annotations = cJSON_CreateObject()))
                return -ENOMEM;
        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
        const cJSON *v;
        if (((v = cJSON_GetObjectItemCaseSensitive(md, "labels")) &&
             (r = merge_strings(e.labels, v, &e)) < 0) ||
            ((v = cJSON_GetObjectItemCaseSensitive(md, "annotations")) &&
             (r = merge_strings(e.annotations, v, &e)) < 0) ||
            (r = set_unschedulable(cJSON_GetObjectItemCaseSensitive(spec, "unschedulable"), &e)) < 0 ||
            (r = set_taints(s, cJSON_GetObjectItemCaseSensitive(spec, "taints"), &e)) < 0) {
                if (r == -ENOMEM)
                        return r;
                return sim_answer_invalid(ret, "Node", name, e.error ?: "invalid object");
        }
        if (sim_rv_stale(e.rv, n->rv))
                return sim_answer_conflict(ret, "nodes", name);
        return node_edit_commit(s, n, &e, ret);
}

/* ---- stored objects: events, leases, PDBs ---- */
static int pdb_from_body(struct sim *s, const char *ns, const char *name, const cJSON *obj,
                         struct sim_pdb **ret, const char **ret_error)
{
        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
        const cJSON *ml = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(spec, "selector"), "matchLabels");
        struct sim_pdb *d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        if (!(d->name = strdup(name)) || !(d->ns = strdup(ns)) ||
            !(d->match_labels = ml ? cJSON_Duplicate(ml, true) : cJSON_CreateObject())) {
                sim_pdb_free(d);
                return -ENOMEM;
        }
        static const char *const fields[] = { "minAvailable", "maxUnavailable" };
        for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(spec, fields[i]);
                struct intorstr *dst = i == 0 ? &d->spec.min_available : &d->spec.max_unavailable;
                if (!v)
                        continue;
                char buf[32];
                if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble == floor(v->valuedouble))
                        snprintf(buf, sizeof(buf), "%.0f", v->valuedouble);
                else if (cJSON_IsString(v) && strchr(v->valuestring, '%'))
                        snprintf(buf, sizeof(buf), "%s", v->valuestring);
                else
                        buf[0] = 0;
                if (sim_budget_parse(buf, dst) < 0) {
                        *ret_error = "spec: minAvailable and maxUnavailable must be an int or a percent";
                        sim_pdb_free(d);
                        return -EINVAL;
                }
        }
        if (d->spec.min_available.set == d->spec.max_unavailable.set) {
                *ret_error = "spec: exactly one of minAvailable and maxUnavailable is required";
                sim_pdb_free(d);
                return -EINVAL;
        }
        const char *pol =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(spec, "unhealthyPodEvictionPolicy"));
        d->always_allow = streq(pol, "AlwaysAllow");
        *ret = d;
        return 0;
}

static int create_pdb(struct sim *s, const char *ns, const char *name, const cJSON *obj,
                      struct sim_answer *ret)
{
        if (find_pdb(s, ns, name)) {
                _cleanup_free_ char *msg =
                    strprintf("poddisruptionbudgets.policy \"%s\" already exists", name);
                return msg ? sim_answer_status(ret, 409, "AlreadyExists", msg, name, "poddisruptionbudgets")
                           : -ENOMEM;
        }
        struct sim_pdb *d;
        const char *why = NULL;
        int r = pdb_from_body(s, ns, name, obj, &d, &why);
        if (r == -EINVAL)
                return sim_answer_invalid(ret, "PodDisruptionBudget", name, why);
        if (r < 0)
                return r;
        d->cond_since = s->t;
        size_t before = s->n_pdbs;
        r = sim_pdb_add(s, d);
        if (r < 0 && s->n_pdbs == before) /* not stored: still ours */
                sim_pdb_free(d);
        if (r < 0)
                return r;
        return answer_obj(ret, 201, sim_render_pdb(s, d));
}

int sim_create(struct sim *s, enum sim_kind kind, const char *ns, const cJSON *obj, struct sim_answer *ret)
{
        sim_begin(s);
        if (kind != SIM_EVENT && kind != SIM_LEASE && kind != SIM_CONFIGMAP && kind != SIM_PDB) {
                _cleanup_free_ char *msg =
                    strprintf("the simulator does not create %s", sim_kind_resource(kind));
                return msg ? sim_answer_status(ret, 405, "MethodNotAllowed", msg, NULL, NULL) : -ENOMEM;
        }
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "name"));
        const char *gen = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "generateName"));
        const char *bns = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "namespace"));
        if (!cJSON_IsObject(obj) || (md && !cJSON_IsObject(md)))
                return sim_answer_status(ret, 400, "BadRequest",
                                         "the body must be a JSON object with metadata", NULL, NULL);
        if (bns && ns && !streq(bns, ns))
                return sim_answer_status(
                    ret, 400, "BadRequest",
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request",
                    NULL, NULL);
        _cleanup_free_ char *genname = NULL;
        if (isempty(name) && !isempty(gen)) {
                char sfx[6];
                sim_rand_suffix(s, sfx);
                if (!(genname = strprintf("%s%s", gen, sfx)))
                        return -ENOMEM;
                name = genname;
        }
        if (isempty(name))
                return sim_answer_invalid(ret,
                                          kind == SIM_LEASE       ? "Lease"
                                          : kind == SIM_PDB       ? "PodDisruptionBudget"
                                          : kind == SIM_CONFIGMAP ? "ConfigMap"
                                                                  : "Event",
                                          "",
                                          "metadata.name: Required value: name or generateName is required");
        if (kind == SIM_PDB)
                return create_pdb(s, ns, name, obj, ret);

        const char *resource = resource_of(kind, obj);
        if (find_obj(s, kind, ns, name)) {
                _cleanup_free_ char *msg = strprintf("%s \"%s\" already exists", resource, name);
                _cleanup_free_ char *rk = strndup(resource, strcspn(resource, "."));
                return msg && rk ? sim_answer_status(ret, 409, "AlreadyExists", msg, name, rk) : -ENOMEM;
        }
        _cleanup_free_ struct sim_obj *g = calloc(1, sizeof(*g));
        if (!g)
                return -ENOMEM;
        g->kind = kind;
        _cleanup_free_ char *uid = sim_new_uid(s);
        char ts[32];
        if (!uid || !(g->obj = cJSON_Duplicate(obj, true)) || !(g->name = strdup(name)) ||
            (ns && !(g->ns = strdup(ns))))
                goto oom;
        cJSON *gmd = cJSON_GetObjectItemCaseSensitive(g->obj, "metadata");
        if (!gmd && !(gmd = cJSON_AddObjectToObject(g->obj, "metadata")))
                goto oom;
        if (!cJSON_GetObjectItemCaseSensitive(g->obj, "apiVersion") &&
            obj_set_string(g->obj, "apiVersion", kind == SIM_LEASE ? "coordination.k8s.io/v1" : "v1") < 0)
                goto oom;
        if (!cJSON_GetObjectItemCaseSensitive(g->obj, "kind") &&
            obj_set_string(g->obj, "kind",
                           kind == SIM_LEASE       ? "Lease"
                           : kind == SIM_CONFIGMAP ? "ConfigMap"
                                                   : "Event") < 0)
                goto oom;
        if (obj_set_string(gmd, "name", name) < 0 || (ns && obj_set_string(gmd, "namespace", ns) < 0) ||
            obj_set_string(gmd, "uid", uid) < 0 ||
            obj_set_string(gmd, "creationTimestamp", sim_timestamp(s, s->t, ts)) < 0)
                goto oom;
        struct sim_obj **a = realloc(s->objs, (s->n_objs + 1) * sizeof(*a));
        if (!a)
                goto oom;
        s->objs = a;
        s->objs[s->n_objs++] = g;
        struct sim_obj *stored = TAKE_PTR(g);
        (void)sim_emit(s, kind, "ADDED", stored);
        return answer_obj(ret, 201, cJSON_Duplicate(stored->obj, true));
oom:
        cJSON_Delete(g->obj);
        free(g->name);
        free(g->ns);
        return -ENOMEM;
}

int sim_replace(struct sim *s, enum sim_kind kind, const char *ns, const char *name, const cJSON *obj,
                struct sim_answer *ret)
{
        sim_begin(s);
        const cJSON *bmd = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
        if (!cJSON_IsObject(obj) || (bmd && !cJSON_IsObject(bmd)))
                return sim_answer_status(ret, 400, "BadRequest",
                                         "the body must be a JSON object with metadata", NULL, NULL);
        if (kind == SIM_NODE)
                return node_replace(s, name, obj, ret);
        if (kind == SIM_DEPLOYMENT)
                return sim_deployment_replace(s, ns, name, obj, ret);
        if (kind != SIM_EVENT && kind != SIM_LEASE && kind != SIM_CONFIGMAP) {
                _cleanup_free_ char *msg =
                    strprintf("the simulator does not replace %s", sim_kind_resource(kind));
                return msg ? sim_answer_status(ret, 405, "MethodNotAllowed", msg, NULL, NULL) : -ENOMEM;
        }
        const char *resource = resource_of(kind, obj);
        struct sim_obj *g = find_obj(s, kind, ns, name);
        if (!g)
                return sim_answer_not_found(ret, resource, name);
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
        if (renames(md, name))
                return rename_refused(ret);
        const char *rv = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "resourceVersion"));
        const cJSON *gmd = cJSON_GetObjectItemCaseSensitive(g->obj, "metadata");
        const char *cur = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(gmd, "resourceVersion"));
        if (!isempty(rv) && !streq(rv, cur))
                return sim_answer_conflict(ret, resource, name);

        _cleanup_(cJSON_Deletep) cJSON *n = cJSON_Duplicate(obj, true);
        if (!n)
                return -ENOMEM;
        cJSON *nmd = cJSON_GetObjectItemCaseSensitive(n, "metadata");
        if (!nmd && !(nmd = cJSON_AddObjectToObject(n, "metadata")))
                return -ENOMEM;
        /* Identity and creation stay the server's. */
        static const char *const keep[] = { "uid", "creationTimestamp" };
        for (size_t i = 0; i < ARRAY_SIZE(keep); i++) {
                const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(gmd, keep[i]));
                if (v && obj_set_string(nmd, keep[i], v) < 0)
                        return -ENOMEM;
        }
        if (obj_set_string(nmd, "name", name) < 0 || (ns && obj_set_string(nmd, "namespace", ns) < 0))
                return -ENOMEM;
        cJSON_Delete(g->obj);
        g->obj = TAKE_PTR(n);
        (void)sim_emit(s, kind, "MODIFIED", g);
        return answer_obj(ret, 200, cJSON_Duplicate(g->obj, true));
}

int sim_pod_log_facts(struct sim *s, const char *ns, const char *name, struct sim_pod_log_facts *ret)
{
        sim_begin(s);
        const struct sim_pod *p = sim_find_pod(s, ns, name);
        if (!p)
                return -ENOENT;
        *ret = (struct sim_pod_log_facts){
                .started = p->node >= 0,
                .terminating = p->sigtermed,
                .started_at = p->scheduled_at,
                .ready_at = p->ready_at,
                .sigterm_at = p->sigterm_at,
                .exit_at = p->exit_at,
                .grace = p->grace,
                .graceful = p->wl->sc->shutdown <= (double)p->grace,
        };
        snprintf(ret->name, sizeof(ret->name), "%s", p->name);
        snprintf(ret->workload, sizeof(ret->workload), "%s", p->wl->sc->name);
        snprintf(ret->node, sizeof(ret->node), "%s", p->node >= 0 ? s->nodes[p->node]->name : "");
        snprintf(ret->uid, sizeof(ret->uid), "%s", p->uid);
        return 0;
}
