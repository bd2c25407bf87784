/* The deadline-budget drain planner: an event-driven replay of the drain against the PDBs, on the
 * predicted cluster answers (slots coming back as replacements turn Ready). Pure: no I/O, no clock. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drain/planner_internal.h"
#include "spotdrain/drain.h"

#define T_NEVER_BEFORE INT64_MIN
/* Priorities from here up are the system-critical range (scheduling.SystemCriticalPriority). */
#define SYSTEM_CRITICAL_PRIORITY 2000000000

static const char *const default_critical_classes[] = { "system-cluster-critical", "system-node-critical" };

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

bool drain_plan_pod_to_evict(const struct drain_plan_pod *pp)
{
        return pp->action == DRAIN_ACTION_EVICT || pp->action == DRAIN_ACTION_FORCE ||
               pp->action == DRAIN_ACTION_STUCK || pp->action == DRAIN_ACTION_SURGE;
}

bool drain_pod_takes_slot(const struct drain_pod_in *pod)
{
        /* No PDB, several (the API answers 500 and the pod goes to the force path), or an unhealthy pod that
         * the API may let go without a disruption: nothing to count. */
        return pod->n_pdbs == 1 && pod->ready && !pod->pending;
}

bool drain_pod_is_critical(const struct drain_input *in, const struct drain_pod_in *pod)
{
        if (pod->priority >= SYSTEM_CRITICAL_PRIORITY)
                return true;
        if (isempty(pod->priority_class))
                return false;
        const char *const *classes = in->critical_classes ? in->critical_classes : default_critical_classes;
        size_t n = in->critical_classes ? in->n_critical_classes : ARRAY_SIZE(default_critical_classes);
        for (size_t i = 0; i < n; i++)
                if (streq(classes[i], pod->priority_class))
                        return true;
        return false;
}

static int64_t pod_shutdown(const struct drain_pod_in *pod)
{
        int64_t grace = clamp_t(pod->grace_usec);
        /* The kubelet kills at the end of the grace period: a longer shutdown never happens. */
        if (pod->shutdown_usec == 0)
                return grace;
        return min_t(clamp_t(pod->shutdown_usec), grace);
}

static int64_t pod_startup(const struct drain_input *in, const struct drain_pod_in *pod)
{
        if (pod->owner_key)
                for (size_t i = 0; i < in->n_startups; i++)
                        if (streq(in->startups[i].owner_key, pod->owner_key))
                                return clamp_t(in->startups[i].startup_usec);
        return clamp_t(in->default_startup_usec);
}

/* Disruptions the PDB allows at the start, negative while currentHealthy < desiredHealthy (so that
 * replacements turning Ready first pay the deficit back). The status' disruptionsAllowed wins when lower:
 * the API server decrements it at each eviction before the controller recounts. */
static int pdb_initial_margin(const struct drain_pdb_in *pdb, bool *ret_frozen)
{
        /* The disruption controller allows nothing while it expects no pod (e.g. it found no controller). */
        *ret_frozen = pdb->expected_pods <= 0;
        int diff = pdb->current_healthy - pdb->desired_healthy;
        if (diff < 0)
                return diff;
        return min_t(diff, pdb->disruptions_allowed < 0 ? 0 : pdb->disruptions_allowed);
}

static int validate(const struct drain_input *in)
{
        if (!in || (in->n_nodes && !in->nodes) || (in->n_pods && !in->pods) || (in->n_pdbs && !in->pdbs) ||
            (in->n_startups && !in->startups))
                return -EINVAL;
        if (in->n_pdbs > INT_MAX || in->n_pods > INT_MAX)
                return -EINVAL;
        for (size_t i = 0; i < in->n_nodes; i++)
                if (!in->nodes[i].name)
                        return -EINVAL;
        for (size_t i = 0; i < in->n_pdbs; i++)
                if (!in->pdbs[i].namespace || !in->pdbs[i].name ||
                    (in->pdbs[i].n_lost && !in->pdbs[i].lost_usec))
                        return -EINVAL;
        for (size_t i = 0; i < in->n_pods; i++) {
                const struct drain_pod_in *pod = &in->pods[i];
                if (!pod->namespace || !pod->name || pod->node >= in->n_nodes || (pod->n_pdbs && !pod->pdbs))
                        return -EINVAL;
                for (size_t j = 0; j < pod->n_pdbs; j++)
                        if (pod->pdbs[j] >= in->n_pdbs)
                                return -EINVAL;
        }
        return 0;
}

