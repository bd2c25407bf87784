/* What the planner's replay is made into: for each PDB the disruptions that fit (and what it allows), for
 * each pod its times and action, for each node its last safe moment and the reason it is what it is (the
 * PDB that limits it, in words). Pure: no I/O, no clock. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drain/planner_internal.h"

/* "12" for whole seconds, "12.5" otherwise. */
struct secs {
        char s[32];
};
static struct secs fmt_secs(int64_t usec)
{
        struct secs r;
        if (usec % USEC_PER_SEC == 0)
                snprintf(r.s, sizeof(r.s), "%" PRId64, usec / USEC_PER_SEC);
        else
                snprintf(r.s, sizeof(r.s), "%.1f", (double)usec / (double)USEC_PER_SEC);
        return r;
}

/* Whether every pod of PDB b got its graceful stop started by its last safe moment through the PDB alone. */
static bool pdb_fits(const struct planner *pl, const struct sim *s, size_t b, int64_t *ret_finish)
{
        bool ok = true;
        int64_t finish = pl->now;
        for (size_t m = pl->pdb_first[b]; m < pl->pdb_first[b + 1]; m++) {
                size_t i = pl->pdb_pods[m];
                if (s->state[i] == PS_OUT || s->state[i] == PS_DELETING)
                        continue;
                if (s->state[i] != PS_EVICTED) {
                        ok = false;
                        finish = T_NEVER;
                        continue;
                }
                if (s->t_evict[i] > pl->pi[i].last_safe)
                        ok = false;
                if (finish != T_NEVER)
                        finish = max_t(finish, s->t_gone[i]);
        }
        if (ret_finish)
                *ret_finish = finish;
        return ok;
}

/* The smallest number of disruptions at the start that makes PDB b fit, or -1. */
static int fit_k(const struct planner *pl, const struct sim *nat, struct sim *scratch, size_t b, int k0,
                 int n_ready)
{
        int lo = (k0 > 0 ? k0 : 0) + 1, hi = n_ready > 1 ? n_ready : 1;
        if (lo > hi)
                return -1;
        planner_sim_run(pl, scratch, false, b, hi, nat);
        if (!pdb_fits(pl, scratch, b, NULL))
                return -1;
        while (lo < hi) {
                int mid = lo + (hi - lo) / 2;
                planner_sim_run(pl, scratch, false, b, mid, nat);
                if (pdb_fits(pl, scratch, b, NULL))
                        hi = mid;
                else
                        lo = mid + 1;
        }
        return lo;
}

static int allowed_with(const struct drain_pdb_in *pdb, const struct pdb_spec *spec, int scale)
{
        int expected, desired;
        int matching = pdb->covered_pods > 0 ? pdb->covered_pods : scale;
        pdb_expected(spec, matching, scale, &expected, &desired);
        return pdb_disruptions_allowed(pdb->current_healthy, desired, expected);
}

/* The spec values that give at least k disruptions, under the disruption controller's own rounding. */
static void fit_values(const struct drain_pdb_in *pdb, int k, struct drain_plan_pdb *out)
{
        int scale = pdb->expected_pods > 0 ? pdb->expected_pods : pdb->covered_pods;
        out->fit_max_unavailable = out->fit_max_unavailable_pct = -1;
        out->fit_min_available = out->fit_min_available_pct = -1;
        if (k <= 0 || scale <= 0)
                return;
        for (int m = 0; m <= scale; m++) {
                struct pdb_spec s = { .max_unavailable = { .set = true, .value = m } };
                if (allowed_with(pdb, &s, scale) >= k) {
                        out->fit_max_unavailable = m;
                        break;
                }
        }
        /* The percent that names the same share (3 of 30 → 10%), not the smallest one that Kubernetes'
         * rounding happens to stretch to k (4% of 30 → 2), which stops fitting at the first scale-down. */
        int pct0 = out->fit_max_unavailable < 0 ? 1 : (100 * out->fit_max_unavailable + scale - 1) / scale;
        for (int pct = pct0 > 0 ? pct0 : 1; pct <= 100; pct++) {
                struct pdb_spec s = { .max_unavailable = { .set = true, .percent = true, .value = pct } };
                if (allowed_with(pdb, &s, scale) >= k) {
                        out->fit_max_unavailable_pct = pct;
                        break;
                }
        }
        for (int m = pdb->current_healthy; m >= 0; m--) {
                struct pdb_spec s = { .min_available = { .set = true, .value = m } };
                if (allowed_with(pdb, &s, scale) >= k) {
                        out->fit_min_available = m;
                        break;
                }
        }
        for (int pct = 100; pct >= 0; pct--) {
                struct pdb_spec s = { .min_available = { .set = true, .percent = true, .value = pct } };
                if (allowed_with(pdb, &s, scale) >= k) {
                        out->fit_min_available_pct = pct;
                        break;
                }
        }
}

