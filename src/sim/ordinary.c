/* The cluster's ordinary life, as a workload's controller lives it: a rolling restart (`kubectl rollout
 * restart`) replaces one pod at a time, the next once the replacement of the last is Ready; a scale sets
 * the replicas, the controller deleting the newest pods (a StatefulSet the highest ordinals) or creating
 * more. Every pod deleted this way stops as a drained one would (its shutdown within its grace period),
 * which is what spotdrain learns stop times from. */
#include <errno.h>

#include "sim/model_internal.h"
#include "spotdrain/util.h"

/* Pods of w not terminating, and whether each of them is Ready. */
static int active(const struct sim_workload *w, bool *ret_all_ready)
{
        int n = 0;
        bool ready = true;
        for (const struct sim_pod *p = w->pods.head; p; p = p->links[SIM_LINK_WL].next) {
                if (p->deleting)
                        continue;
                n++;
                ready = ready && p->ready;
        }
        *ret_all_ready = ready;
        return n;
}

/* The pod to go first on a scale-down: the newest, or the highest StatefulSet ordinal. */
static struct sim_pod *scale_victim(const struct sim_workload *w)
{
        struct sim_pod *best = NULL;
        for (struct sim_pod *p = w->pods.head; p; p = p->links[SIM_LINK_WL].next) {
                if (p->deleting)
                        continue;
                if (!best || (w->sc->kind == SIM_WL_STATEFULSET ? p->ordinal > best->ordinal
                                                                : p->created >= best->created))
                        best = p;
        }
        return best;
}

void sim_ordinary_event(struct sim *s, const struct sim_sc_event *e)
{
        struct sim_workload *w = &s->wls[e->workload];
        bool ready;
        w->dirty = true;
        if (streq(e->type, "scale")) {
                w->sc->replicas = e->replicas;
                w->replicas = e->replicas; /* what a Deployment's controllers keep (deployments.c) */
                for (int n = active(w, &ready); n > e->replicas; n--) {
                        struct sim_pod *p = scale_victim(w);
                        if (!p || sim_pod_delete(s, p, -1) < 0)
                                break;
                }
                return;
        }
        /* rollout: every pod there now is replaced; a rollout under way starts again. */
        w->rollout_left = 0;
        for (struct sim_pod *p = w->pods.head; p; p = p->links[SIM_LINK_WL].next) {
                p->rollout = !p->deleting;
                w->rollout_left += p->rollout;
        }
}

/* The oldest pod of w that its rollout is to replace. */
static struct sim_pod *rollout_next(const struct sim_workload *w)
{
        struct sim_pod *best = NULL;
        for (struct sim_pod *p = w->pods.head; p; p = p->links[SIM_LINK_WL].next)
                if (!p->deleting && p->rollout && (!best || p->created < best->created))
                        best = p;
        return best;
}

void sim_rollouts_step(struct sim *s)
{
        for (size_t i = 0; i < s->n_wls; i++) {
                struct sim_workload *w = &s->wls[i];
                bool ready;
                if (w->rollout_left <= 0)
                        continue;
                /* maxUnavailable 1, maxSurge 0: one pod away at a time, and only once all are back. */
                bool going = false;
                for (const struct sim_pod *p = w->pods.head; p && !going; p = p->links[SIM_LINK_WL].next)
                        going = p->deleting;
                if (going || active(w, &ready) < w->sc->replicas || !ready)
                        continue;
                struct sim_pod *p = rollout_next(w);
                if (!p) {
                        w->rollout_left = 0; /* the rest went some other way (a drain, a scale-down) */
                        continue;
                }
                if (sim_pod_delete(s, p, -1) < 0)
                        continue;
                w->rollout_left--;
                w->dirty = true;
        }
}
