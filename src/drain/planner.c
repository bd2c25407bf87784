/* The deadline-budget drain planner: an event-driven replay of the drain against the PDBs, on the
 * predicted cluster answers (slots coming back as replacements turn Ready). Pure: no I/O, no clock. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/drain.h"

#define USEC_PER_SEC ((int64_t)1000000)
/* Every input instant and duration is clamped to this, so that sums of a few of them cannot overflow. */
#define T_MAX (INT64_MAX / 8)
/* "Never" inside the planner. */
#define T_NEVER        INT64_MAX
#define T_NEVER_BEFORE INT64_MIN
/* Priorities from here up are the system-critical range (scheduling.SystemCriticalPriority). */
#define SYSTEM_CRITICAL_PRIORITY 2000000000

static const char *const default_critical_classes[] = { "system-cluster-critical", "system-node-critical" };

enum pod_state {
        PS_OUT,      /* left on the node */
        PS_WAITING,  /* not yet evicted */
        PS_EVICTED,  /* graceful stop started through the eviction API */
        PS_FORCED,   /* deleted around its PDB */
        PS_DELETING, /* was already going when the plan was made */
};

/* What the planner derives once from each input pod. */
struct pod_info {
        int64_t shutdown, startup, grace;
        int64_t last_safe; /* end - shutdown */
        int64_t end;       /* node deadline - margin */
        int64_t deadline;
        int64_t not_before; /* not evicted earlier: a do-not-disrupt pod's last safe moment */
        int64_t lb_wait;    /* held for the load balancers until then (not_before); 0: not held */
        int tier;
        bool left;
};

struct slot_return {
        int64_t at;
        size_t pdb;
        bool done;
};

/* One replay of the drain. */
struct sim {
        enum pod_state *state;
        int64_t *t_evict;
        int64_t *t_gone;
        int *margin;  /* per PDB: currentHealthy - desiredHealthy as it moves */
        int *pending; /* per PDB: slot returns ahead at the start */
        struct slot_return *returns;
        size_t n_returns;
        int64_t *node_t0_gone; /* per node: when every tier-0 pod is gone; T_NEVER while one waits */
        size_t *order;         /* the pods replayed, from planner.order */
        size_t n_order;
};

struct planner {
        const struct drain_input *in;
        int64_t now;
        struct pod_info *pi;
        size_t *order; /* pods to evict, earliest last safe moment first */
        size_t n_order;
        int *margin0;         /* per PDB, at the start */
        bool *frozen;         /* per PDB: expectedPods <= 0, nothing is ever allowed */
        int64_t *pdb_startup; /* per PDB: the longest startup of its pods here (a lost pod's return) */
        bool *surge;          /* per pod: a replacement is started for it first (surge.c decides) */
        size_t max_returns;
        /* Pods by node and by PDB, each in input order: node_pods[node_first[n] .. node_first[n + 1]) are
         * node n's, pdb_pods[pdb_first[b] .. pdb_first[b + 1]) PDB b's. The per-node and per-PDB figures
         * walk these, not every pod of every drain (a joint plan of hundreds of nodes). */
        size_t *node_first, *node_pods;
        size_t *pdb_first, *pdb_pods;
        int *pdb_count; /* scratch per PDB, zero between uses */
};

static int64_t clamp_t(uint64_t v)
{
        return v > (uint64_t)T_MAX ? T_MAX : (int64_t)v;
}

static int64_t min_t(int64_t a, int64_t b)
{
        return a < b ? a : b;
}

static int64_t max_t(int64_t a, int64_t b)
{
        return a > b ? a : b;
}

static uint64_t to_u(int64_t v)
{
        if (v == T_NEVER)
                return DRAIN_NEVER;
        return v < 0 ? 0 : (uint64_t)v;
}

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

