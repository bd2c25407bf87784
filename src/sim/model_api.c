/* The simulator's API operations: list/get, eviction and delete exactly as kube-apiserver answers them, node
 * patch/replace, and create/replace of stored objects (events, leases, PDBs). This file has list/get and
 * what the others share; model_evict.c, model_patch.c and model_store.c the rest. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/disruption.h"
#include "sim/model_internal.h"
#include "spotdrain/keys.h"
#include "spotdrain/util.h"

int sim_answer_obj(struct sim_answer *ret, int code, cJSON *obj)
{
        if (!obj)
                return -ENOMEM;
        *ret = (struct sim_answer){ .status = code, .body = obj };
        return 0;
}

/* A PUT whose body has a metadata.name other than the name on the URL: kube-apiserver refuses to rename. */
bool sim_md_renames(const cJSON *md, const char *name)
{
        const char *bname = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "name"));
        return bname && !streq(bname, name);
}

int sim_rename_refused(struct sim_answer *ret)
{
        return sim_answer_status(ret, 400, "BadRequest",
                                 "the name of the object does not match the name on the URL", NULL, NULL);
}

const char *sim_resource_of(enum sim_kind kind, const cJSON *obj)
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
                for (size_t i = 0, kept = 0; i < s->n_pods && r >= 0; i++) {
                        if ((ns && !streq(ns, sim_pod_ns(s->pods[i]))) ||
                            !labels_kept(f, s->pods[i]->labels))
                                continue;
                        if (f && f->max && kept++ < f->skip)
                                continue;
                        if (f && f->max && kept > f->skip + f->max)
                                break;
                        r = push_rendered(arr, sim_render_pod(s, s->pods[i]));
                }
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

struct sim_obj *sim_find_obj(struct sim *s, enum sim_kind kind, const char *ns, const char *name)
{
        for (size_t i = 0; i < s->n_objs; i++)
                if (s->objs[i]->kind == kind && streq(s->objs[i]->name, name) &&
                    streq_ptr(s->objs[i]->ns, ns))
                        return s->objs[i];
        return NULL;
}

struct sim_pdb *sim_find_pdb(struct sim *s, const char *ns, const char *name)
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
                struct sim_pdb *d = sim_find_pdb(s, ns, name);
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
                struct sim_obj *g = sim_find_obj(s, kind, ns, name);
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
