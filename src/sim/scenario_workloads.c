/* Scenario files: the workloads section (Deployments, StatefulSets, DaemonSets, Jobs, pods; their PDBs and
 * target groups). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/disruption.h"
#include "sim/model_internal.h"
#include "sim/scenario_internal.h"
#include "spotdrain/util.h"
#include "spotdrain/yaml.h"

static int parse_pdb(struct sctx *c, const struct ynode *m, const char *path, struct sim_sc_workload *w)
{
        static const char *const keys[] = { "min_available", "max_unavailable",
                                            "unhealthy_pod_eviction_policy", NULL };
        int r = sim_sc_check_map(c, m, path, keys);
        if (r < 0)
                return r;
        const struct ynode *mn = ynode_get(m, "min_available"), *mx = ynode_get(m, "max_unavailable");
        if (!!mn == !!mx)
                return sim_sc_fail(c, m, path,
                                   "exactly one of min_available and max_unavailable is required");
        const struct ynode *v = mn ?: mx;
        char p[PATH_MAX_LEN];
        sim_sc_sub(p, path, v->key);
        const char *s = ynode_str(v);
        struct intorstr *dst = mn ? &w->pdb.min_available : &w->pdb.max_unavailable;
        /* A quoted plain number is a string without '%' in Kubernetes' IntOrString: reject it as the API
         * would. */
        if (!s || sim_budget_parse(s, dst) < 0 || (v->quoted && !dst->percent) ||
            (dst->percent && dst->value > 100))
                return sim_sc_fail(c, v, p, "must be an int or a percent");
        w->has_pdb = true;
        const struct ynode *pol = ynode_get(m, "unhealthy_pod_eviction_policy");
        if (pol) {
                sim_sc_sub(p, path, "unhealthy_pod_eviction_policy");
                const char *ps = ynode_str(pol);
                if (streq(ps, "AlwaysAllow"))
                        w->pdb_always_allow = true;
                else if (!streq(ps, "IfHealthyBudget"))
                        return sim_sc_fail(c, pol, p, "must be IfHealthyBudget or AlwaysAllow");
        }
        return 0;
}

/* One IntOrString of a Deployment's rolling update: an int or a percent of at most 100. */
static int parse_rolling_value(struct sctx *c, const struct ynode *m, const char *key, const char *path,
                               struct intorstr *dst)
{
        const struct ynode *v = ynode_get(m, key);
        char p[PATH_MAX_LEN];
        if (!v)
                return 0;
        sim_sc_sub(p, path, key);
        const char *s = ynode_str(v);
        if (!s || sim_budget_parse(s, dst) < 0 || (v->quoted && !dst->percent) ||
            (dst->percent && dst->value > 100))
                return sim_sc_fail(c, v, p, "must be an int or a percent");
        return 0;
}

/* target_group: {type: instance | ip, deregistration_delay_seconds: N (0-3600, ELBv2's default 300),
 * reaction_seconds: how long after a node's exclude label the controller deregisters its instance (0)}. */
static int parse_target_group(struct sctx *c, const struct ynode *m, const char *p,
                              struct sim_sc_workload *w)
{
        static const char *const keys[] = { "type", "deregistration_delay_seconds", "reaction_seconds",
                                            NULL };
        const struct ynode *tg = ynode_get(m, "target_group");
        _cleanup_free_ char *type = NULL;
        char pk[PATH_MAX_LEN];
        int r;

        if (!tg || ynode_is_null(tg))
                return 0;
        sim_sc_sub(pk, p, "target_group");
        w->tg_delay = 300;
        if ((r = sim_sc_check_map(c, tg, pk, keys)) < 0 ||
            (r = sim_sc_get_str(c, tg, "type", pk, false, &type)) < 0 ||
            (r = sim_sc_get_double(c, tg, "deregistration_delay_seconds", pk, 0, 3600, &w->tg_delay)) < 0 ||
            (r = sim_sc_get_double(c, tg, "reaction_seconds", pk, 0, 3600, &w->tg_reaction)) < 0)
                return r;
        if (type && !streq(type, "instance") && !streq(type, "ip"))
                return sim_sc_fail(c, ynode_get(tg, "type"), pk, "type must be instance or ip, not \"%s\"",
                                   type);
        w->tg_ip = type && streq(type, "ip");
        w->has_tg = w->has_service = true;
        return 0;
}