int planner_fill_pdbs(const struct planner *pl, const struct sim *nat, struct sim *scratch,
                      struct drain_plan *plan)
{
        const struct drain_input *in = pl->in;
        for (size_t b = 0; b < in->n_pdbs; b++) {
                struct drain_plan_pdb *o = &plan->pdbs[b];
                const struct drain_pdb_in *pdb = &in->pdbs[b];
                o->namespace = strdup(pdb->namespace);
                o->name = strdup(pdb->name);
                if (!o->namespace || !o->name)
                        return -ENOMEM;
                o->k = pl->frozen[b] || pl->margin0[b] < 0 ? 0 : pl->margin0[b];
                o->expected_pods = pdb->expected_pods > 0 ? pdb->expected_pods : pdb->covered_pods;
                int64_t finish = pl->now, startup = 0, slot_return = 0;
                for (size_t m = pl->pdb_first[b]; m < pl->pdb_first[b + 1]; m++) {
                        size_t i = pl->pdb_pods[m];
                        const struct drain_pod_in *pod = &in->pods[i];
                        const struct drain_plan_pod *pp = &plan->pods[i];
                        if (pl->pi[i].left)
                                continue;
                        finish = max_t(finish, clamp_t(pp->gone_usec));
                        if (pod->deleting)
                                continue;
                        o->n++;
                        /* Pending pods skip the PDB check, so only running ones meet the 500. */
                        if (pod->n_pdbs > 1 && !pod->pending)
                                o->overlap = true;
                        else if (pod->ready && !pod->pending)
                                o->n_ready++;
                        startup = max_t(startup, pl->pi[i].startup);
                        int64_t back = pl->pi[i].startup +
                                       (pod->owner == DRAIN_OWNER_STATEFULSET ? pl->pi[i].shutdown : 0);
                        slot_return = max_t(slot_return, back);
                }
                o->waves = o->k > 0 ? (o->n_ready + o->k - 1) / o->k : 0;
                o->startup_usec = to_u(startup);
                o->slot_return_usec = to_u(slot_return);
                o->finish_usec = to_u(finish);
                int64_t nat_finish;
                o->feasible = pdb_fits(pl, nat, b, &nat_finish);
                o->unforced_finish_usec = to_u(nat_finish);
                o->fit_k = -1;
                fit_values(pdb, -1, o);
                if (o->feasible || o->overlap)
                        continue;
                o->fit_k = fit_k(pl, nat, scratch, b, pl->frozen[b] ? 0 : pl->margin0[b], o->n_ready);
                fit_values(pdb, o->fit_k, o);
        }
        return 0;
}

