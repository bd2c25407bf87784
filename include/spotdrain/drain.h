/* drain: the deadline-budget planner (pure) and, beside it, the executor that carries a plan out. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/pdb.h"
#include "spotdrain/util.h"

struct cJSON;

/* ==== planner ====
 * A pure function from (pods on the draining nodes, their PDBs, startup/shutdown estimates, now, deadlines)
 * to a plan: per PDB the waves of evictions and the value that would fit the budget, per pod the time it is
 * evicted and gone and its last safe moment, per node the predicted finish and a verdict. No I/O, no clock.
 *
 * The model: evicting a Ready pod takes one of its PDB's disruptions; a ReplicaSet (Deployment) or Job
 * creates the replacement the moment the pod gets its deletionTimestamp, a StatefulSet only once the old pod
 * has exited, and the slot comes back when the replacement turns Ready (startup estimate later). Bare pods
 * and DaemonSet pods are not replaced, so their slot never comes back. All times are engine-clock
 * microseconds. */

/* What owns a pod, as far as replacement timing goes. Deployments own pods through a ReplicaSet. */
enum drain_owner {
        DRAIN_OWNER_NONE, /* a bare pod */
        DRAIN_OWNER_REPLICASET,
        DRAIN_OWNER_STATEFULSET,
        DRAIN_OWNER_DAEMONSET,
        DRAIN_OWNER_JOB,
};

enum drain_policy {
        DRAIN_POLICY_FORCE,   /* at a pod's last safe moment, delete it around its PDB */
        DRAIN_POLICY_RESPECT, /* never go around a PDB: a blocked pod is killed with the instance */
};

/* Surge before evict (drain.surge): when a Deployment's pods on the node are given a replacement first. */
enum drain_surge_mode {
        DRAIN_SURGE_OFF,
        DRAIN_SURGE_BLOCKED, /* only pods that the PDBs would otherwise keep until they are forced or killed
                              */
        DRAIN_SURGE_ALWAYS,  /* every pod that can surge */
};

#define DRAIN_NEVER     UINT64_MAX
#define DRAIN_ALL_NODES SIZE_MAX

struct drain_node_in {
        const char *name;
        uint64_t deadline_usec; /* the instance is gone at this instant */
        uint64_t margin_usec;   /* safety margin kept before the deadline */
        /* drain.lb_deregistration_seconds: pods behind a Service (drain_pod_in.behind_service) are not
         * evicted before this instant (the exclude label's answer plus the target group's deregistration
         * delay), so that the load balancers stop sending them connections first; 0 = none. */
        uint64_t lb_hold_usec;
};

struct drain_pod_in {
        const char *uid; /* may be NULL */
        const char *namespace;
        const char *name;
        size_t node; /* index into drain_input.nodes */
        enum drain_owner owner;
        const char *owner_key;      /* looks up drain_input.startups; NULL: the default startup */
        int priority;               /* spec.priority */
        const char *priority_class; /* spec.priorityClassName, may be NULL */
        uint64_t grace_usec;        /* terminationGracePeriodSeconds */
        uint64_t shutdown_usec; /* observed SIGTERM → exit; 0 = unknown (the grace period is assumed) */
        /* karpenter.sh/do-not-disrupt: "true" or spotdrain.io/keep-until-last-moment (keys.h): not evicted
         * before its last safe moment, so that it can finish its work; stopped then (the node is going) */
        bool do_not_disrupt;
        bool mirror;   /* static pod mirror: never evicted */
        bool emptydir; /* its emptyDir data is lost: warned */
        bool ready;    /* the Ready condition is true */
        bool pending;  /* phase Pending: the eviction API lets it go without consulting PDBs */
        bool deleting; /* has a deletionTimestamp */
        /* When the delete of a deleting pod was requested (deletionTimestamp - deletionGracePeriodSeconds);
         * 0 = unknown, in which case its replacement is assumed to be counted in the PDB status already. */
        uint64_t deleted_at_usec;
        /* A deleting pod that is already gone, still planned so that its replacement's slot is foreseen:
         * when it left; 0 = still there. */
        uint64_t gone_usec;
        const size_t *pdbs; /* indices into drain_input.pdbs of every PDB that selects it */
        size_t n_pdbs;
        /* Its owner is a Deployment that can surge (RollingUpdate, maxSurge >= 1): a replacement can be
         * started before it goes, which gives its PDBs a slot once Ready (startup later). */
        bool can_surge;
        /* When the replacement was asked for (engine clock); 0 = not yet. A surged pod is planned as
         * surged whatever the mode. */
        uint64_t surged_usec;
        /* shutdown_usec comes from stops of its owner's pods that were seen; false: it is a guess (or 0),
         * which the graded verdict (drain_grade_node) does not take as a fact. */
        bool shutdown_seen;
        /* A Service selects it: held until its node's lb_hold_usec. */
        bool behind_service;
        /* Its Service is behind an instance target group (a TargetGroupBinding): held until its node's
         * instance left healthy there, expected at lb_hold_usec (0: it has); never past its last safe
         * moment. */
        bool lb_target;
        uint64_t lb_hold_usec;
};