/* strategy: {max_surge, max_unavailable} and hpa: {min_replicas, max_replicas}, both for Deployments. */
static int parse_deploy_extras(struct sctx *c, const struct ynode *m, const char *p,
                               struct sim_sc_workload *w)
{
        static const char *const skeys[] = { "max_surge", "max_unavailable", NULL };
        static const char *const hkeys[] = { "min_replicas", "max_replicas", NULL };
        const struct ynode *st = ynode_get(m, "strategy"), *hpa = ynode_get(m, "hpa");
        char pk[PATH_MAX_LEN];
        int r;

        /* As the API server defaults a RollingUpdate Deployment. */
        w->max_surge = (struct intorstr){ .set = true, .percent = true, .value = 25 };
        w->max_unavailable = w->max_surge;
        if (st && !ynode_is_null(st)) {
                sim_sc_sub(pk, p, "strategy");
                if (w->kind != SIM_WL_DEPLOYMENT)
                        return sim_sc_fail(c, st, pk, "only a Deployment has a rolling update strategy");
                if ((r = sim_sc_check_map(c, st, pk, skeys)) < 0 ||
                    (r = parse_rolling_value(c, st, "max_surge", pk, &w->max_surge)) < 0 ||
                    (r = parse_rolling_value(c, st, "max_unavailable", pk, &w->max_unavailable)) < 0)
                        return r;
                if (w->max_surge.value == 0 && w->max_unavailable.value == 0)
                        return sim_sc_fail(c, st, pk, "max_unavailable may not be 0 when max_surge is 0");
        }
        if (hpa && !ynode_is_null(hpa)) {
                int64_t lo = 1, hi = 0;
                sim_sc_sub(pk, p, "hpa");
                if (w->kind != SIM_WL_DEPLOYMENT)
                        return sim_sc_fail(c, hpa, pk,
                                           "the simulator's autoscalers target Deployments only");
                if ((r = sim_sc_check_map(c, hpa, pk, hkeys)) < 0 ||
                    (r = sim_sc_get_int(c, hpa, "min_replicas", pk, 1, 100000, &lo)) < 0 ||
                    (r = sim_sc_get_int(c, hpa, "max_replicas", pk, 1, 100000, &hi)) < 0)
                        return r;
                if (!ynode_get(hpa, "max_replicas") || hi < lo)
                        return sim_sc_fail(c, hpa, pk, "max_replicas is required, at least min_replicas");
                w->has_hpa = true;
                w->hpa_min = (int)lo;
                w->hpa_max = (int)hi;
        }
        return parse_target_group(c, m, p, w);
}

static int parse_kind(const char *s, enum sim_wl_kind *ret)
{
        static const char *const names[] = {
                [SIM_WL_DEPLOYMENT] = "Deployment",
                [SIM_WL_STATEFULSET] = "StatefulSet",
                [SIM_WL_DAEMONSET] = "DaemonSet",
                [SIM_WL_JOB] = "Job",
                [SIM_WL_POD] = "Pod",
        };
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (streq(s, names[i])) {
                        *ret = (enum sim_wl_kind)i;
                        return 0;
                }
        return -EINVAL;
}