int planner_fill_pods(const struct planner *pl, const struct sim *s, struct drain_plan *plan)
{
        const struct drain_input *in = pl->in;
        for (size_t i = 0; i < in->n_pods; i++) {
                const struct drain_pod_in *pod = &in->pods[i];
                const struct pod_info *p = &pl->pi[i];
                struct drain_plan_pod *o = &plan->pods[i];
                if (plan->names_borrowed) {
                        o->namespace = (char *)pod->namespace;
                        o->name = (char *)pod->name;
                        o->uid = (char *)pod->uid;
                } else {
                        o->namespace = strdup(pod->namespace);
                        o->name = strdup(pod->name);
                        if (!o->namespace || !o->name)
                                return -ENOMEM;
                        if (pod->uid && !(o->uid = strdup(pod->uid)))
                                return -ENOMEM;
                }
                o->node = pod->node;
                o->pdb = pod->n_pdbs ? (int)pod->pdbs[0] : -1;
                o->n_pdbs = pod->n_pdbs;
                o->tier = p->tier;
                o->last_safe_usec = to_u(p->last_safe);
                o->shutdown_usec = to_u(p->shutdown);
                o->startup_usec = to_u(p->startup);
                o->surge = pl->surge[i];
                o->lb_wait_until_usec = p->lb_wait > pl->now && !pod->deleting ? to_u(p->lb_wait) : 0;
                if (pod->do_not_disrupt)
                        o->warnings |= DRAIN_WARN_DO_NOT_DISRUPT;
                if (pod->owner == DRAIN_OWNER_NONE)
                        o->warnings |= DRAIN_WARN_BARE;
                if (pod->emptydir)
                        o->warnings |= DRAIN_WARN_EMPTYDIR;
                if (pod->n_pdbs > 1)
                        o->warnings |= DRAIN_WARN_MULTI_PDB;
                if (!p->left && !pod->deleting && p->last_safe < pl->now)
                        o->warnings |= DRAIN_WARN_NO_TIME;

                int64_t gone = s->t_gone[i];
                enum pod_state st = s->state[i];
                /* A stop that would start once the instance is gone never happens. */
                if ((st == PS_EVICTED || st == PS_FORCED) && s->t_evict[i] >= p->deadline &&
                    s->t_evict[i] > pl->now)
                        st = PS_WAITING;
                switch (st) {
                case PS_OUT:
                        o->action = DRAIN_ACTION_LEAVE;
                        break;
                case PS_WAITING:
                        o->action = DRAIN_ACTION_STUCK;
                        o->killed = true;
                        gone = p->deadline;
                        break;
                case PS_DELETING:
                        o->action = DRAIN_ACTION_DELETING;
                        o->killed = gone > p->end;
                        break;
                case PS_EVICTED:
                case PS_FORCED:
                        o->action = st == PS_FORCED ? DRAIN_ACTION_FORCE
                                    : pl->surge[i]  ? DRAIN_ACTION_SURGE
                                                    : DRAIN_ACTION_EVICT;
                        o->forced = st == PS_FORCED;
                        /* Late, or cut short by a shortened grace period. */
                        o->killed = s->t_evict[i] > p->last_safe || gone - s->t_evict[i] < p->shutdown;
                        break;
                }
                if (o->killed && st != PS_WAITING)
                        gone = max_t(min_t(gone, p->deadline), s->t_evict[i]);
                o->evict_usec = st == PS_WAITING ? DRAIN_NEVER : to_u(s->t_evict[i]);
                o->gone_usec = to_u(gone);
        }
        return 0;
}

/* Whether a pod of node n counts for its drain: not already going, not left on it. */
static bool pod_to_go(const struct planner *pl, size_t i)
{
        return !pl->in->pods[i].deleting && !pod_left(pl->in, &pl->in->pods[i]);
}

/* How many pods of node n to go PDB b covers. */
static int pdb_on_node(const struct planner *pl, size_t b, size_t n)
{
        int count = 0;
        for (size_t k = pl->node_first[n]; k < pl->node_first[n + 1]; k++) {
                size_t i = pl->node_pods[k];
                if (pod_to_go(pl, i) && planner_pod_in_pdb(&pl->in->pods[i], b))
                        count++;
        }
        return count;
}

/* The PDB that bounds the node's drain: the infeasible one that finishes last, else the slowest one. */
static int limiting_pdb(const struct planner *pl, const struct drain_plan *plan, size_t n)
{
        int best = -1;
        /* The PDBs of the node's pods to go, marked in pdb_count, then taken in index order. */
        for (size_t k = pl->node_first[n]; k < pl->node_first[n + 1]; k++) {
                const struct drain_pod_in *pod = &pl->in->pods[pl->node_pods[k]];
                if (pod_to_go(pl, pl->node_pods[k]))
                        for (size_t j = 0; j < pod->n_pdbs; j++)
                                pl->pdb_count[pod->pdbs[j]] = 1;
        }
        for (size_t b = 0; b < plan->n_pdbs; b++) {
                if (!pl->pdb_count[b])
                        continue;
                pl->pdb_count[b] = 0;
                if (best < 0) {
                        best = (int)b;
                        continue;
                }
                const struct drain_plan_pdb *x = &plan->pdbs[b], *y = &plan->pdbs[best];
                if (x->feasible != y->feasible) {
                        if (!x->feasible)
                                best = (int)b;
                        continue;
                }
                uint64_t fx = x->feasible ? x->finish_usec : x->unforced_finish_usec;
                uint64_t fy = y->feasible ? y->finish_usec : y->unforced_finish_usec;
                if (fx > fy)
                        best = (int)b;
        }
        return best;
}

