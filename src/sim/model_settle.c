/* After every change the controllers settle: ReplicaSets/Jobs/StatefulSets/DaemonSets create the pods they
 * miss, the first-fit scheduler binds Pending pods, PDB and workload status are recomputed. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/disruption.h"
#include "sim/model_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

/* ---- controllers, scheduler, PDB status ---- */
/* Pods of the workload that are not terminating. */
static int workload_active_pods(const struct sim_workload *w)
{
        int c = 0;
        for (const struct sim_pod *p = w->pods.head; p; p = p->links[SIM_LINK_WL].next)
                if (!p->deleting)
                        c++;
        return c;
}

static bool node_has_pod_of(const struct sim_node *n, const struct sim_workload *w)
{
        for (const struct sim_pod *p = n->pods.head; p; p = p->links[SIM_LINK_NODE].next)
                if (p->wl == w)
                        return true;
        return false;
}

/* Only workloads whose pods changed since the last settle (and DaemonSets when nodes joined) can be missing
 * a pod: for the others a reconcile would find nothing to do. */
void sim_reconcile_controllers(struct sim *s)
{
        for (size_t wi = 0; wi < s->n_wls; wi++) {
                struct sim_workload *w = &s->wls[wi];
                struct sim_pod *p;
                if (!w->dirty && !(w->sc->kind == SIM_WL_DAEMONSET && s->nodes_changed))
                        continue;
                switch (w->sc->kind) {
                case SIM_WL_DEPLOYMENT:
                        sim_deployment_reconcile(s, w);
                        break;
                case SIM_WL_JOB:
                        /* The Job controller replaces a pod as soon as it is terminating. */
                        for (int n = workload_active_pods(w); n < w->sc->replicas; n++) {
                                if (sim_pod_new(s, w, w->next_ordinal_or_index++, &p) < 0)
                                        break;
                                (void)sim_emit(s, SIM_POD, "ADDED", p);
                        }
                        break;
                case SIM_WL_STATEFULSET:
                        /* Same name, new UID, only once the old pod is gone. */
                        for (int i = 0; i < w->replicas; i++) {
                                char name[300];
                                snprintf(name, sizeof(name), "%s-%d", w->sc->name, i);
                                if (sim_find_pod(s, w->sc->ns, name))
                                        continue;
                                if (sim_pod_new(s, w, i, &p) < 0)
                                        break;
                                (void)sim_emit(s, SIM_POD, "ADDED", p);
                        }
                        break;
                case SIM_WL_DAEMONSET:
                        for (size_t ni = 0; ni < s->n_nodes; ni++) {
                                if (s->nodes[ni]->removed)
                                        continue;
                                if (node_has_pod_of(s->nodes[ni], w) || sim_pod_new(s, w, 0, &p) < 0)
                                        continue;
                                /* The DaemonSet controller pins its pod to the node (node affinity). */
                                sim_pod_bind(s, p, ni, false);
                                (void)sim_emit(s, SIM_POD, "ADDED", p);
                        }
                        break;
                case SIM_WL_POD:
                        break;
                }
        }
}

static bool node_fits(const struct sim_node *n, const struct sim_pod *p)
{
        const struct sim_sc_node *c = n->sc;
        if (n->removed || n->unschedulable || n->not_ready || n->down || sim_taints_block(n, p))
                return false;
        return n->used_cpu + p->wl->sc->cpu_millis <= c->cpu_millis &&
               n->used_mem + p->wl->sc->memory_bytes <= c->memory_bytes && n->used_pods + 1 <= c->pods;
}

static bool placed_on(const struct sim_pod *p, size_t ni)
{
        for (size_t k = 0; k < p->wl->sc->n_placement; k++)
                if (p->wl->sc->placement[k].node == ni)
                        return true;
        return false;
}