static void planner_done(struct planner *pl)
{
        free(pl->pi);
        free(pl->order);
        free(pl->margin0);
        free(pl->frozen);
        free(pl->pdb_startup);
        free(pl->surge);
        free(pl->node_first);
        free(pl->node_pods);
        free(pl->pdb_first);
        free(pl->pdb_pods);
        free(pl->pdb_count);
}

/* Whether pod->pdbs[j] is named there for the first time (an input may repeat a PDB). */
static bool first_mention(const struct drain_pod_in *pod, size_t j)
{
        for (size_t k = 0; k < j; k++)
                if (pod->pdbs[k] == pod->pdbs[j])
                        return false;
        return true;
}

/* Counting sort of the pods by node and by PDB (stable: input order within each). */
static int index_pods(struct planner *pl)
{
        const struct drain_input *in = pl->in;
        size_t members = 0;
        for (size_t i = 0; i < in->n_pods; i++)
                members += in->pods[i].n_pdbs;
        pl->node_first = calloc(in->n_nodes + 1, sizeof(*pl->node_first));
        pl->node_pods = calloc(in->n_pods ? in->n_pods : 1, sizeof(*pl->node_pods));
        pl->pdb_first = calloc(in->n_pdbs + 1, sizeof(*pl->pdb_first));
        pl->pdb_pods = calloc(members ? members : 1, sizeof(*pl->pdb_pods));
        pl->pdb_count = calloc(in->n_pdbs ? in->n_pdbs : 1, sizeof(*pl->pdb_count));
        if (!pl->node_first || !pl->node_pods || !pl->pdb_first || !pl->pdb_pods || !pl->pdb_count)
                return -ENOMEM;
        for (size_t i = 0; i < in->n_pods; i++) {
                pl->node_first[in->pods[i].node + 1]++;
                for (size_t j = 0; j < in->pods[i].n_pdbs; j++)
                        if (first_mention(&in->pods[i], j))
                                pl->pdb_first[in->pods[i].pdbs[j] + 1]++;
        }
        for (size_t n = 0; n < in->n_nodes; n++)
                pl->node_first[n + 1] += pl->node_first[n];
        for (size_t b = 0; b < in->n_pdbs; b++)
                pl->pdb_first[b + 1] += pl->pdb_first[b];
        /* pdb_count serves as the fill cursor of each PDB, node_pods' of each node is its next free slot
         * counted back from the next node's first. */
        _cleanup_free_ size_t *fill = calloc(in->n_nodes ? in->n_nodes : 1, sizeof(*fill));
        if (!fill)
                return -ENOMEM;
        for (size_t i = 0; i < in->n_pods; i++) {
                const struct drain_pod_in *pod = &in->pods[i];
                pl->node_pods[pl->node_first[pod->node] + fill[pod->node]++] = i;
                for (size_t j = 0; j < pod->n_pdbs; j++) {
                        size_t b = pod->pdbs[j];
                        if (first_mention(pod, j))
                                pl->pdb_pods[pl->pdb_first[b] + (size_t)pl->pdb_count[b]++] = i;
                }
        }
        memset(pl->pdb_count, 0, (in->n_pdbs ? in->n_pdbs : 1) * sizeof(*pl->pdb_count));
        return 0;
}

/* Sort key of a pod to evict. */
struct order_key {
        int64_t last_safe;
        int64_t end;
        const char *node;
        size_t idx;
};