static int fit_phrase(struct buf *b, const struct drain_plan_pdb *pdb)
{
        if (pdb->overlap)
                return buf_printf(b, "; a pod is selected by several PDBs, so no value of this one fits");
        if (pdb->fit_k < 0 || pdb->fit_max_unavailable < 0)
                return buf_printf(b, "; no value of this PDB would fit");
        int r = buf_printf(b, "; maxUnavailable %d", pdb->fit_max_unavailable);
        if (r >= 0 && pdb->fit_max_unavailable_pct >= 0)
                r = buf_printf(b, " (%d%%)", pdb->fit_max_unavailable_pct);
        if (r >= 0 && pdb->fit_min_available >= 0)
                r = buf_printf(b, " or minAvailable %d", pdb->fit_min_available);
        if (r >= 0 && pdb->fit_min_available >= 0 && pdb->fit_min_available_pct >= 0)
                r = buf_printf(b, " (%d%%)", pdb->fit_min_available_pct);
        if (r >= 0)
                r = buf_printf(b, " would fit");
        return r;
}

static int pdb_phrase(struct buf *b, const struct planner *pl, const struct drain_plan *plan, size_t n,
                      int lb)
{
        const struct drain_plan_pdb *pdb = &plan->pdbs[lb];
        const struct drain_pdb_in *pin = &pl->in->pdbs[lb];
        const char *node = plan->nodes[n].name;
        int here = pdb_on_node(pl, (size_t)lb, n);
        int64_t left = (int64_t)plan->nodes[n].deadline_usec - (int64_t)plan->nodes[n].margin_usec - pl->now;
        int r;
        if (pdb->k > 0 && pdb->overlap)
                r = buf_printf(b,
                               "PDB %s/%s shares pods with another PDB; the eviction API refuses them (500)",
                               pdb->namespace, pdb->name);
        else {
                /* No room at all is often the drains' own evictions (a replacement still starting): either
                 * way the pods of the other draining nodes wait for the same slots, and the time they take
                 * is the reason. */
                r = pdb->k <= 0
                        ? buf_printf(b,
                                     "PDB %s/%s allows no disruption (currentHealthy %d, "
                                     "desiredHealthy %d); ",
                                     pdb->namespace, pdb->name, pin->current_healthy, pin->desired_healthy)
                        : buf_printf(b, "PDB %s/%s allows %d disruption%s at a time; ", pdb->namespace,
                                     pdb->name, pdb->k, pdb->k == 1 ? "" : "s");
                if (r >= 0)
                        r = buf_printf(b, "%d pods on %s", here, node);
                if (r >= 0 && here != pdb->n)
                        r = buf_printf(b, " (%d on the draining nodes)", pdb->n);
                if (r >= 0)
                        r = pdb->k <= 0 ? buf_printf(b, " cannot be evicted before pods turn Ready")
                                        : buf_printf(b, " need %d waves of %s s", pdb->waves,
                                                     fmt_secs(pdb->slot_return_usec).s);
                if (r >= 0 && pdb->unforced_finish_usec != DRAIN_NEVER)
                        r = buf_printf(b, ": the last pod is gone at %s s > %s s left",
                                       fmt_secs((int64_t)pdb->unforced_finish_usec - pl->now).s,
                                       fmt_secs(left).s);
                else if (r >= 0 && pdb->k > 0)
                        r = buf_printf(b, ", more than the %s s left", fmt_secs(left).s);
        }
        if (r >= 0)
                r = fit_phrase(b, pdb);
        return r;
}

