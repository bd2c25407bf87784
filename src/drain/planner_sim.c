/* The planner's replay of a drain: the pods stopped in order against their PDBs on the predicted cluster
 * answers (slots coming back as replacements turn Ready, overdue, lost or surged ones), tier by tier, until
 * every pod is out or the horizon is reached. Pure: no I/O, no clock. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drain/planner_internal.h"

bool planner_pod_in_pdb(const struct drain_pod_in *pod, size_t b)
{
        for (size_t j = 0; j < pod->n_pdbs; j++)
                if (pod->pdbs[j] == b)
                        return true;
        return false;
}

void planner_sim_done(struct sim *s)
{
        free(s->state);
        free(s->t_evict);
        free(s->t_gone);
        free(s->margin);
        free(s->pending);
        free(s->returns);
        free(s->node_t0_gone);
        free(s->node_wait0);
        free(s->node_gone0);
        free(s->stale);
        free(s->is_stale);
        free(s->order);
        *s = (struct sim){ 0 };
}

int planner_sim_init(struct sim *s, const struct planner *pl)
{
        const struct drain_input *in = pl->in;
        size_t np = in->n_pods ? in->n_pods : 1, nn = in->n_nodes ? in->n_nodes : 1;
        *s = (struct sim){
                .state = calloc(np, sizeof(*s->state)),
                .t_evict = calloc(np, sizeof(*s->t_evict)),
                .t_gone = calloc(np, sizeof(*s->t_gone)),
                .margin = calloc(in->n_pdbs ? in->n_pdbs : 1, sizeof(*s->margin)),
                .pending = calloc(in->n_pdbs ? in->n_pdbs : 1, sizeof(*s->pending)),
                .returns = calloc(pl->max_returns ? pl->max_returns : 1, sizeof(*s->returns)),
                .node_t0_gone = calloc(nn, sizeof(*s->node_t0_gone)),
                .node_wait0 = calloc(nn, sizeof(*s->node_wait0)),
                .node_gone0 = calloc(nn, sizeof(*s->node_gone0)),
                .stale = calloc(nn, sizeof(*s->stale)),
                .is_stale = calloc(nn, sizeof(*s->is_stale)),
                .order = calloc(np, sizeof(*s->order)),
        };
        if (!s->state || !s->t_evict || !s->t_gone || !s->margin || !s->pending || !s->returns ||
            !s->node_t0_gone || !s->node_wait0 || !s->node_gone0 || !s->stale || !s->is_stale || !s->order) {
                planner_sim_done(s);
                return -ENOMEM;
        }
        return 0;
}

/* The returns are a min-heap by time: a replay of thousands of pods looks for the next one at every step. */
static void push_return(struct sim *s, int64_t at, size_t pdb)
{
        size_t i = s->n_returns++;
        struct slot_return r = { .at = at, .pdb = pdb };
        while (i > 0 && s->returns[(i - 1) / 2].at > at) {
                s->returns[i] = s->returns[(i - 1) / 2];
                i = (i - 1) / 2;
        }
        s->returns[i] = r;
}

static void pop_return(struct sim *s)
{
        struct slot_return last = s->returns[--s->n_returns];
        size_t i = 0, n = s->n_returns;
        for (;;) {
                size_t c = 2 * i + 1;
                if (c >= n)
                        break;
                if (c + 1 < n && s->returns[c + 1].at < s->returns[c].at)
                        c++;
                if (s->returns[c].at >= last.at)
                        break;
                s->returns[i] = s->returns[c];
                i = c;
        }
        if (n > 0)
                s->returns[i] = last;
}

/* A tier-0 pod stopped: its node's node_t0_gone is updated at the next pass (node_t0_refresh), as the whole
 * of it was computed at the start of each pass. */
static void node_t0_stopped(const struct planner *pl, struct sim *s, size_t i)
{
        size_t n = pl->in->pods[i].node;
        if (pl->pi[i].tier != 0)
                return;
        s->node_wait0[n]--;
        s->node_gone0[n] = max_t(s->node_gone0[n], s->t_gone[i]);
        if (!s->is_stale[n]) {
                s->is_stale[n] = true;
                s->stale[s->n_stale++] = n;
        }
}

/* The pod's graceful stop starts at t (evicted, or deleted around its PDB with the executor's shortened
 * grace). Schedules the slots its replacement gives back. */
