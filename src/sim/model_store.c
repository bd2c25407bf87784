/* The simulator's API operations: create and replace of stored objects (events, leases, ConfigMaps,
 * PDBs), and the facts of a pod's log. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/disruption.h"
#include "sim/model_internal.h"
#include "spotdrain/keys.h"
#include "spotdrain/util.h"

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
        if (sim_find_pdb(s, ns, name)) {
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
        return sim_answer_obj(ret, 201, sim_render_pdb(s, d));
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

        const char *resource = sim_resource_of(kind, obj);
        if (sim_find_obj(s, kind, ns, name)) {
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
            sim_obj_set_string(g->obj, "apiVersion", kind == SIM_LEASE ? "coordination.k8s.io/v1" : "v1") <
                0)
                goto oom;
        if (!cJSON_GetObjectItemCaseSensitive(g->obj, "kind") &&
            sim_obj_set_string(g->obj, "kind",
                               kind == SIM_LEASE       ? "Lease"
                               : kind == SIM_CONFIGMAP ? "ConfigMap"
                                                       : "Event") < 0)
                goto oom;
        if (sim_obj_set_string(gmd, "name", name) < 0 ||
            (ns && sim_obj_set_string(gmd, "namespace", ns) < 0) ||
            sim_obj_set_string(gmd, "uid", uid) < 0 ||
            sim_obj_set_string(gmd, "creationTimestamp", sim_timestamp(s, s->t, ts)) < 0)
                goto oom;
        struct sim_obj **a = realloc(s->objs, (s->n_objs + 1) * sizeof(*a));
        if (!a)
                goto oom;
        s->objs = a;
        s->objs[s->n_objs++] = g;
        struct sim_obj *stored = TAKE_PTR(g);
        (void)sim_emit(s, kind, "ADDED", stored);
        return sim_answer_obj(ret, 201, cJSON_Duplicate(stored->obj, true));
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
                return sim_node_replace(s, name, obj, ret);
        if (kind == SIM_DEPLOYMENT)
                return sim_deployment_replace(s, ns, name, obj, ret);
        if (kind != SIM_EVENT && kind != SIM_LEASE && kind != SIM_CONFIGMAP) {
                _cleanup_free_ char *msg =
                    strprintf("the simulator does not replace %s", sim_kind_resource(kind));
                return msg ? sim_answer_status(ret, 405, "MethodNotAllowed", msg, NULL, NULL) : -ENOMEM;
        }
        const char *resource = sim_resource_of(kind, obj);
        struct sim_obj *g = sim_find_obj(s, kind, ns, name);
        if (!g)
                return sim_answer_not_found(ret, resource, name);
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
        if (sim_md_renames(md, name))
                return sim_rename_refused(ret);
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
                if (v && sim_obj_set_string(nmd, keep[i], v) < 0)
                        return -ENOMEM;
        }
        if (sim_obj_set_string(nmd, "name", name) < 0 ||
            (ns && sim_obj_set_string(nmd, "namespace", ns) < 0))
                return -ENOMEM;
        cJSON_Delete(g->obj);
        g->obj = TAKE_PTR(n);
        (void)sim_emit(s, kind, "MODIFIED", g);
        return sim_answer_obj(ret, 200, cJSON_Duplicate(g->obj, true));
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
