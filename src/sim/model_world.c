/* The simulator's starting world, built from a scenario, and its end. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/disruption.h"
#include "sim/model_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

#define INITIAL_AGE 3600.0 /* pods of the starting world were created this long before t=0 */

/* ---- building the world ---- */
static struct sim_pdb *pdb_new(const char *name, const char *ns)
{
        struct sim_pdb *d = calloc(1, sizeof(*d));
        if (!d)
                return NULL;
        if (!(d->name = strdup(name)) || !(d->ns = strdup(ns)) ||
            !(d->match_labels = cJSON_CreateObject())) {
                sim_pdb_free(d);
                return NULL;
        }
        return d;
}

struct sim_pdb *sim_pdb_free(struct sim_pdb *d)
{
        if (!d)
                return NULL;
        free(d->name);
        free(d->ns);
        free(d->uid);
        cJSON_Delete(d->match_labels);
        for (size_t i = 0; i < d->n_disrupted; i++)
                free(d->disrupted[i].pod);
        free(d->disrupted);
        free(d);
        return NULL;
}

int sim_pdb_add(struct sim *s, struct sim_pdb *d)
{
        struct sim_pdb **a = realloc(s->pdbs, (s->n_pdbs + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        s->pdbs = a;
        if (!d->uid && !(d->uid = sim_new_uid(s)))
                return -ENOMEM;
        d->created = s->t;
        s->pdbs[s->n_pdbs++] = d;
        /* Watchers see it ADDED with its status already computed, as the disruption controller is quick. */
        sim_pdb_recompute(s, d, false);
        return sim_emit(s, SIM_PDB, "ADDED", d);
}

static int ns_add(struct sim *s, const char *name)
{
        for (size_t i = 0; i < s->n_nss; i++)
                if (streq(s->nss[i].name, name))
                        return 0;
        struct sim_ns *a = realloc(s->nss, (s->n_nss + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        s->nss = a;
        struct sim_ns *n = &s->nss[s->n_nss];
        *n = (struct sim_ns){ 0 };
        if (!(n->name = strdup(name)) || !(n->uid = sim_new_uid(s))) {
                free(n->name);
                return -ENOMEM;
        }
        s->n_nss++;
        return 0;
}

/* The objects a workload is served as: a Deployment and its ReplicaSet, a StatefulSet, a DaemonSet; Jobs and
 * bare pods have none of their own. */
static size_t workload_objects(const struct sim_workload *w)
{
        switch (w->sc->kind) {
        case SIM_WL_DEPLOYMENT:
                return 2;
        case SIM_WL_STATEFULSET:
        case SIM_WL_DAEMONSET:
                return 1;
        default:
                return 0;
        }
}

static int world_build(struct sim *s)
{
        static const char *const system_ns[] = { "default", "kube-node-lease", "kube-public",
                                                 "kube-system" };
        const struct sim_scenario *sc = s->sc;
        int r;
        s->t = -2 * INITIAL_AGE;
        for (size_t i = 0; i < ARRAY_SIZE(system_ns); i++)
                if ((r = ns_add(s, system_ns[i])) < 0)
                        return r;
        for (size_t i = 0; i < sc->n_workloads; i++)
                if ((r = ns_add(s, sc->workloads[i].ns)) < 0)
                        return r;
        s->nodes = calloc(sc->n_nodes, sizeof(*s->nodes));
        if (!s->nodes)
                return -ENOMEM;
        for (size_t i = 0; i < sc->n_nodes; i++) {
                if ((r = sim_node_new(s, &sc->nodes[i], &s->nodes[i])) < 0)
                        return r;
                s->n_nodes++;
                if ((r = sim_node_index_add(s, s->nodes[i])) < 0)
                        return r;
        }
        s->wls = calloc(sc->n_workloads ?: 1, sizeof(*s->wls));
        if (!s->wls)
                return -ENOMEM;
        for (size_t i = 0; i < sc->n_workloads; i++) {
                struct sim_workload *w = &s->wls[i];
                char hash[11];
                w->sc = &sc->workloads[i];
                w->replicas = w->sc->replicas;
                w->generation = 1;
                sim_rand_chars(s, hash, 10);
                if (!(w->uid = sim_new_uid(s)) || !(w->rs_uid = sim_new_uid(s)) ||
                    !(w->hash = strdup(hash)) || !(w->rs_name = strprintf("%s-%s", w->sc->name, hash)) ||
                    !(w->annotations = cJSON_CreateObject()) ||
                    !(w->tmpl_annotations = cJSON_Duplicate(w->sc->annotations, true)) ||
                    (w->sc->has_hpa && !(w->hpa_uid = sim_new_uid(s))) ||
                    (w->sc->has_service && !(w->svc_uid = sim_new_uid(s))) ||
                    (w->sc->has_tg && !(w->tgb_uid = sim_new_uid(s))))
                        return -ENOMEM;
                s->n_wls++;
                /* The labels every pod of it carries (pod_labels of a stand-in pod). */
                struct sim_pod tmpl = { .wl = w, .name = (char *)"" };
                if (sim_pod_labels(&tmpl) < 0) {
                        cJSON_Delete(tmpl.labels);
                        return -ENOMEM;
                }
                w->tmpl_labels = tmpl.labels;
                if (!w->sc->has_pdb)
                        continue;
                struct sim_pdb *d = pdb_new(w->sc->name, w->sc->ns);
                if (!d)
                        return -ENOMEM;
                d->spec = w->sc->pdb;
                d->always_allow = w->sc->pdb_always_allow;
                if (sim_add_label(d->match_labels, "app", w->sc->name) < 0 || (r = sim_pdb_add(s, d)) < 0) {
                        sim_pdb_free(d);
                        return -ENOMEM;
                }
        }

        /* The starting pods: created an hour before t=0 (so creation → Ready reflects startup_seconds),
         * placed as the scenario says, the rest first-fit. */
        s->t = -INITIAL_AGE;
        for (size_t wi = 0; wi < s->n_wls; wi++) {
                struct sim_workload *w = &s->wls[wi];
                struct sim_pod *p;
                if (w->sc->kind == SIM_WL_DAEMONSET)
                        continue; /* created by the controller below */
                int made = 0;
                for (size_t k = 0; k < w->sc->n_placement; k++)
                        for (int c = 0; c < w->sc->placement[k].count; c++) {
                                if ((r = sim_pod_new(s, w, w->next_ordinal_or_index++, &p)) < 0)
                                        return r;
                                sim_pod_bind(s, p, w->sc->placement[k].node, false);
                                made++;
                        }
                for (; made < w->sc->replicas; made++)
                        if ((r = sim_pod_new(s, w, w->next_ordinal_or_index++, &p)) < 0)
                                return r;
        }
        s->nodes_changed = true; /* the DaemonSets' pods */
        sim_reconcile_controllers(s);
        if ((r = sim_schedule_pending(s, true)) < 0)
                return r;
        for (size_t i = 0; i < s->n_pods; i++) {
                struct sim_pod *p = s->pods[i];
                if (p->node >= 0) {
                        p->ready = true;
                        sim_pod_changed(s, p);
                }
        }
        s->t = 0;
        for (size_t i = 0; i < s->n_pdbs; i++) {
                sim_pdb_recompute(s, s->pdbs[i], false);
                s->pdbs[i]->cond_since = s->pdbs[i]->created;
        }
        for (size_t i = 0; i < s->n_wls; i++)
                sim_workload_status(s, &s->wls[i], false);

        /* Everything enters the change log as ADDED, in a stable order; of a large world only the newest
         * SIM_LOG_MAX are kept, so the others are not rendered at all. */
        size_t total = s->n_nss + s->n_nodes + s->n_pods + s->n_pdbs;
        for (size_t i = 0; i < s->n_wls; i++)
                total += workload_objects(&s->wls[i]);
        s->log_skip = total > SIM_LOG_MAX ? total - SIM_LOG_MAX : 0;
        s->building = false;
        for (size_t i = 0; i < s->n_nss; i++)
                if ((r = sim_emit(s, SIM_NAMESPACE, "ADDED", &s->nss[i])) < 0)
                        return r;
        for (size_t i = 0; i < s->n_nodes; i++)
                if ((r = sim_emit(s, SIM_NODE, "ADDED", s->nodes[i])) < 0)
                        return r;
        for (size_t i = 0; i < s->n_wls; i++) {
                struct sim_workload *w = &s->wls[i];
                switch (w->sc->kind) {
                case SIM_WL_DEPLOYMENT:
                        if ((r = sim_emit(s, SIM_DEPLOYMENT, "ADDED", w)) < 0 ||
                            (r = sim_emit(s, SIM_REPLICASET, "ADDED", w)) < 0)
                                return r;
                        break;
                case SIM_WL_STATEFULSET:
                        if ((r = sim_emit(s, SIM_STATEFULSET, "ADDED", w)) < 0)
                                return r;
                        break;
                case SIM_WL_DAEMONSET:
                        if ((r = sim_emit(s, SIM_DAEMONSET, "ADDED", w)) < 0)
                                return r;
                        break;
                default:
                        break;
                }
        }
        for (size_t i = 0; i < s->n_pods; i++)
                if ((r = sim_emit(s, SIM_POD, "ADDED", s->pods[i])) < 0)
                        return r;
        for (size_t i = 0; i < s->n_pdbs; i++)
                if ((r = sim_emit(s, SIM_PDB, "ADDED", s->pdbs[i])) < 0)
                        return r;
        return 0;
}

static void sim_freep(struct sim **s)
{
        sim_free(*s);
}

int sim_new(const struct ynode *scenario, const struct sim_options *opt, struct sim **ret, char **ret_error)
{
        _cleanup_(sim_freep) struct sim *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        pthread_mutex_init(&s->mutex, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&s->cond, &ca);
        pthread_condattr_destroy(&ca);
        s->log = calloc(SIM_LOG_MAX, sizeof(*s->log));
        if (!s->log)
                return -ENOMEM;
        int r = sim_scenario_parse(scenario, NULL, &s->sc, ret_error);
        if (r < 0)
                return r;
        const char *mode = opt && opt->mode ? opt->mode : s->sc->mode;
        if (!streq(mode, "agent") && !streq(mode, "controller")) {
                if (ret_error)
                        *ret_error = strprintf("unknown mode \"%s\" (agent or controller)", mode);
                return -EINVAL;
        }
        if (!(s->mode = strdup(mode)))
                return -ENOMEM;
        s->time_scale = opt && opt->time_scale > 0 ? opt->time_scale : 1;
        s->seed = opt && opt->seed ? opt->seed : s->sc->seed;
        s->rng = s->seed;
        s->fault_rng = s->seed ^ 0x5deece66dULL;
        s->manual_clock = opt && opt->manual_clock;
        s->epoch_usec = clk_now();
        s->building = true;
        r = world_build(s);
        if (r < 0) {
                if (ret_error && !*ret_error)
                        *ret_error = strprintf("cannot build the world: %s", strerror(-r));
                return r;
        }
        *ret = TAKE_PTR(s);
        return 0;
}

struct sim *sim_free(struct sim *s)
{
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_pods; i++)
                sim_pod_free(s->pods[i]);
        free(s->pods);
        free(s->pod_hash);
        for (size_t i = 0; i < s->n_nodes; i++)
                sim_node_free(s->nodes[i]);
        free(s->nodes);
        free(s->due_nodes);
        free(s->node_hash);
        for (size_t i = 0; i < s->n_wls; i++) {
                free(s->wls[i].uid);
                free(s->wls[i].rs_uid);
                free(s->wls[i].hash);
                free(s->wls[i].rs_name);
                cJSON_Delete(s->wls[i].tmpl_labels);
                sim_workload_clear_deploy(&s->wls[i]);
        }
        free(s->wls);
        for (size_t i = 0; i < s->n_pdbs; i++)
                sim_pdb_free(s->pdbs[i]);
        free(s->pdbs);
        for (size_t i = 0; i < s->n_nss; i++) {
                free(s->nss[i].name);
                free(s->nss[i].uid);
        }
        free(s->nss);
        for (size_t i = 0; i < s->n_objs; i++) {
                free(s->objs[i]->ns);
                free(s->objs[i]->name);
                cJSON_Delete(s->objs[i]->obj);
                free(s->objs[i]);
        }
        free(s->objs);
        sim_va_free_all(s);
        if (s->log)
                for (size_t i = 0; i < s->log_len; i++) {
                        struct sim_logentry *e = &s->log[(s->log_start + i) % SIM_LOG_MAX];
                        free(e->ns);
                        cJSON_Delete(e->obj);
                }
        free(s->log);
        for (size_t i = 0; i < s->n_alerts; i++) {
                free(s->alerts[i].kind);
                free(s->alerts[i].node);
                free(s->alerts[i].message);
                cJSON_Delete(s->alerts[i].postmortem);
        }
        free(s->alerts);
        for (size_t i = 0; i < s->n_writes; i++) {
                free(s->writes[i].surface);
                free(s->writes[i].what);
        }
        free(s->writes);
        for (size_t i = 0; i < s->n_launches; i++) {
                free(s->launches[i].instance_id);
                free(s->launches[i].zone);
                free(s->launches[i].capacity_type);
                free(s->launches[i].name);
        }
        free(s->launches);
        free(s->mode);
        sim_scenario_free(s->sc);
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->mutex);
        free(s);
        return NULL;
}
