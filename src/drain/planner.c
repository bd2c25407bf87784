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

/* The owner's first startup in the input, else the default. */
static int64_t pod_startup(const struct drain_input *in, const struct drain_pod_in *pod)
{
        if (pod->owner_key)
                for (size_t i = 0; i < in->n_startups; i++)
                        if (streq_ptr(in->startups[i].owner_key, pod->owner_key))
                                return clamp_t(in->startups[i].startup_usec);
        return clamp_t(in->default_startup_usec);
}

static int startup_ref_cmp(const void *a, const void *b)
{
        const struct startup_ref *x = a, *y = b;
        int c = strcmp(x->owner_key, y->owner_key);
        if (c != 0)
                return c;
        return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

static int index_startups(struct planner *pl)
{
        const struct drain_input *in = pl->in;
        pl->startups = calloc(in->n_startups ? in->n_startups : 1, sizeof(*pl->startups));
        if (!pl->startups)
                return -ENOMEM;
        for (size_t i = 0; i < in->n_startups; i++)
                if (in->startups[i].owner_key)
                        pl->startups[pl->n_startups++] =
                            (struct startup_ref){ .owner_key = in->startups[i].owner_key, .idx = i };
        qsort(pl->startups, pl->n_startups, sizeof(*pl->startups), startup_ref_cmp);
        return 0;
}

/* pod_startup() by the planner's index. */
static int64_t planner_pod_startup(const struct planner *pl, const struct drain_pod_in *pod)
{
        size_t lo = 0, hi = pl->n_startups;
        if (!pod->owner_key)
                return clamp_t(pl->in->default_startup_usec);
        /* The first entry not below the key: the owner's first in the input, when it has one. */
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (strcmp(pl->startups[mid].owner_key, pod->owner_key) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo < pl->n_startups && streq(pl->startups[lo].owner_key, pod->owner_key))
                return clamp_t(pl->in->startups[pl->startups[lo].idx].startup_usec);
        return clamp_t(pl->in->default_startup_usec);
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
        free(pl->startups);
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
            index_pods(pl) < 0 || index_startups(pl) < 0) {
                planner_done(pl);
                return -ENOMEM;
        }
        for (size_t i = 0; i < in->n_pods; i++) {
                const struct drain_pod_in *pod = &in->pods[i];
                const struct drain_node_in *node = &in->nodes[pod->node];
                struct pod_info *p = &pl->pi[i];
                p->grace = clamp_t(pod->grace_usec);
                p->shutdown = pod_shutdown(pod);
                p->startup = planner_pod_startup(pl, pod);
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
                r = planner_fill_pods(pl, force ? &forced : &nat, plan);
        }
        if (r >= 0)
                r = planner_fill_pdbs(pl, &nat, &scratch, plan);
        if (r >= 0)
                r = planner_fill_nodes(pl, plan);
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