static void start_stop(const struct planner *pl, struct sim *s, size_t i, int64_t t, bool forced)
{
        const struct drain_pod_in *pod = &pl->in->pods[i];
        const struct pod_info *p = &pl->pi[i];
        s->state[i] = forced ? PS_FORCED : PS_EVICTED;
        s->t_evict[i] = t;
        if (forced) {
                int64_t grace = max_t(USEC_PER_SEC, min_t(p->grace, p->end - t));
                s->t_gone[i] = t + min_t(p->shutdown, grace);
        } else
                s->t_gone[i] = t + p->shutdown;
        node_t0_stopped(pl, s, i);
        /* A surged pod's replacement was started before it went, and gave its slot back when Ready. */
        if (!owner_replaces(pod->owner) || pl->surge[i])
                return;
        /* A StatefulSet recreates the pod only once the old one has exited. */
        int64_t at = (pod->owner == DRAIN_OWNER_STATEFULSET ? s->t_gone[i] : t) + p->startup;
        for (size_t j = 0; j < pod->n_pdbs; j++)
                push_return(s, at, pod->pdbs[j]);
}

/* The eviction API's answer at t, as kube-apiserver decides it; starts the stop when it would succeed. */
static bool try_evict(const struct planner *pl, struct sim *s, size_t i, int64_t t, bool frozen_p)
{
        const struct drain_pod_in *pod = &pl->in->pods[i];
        /* Pending pods go without a look at PDBs; pods under several PDBs get a 500. */
        if (pod->pending || pod->n_pdbs == 0) {
                start_stop(pl, s, i, t, false);
                return true;
        }
        if (pod->n_pdbs > 1)
                return false;
        size_t b = pod->pdbs[0];
        const struct drain_pdb_in *pdb = &pl->in->pdbs[b];
        /* An unready pod does not count as healthy: it goes for free when the policy says AlwaysAllow, or
         * (IfHealthyBudget) while the budget is met and something is desired. */
        if (!pod->ready &&
            (pdb->always_allow_unhealthy || (s->margin[b] >= 0 && pdb->desired_healthy > 0 && !frozen_p))) {
                start_stop(pl, s, i, t, false);
                return true;
        }
        if (frozen_p || s->margin[b] <= 0)
                return false;
        s->margin[b]--;
        start_stop(pl, s, i, t, false);
        return true;
}

static void do_force(const struct planner *pl, struct sim *s, size_t i, int64_t t)
{
        const struct drain_pod_in *pod = &pl->in->pods[i];
        if (pod->ready && !pod->pending)
                for (size_t j = 0; j < pod->n_pdbs; j++)
                        s->margin[pod->pdbs[j]]--;
        start_stop(pl, s, i, t, true);
}

static bool apply_returns(struct sim *s, int64_t t)
{
        bool any = false;
        while (s->n_returns > 0 && s->returns[0].at <= t) {
                s->margin[s->returns[0].pdb]++;
                pop_return(s);
                any = true;
        }
        return any;
}

/* Per node, when every tier-0 pod of its is gone (T_NEVER while one waits), from the pods as they are at the
 * start of the replay. */
static void compute_tier0_gone(const struct planner *pl, struct sim *s)
{
        const struct drain_input *in = pl->in;
        for (size_t n = 0; n < in->n_nodes; n++) {
                s->node_wait0[n] = 0;
                s->node_gone0[n] = pl->now;
                s->is_stale[n] = false;
        }
        s->n_stale = 0;
        for (size_t i = 0; i < in->n_pods; i++) {
                if (pl->pi[i].tier != 0 || s->state[i] == PS_OUT)
                        continue;
                size_t n = in->pods[i].node;
                if (s->state[i] == PS_WAITING)
                        s->node_wait0[n]++;
                else
                        s->node_gone0[n] = max_t(s->node_gone0[n], s->t_gone[i]);
        }
        for (size_t n = 0; n < in->n_nodes; n++)
                s->node_t0_gone[n] = s->node_wait0[n] > 0 ? T_NEVER : s->node_gone0[n];
}

/* The nodes whose tier-0 pods stopped during the last pass. */
static void node_t0_refresh(struct sim *s)
{
        for (size_t k = 0; k < s->n_stale; k++) {
                size_t n = s->stale[k];
                s->node_t0_gone[n] = s->node_wait0[n] > 0 ? T_NEVER : s->node_gone0[n];
                s->is_stale[n] = false;
        }
        s->n_stale = 0;
}

/* Critical pods wait for the node's other pods to be gone, but never past their own last safe moment. */
static bool tier_open(const struct planner *pl, const struct sim *s, size_t i, int64_t t)
{
        const struct pod_info *p = &pl->pi[i];
        return p->tier == 0 || t >= p->last_safe || s->node_t0_gone[pl->in->pods[i].node] <= t;
}

