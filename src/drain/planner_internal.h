/* Shared by the files of the planner (planner.c and the parts carved out of it): its state, the replay of a
 * drain and the small arithmetic they share. Not part of the public interface. Pure, as the planner. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/drain.h"

#define USEC_PER_SEC ((int64_t)1000000)
/* Every input instant and duration is clamped to this, so that sums of a few of them cannot overflow. */
#define T_MAX (INT64_MAX / 8)
/* "Never" inside the planner. */
#define T_NEVER INT64_MAX

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
};

struct startup_ref {
        const char *owner_key;
        size_t idx; /* in drain_input.startups */
};

/* One replay of the drain. */
struct sim {
        enum pod_state *state;
        int64_t *t_evict;
        int64_t *t_gone;
        int *margin;                 /* per PDB: currentHealthy - desiredHealthy as it moves */
        int *pending;                /* per PDB: slot returns ahead at the start */
        struct slot_return *returns; /* a min-heap by time */
        size_t n_returns;
        int64_t *node_t0_gone; /* per node: when every tier-0 pod is gone; T_NEVER while one waits */
        /* Per node, kept as pods stop, for node_t0_gone: its tier-0 pods still waiting, the latest end of
         * the others; and the nodes whose node_t0_gone is due for an update at the next pass. */
        int *node_wait0;
        int64_t *node_gone0;
        size_t *stale;
        size_t n_stale;
        bool *is_stale;
        size_t *order; /* the pods replayed, from planner.order; those no longer waiting dropped */
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
        /* The startups with an owner, by owner key and input order within one: a joint plan looks one up
         * for each of its thousands of pods. */
        struct startup_ref *startups;
        size_t n_startups;
};

static inline int64_t clamp_t(uint64_t v)
{
        return v > (uint64_t)T_MAX ? T_MAX : (int64_t)v;
}

static inline int64_t min_t(int64_t a, int64_t b)
{
        return a < b ? a : b;
}

static inline int64_t max_t(int64_t a, int64_t b)
{
        return a > b ? a : b;
}

static inline uint64_t to_u(int64_t v)
{
        if (v == T_NEVER)
                return DRAIN_NEVER;
        return v < 0 ? 0 : (uint64_t)v;
}

static inline bool pod_left(const struct drain_input *in, const struct drain_pod_in *pod)
{
        return pod->mirror || (pod->owner == DRAIN_OWNER_DAEMONSET && !in->evict_daemonsets);
}

static inline bool owner_replaces(enum drain_owner o)
{
        return o == DRAIN_OWNER_REPLICASET || o == DRAIN_OWNER_STATEFULSET || o == DRAIN_OWNER_JOB;
}

/* planner_sim.c: the replay. */
bool planner_pod_in_pdb(const struct drain_pod_in *pod, size_t b);
void planner_sim_done(struct sim *s);
int planner_sim_init(struct sim *s, const struct planner *pl);
bool planner_surge_helps(const struct drain_input *in, const struct drain_pod_in *pod);
void planner_sim_run(const struct planner *pl, struct sim *s, bool force, size_t override_pdb,
                     int override_k, const struct sim *pinned);

/* planner_result.c: the plan filled from the replay. */
int planner_fill_pdbs(const struct planner *pl, const struct sim *nat, struct sim *scratch,
                      struct drain_plan *plan);
int planner_fill_pods(const struct planner *pl, const struct sim *s, struct drain_plan *plan);
int planner_fill_nodes(const struct planner *pl, struct drain_plan *plan);