static int order_cmp(const void *a, const void *b)
{
        const struct order_key *x = a, *y = b;
        /* Earliest deadline first: a pod's own deadline is its last safe moment; then its node's. */
        if (x->last_safe != y->last_safe)
                return x->last_safe < y->last_safe ? -1 : 1;
        if (x->end != y->end)
                return x->end < y->end ? -1 : 1;
        /* Between nodes with one deadline, the name first in byte order (as the ledger gives slots): a plan
         * made elsewhere, with the nodes in another order (an agent's, its own node first), agrees. */
        int c = strcmp(x->node, y->node);
        if (c != 0)
                return c;
        return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

static int planner_init(struct planner *pl, const struct drain_input *in)
{
        *pl = (struct planner){ .in = in, .now = clamp_t(in->now_usec) };
        size_t np = in->n_pods ? in->n_pods : 1, nb = in->n_pdbs ? in->n_pdbs : 1;
        pl->pi = calloc(np, sizeof(*pl->pi));
        pl->order = calloc(np, sizeof(*pl->order));
        pl->margin0 = calloc(nb, sizeof(*pl->margin0));
        pl->frozen = calloc(nb, sizeof(*pl->frozen));
        pl->pdb_startup = calloc(nb, sizeof(*pl->pdb_startup));
        pl->surge = calloc(np, sizeof(*pl->surge));
        if (!pl->pi || !pl->order || !pl->margin0 || !pl->frozen || !pl->pdb_startup || !pl->surge ||
            index_pods(pl) < 0) {
                planner_done(pl);
                return -ENOMEM;
        }
        for (size_t i = 0; i < in->n_pods; i++) {
                const struct drain_pod_in *pod = &in->pods[i];
                const struct drain_node_in *node = &in->nodes[pod->node];
                struct pod_info *p = &pl->pi[i];
                p->grace = clamp_t(pod->grace_usec);
                p->shutdown = pod_shutdown(pod);
                p->startup = pod_startup(in, pod);
                p->deadline = clamp_t(node->deadline_usec);
                p->end = p->deadline - clamp_t(node->margin_usec);
                p->last_safe = p->end - p->shutdown;
                p->not_before = pod->do_not_disrupt ? p->last_safe : T_NEVER_BEFORE;
                /* Held for the load balancers, but never past its last safe moment: it goes then. */
                if (pod->behind_service && node->lb_hold_usec)
                        p->not_before =
                            max_t(p->not_before, min_t(clamp_t(node->lb_hold_usec), p->last_safe));
                /* Behind an instance target group: until the instance left healthy there. */
                if (pod->lb_target && pod->lb_hold_usec)
                        p->not_before =
                            max_t(p->not_before, min_t(clamp_t(pod->lb_hold_usec), p->last_safe));
                p->lb_wait =
                    (pod->behind_service && node->lb_hold_usec) || (pod->lb_target && pod->lb_hold_usec)
                        ? p->not_before
                        : 0;
                p->tier = drain_pod_is_critical(in, pod) ? 1 : 0;
                p->left = pod_left(in, pod);
                pl->max_returns += pod->n_pdbs * (pod->can_surge || pod->surged_usec ? 2 : 1);
                if (!p->left && !pod->deleting)
                        pl->order[pl->n_order++] = i;
                if (!p->left)
                        for (size_t j = 0; j < pod->n_pdbs; j++)
                                pl->pdb_startup[pod->pdbs[j]] =
                                    max_t(pl->pdb_startup[pod->pdbs[j]], p->startup);
        }
        for (size_t i = 0; i < in->n_pdbs; i++) {
                pl->margin0[i] = pdb_initial_margin(&in->pdbs[i], &pl->frozen[i]);
                if (pl->pdb_startup[i] == 0)
                        pl->pdb_startup[i] = clamp_t(in->default_startup_usec);
                pl->max_returns += in->pdbs[i].n_lost;
        }
        _cleanup_free_ struct order_key *keys = calloc(pl->n_order ? pl->n_order : 1, sizeof(*keys));
        if (!keys) {
                planner_done(pl);
                return -ENOMEM;
        }
        for (size_t o = 0; o < pl->n_order; o++) {
                size_t i = pl->order[o];
                keys[o] = (struct order_key){ .last_safe = pl->pi[i].last_safe,
                                              .end = pl->pi[i].end,
                                              .node = in->nodes[in->pods[i].node].name,
                                              .idx = i };
        }
        qsort(keys, pl->n_order, sizeof(*keys), order_cmp);
        for (size_t o = 0; o < pl->n_order; o++)
                pl->order[o] = keys[o].idx;
        return 0;
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

static int fill_pdbs(const struct planner *pl, const struct sim *nat, struct sim *scratch,
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

static int fill_pods(const struct planner *pl, const struct sim *s, struct drain_plan *plan)
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
        if (pdb->k <= 0)
                r = buf_printf(
                    b,
                    "PDB %s/%s allows no disruption (currentHealthy %d, desiredHealthy %d); %d pods on %s "
                    "cannot be evicted before pods turn Ready",
                    pdb->namespace, pdb->name, pin->current_healthy, pin->desired_healthy, here, node);
        else if (pdb->overlap)
                r = buf_printf(b,
                               "PDB %s/%s shares pods with another PDB; the eviction API refuses them (500)",
                               pdb->namespace, pdb->name);
        else {
                r = buf_printf(b, "PDB %s/%s allows %d disruption%s at a time; %d pods on %s",
                               pdb->namespace, pdb->name, pdb->k, pdb->k == 1 ? "" : "s", here, node);
                if (r >= 0 && here != pdb->n)
                        r = buf_printf(b, " (%d on the draining nodes)", pdb->n);
                if (r >= 0)
                        r = buf_printf(b, " need %d waves of %s s", pdb->waves,
                                       fmt_secs(pdb->slot_return_usec).s);
                if (r >= 0 && pdb->unforced_finish_usec != DRAIN_NEVER)
                        r = buf_printf(b, ": the last pod is gone at %s s > %s s left",
                                       fmt_secs((int64_t)pdb->unforced_finish_usec - pl->now).s,
                                       fmt_secs(left).s);
                else if (r >= 0)
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

static int fill_nodes(const struct planner *pl, struct drain_plan *plan)
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

struct drain_plan *drain_plan_free(struct drain_plan *p)
{
        if (!p)
                return NULL;
        for (size_t i = 0; i < p->n_nodes; i++) {
                free(p->nodes[i].name);
                free(p->nodes[i].reason);
        }
        for (size_t i = 0; i < p->n_pdbs; i++) {
                free(p->pdbs[i].namespace);
                free(p->pdbs[i].name);
        }
        for (size_t i = 0; i < p->n_pods && !p->names_borrowed; i++) {
                free(p->pods[i].uid);
                free(p->pods[i].namespace);
                free(p->pods[i].name);
        }
        free(p->nodes);
        free(p->pdbs);
        free(p->pods);
        free(p);
        return NULL;
}

/* Which pods surge: those surged already, and under drain.surge always every pod that can, under blocked
 * those that a replay without surge leaves to be forced or killed with the instance, where a replacement
 * frees a slot of every PDB of theirs (surge_frees_slot). */
static void choose_surge(const struct planner *pl, struct sim *scratch, bool force)
{
        const struct drain_input *in = pl->in;
        bool blocked_only = in->surge == DRAIN_SURGE_BLOCKED, any = false;
        for (size_t i = 0; i < in->n_pods; i++) {
                const struct drain_pod_in *pod = &in->pods[i];
                bool can =
                    in->surge != DRAIN_SURGE_OFF && pod->can_surge && !pl->pi[i].left && !pod->deleting;
                pl->surge[i] = pod->surged_usec != 0 && !pl->pi[i].left && !pod->deleting;
                if (can && !blocked_only)
                        pl->surge[i] = true;
                any = any || (can && !pl->surge[i]);
        }
        if (!blocked_only || !any)
                return;
        planner_sim_run(pl, scratch, force, SIZE_MAX, 0, NULL);
        for (size_t i = 0; i < in->n_pods; i++) {
                const struct drain_pod_in *pod = &in->pods[i];
                if (pod->can_surge && !pl->pi[i].left && !pod->deleting && planner_surge_helps(in, pod) &&
                    (scratch->state[i] == PS_FORCED || scratch->state[i] == PS_WAITING))
                        pl->surge[i] = true;
        }
}

static int plan_build(const struct planner *pl, struct drain_plan *plan)
{
        const struct drain_input *in = pl->in;
        struct sim nat = { 0 }, forced = { 0 }, scratch = { 0 };
        int r = planner_sim_init(&nat, pl);
        if (r >= 0)
                r = planner_sim_init(&scratch, pl);
        bool force = in->policy == DRAIN_POLICY_FORCE;
        if (r >= 0 && force)
                r = planner_sim_init(&forced, pl);
        if (r >= 0)
                choose_surge(pl, &scratch, force);
        if (r >= 0) {
                planner_sim_run(pl, &nat, false, SIZE_MAX, 0, NULL);
                if (force)
                        planner_sim_run(pl, &forced, true, SIZE_MAX, 0, NULL);
                /* Under respect the plan is the replay through the PDBs alone. */
                r = fill_pods(pl, force ? &forced : &nat, plan);
        }
        if (r >= 0)
                r = fill_pdbs(pl, &nat, &scratch, plan);
        if (r >= 0)
                r = fill_nodes(pl, plan);
        planner_sim_done(&nat);
        planner_sim_done(&forced);
        planner_sim_done(&scratch);
        return r;
}

int drain_plan_make(const struct drain_input *in, struct drain_plan **ret)
{
        int r = validate(in);
        if (r < 0)
                return r;
        _cleanup_(drain_plan_freep) struct drain_plan *plan = calloc(1, sizeof(*plan));
        if (!plan)
                return -ENOMEM;
        plan->now_usec = in->now_usec;
        plan->policy = in->policy;
        plan->names_borrowed = in->plans_borrow_names;
        plan->nodes = calloc(in->n_nodes ? in->n_nodes : 1, sizeof(*plan->nodes));
        plan->pdbs = calloc(in->n_pdbs ? in->n_pdbs : 1, sizeof(*plan->pdbs));
        plan->pods = calloc(in->n_pods ? in->n_pods : 1, sizeof(*plan->pods));
        if (!plan->nodes || !plan->pdbs || !plan->pods)
                return -ENOMEM;
        plan->n_nodes = in->n_nodes;
        plan->n_pdbs = in->n_pdbs;
        plan->n_pods = in->n_pods;

        struct planner pl;
        r = planner_init(&pl, in);
        if (r < 0)
                return r;
        r = plan_build(&pl, plan);
        planner_done(&pl);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(plan);
        return 0;
}

uint64_t drain_lower_bound_usec(const struct drain_input *in, size_t node)
{
        if (validate(in) < 0)
                return DRAIN_NEVER;
        int64_t now = clamp_t(in->now_usec), lb = 0;
        /* Every pod needs its own shutdown, whatever the order. */
        for (size_t i = 0; i < in->n_pods; i++) {
                const struct drain_pod_in *pod = &in->pods[i];
                if ((node != DRAIN_ALL_NODES && pod->node != node) || pod_left(in, pod))
                        continue;
                int64_t need = pod_shutdown(pod);
                if (pod->gone_usec)
                        need = 0;
                else if (pod->deleting && pod->deleted_at_usec)
                        need = clamp_t(pod->deleted_at_usec) + need - now;
                lb = max_t(lb, need);
        }
        /* A PDB with k disruptions needs ceil(m/k) waves for its m budgeted pods; the last wave can start
         * no earlier than (waves - 1) slot returns, and its quickest pod still has to shut down.
         * Replacements of pods that go without a disruption (Pending, unready, already deleting) add a slot
         * each; counting those as there from the start keeps this a lower bound. */
        for (size_t b = 0; b < in->n_pdbs; b++) {
                int m = 0, extra = 0;
                int64_t min_shutdown = T_NEVER, min_return = T_NEVER;
                for (size_t i = 0; i < in->n_pods; i++) {
                        const struct drain_pod_in *pod = &in->pods[i];
                        if (pod_left(in, pod) || !planner_pod_in_pdb(pod, b))
                                continue;
                        bool budgeted = !pod->deleting && !pod->pending && pod->ready && pod->n_pdbs == 1;
                        if (!budgeted) {
                                bool adds =
                                    pod->deleting ? pod->deleted_at_usec != 0 : pod->pending || !pod->ready;
                                extra += owner_replaces(pod->owner) && adds;
                                continue;
                        }
                        if (node != DRAIN_ALL_NODES && pod->node != node)
                                continue;
                        m++;
                        int64_t sd = pod_shutdown(pod);
                        min_shutdown = min_t(min_shutdown, sd);
                        if (owner_replaces(pod->owner))
                                min_return =
                                    min_t(min_return, pod_startup(in, pod) +
                                                          (pod->owner == DRAIN_OWNER_STATEFULSET ? sd : 0));
                }
                if (m == 0)
                        continue;
                bool frozen;
                int k = pdb_initial_margin(&in->pdbs[b], &frozen) + extra;
                if (frozen || k <= 0)
                        return DRAIN_NEVER;
                int waves = (m + k - 1) / k;
                if (waves > 1 && min_return == T_NEVER)
                        return DRAIN_NEVER;
                int64_t need = waves > 1 ? (int64_t)(waves - 1) * min_return + min_shutdown : min_shutdown;
                lb = max_t(lb, need);
        }
        return to_u(lb);
}

const char *drain_verdict_to_string(enum drain_verdict v)
{
        switch (v) {
        case DRAIN_FEASIBLE:
                return "FEASIBLE";
        case DRAIN_INFEASIBLE_FORCED:
                return "INFEASIBLE_FORCED";
        case DRAIN_INFEASIBLE_KILLED:
                return "INFEASIBLE_KILLED";
        }
        return "?";
}

const char *drain_action_to_string(enum drain_action a)
{
        switch (a) {
        case DRAIN_ACTION_EVICT:
                return "evict";
        case DRAIN_ACTION_FORCE:
                return "force";
        case DRAIN_ACTION_LEAVE:
                return "leave";
        case DRAIN_ACTION_DELETING:
                return "deleting";
        case DRAIN_ACTION_STUCK:
                return "stuck";
        case DRAIN_ACTION_SURGE:
                return "surge";
        }
        return "?";
}