static bool pod_left(const struct drain_input *in, const struct drain_pod_in *pod)
{
        return pod->mirror || (pod->owner == DRAIN_OWNER_DAEMONSET && !in->evict_daemonsets);
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

static bool owner_replaces(enum drain_owner o)
{
        return o == DRAIN_OWNER_REPLICASET || o == DRAIN_OWNER_STATEFULSET || o == DRAIN_OWNER_JOB;
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

static bool pod_in_pdb(const struct drain_pod_in *pod, size_t b)
{
        for (size_t j = 0; j < pod->n_pdbs; j++)
                if (pod->pdbs[j] == b)
                        return true;
        return false;
}

static void sim_done(struct sim *s)
{
        free(s->state);
        free(s->t_evict);
        free(s->t_gone);
        free(s->margin);
        free(s->pending);
        free(s->returns);
        free(s->node_t0_gone);
        free(s->order);
        *s = (struct sim){ 0 };
}

static int sim_init(struct sim *s, const struct planner *pl)
{
        const struct drain_input *in = pl->in;
        size_t np = in->n_pods ? in->n_pods : 1;
        *s = (struct sim){
                .state = calloc(np, sizeof(*s->state)),
                .t_evict = calloc(np, sizeof(*s->t_evict)),
                .t_gone = calloc(np, sizeof(*s->t_gone)),
                .margin = calloc(in->n_pdbs ? in->n_pdbs : 1, sizeof(*s->margin)),
                .pending = calloc(in->n_pdbs ? in->n_pdbs : 1, sizeof(*s->pending)),
                .returns = calloc(pl->max_returns ? pl->max_returns : 1, sizeof(*s->returns)),
                .node_t0_gone = calloc(in->n_nodes ? in->n_nodes : 1, sizeof(*s->node_t0_gone)),
                .order = calloc(np, sizeof(*s->order)),
        };
        if (!s->state || !s->t_evict || !s->t_gone || !s->margin || !s->pending || !s->returns ||
            !s->node_t0_gone || !s->order) {
                sim_done(s);
                return -ENOMEM;
        }
        return 0;
}

static void push_return(struct sim *s, int64_t at, size_t pdb)
{
        s->returns[s->n_returns++] = (struct slot_return){ .at = at, .pdb = pdb };
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
        for (size_t r = 0; r < s->n_returns; r++)
                if (!s->returns[r].done && s->returns[r].at <= t) {
                        s->returns[r].done = true;
                        s->margin[s->returns[r].pdb]++;
                        any = true;
                }
        return any;
}

static void compute_tier0_gone(const struct planner *pl, struct sim *s)
{
        const struct drain_input *in = pl->in;
        for (size_t n = 0; n < in->n_nodes; n++)
                s->node_t0_gone[n] = pl->now;
        for (size_t i = 0; i < in->n_pods; i++) {
                if (pl->pi[i].tier != 0 || s->state[i] == PS_OUT)
                        continue;
                size_t n = in->pods[i].node;
                int64_t g = s->state[i] == PS_WAITING ? T_NEVER : s->t_gone[i];
                s->node_t0_gone[n] = max_t(s->node_t0_gone[n], g);
        }
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
                if ((pinned && !pod_in_pdb(pod, override_pdb)) || s->state[i] != PS_DELETING ||
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

static bool surge_helps(const struct drain_input *in, const struct drain_pod_in *pod)
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
                if (!pl->surge[i] || s->state[i] != PS_WAITING || (pinned && !pod_in_pdb(pod, override_pdb)))
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
static void sim_run(const struct planner *pl, struct sim *s, bool force, size_t override_pdb, int override_k,
                    const struct sim *pinned)
{
        const struct drain_input *in = pl->in;
        int64_t now = pl->now;

        s->n_returns = 0;
        s->n_order = 0;
        for (size_t o = 0; o < pl->n_order; o++)
                if (!pinned || pod_in_pdb(&in->pods[pl->order[o]], override_pdb))
                        s->order[s->n_order++] = pl->order[o];
        for (size_t b = 0; b < in->n_pdbs; b++)
                s->margin[b] = b == override_pdb ? override_k : pl->margin0[b];
        for (size_t i = 0; i < in->n_pods; i++) {
                const struct drain_pod_in *pod = &in->pods[i];
                const struct pod_info *p = &pl->pi[i];
                if (pinned && !pod_in_pdb(pod, override_pdb)) {
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

        for (int64_t t = now;;) {
                bool progress;
                do {
                        progress = apply_returns(s, t);
                        compute_tier0_gone(pl, s);
                        for (size_t o = 0; o < s->n_order; o++) {
                                size_t i = s->order[o];
                                if (s->state[i] != PS_WAITING || !tier_open(pl, s, i, t))
                                        continue;
                                size_t b = in->pods[i].n_pdbs == 1 ? in->pods[i].pdbs[0] : SIZE_MAX;
                                bool frozen_p = b != SIZE_MAX && b != override_pdb && pl->frozen[b];
                                if (t >= pl->pi[i].not_before && try_evict(pl, s, i, t, frozen_p))
                                        progress = true;
                                else if (force && t >= pl->pi[i].last_safe) {
                                        do_force(pl, s, i, t);
                                        progress = true;
                                }
                        }
                } while (progress);

                int64_t next = T_NEVER;
                for (size_t r = 0; r < s->n_returns; r++)
                        if (!s->returns[r].done)
                                next = min_t(next, s->returns[r].at);
                for (size_t o = 0; o < s->n_order; o++) {
                        size_t i = s->order[o];
                        if (s->state[i] != PS_WAITING)
                                continue;
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
        sim_run(pl, scratch, false, b, hi, nat);
        if (!pdb_fits(pl, scratch, b, NULL))
                return -1;
        while (lo < hi) {
                int mid = lo + (hi - lo) / 2;
                sim_run(pl, scratch, false, b, mid, nat);
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
                if (pod_to_go(pl, i) && pod_in_pdb(&pl->in->pods[i], b))
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
        sim_run(pl, scratch, force, SIZE_MAX, 0, NULL);
        for (size_t i = 0; i < in->n_pods; i++) {
                const struct drain_pod_in *pod = &in->pods[i];
                if (pod->can_surge && !pl->pi[i].left && !pod->deleting && surge_helps(in, pod) &&
                    (scratch->state[i] == PS_FORCED || scratch->state[i] == PS_WAITING))
                        pl->surge[i] = true;
        }
}

static int plan_build(const struct planner *pl, struct drain_plan *plan)
{
        const struct drain_input *in = pl->in;
        struct sim nat = { 0 }, forced = { 0 }, scratch = { 0 };
        int r = sim_init(&nat, pl);
        if (r >= 0)
                r = sim_init(&scratch, pl);
        bool force = in->policy == DRAIN_POLICY_FORCE;
        if (r >= 0 && force)
                r = sim_init(&forced, pl);
        if (r >= 0)
                choose_surge(pl, &scratch, force);
        if (r >= 0) {
                sim_run(pl, &nat, false, SIZE_MAX, 0, NULL);
                if (force)
                        sim_run(pl, &forced, true, SIZE_MAX, 0, NULL);
                /* Under respect the plan is the replay through the PDBs alone. */
                r = fill_pods(pl, force ? &forced : &nat, plan);
        }
        if (r >= 0)
                r = fill_pdbs(pl, &nat, &scratch, plan);
        if (r >= 0)
                r = fill_nodes(pl, plan);
        sim_done(&nat);
        sim_done(&forced);
        sim_done(&scratch);
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
                        if (pod_left(in, pod) || !pod_in_pdb(pod, b))
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