struct drain_pdb_in {
        const char *namespace;
        const char *name;
        struct pdb_spec spec;
        bool always_allow_unhealthy; /* spec.unhealthyPodEvictionPolicy: AlwaysAllow */
        /* status */
        int current_healthy;
        int desired_healthy;
        int expected_pods;
        int disruptions_allowed;
        int covered_pods; /* pods the selector matches, cluster-wide */
        /* When healthy pods this process did not evict were lost, as far as it saw (a drop of currentHealthy
         * in the watch, a replacement found starting), ascending. The planner expects each back a startup
         * later, for as much of the status' shortfall as the plan's own deleting pods do not explain; one
         * overdue by more than DRAIN_LOSS_OVERDUE_USEC counts as down for good (a crashloop, say). */
        const uint64_t *lost_usec;
        size_t n_lost;
};

#define DRAIN_LOSS_OVERDUE_USEC (30 * UINT64_C(1000000))

/* Median creation → Ready of an owner's pods. */
struct drain_startup {
        const char *owner_key;
        uint64_t startup_usec;
};

struct drain_input {
        uint64_t now_usec;
        const struct drain_node_in *nodes;
        size_t n_nodes;
        const struct drain_pod_in *pods; /* the pods on those nodes */
        size_t n_pods;
        const struct drain_pdb_in *pdbs;
        size_t n_pdbs;
        const struct drain_startup *startups;
        size_t n_startups;
        uint64_t default_startup_usec; /* for owners without a measurement */
        enum drain_policy policy;
        enum drain_surge_mode surge;
        bool evict_daemonsets; /* false (the default): DaemonSet pods are left */
        /* Priority classes evicted in the last tier; NULL: system-cluster-critical and system-node-critical.
         * Pods with priority >= 2000000000 (the system-critical range) are critical too. */
        const char *const *critical_classes;
        size_t n_critical_classes;
        /* The plans of this input point at its pods' uid, namespace and name instead of copying them (the
         * input must then outlive its plans): the joint plans of hundreds of drains and their grading
         * plans would otherwise copy every pod's names each time. */
        bool plans_borrow_names;
};

enum drain_verdict {
        DRAIN_FEASIBLE,
        DRAIN_INFEASIBLE_FORCED, /* finishes in time only by deleting some pods around their PDB */
        DRAIN_INFEASIBLE_KILLED, /* some pod cannot finish its graceful stop before deadline - margin */
};

enum drain_action {
        DRAIN_ACTION_EVICT,    /* through the eviction API */
        DRAIN_ACTION_FORCE,    /* deleted around its PDB at its last safe moment (or at once when past it) */
        DRAIN_ACTION_LEAVE,    /* DaemonSet or mirror pod, left on the node */
        DRAIN_ACTION_DELETING, /* already going away */
        DRAIN_ACTION_STUCK,    /* can never be evicted under the policy: killed with the instance */
        DRAIN_ACTION_SURGE,    /* its replacement is started first, then it is evicted through its PDB */
};