static int parse_workload(struct sctx *c, const struct ynode *m, const char *p, struct sim_scenario *sc,
                          struct sim_sc_workload *w)
{
        static const char *const keys[] = {
                "name",
                "namespace",
                "kind",
                "replicas",
                "placement",
                "requests",
                "termination_grace_seconds",
                "shutdown_seconds",
                "startup_seconds",
                "priority_class",
                "priority",
                "annotations",
                "emptydir",
                "pdb",
                "strategy",
                "hpa",
                "volume_detach_seconds",
                "service",
                "target_group",
                NULL,
        };
        static const char *const rkeys[] = { "cpu", "memory", NULL };
        char pk[PATH_MAX_LEN];
        int r = sim_sc_check_map(c, m, p, keys);
        if (r < 0)
                return r;
        if ((r = sim_sc_get_str(c, m, "name", p, true, &w->name)) < 0 ||
            (r = sim_sc_get_str(c, m, "namespace", p, false, &w->ns)) < 0)
                return r;
        sim_sc_sub(pk, p, "name");
        if (!sim_sc_valid_name(w->name) || strchr(w->name, '.') || strlen(w->name) > 50)
                return sim_sc_fail(c, ynode_get(m, "name"), pk,
                                   "must be a lowercase DNS label of at most 50 characters");
        if (!w->ns && !(w->ns = strdup("default")))
                return -ENOMEM;
        sim_sc_sub(pk, p, "namespace");
        if (!sim_sc_valid_name(w->ns) || strchr(w->ns, '.'))
                return sim_sc_fail(c, ynode_get(m, "namespace"), pk, "must be a lowercase DNS label");
        _cleanup_free_ char *kind = NULL;
        if ((r = sim_sc_get_str(c, m, "kind", p, false, &kind)) < 0)
                return r;
        sim_sc_sub(pk, p, "kind");
        w->kind = SIM_WL_DEPLOYMENT;
        if (kind && parse_kind(kind, &w->kind) < 0)
                return sim_sc_fail(c, ynode_get(m, "kind"), pk,
                                   "must be Deployment, StatefulSet, DaemonSet, Job or Pod, not \"%s\"",
                                   kind);
        int64_t replicas = 1, grace = 30, prio = 0;
        if ((r = sim_sc_get_int(c, m, "replicas", p, 0, 100000, &replicas)) < 0 ||
            (r = sim_sc_get_int(c, m, "termination_grace_seconds", p, 0, 86400 * 7, &grace)) < 0 ||
            (r = sim_sc_get_double(c, m, "shutdown_seconds", p, 0, 86400, &w->shutdown)) < 0 ||
            (r = sim_sc_get_double(c, m, "startup_seconds", p, 0, 86400, &w->startup)) < 0 ||
            (r = sim_sc_get_str(c, m, "priority_class", p, false, &w->priority_class)) < 0 ||
            (r = sim_sc_get_int(c, m, "priority", p, -2147483648LL, 1000000000, &prio)) < 0 ||
            (r = sim_sc_get_bool(c, m, "emptydir", p, &w->emptydir)) < 0)
                return r;
        if ((r = sim_sc_get_bool(c, m, "service", p, &w->has_service)) < 0)
                return r;
        w->volume_detach = -1;
        if (ynode_get(m, "volume_detach_seconds") &&
            (r = sim_sc_get_double(c, m, "volume_detach_seconds", p, 0, 3600, &w->volume_detach)) < 0)
                return r;
        w->replicas = (int)replicas;
        w->grace = grace;
        w->has_priority = ynode_get(m, "priority") != NULL;
        w->priority = (int32_t)prio;
        if (w->priority_class && !*w->priority_class) {
                free(w->priority_class);
                w->priority_class = NULL;
        }

        const struct ynode *req = ynode_get(m, "requests");
        if (req) {
                sim_sc_sub(pk, p, "requests");
                if ((r = sim_sc_check_map(c, req, pk, rkeys)) < 0 ||
                    (r = sim_sc_get_quantity(c, req, "cpu", pk, true, &w->cpu, &w->cpu_millis)) < 0 ||
                    (r = sim_sc_get_quantity(c, req, "memory", pk, false, &w->memory, &w->memory_bytes)) < 0)
                        return r;
        }

