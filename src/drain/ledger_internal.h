/* Shared by the files of the drain ledger (ledger.c and the parts carved out of it): its state, its PDBs,
 * members and waiters, and the calls between its parts. Not part of the public interface. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drain/drain_internal.h"
#include "spotdrain/engine.h"
#include "spotdrain/kube.h"
#include "spotdrain/surge.h"

struct member {
        const struct drain_ledger_member_ops *ops;
        void *userdata;
        char *node;
        uint64_t joined_at, deadline;
        bool stated;  /* has stated its wants once (drain_ledger_end) */
        bool pending; /* asked for a plan while a new one had to wait: woken when it is made */
        bool in_plan; /* slice is its place in the plan being made */
        struct drain_ledger_slice slice;
};

struct waiter {
        void *member;
        char *pod;
        uint64_t last_safe;
        /* Ties between nodes go to the earlier deadline, then the node name first in byte order (an order
         * that drains in other processes can reproduce, drain_peers_new()); on one node, to the
         * pod that waited first. node is the member's. */
        uint64_t deadline;
        const char *node;
        uint64_t seq;
        bool remote; /* a peer's (drain_ledger_member_ops.remote) */
        bool seen;   /* stated since the member's last drain_ledger_begin() */
};

struct grant {
        void *member;
        char *pod;
        bool answered;       /* the eviction was answered: reflected by the next status change */
        unsigned status_seq; /* lpdb.status_seq when it was given */
};

/* A healthy pod of a PDB lost to something outside the ledger's grants (another process's eviction, a pod
 * going unready): drain_pdb_in.lost_usec. */
struct loss {
        uint64_t at;
        char *uid; /* the starting pod that showed it (drain_ledger_note_starting); NULL: a drop in the watch
                    */
};
#define MAX_LOSSES 64

struct lpdb {
        char *key; /* namespace/name */
        struct waiter *waiters;
        size_t n_waiters;
        struct grant *grants;
        size_t n_grants;
        bool stale;         /* a 429 contradicted the status: no slot until it changes or stale_until */
        bool allowed_known; /* allowed is the status's (status_allowed()), until the status moves */
        int allowed;
        uint64_t stale_until;
        unsigned status_seq; /* moves with every status change seen */
        struct loss *losses; /* ascending */
        size_t n_losses;
        char **evicted; /* RECENT_EVICTED names, a ring */
        size_t evicted_next;
};

/* A pod of a drain that ended, deleting and gone already, kept until its replacement should be Ready, so
 * that the drains still going foresee the PDB slot it gives back. */
struct kept_ghost {
        char *node;
        uint64_t deadline, margin, gone_at, until;
        struct drain_pod_memo *memo; /* its last state, as parsed for the plans */
};

struct startup_ask {
        char *owner_key;
        void **waiters; /* members (their userdata) */
        size_t n_waiters;
};

struct drain_ledger {
        struct kube_client *c;
        struct loop *loop;
        uint64_t floor;
        struct kube_informer *inf;
        struct member *members;
        size_t n_members;
        uint64_t seq;
        struct lpdb *pdbs;
        size_t n_pdbs;
        size_t *by_key; /* indexes of pdbs in the order of their keys, for lookups by bisection */
        /* The member between drain_ledger_begin() and _end(), and whether a newcomer holds it up. */
        const void *stating;
        bool stating_unsettled;
        struct timer *dispatch, *recheck;
        uint64_t recheck_at;
        struct drain_ledger_stats stats;
        /* Startup measurements by owner key, shared by the drains (one sibling list per owner, not per
         * drain: with many nodes draining at once those lists would use up the client's rate limit). */
        struct drain_startup *startups;
        size_t n_startups;
        /* The sibling lists under way, by owner, with the members waiting for another's answer: five
         * hundred drains starting at once share a few hundred owners, and each list of a large workload's
         * pods is a large answer (the client's rate and the process's memory both). */
        struct startup_ask *asks;
        size_t n_asks;
        unsigned startups_gen; /* counts the measurements added, for drain_ledger_startups_planned() */
        struct drain_surge_reads *surge_reads; /* made when a drain first asks */
        struct drain_shutdowns *shutdowns,
            *own_shutdowns; /* borrowed (drain_ledger_use_shutdowns), or own */
        struct kept_ghost *ghosts;
        size_t n_ghosts;
        /* The joint plan of every member, and when the next may be made. */
        struct drain_joint *joint;
        bool dirty;
        uint64_t plan_cost, plan_made; /* engine clock: what the last one took, when it was done */
        uint64_t rejudge_after;        /* engine clock: when a drain may next be judged again mid-drain */
        struct timer *replan;
        /* The options of the members' plans (the first member's; a process drains with one configuration),
         * so that the ledger can make a plan itself when something changed. */
        struct drain_inputs_options opts;
        char **critical;
        size_t n_critical;
        bool have_opts;
};

/* ledger_plan.c: the joint plan. */
size_t lpdb_position(const struct drain_ledger *l, const char *key, bool *found);
struct lpdb *lpdb_find(struct drain_ledger *l, const char *key);
void kept_ghost_clear(struct kept_ghost *g);
void ledger_set_dirty(struct drain_ledger *l);

/* ledger.c: one member woken (its startup asked for is answered, ledger_startups.c). */
void ledger_wake_member(struct drain_ledger *l, void *member);