/* First fit in node order over Ready, schedulable nodes with room for the pod's requests. Terminating pods
 * still hold their room, as in Kubernetes. initial: the starting world, where a workload's placement gives
 * the exact count on the nodes it names, so its other pods go to other nodes first. */
int sim_schedule_pending(struct sim *s, bool initial)
{
        /* The pending list is in creation order, as the scan over every pod was. */
        for (struct sim_pod *p = s->pending.head, *next; p; p = next) {
                next = p->links[SIM_LINK_PENDING].next;
                for (int pass = initial ? 0 : 1; pass < 2 && p->node < 0; pass++)
                        for (size_t ni = 0; ni < s->n_nodes; ni++) {
                                if ((pass == 0 && placed_on(p, ni)) || !node_fits(s->nodes[ni], p))
                                        continue;
                                sim_pod_bind(s, p, ni, true); /* leaves the pending list */
                                break;
                        }
        }
        return 0;
}

/* Labels that differ between the pods of one workload (a StatefulSet's pod name and index); every other
 * label of a pod is its workload's. */
static bool label_is_per_pod(const char *key)
{
        return streq(key, "statefulset.kubernetes.io/pod-name") ||
               streq(key, "apps.kubernetes.io/pod-index");
}

/* Whether the PDB can select any pod of the workload: false only when its selector rules out the labels all
 * of the workload's pods share. */
static bool pdb_may_select(const struct sim_pdb *d, const struct sim_workload *w)
{
        if (!streq(d->ns, w->sc->ns))
                return false;
        const cJSON *ml;
        cJSON_ArrayForEach (ml, d->match_labels) {
                if (label_is_per_pod(ml->string))
                        continue;
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(w->tmpl_labels, ml->string);
                if (!cJSON_IsString(v) || !cJSON_IsString(ml) || !streq(v->valuestring, ml->valuestring))
                        return false;
        }
        return true;
}

void sim_pdb_recompute(struct sim *s, struct sim_pdb *d, bool emit)
{
        bool changed = !d->computed;
        /* Entries leave disruptedPods once the pod is terminating or gone, or after 2 minutes. */
        for (size_t i = 0; i < d->n_disrupted;) {
                struct sim_pod *p = sim_find_pod(s, d->ns, d->disrupted[i].pod);
                if (!p || p->deleting || d->disrupted[i].at + DISRUPTED_POD_TTL <= s->t) {
                        free(d->disrupted[i].pod);
                        d->disrupted[i] = d->disrupted[--d->n_disrupted];
                        changed = true;
                } else
                        i++;
        }
        int matching = 0, healthy = 0, scale = 0;
        bool scale_ok = true;
        for (size_t wi = 0; wi < s->n_wls; wi++) {
                const struct sim_workload *w = &s->wls[wi];
                bool owns = false;
                if (!pdb_may_select(d, w))
                        continue;
                for (const struct sim_pod *p = w->pods.head; p; p = p->links[SIM_LINK_WL].next) {
                        if (!sim_pdb_matches(d, p))
                                continue;
                        owns = true;
                        matching++;
                        if (p->ready && !p->deleting && !sim_pdb_is_disrupted(d, p->name))
                                healthy++;
                }
                if (!owns)
                        continue;
                if (w->sc->kind == SIM_WL_DEPLOYMENT || w->sc->kind == SIM_WL_STATEFULSET)
                        scale += w->replicas;
                else if (w->sc->kind != SIM_WL_POD) /* a bare pod is unmanaged: not in the scale */
                        scale_ok = false;           /* no scale subresource: the controller fails safe */
        }
        struct sim_budget_status st;
        sim_budget_compute(
            &d->spec,
            &(struct sim_budget_pods){
                .matching = matching, .scale = scale, .scale_known = scale_ok, .healthy = healthy },
            &st);
        int expected = st.expected, desired = st.desired, allowed = st.allowed;
        if ((allowed > 0) != (d->allowed > 0) || !d->computed)
                d->cond_since = s->t;
        changed = changed || healthy != d->current || desired != d->desired || expected != d->expected ||
                  allowed != d->allowed;
        d->current = healthy;
        d->desired = desired;
        d->expected = expected;
        d->allowed = allowed;
        d->computed = true;
        if (changed && emit)
                (void)sim_emit(s, SIM_PDB, "MODIFIED", d);
}