/* Replacements that should be Ready by now by the startup estimate, but that the PDB status does not count
 * yet (it is a watch event behind, or the estimate a little short): as many as the status shows missing
 * beyond the returns still ahead, each a moment from now. Without them a plan made around the instant a
 * wave's replacements turn Ready would see one slot where there are two. */
#define OVERDUE_RETURN_USEC USEC_PER_SEC
static void push_overdue_returns(const struct planner *pl, struct sim *s, size_t override_pdb,
                                 const struct sim *pinned)
{
        const struct drain_input *in = pl->in;
        int64_t now = pl->now;
        for (size_t b = 0; b < in->n_pdbs; b++)
                s->pending[b] = 0;
        for (size_t r = 0; r < s->n_returns; r++)
                s->pending[s->returns[r].pdb]++;
        for (size_t i = 0; i < in->n_pods; i++) {
                const struct drain_pod_in *pod = &in->pods[i];
                if ((pinned && !planner_pod_in_pdb(pod, override_pdb)) || s->state[i] != PS_DELETING ||
                    !pod->deleted_at_usec || !owner_replaces(pod->owner))
                        continue;
                int64_t since = clamp_t(pod->deleted_at_usec);
                int64_t at =
                    (pod->owner == DRAIN_OWNER_STATEFULSET ? s->t_gone[i] : since) + pl->pi[i].startup;
                if (at > now)
                        continue;
                for (size_t j = 0; j < pod->n_pdbs; j++) {
                        size_t b = pod->pdbs[j];
                        const struct drain_pdb_in *d = &in->pdbs[b];
                        if (d->expected_pods - d->current_healthy > s->pending[b]) {
                                push_return(s, now + OVERDUE_RETURN_USEC, b);
                                s->pending[b]++;
                        }
                }
        }
}

/* The rest of each PDB's shortfall, beyond the returns already foreseen: pods lost to something outside
 * these drains (another process's eviction, a pod restarting), each back a startup after it was lost, the
 * earliest first, or a moment from now when a little overdue. One overdue by more than
 * DRAIN_LOSS_OVERDUE_USEC, or never seen going, stays missing. */
static void push_lost_returns(const struct planner *pl, struct sim *s, size_t override_pdb,
                              const struct sim *pinned)
{
        const struct drain_input *in = pl->in;
        int64_t now = pl->now;
        for (size_t b = 0; b < in->n_pdbs; b++) {
                const struct drain_pdb_in *d = &in->pdbs[b];
                if (pinned && b != override_pdb)
                        continue;
                int missing = d->expected_pods - d->current_healthy - s->pending[b];
                for (size_t k = 0; k < d->n_lost && missing > 0; k++) {
                        int64_t at = clamp_t(d->lost_usec[k]) + pl->pdb_startup[b];
                        if (at < now - (int64_t)DRAIN_LOSS_OVERDUE_USEC)
                                continue;
                        push_return(s, at > now ? at : now + OVERDUE_RETURN_USEC, b);
                        s->pending[b]++;
                        missing--;
                }
        }
}

/* Whether a surged replacement gives the PDB a slot: under an integer minAvailable one more healthy pod is
 * one more disruption; under maxUnavailable (or a percentage) the raised scale raises desiredHealthy with
 * it. */
static bool surge_frees_slot(const struct drain_pdb_in *pdb)
{
        return pdb->spec.min_available.set && !pdb->spec.min_available.percent;
}

bool planner_surge_helps(const struct drain_input *in, const struct drain_pod_in *pod)
{
        for (size_t j = 0; j < pod->n_pdbs; j++)
                if (!surge_frees_slot(&in->pdbs[pod->pdbs[j]]))
                        return false;
        return pod->n_pdbs > 0;
}

/* The replacements surge starts before their pods go: each gives its pod's PDBs a slot once Ready, a
 * startup after it was asked for (now, when it is yet to be). One that should be Ready already is in the
 * PDB status, or a watch event behind it. */
static void push_surge_returns(const struct planner *pl, struct sim *s, size_t override_pdb,
                               const struct sim *pinned)
{
        const struct drain_input *in = pl->in;
        for (size_t i = 0; i < in->n_pods; i++) {
                const struct drain_pod_in *pod = &in->pods[i];
                if (!pl->surge[i] || s->state[i] != PS_WAITING ||
                    (pinned && !planner_pod_in_pdb(pod, override_pdb)))
                        continue;
                int64_t at = (pod->surged_usec ? clamp_t(pod->surged_usec) : pl->now) + pl->pi[i].startup;
                if (at <= pl->now)
                        continue;
                for (size_t j = 0; j < pod->n_pdbs; j++)
                        if (surge_frees_slot(&in->pdbs[pod->pdbs[j]]))
                                push_return(s, at, pod->pdbs[j]);
        }
}