/* drain_plan_pod.warnings */
enum {
        DRAIN_WARN_DO_NOT_DISRUPT = 1u << 0,
        DRAIN_WARN_BARE = 1u << 1,      /* no owner: nothing recreates it */
        DRAIN_WARN_EMPTYDIR = 1u << 2,  /* emptyDir data is lost */
        DRAIN_WARN_MULTI_PDB = 1u << 3, /* several PDBs select it: the eviction API answers 500 */
        DRAIN_WARN_NO_TIME = 1u << 4,   /* its shutdown does not fit in the time left, whatever happens */
};

struct drain_plan_pod {
        char *uid; /* NULL when the input had none */
        char *namespace;
        char *name;
        size_t node;
        int pdb; /* index of its PDB (the first one when several), -1 for none */
        size_t n_pdbs;
        int tier; /* 0 normal, 1 critical: evicted once the node's normal pods are gone */
        enum drain_action action;
        uint64_t evict_usec; /* when its graceful stop starts; DRAIN_NEVER when left or stuck */
        uint64_t gone_usec;  /* predicted exit; the deadline when killed; DRAIN_NEVER when left */
        /* deadline - margin - shutdown: the latest moment a graceful stop can start and still finish before
         * the instance dies; 0 when that moment is before the epoch. */
        uint64_t last_safe_usec;
        uint64_t shutdown_usec; /* the estimate used: observed, else the grace period */
        uint64_t startup_usec;  /* its owner's startup estimate */
        bool forced;
        bool killed; /* predicted not to finish its graceful stop before deadline - margin */
        /* A replacement is started for it first (drain.surge); with action surge that is what lets it go,
         * with force its replacement is not Ready in time but starts early. */
        bool surge;
        unsigned warnings;
        /* Held for the load balancers until then (its target group's instance target out of healthy, or
         * drain.lb_deregistration_seconds after the exclude label; never past its last safe moment); 0 when
         * it is not held. */
        uint64_t lb_wait_until_usec;
};

struct drain_plan_pdb {
        char *namespace;
        char *name;
        int n;       /* its pods on the draining nodes that are to go (evicted or forced) */
        int n_ready; /* of those, the ones an eviction takes a disruption for (Ready, one PDB) */
        int k;       /* disruptions allowed now (0 while currentHealthy < desiredHealthy) */
        int waves;   /* ceil(n_ready / k); 0 when k <= 0 */
        int expected_pods;
        uint64_t startup_usec; /* the largest startup estimate of its pods */
        uint64_t
            slot_return_usec; /* eviction → slot back: startup, or shutdown + startup for StatefulSets */
        uint64_t finish_usec; /* its last pod gone, in the plan (forcing included); now when n == 0 */
        uint64_t unforced_finish_usec; /* its last pod gone through the PDB alone; DRAIN_NEVER if it can't */
        bool feasible;                 /* every pod evicted through the PDB by its last safe moment */
        bool overlap;                  /* some pod is also selected by another PDB */
        /* When infeasible: the disruptions that would fit, and the spec values that give at least that many
         * under Kubernetes' rounding; -1 when no value of this PDB would make it fit. */
        int fit_k;
        int fit_max_unavailable;
        int fit_max_unavailable_pct;
        int fit_min_available;
        int fit_min_available_pct;
};

struct drain_plan_node {
        char *name;
        uint64_t deadline_usec;
        uint64_t margin_usec;
        uint64_t finish_usec; /* every pod to go is gone; now when there is none */
        enum drain_verdict verdict;
        int limiting_pdb; /* -1 for none */
        size_t n_to_go, n_forced, n_killed, n_left;
        /* The time reserved for the load balancers: pods behind a Service to go (n_lb_held) keep running
         * until lb_hold_usec; n_lb_held 0 when none is held. */
        uint64_t lb_hold_usec;
        size_t n_lb_held;
        char *reason; /* one line for humans */
};