void sim_workload_status(struct sim *s, struct sim_workload *w, bool emit)
{
        int n = 0, ready = 0, updated = 0, updated_ready = 0;
        for (const struct sim_pod *p = w->pods.head; p; p = p->links[SIM_LINK_WL].next) {
                if (p->deleting)
                        continue;
                bool current = p->rev == w->n_old_rs;
                n++;
                updated += current;
                if (p->ready) {
                        ready++;
                        updated_ready += current;
                }
        }
        if (n == w->st_replicas && ready == w->st_ready && updated == w->st_updated &&
            updated_ready == w->st_updated_ready)
                return;
        w->st_replicas = n;
        w->st_ready = ready;
        w->st_updated = updated;
        w->st_updated_ready = updated_ready;
        if (!emit)
                return;
        switch (w->sc->kind) {
        case SIM_WL_DEPLOYMENT:
                (void)sim_emit(s, SIM_REPLICASET, "MODIFIED", w);
                (void)sim_emit(s, SIM_DEPLOYMENT, "MODIFIED", w);
                break;
        case SIM_WL_STATEFULSET:
                (void)sim_emit(s, SIM_STATEFULSET, "MODIFIED", w);
                break;
        case SIM_WL_DAEMONSET:
                (void)sim_emit(s, SIM_DAEMONSET, "MODIFIED", w);
                break;
        default:
                break;
        }
}

static void check_drained(struct sim *s)
{
        for (size_t ni = 0; ni < s->n_nodes; ni++) {
                struct sim_node *n = s->nodes[ni];
                if (!n->noticed || n->removed || n->drained_at >= 0)
                        continue;
                bool left = false;
                for (const struct sim_pod *p = n->pods.head; p && !left; p = p->links[SIM_LINK_NODE].next)
                        left = sim_pod_evictable(p);
                if (!left)
                        n->drained_at = s->t;
        }
}

/* A PDB's status can only have moved when a workload it may select changed (dirty, the n_dirty of them),
 * or while it has disruptedPods entries (they expire with time). */
static bool pdb_stale(const struct sim_pdb *d, struct sim_workload *const *dirty, size_t n_dirty)
{
        if (!d->computed || d->n_disrupted > 0)
                return true;
        for (size_t i = 0; i < n_dirty; i++)
                if (pdb_may_select(d, dirty[i]))
                        return true;
        return false;
}

void sim_settle(struct sim *s)
{
        if (!s->dirty)
                return;
        sim_rollouts_step(s);
        sim_reconcile_controllers(s);
        (void)sim_schedule_pending(s, false);
        /* The changed workloads, looked up once rather than for each PDB (500 PDBs x 500 workloads at each
         * settle of a large run). Without room every PDB is recomputed. */
        _cleanup_free_ struct sim_workload **dirty = calloc(s->n_wls ?: 1, sizeof(*dirty));
        size_t n_dirty = 0;
        for (size_t i = 0; dirty && i < s->n_wls; i++)
                if (s->wls[i].dirty)
                        dirty[n_dirty++] = &s->wls[i];
        for (size_t i = 0; i < s->n_pdbs; i++)
                if (!dirty || pdb_stale(s->pdbs[i], dirty, n_dirty))
                        sim_pdb_recompute(s, s->pdbs[i], true);
        for (size_t i = 0; i < s->n_wls; i++)
                if (s->wls[i].dirty) {
                        sim_workload_status(s, &s->wls[i], true);
                        s->wls[i].dirty = false;
                }
        check_drained(s);
        s->nodes_changed = false;
        s->dirty = false;
}