static int node_reason(const struct planner *pl, struct drain_plan *plan, size_t n)
{
        struct drain_plan_node *node = &plan->nodes[n];
        _cleanup_(buf_free) struct buf b = { 0 };
        int64_t left = (int64_t)node->deadline_usec - (int64_t)node->margin_usec - pl->now;
        int r = 0;
        const struct drain_plan_pod *hopeless = NULL, *multi = NULL;
        for (size_t k = pl->node_first[n]; k < pl->node_first[n + 1]; k++) {
                const struct drain_plan_pod *p = &plan->pods[pl->node_pods[k]];
                if (!hopeless && (p->warnings & DRAIN_WARN_NO_TIME))
                        hopeless = p;
                if (!multi && (p->warnings & DRAIN_WARN_MULTI_PDB) && p->action != DRAIN_ACTION_LEAVE)
                        multi = p;
        }
        if (node->verdict == DRAIN_FEASIBLE) {
                r = buf_printf(&b, "%zu pods gone %s s after now, %s s left", node->n_to_go,
                               fmt_secs((int64_t)node->finish_usec - pl->now).s, fmt_secs(left).s);
                if (r >= 0 && node->limiting_pdb >= 0) {
                        const struct drain_plan_pdb *pdb = &plan->pdbs[node->limiting_pdb];
                        r = buf_printf(&b, "; slowest: PDB %s/%s, %d wave%s", pdb->namespace, pdb->name,
                                       pdb->waves, pdb->waves == 1 ? "" : "s");
                }
        } else {
                /* Every cause found, the limiting PDB first. */
                if (node->limiting_pdb >= 0 && !plan->pdbs[node->limiting_pdb].feasible)
                        r = pdb_phrase(&b, pl, plan, n, node->limiting_pdb);
                if (r >= 0 && hopeless)
                        r = buf_printf(&b, "%spod %s/%s needs %s s to shut down, only %s s left",
                                       b.len ? "; " : "", hopeless->namespace, hopeless->name,
                                       fmt_secs((int64_t)hopeless->shutdown_usec).s, fmt_secs(left).s);
                if (r >= 0 && multi)
                        r = buf_printf(
                            &b, "%spod %s/%s is selected by %zu PDBs: the eviction API refuses it (500)",
                            b.len ? "; " : "", multi->namespace, multi->name, multi->n_pdbs);
                if (r >= 0 && b.len == 0)
                        r = buf_printf(&b, "pods cannot all stop gracefully in the %s s left",
                                       fmt_secs(left).s);
        }
        if (r >= 0 && node->n_forced > 0)
                r = buf_printf(&b, "; %zu pod%s forced at the last safe moment", node->n_forced,
                               node->n_forced == 1 ? "" : "s");
        if (r >= 0 && node->n_killed > 0)
                r = buf_printf(&b, "; %zu pod%s predicted killed", node->n_killed,
                               node->n_killed == 1 ? "" : "s");
        if (r < 0)
                return -ENOMEM;
        node->reason = TAKE_PTR(b.data);
        return 0;
}

int planner_fill_nodes(const struct planner *pl, struct drain_plan *plan)
{
        const struct drain_input *in = pl->in;
        for (size_t n = 0; n < in->n_nodes; n++) {
                struct drain_plan_node *o = &plan->nodes[n];
                o->name = strdup(in->nodes[n].name);
                if (!o->name)
                        return -ENOMEM;
                o->deadline_usec = to_u(clamp_t(in->nodes[n].deadline_usec));
                o->margin_usec = to_u(clamp_t(in->nodes[n].margin_usec));
                o->lb_hold_usec = in->nodes[n].lb_hold_usec;
                int64_t finish = pl->now;
                for (size_t k = pl->node_first[n]; k < pl->node_first[n + 1]; k++) {
                        size_t i = pl->node_pods[k];
                        const struct drain_plan_pod *p = &plan->pods[i];
                        if (p->action == DRAIN_ACTION_LEAVE) {
                                o->n_left++;
                                continue;
                        }
                        o->n_to_go++;
                        if (in->pods[i].behind_service && in->nodes[n].lb_hold_usec > in->now_usec &&
                            !in->pods[i].deleting)
                                o->n_lb_held++;
                        o->n_forced += p->forced;
                        o->n_killed += p->killed;
                        finish = max_t(finish, clamp_t(p->gone_usec));
                }
                o->finish_usec = to_u(finish);
                o->verdict = o->n_killed   ? DRAIN_INFEASIBLE_KILLED
                             : o->n_forced ? DRAIN_INFEASIBLE_FORCED
                                           : DRAIN_FEASIBLE;
                o->limiting_pdb = limiting_pdb(pl, plan, n);
        }
        for (size_t n = 0; n < in->n_nodes; n++) {
                int r = node_reason(pl, plan, n);
                if (r < 0)
                        return r;
        }
        return 0;
}