struct drain_plan {
        uint64_t now_usec;
        enum drain_policy policy;
        struct drain_plan_node *nodes;
        size_t n_nodes;
        struct drain_plan_pdb *pdbs;
        size_t n_pdbs;
        struct drain_plan_pod *pods; /* in input order */
        size_t n_pods;
        bool names_borrowed; /* the pods' uid, namespace and name are the input's (plans_borrow_names) */
};

/* Plans the drain of every node in the input at once; PDB slots shared by pods on several nodes go to the
 * earliest last safe moment first. -EINVAL for an index out of range or a missing name, -ENOMEM. */
int drain_plan_make(const struct drain_input *in, struct drain_plan **ret);
/* NULL-safe; returns NULL. */
struct drain_plan *drain_plan_free(struct drain_plan *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct drain_plan *, drain_plan_free);

/* The fastest any correct tool could drain NODE (or DRAIN_ALL_NODES), as a duration from now: the max over
 * PDBs of (waves - 1) × slot return + shutdown (the last wave starts after waves - 1 replacements turned
 * Ready, then its pods still shut down; slot return is startup, or shutdown + startup for StatefulSets), and
 * the max shutdown of every pod to go. Ignores deadlines and tiers. DRAIN_NEVER when a PDB can never allow
 * a disruption its pods need. */
uint64_t drain_lower_bound_usec(const struct drain_input *in, size_t node);

/* Whether the plan has the pod go through the eviction API (evicted, forced once its time is up, or tried
 * though it is stuck), and whether its eviction takes a slot of its PDB. */
bool drain_plan_pod_to_evict(const struct drain_plan_pod *pp);
bool drain_pod_takes_slot(const struct drain_pod_in *pod);
/* Whether the pod is evicted in the last tier. */
bool drain_pod_is_critical(const struct drain_input *in, const struct drain_pod_in *pod);

/* Plain-text tables (nodes, PDBs, pods) for `spotdrain plan`. Times are seconds from now. */
int drain_plan_format(const struct drain_plan *p, char **ret);
/* The plan as JSON (for --json); times are seconds from now, null for never. */
int drain_plan_to_json(const struct drain_plan *p, struct cJSON **ret);

/* ==== graded verdict (verdict.c) ====
 * At a notice the stop times of many pods are unknown; a verdict that guesses them cries wolf. The grade
 * keeps what is certain apart from what depends on the unknowns, by planning the drain with every pod whose
 * stop time was never seen (drain_pod_in.shutdown_seen false) stopping at once, with its whole grace
 * period, and in between; pods seen stopping keep their estimate. */
enum drain_grade {
        DRAIN_GRADE_FITS,       /* fits even if every unseen pod takes its whole grace period */
        DRAIN_GRADE_AT_RISK,    /* fits only if the unseen pods stop within stop_within_usec */
        DRAIN_GRADE_INFEASIBLE, /* cannot fit even if they stopped at once (or the stops seen say so) */
};

/* One of the two estimates of a drain (verdict.c): every pod never seen stopping stops at once (quick) or
 * takes its whole grace period (slow); a pod seen stopping takes what it was seen to take in both. */
struct drain_estimate {
        enum drain_verdict verdict;
        /* Durations from the input's now: every pod gone, the forced ones included (finish), and the last
         * pod gone if none were forced (unforced: the PDBs alone); DRAIN_NEVER when that cannot happen. */
        uint64_t finish_usec, unforced_usec;
        size_t n_to_go, n_forced, n_killed;
};
struct drain_outlook {
        bool known;  /* computed; the pair below is meaningless otherwise */
        bool unseen; /* the two differ in what they assume: some pod's stop was never seen */
        struct drain_estimate quick, slow;
};
/* "at once / whole grace: last pod gone unforced in 135 / 165 s, 2 / 4 forced, 0 / 0 killed", or with one
 * figure each when no stop is a guess. NULL on ENOMEM. */
char *drain_outlook_format(const struct drain_outlook *e);
/* The pair in a JSON object (quick and slow, each verdict, finish, unforced, to_go, forced, killed in
 * seconds and counts, null for never); false on ENOMEM. */
