/* The Deployment controller: scaling its ReplicaSet, rolling a new template out under maxSurge /
 * maxUnavailable, as clients changed it (deployment_writes.c: the scale subresource, PATCH and PUT) and the
 * HorizontalPodAutoscalers a scenario declares.
 *
 * Modelling choices where Kubernetes leaves room (or does more than a drain needs):
 * - The rolling update is the deployment controller's arithmetic in one step per settle: the new ReplicaSet
 *   grows while the Deployment's pods stay within replicas + maxSurge, the old ones shrink (unready first)
 *   while replicas - maxUnavailable pods stay available (Ready: minReadySeconds is 0). An old pod that is
 *   evicted is not replaced from the old template (Kubernetes would for a moment, until the deployment
 *   controller scales that ReplicaSet down).
 * - Scaling down deletes, as the ReplicaSet controller ranks them: unscheduled before scheduled, not Ready
 *   before Ready, Ready for a shorter time before longer, newer before older.
 * - Only the current ReplicaSet is listed; the pods of an old one name it in their ownerReferences. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sim/model_internal.h"
#include "spotdrain/util.h"

struct sim_workload *sim_find_deployment(struct sim *s, const char *ns, const char *name)
{
        for (size_t i = 0; i < s->n_wls; i++)
                if (s->wls[i].sc->kind == SIM_WL_DEPLOYMENT && streq(s->wls[i].sc->ns, ns) &&
                    streq(s->wls[i].sc->name, name))
                        return &s->wls[i];
        return NULL;
}

void sim_workload_clear_deploy(struct sim_workload *w)
{
        cJSON_Delete(w->annotations);
        cJSON_Delete(w->tmpl_annotations);
        for (size_t i = 0; i < w->n_old_rs; i++) {
                free(w->old_rs[i].hash);
                free(w->old_rs[i].name);
                free(w->old_rs[i].uid);
        }
        free(w->old_rs);
        free(w->hpa_uid);
        free(w->svc_uid);
        w->svc_uid = NULL;
        free(w->tgb_uid);
        w->tgb_uid = NULL;
        w->annotations = w->tmpl_annotations = NULL;
        w->old_rs = NULL;
        w->n_old_rs = 0;
        w->hpa_uid = NULL;
}

/* ---- the controller ---- */

static bool active(const struct sim_pod *p)
{
        return !p->deleting;
}

static bool current(const struct sim_pod *p)
{
        return p->rev == p->wl->n_old_rs;
}

/* The ReplicaSet controller's order of deletion: which of a and b goes first (true: a). */
static bool deleted_before(const struct sim_pod *a, const struct sim_pod *b)
{
        if ((a->node < 0) != (b->node < 0))
                return a->node < 0;
        if (a->ready != b->ready)
                return !a->ready;
        if (a->ready && a->ready_at != b->ready_at)
                return a->ready_at > b->ready_at;
        return a->seq > b->seq;
}

/* The active pod of the template (want_current) or of an old one that goes first; ready_only: Ready ones
 * only, unready: unready ones only. */
static struct sim_pod *victim(struct sim_workload *w, bool want_current, bool unready_only)
{
        struct sim_pod *best = NULL;
        for (struct sim_pod *p = w->pods.head; p; p = p->links[SIM_LINK_WL].next) {
                if (!active(p) || current(p) != want_current || (unready_only && p->ready))
                        continue;
                if (!best || deleted_before(p, best))
                        best = p;
        }
        return best;
}

static int create_pod(struct sim *s, struct sim_workload *w)
{
        struct sim_pod *p;
        int r = sim_pod_new(s, w, w->next_ordinal_or_index++, &p);
        if (r < 0)
                return r;
        return sim_emit(s, SIM_POD, "ADDED", p);
}

static void delete_pod(struct sim *s, struct sim_pod *p)
{
        (void)sim_pod_delete(s, p, -1);
}

void sim_deployment_reconcile(struct sim *s, struct sim_workload *w)
{
        const struct sim_sc_workload *sc = w->sc;
        int want = w->replicas, n_new = 0, n_old = 0, new_unready = 0;
        struct sim_pod *p;

        for (p = w->pods.head; p; p = p->links[SIM_LINK_WL].next) {
                if (!active(p))
                        continue;
                if (current(p)) {
                        n_new++;
                        new_unready += !p->ready;
                } else
                        n_old++;
        }
        int surge = intorstr_scaled(&sc->max_surge, want, true);
        int unavailable = intorstr_scaled(&sc->max_unavailable, want, false);
        if (surge == 0 && unavailable == 0)
                unavailable = 1; /* as the deployment controller resolves them */
        /* The new ReplicaSet grows to replicas, within replicas + maxSurge pods while old ones remain. */
        while (n_new < want && (n_old == 0 || n_new + n_old < want + surge)) {
                if (create_pod(s, w) < 0)
                        return;
                n_new++;
                new_unready++;
        }
        while (n_new > want && (p = victim(w, true, false))) {
                new_unready -= !p->ready;
                delete_pod(s, p);
                n_new--;
        }
        /* Old pods go, unready first, while replicas - maxUnavailable stay available. */
        int may_go = n_new + n_old - (want - unavailable) - new_unready;
        while (n_old > 0 && may_go > 0 && (p = victim(w, false, true) ?: victim(w, false, false))) {
                delete_pod(s, p);
                n_old--;
                may_go--;
        }
}