        w->annotations = cJSON_CreateObject();
        if (!w->annotations)
                return -ENOMEM;
        const struct ynode *ann = ynode_get(m, "annotations");
        if (ann && !ynode_is_null(ann)) {
                sim_sc_sub(pk, p, "annotations");
                if (ann->type != YNODE_MAP)
                        return sim_sc_fail(c, ann, pk, "must be a map");
                YNODE_FOREACH (a, ann) {
                        char pa[PATH_MAX_LEN];
                        sim_sc_sub(pa, pk, a->key);
                        if (a->type != YNODE_SCALAR)
                                return sim_sc_fail(c, a, pa, "must be a string");
                        if (!cJSON_AddStringToObject(w->annotations, a->key, a->value ? a->value : ""))
                                return -ENOMEM;
                }
        }

        const struct ynode *pl = ynode_get(m, "placement");
        if (pl && !ynode_is_null(pl)) {
                sim_sc_sub(pk, p, "placement");
                if (pl->type != YNODE_MAP)
                        return sim_sc_fail(c, pl, pk, "must be a map of node name to pod count");
                if (w->kind == SIM_WL_DAEMONSET)
                        return sim_sc_fail(c, pl, pk, "a DaemonSet runs one pod on every node");
                w->placement = calloc(pl->n_children ?: 1, sizeof(*w->placement));
                if (!w->placement)
                        return -ENOMEM;
                int64_t total = 0;
                YNODE_FOREACH (e, pl) {
                        char pe[PATH_MAX_LEN];
                        sim_sc_sub(pe, pk, e->key);
                        ssize_t ni = sim_sc_find_node(sc, e->key);
                        if (ni < 0)
                                return sim_sc_fail(c, e, pe, "no node named \"%s\"", e->key);
                        int64_t cnt;
                        if (ynode_int(e, &cnt) < 0 || cnt < 0)
                                return sim_sc_fail(c, e, pe, "must be a non-negative integer");
                        total += cnt;
                        if (total > replicas)
                                return sim_sc_fail(c, e, pk, "places %lld pods but replicas is %lld",
                                                   (long long)total, (long long)replicas);
                        w->placement[w->n_placement++] = (struct sim_sc_placement){ (size_t)ni, (int)cnt };
                }
        }

        const struct ynode *pdb = ynode_get(m, "pdb");
        if (pdb && !ynode_is_null(pdb)) {
                sim_sc_sub(pk, p, "pdb");
                r = parse_pdb(c, pdb, pk, w);
                if (r < 0)
                        return r;
        }
        return parse_deploy_extras(c, m, p, w);
}

int sim_sc_parse_workloads(struct sctx *c, const struct ynode *root, struct sim_scenario *sc)
{
        int64_t pods = 0;
        const struct ynode *seq;
        int r = sim_sc_get_seq(c, root, "workloads", &seq);
        if (r < 0 || !seq)
                return r;
        sc->workloads = calloc(seq->n_children ?: 1, sizeof(*sc->workloads));
        if (!sc->workloads)
                return -ENOMEM;
        for (size_t i = 0; i < seq->n_children; i++) {
                char p[PATH_MAX_LEN];
                snprintf(p, sizeof(p), "workloads[%zu]", i);
                sc->n_workloads = i + 1;
                struct sim_sc_workload *w = &sc->workloads[i];
                r = parse_workload(c, &seq->children[i], p, sc, w);
                if (r < 0)
                        return r;
                pods += w->kind == SIM_WL_DAEMONSET ? (int64_t)sc->n_nodes : w->replicas;
                if (pods > SIM_MAX_PODS)
                        return sim_sc_fail(
                            c, &seq->children[i], p,
                            "the workloads up to here make %lld pods: the simulator takes at most %d",
                            (long long)pods, SIM_MAX_PODS);
                for (size_t j = 0; j < i; j++)
                        if (streq(sc->workloads[j].name, w->name) && streq(sc->workloads[j].ns, w->ns)) {
                                char pk[PATH_MAX_LEN];
                                sim_sc_sub(pk, p, "name");
                                return sim_sc_fail(c, ynode_get(&seq->children[i], "name"), pk,
                                                   "duplicate workload %s/%s", w->ns, w->name);
                        }
        }
        return 0;
}