bool drain_outlook_to_json(const struct drain_outlook *e, struct cJSON *parent, const char *key);
/* The pair as an alert's fields (forced_at_once, forced_whole_grace, killed_at_once, killed_whole_grace),
 * added at fields[n] with their text in f (which must live as long as fields); returns the new count, n
 * when e is not known. fields needs room for 8 more. */
struct drain_outlook_fields {
        char forced_quick[16], forced_slow[16], killed_quick[16], killed_slow[16];
};
size_t drain_outlook_add_fields(const struct drain_outlook *e, struct drain_outlook_fields *f,
                                const char **fields, size_t n);

/* The plan of in with every pod never seen stopping taking its whole grace period: the slow estimate's plan,
 * the one the tables of plan and audit show. -ENOMEM, -EINVAL as drain_plan_make(). */
int drain_plan_whole_grace(const struct drain_input *in, struct drain_plan **ret);

struct drain_grade_result {
        enum drain_grade grade;
        /* The two estimates the grade was made from: every surface prints these. */
        struct drain_outlook outlook;
        /* AT_RISK: the longest stop (after SIGTERM) of the unseen pods that still fits, whole seconds
         * (0: under a second); the longest grace period of those that would have to be quicker. */
        uint64_t stop_within_usec, grace_usec;
        bool unseen; /* the node has pods to go whose stop time was never seen */
        /* INFEASIBLE: the plan with instant unseen stops, in which the node is infeasible; else NULL.
         * plan_borrowed: it belongs to the drain_grade_cache it came from. */
        struct drain_plan *plan;
        bool plan_borrowed;
        char *reason; /* one line for humans; NULL for FITS */
};
/* Grades node (an index into in->nodes) of the drain in (every node of it planned together). -ENOMEM,
 * -EINVAL as drain_plan_make(). */
int drain_grade_node(const struct drain_input *in, size_t node, struct drain_grade_result *ret);
void drain_grade_result_clear(struct drain_grade_result *g);
/* The plans of one input at the stop times tried, for the grades of its other nodes: they do not depend on
 * the node graded, and a joint plan of hundreds of drains costs each of them several. */
struct drain_grade_cache;
struct drain_grade_cache *drain_grade_cache_free(struct drain_grade_cache *c); /* NULL-safe; NULL */
/* drain_grade_node() with the plans of in kept in *cache (made on first use) for the next call on the very
 * same in; the result's plan may be borrowed from it. */
int drain_grade_node_cached(const struct drain_input *in, size_t node, struct drain_grade_cache **cache,
                            struct drain_grade_result *ret);
/* Whether some pod of in was given a stop shorter than its grace period without its owner's stops ever
 * being seen (DRAIN_SHUTDOWN_SAFE on a grace period too long for the drain): a plan of in that fits does
 * not show that the whole grace periods would. */
bool drain_input_guesses(const struct drain_input *in);
/* "fits", "at-risk", "infeasible" */
const char *drain_grade_to_string(enum drain_grade g);

/* ==== the API budget (verdict.c) ====
 * Every drain of a process shares one API client, whose waiting requests go earliest last safe moment
 * first: what the drains whose deadlines come no later than node's need must be sent before node's
 * deadline less its margin. At the least: one request for each pod the plan moves (eviction or forced
 * delete) and DRAIN_API_PER_NODE for each node (cordon and taint, the pod list). */
#define DRAIN_API_PER_NODE 3
struct drain_api_budget {
        uint64_t needed;  /* requests, at the least */
        uint64_t allowed; /* what qps and burst let through before the deadline less the margin */
        double qps;
};
/* Whether the client's rate (qps < 0: unlimited) is too low for node's drain in the plan p of in: 1, 0
 * enough; the figures in *ret either way (needed and allowed 0: nothing judged, the rate unlimited). */
int drain_api_budget_short(const struct drain_input *in, const struct drain_plan *p, size_t node, double qps,
                           unsigned burst, struct drain_api_budget *ret);

const char *drain_verdict_to_string(enum drain_verdict v);
const char *drain_action_to_string(enum drain_action a);