/* Replays the drain. With force, a pod still waiting at its last safe moment is deleted around its PDB.
 * override_pdb (or SIZE_MAX) starts with override_k disruptions instead of its status. With pinned, only
 * the pods of override_pdb are replayed and every other pod keeps its times from pinned: they do not depend
 * on this PDB's disruptions (pods under several PDBs are never replayed this way). */
void planner_sim_run(const struct planner *pl, struct sim *s, bool force, size_t override_pdb,
                     int override_k, const struct sim *pinned)
{
        const struct drain_input *in = pl->in;
        int64_t now = pl->now;

        s->n_returns = 0;
        s->n_order = 0;
        for (size_t o = 0; o < pl->n_order; o++)
                if (!pinned || planner_pod_in_pdb(&in->pods[pl->order[o]], override_pdb))
                        s->order[s->n_order++] = pl->order[o];
        for (size_t b = 0; b < in->n_pdbs; b++)
                s->margin[b] = b == override_pdb ? override_k : pl->margin0[b];
        for (size_t i = 0; i < in->n_pods; i++) {
                const struct drain_pod_in *pod = &in->pods[i];
                const struct pod_info *p = &pl->pi[i];
                if (pinned && !planner_pod_in_pdb(pod, override_pdb)) {
                        s->state[i] = pinned->state[i];
                        s->t_evict[i] = pinned->t_evict[i];
                        s->t_gone[i] = pinned->t_gone[i];
                        continue;
                }
                s->t_evict[i] = s->t_gone[i] = T_NEVER;
                if (p->left) {
                        s->state[i] = PS_OUT;
                        continue;
                }
                if (!pod->deleting) {
                        s->state[i] = PS_WAITING;
                        continue;
                }
                s->state[i] = PS_DELETING;
                int64_t since = pod->deleted_at_usec ? clamp_t(pod->deleted_at_usec) : now;
                s->t_evict[i] = since;
                s->t_gone[i] =
                    pod->gone_usec ? min_t(now, clamp_t(pod->gone_usec)) : max_t(now, since + p->shutdown);
                if (!pod->deleted_at_usec || !owner_replaces(pod->owner))
                        continue;
                int64_t at = (pod->owner == DRAIN_OWNER_STATEFULSET ? s->t_gone[i] : since) + p->startup;
                if (at > now)
                        for (size_t j = 0; j < pod->n_pdbs; j++)
                                push_return(s, at, pod->pdbs[j]);
        }
        push_surge_returns(pl, s, override_pdb, pinned);
        push_overdue_returns(pl, s, override_pdb, pinned);
        push_lost_returns(pl, s, override_pdb, pinned);

        compute_tier0_gone(pl, s);
        for (int64_t t = now;;) {
                bool progress;
                do {
                        progress = apply_returns(s, t);
                        node_t0_refresh(s);
                        /* The pods still waiting stay in s->order, in their order. */
                        size_t w = 0;
                        for (size_t o = 0; o < s->n_order; o++) {
                                size_t i = s->order[o];
                                if (s->state[i] != PS_WAITING)
                                        continue;
                                if (tier_open(pl, s, i, t)) {
                                        size_t b = in->pods[i].n_pdbs == 1 ? in->pods[i].pdbs[0] : SIZE_MAX;
                                        bool frozen_p = b != SIZE_MAX && b != override_pdb && pl->frozen[b];
                                        if (t >= pl->pi[i].not_before && try_evict(pl, s, i, t, frozen_p))
                                                progress = true;
                                        else if (force && t >= pl->pi[i].last_safe) {
                                                do_force(pl, s, i, t);
                                                progress = true;
                                        }
                                }
                                if (s->state[i] == PS_WAITING)
                                        s->order[w++] = i;
                        }
                        s->n_order = w;
                } while (progress);

                int64_t next = s->n_returns > 0 ? s->returns[0].at : T_NEVER;
                for (size_t o = 0; o < s->n_order; o++) {
                        size_t i = s->order[o];
                        if (pl->pi[i].last_safe > t)
                                next = min_t(next, pl->pi[i].last_safe);
                        if (pl->pi[i].not_before > t)
                                next = min_t(next, pl->pi[i].not_before);
                        int64_t open = s->node_t0_gone[in->pods[i].node];
                        if (pl->pi[i].tier != 0 && open > t)
                                next = min_t(next, open);
                }
                if (next == T_NEVER)
                        break;
                t = next;
        }
}
