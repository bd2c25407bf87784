/* engine: carries drain plans out against the Kubernetes API (the executor), and builds the planner's input
 * (struct drain_input, drain.h) from Kubernetes objects.
 *
 * What the executor does to a node, in order:
 *  - cordons it (spec.unschedulable) and adds the NoSchedule (drain.taint_effect) taint
 * SPOTDRAIN_TAINT_INTERRUPTION (keys.h; the key is configurable: drain.taint_key) whose value is the notice
 * kind ("spot-interruption", ...), so that nothing new lands there and other tools can see why;
 *  - labels it SPOTDRAIN_LABEL_EXCLUDE_LB (drain.exclude_from_load_balancers) where it has no such label, so
 *    that load balancers deregister it; no eviction goes out before that label and the cordon are answered;
 *  - records SPOTDRAIN_ANNOTATION_DRAIN on the node: {"kind":KIND,"deadline":RFC3339,"started":RFC3339};
 *  - watches the node's pods and every PDB, measures startup times of the pods' siblings, plans (drain.h),
 *    and raises drain-infeasible at once when the plan says the deadline cannot be met;
 *  - evicts: normal pods first, critical ones (drain.critical_priority_classes) once the normal ones are on
 *    their way; as many at once as the PDBs allow; a 429 is retried the moment a PDB status or a pod
 *    changes, or after a short jittered floor (drain.eviction_retry_floor_ms) when nothing is heard;
 *  - under policy force, deletes a pod that is still there at its last safe moment with grace
 *    min(its grace, time left - margin), at least 1 s, with a UID precondition (pods-forced);
 *  - finishes when every pod to go is gone (a pod with the same name but a new UID counts as gone):
 *    drain-completed, or at the deadline with pods left: deadline-missed.
 * DaemonSet pods and mirror pods are left (configurable); bare pods and pods with emptyDir volumes are
 * evicted with a warning; pods annotated karpenter.sh/do-not-disrupt: "true" or
 * spotdrain.io/keep-until-last-moment keep running until their last safe moment and are evicted then with
 * grace min(their grace, time left - margin), forced as any other pod when that eviction is refused; the
 * agent's own pod (POD_NAMESPACE/POD_NAME) is never touched.
 *
 * This header is what callers outside src/drain use; the calls between the engine's own files (the ledger's
 * members and slots, the planner input's finer setters, the stop-time store, the load balancers' target
 * groups, the alerts of a verdict) are in src/drain/engine_internal.h. */
#pragma once

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/drain.h"

/* The drain engine's configuration (drain.*). Its keys: drain_config_section (its settings.c). */
struct drain_settings {
        uint64_t budget_usec;
        uint64_t safety_margin_usec;
        int policy; /* enum drain_policy (drain.h), as the configuration parser stores an enum */
        char *taint_key;
        bool ignore_daemonsets;
        bool delete_emptydir_data;
        uint64_t default_startup_usec;
        double expected_shutdown_fraction;
        uint64_t eviction_retry_floor_usec;
        char **critical_priority_classes;
        int surge;                 /* enum drain_surge_mode (drain.h) */
        char *estimates_configmap; /* "" = stop and startup estimates are not kept */
        bool exclude_from_load_balancers;
        int taint_effect; /* enum drain_taint_effect */
        bool cordon_only;
        char **skip_namespaces;
        char *skip_pod_selector; /* "" or NULL: none */
        bool out_of_service_taint;
        uint64_t lb_deregistration_usec;
        bool target_groups; /* TargetGroupBindings and ELBv2 looked at (drain_exec_options.elbv2) */
        bool
            deregister_targets; /* the instance deregistered from its instance target groups at the notice */
};
enum drain_taint_effect {
        DRAIN_TAINT_NO_SCHEDULE,
        DRAIN_TAINT_NO_EXECUTE,
};
struct config_section;
extern const struct config_section drain_config_section;

struct alert_bus;
struct kube_client;
struct kube_pod;
struct metrics;
struct spotdrain_config;

/* ==== the drain record (record.c): SPOTDRAIN_ANNOTATION_DRAIN on the node being drained ====
 * {"kind":KIND,"deadline":RFC3339,"started":RFC3339,"instance":ID,"event_id":ID,"cordoned_before":true},
 * times to the millisecond (engine clock); instance and event_id (the notice's) are left out when NULL or
 * "", cordoned_before when false (the node was schedulable when the drain began: the cordon is spotdrain's).
 * A resume checks the instance against the node's providerID (dispatch_resume_recorded()). */
char *drain_record_format(const char *kind, uint64_t deadline_usec, uint64_t started_usec,
                          const char *instance_id, const char *event_id, bool cordoned_before);
/* Whether the node's record says it was cordoned before spotdrain's drain began (someone else's cordon). */
bool drain_record_cordoned_before(const cJSON *node);
/* The record on a Node object: its kind (a copy; ret_kind may be NULL), deadline and instance (a copy, NULL
 * when the record names none; ret_instance may be NULL); -ENOENT when the node has none, -EBADMSG when it
 * cannot be read, -ENOMEM. */
int drain_record_read(const cJSON *node, char **ret_kind, uint64_t *ret_deadline, char **ret_instance);
/* Whether the node carries the record of a drain for that kind and notice event (a drain of spotdrain's own
 * cordoned it for that notice). */
bool drain_record_is_for(const cJSON *node, const char *kind, const char *event_id);

/* ==== planner input from Kubernetes objects (inputs.c) ==== */

/* Observed graceful stops (delete → gone) per owner, the latest few of each (its calls: the engine's own,
 * src/drain/engine_internal.h). */
struct drain_shutdowns;

/* What a pod's shutdown is taken to be. Either way a pod of the owner that has been stopping longer than
 * that (it is still there) raises it to what it has already taken. */
enum drain_shutdown_basis {
        /* For acting (the last safe moment to start a graceful stop): the longest stop observed of the
         * owner's pods with a quarter (at least 1 s) on top; when none was seen, the whole grace period if
         * it fits in the node's drain, else expected_shutdown_fraction of it, capped at the time left
         * (drain_inputs_set_node_start). */
        DRAIN_SHUTDOWN_SAFE,
        /* For predicting (the drain-infeasible verdict): the median stop observed; when none was seen,
         * expected_shutdown_fraction of the grace period. */
        DRAIN_SHUTDOWN_EXPECTED,
};

struct drain_inputs_options {
        uint64_t now_usec;
        enum drain_policy policy;
        enum drain_surge_mode surge;
        bool evict_daemonsets;
        uint64_t default_startup_usec;
        const char *const *critical_classes; /* NULL: the planner's defaults */
        size_t n_critical_classes;
        /* Shutdown estimates (drain_pod_in.shutdown_usec) from the stops observed so far (NULL: none). */
        const struct drain_shutdowns *shutdowns;
        enum drain_shutdown_basis shutdown_basis;
        /* An owner never seen stopping: DRAIN_SHUTDOWN_EXPECTED, and DRAIN_SHUTDOWN_SAFE when its grace
         * period does not fit (0: the whole grace period). */
        double expected_shutdown_fraction;
};

/* The planner's input (the engine's own: src/drain/engine_internal.h). */
struct drain_inputs;
/* Whether the Service selects the pod (its namespace, every pair of its spec.selector; none without one). */
bool drain_service_selects(const cJSON *svc, const struct kube_pod *kp);
/* Median creation → Ready of the Ready pods in items (an array of Pod objects), per owner. Owner keys in
 * the result are owned by it: release with drain_startups_free(). */
int drain_startups_measure(const cJSON *items, struct drain_startup **ret, size_t *ret_n);
void drain_startups_free(struct drain_startup *s, size_t n);

/* ==== one node's plan as it stands now (node_now.c), for the one-shot commands ==== */
/* The planner's options from the drain.* settings at now_usec: the graded verdict's basis
 * (DRAIN_SHUTDOWN_EXPECTED); a caller planning to act sets shutdown_basis. */
struct drain_inputs_options drain_inputs_options_from_settings(const struct drain_settings *s,
                                                               uint64_t now_usec);
/* A blocking list (timeout_usec 0: 60 s); the answer is the caller's. A failure is logged. */
int drain_list_sync(struct kube_client *c, const char *path, const char *label_selector,
                    const char *field_selector, uint64_t timeout_usec, cJSON **ret);
/* The TargetGroupBindings (*ret), 1; 0 without any or without the CRD (404); a failure is a warning. */
int drain_list_tgbs(struct kube_client *c, uint64_t timeout_usec, cJSON **ret);
struct drain_node_now_options {
        struct kube_client *client;
        const struct drain_settings *settings;
        const char *node;
        uint64_t now_usec, deadline_usec; /* engine clock */
        uint64_t list_timeout_usec;       /* of each list; 0: 60 s */
        /* The process's own pod, never planned (NULL: none; a NULL namespace: any). */
        const char *self_namespace, *self_name;
        bool *reported; /* set when a failure was said in a sentence of its own (a list's); may be NULL */
};
/* The plan of o->node as it stands now, as a drain would act on it (DRAIN_SHUTDOWN_SAFE), its graded
 * verdict (on the expected stops), and the room its surged pods find on other nodes: its pods, the PDBs,
 * the startups of its pods' owners, the Services and TargetGroupBindings that hold pods for the load
 * balancers and the Deployments that can surge, each listed once. */
struct drain_grade_result;
struct drain_room;
int drain_node_now(const struct drain_node_now_options *o, struct drain_plan **ret,
                   struct drain_grade_result *ret_grade, struct drain_room *ret_room);

/* A node's plan from objects listed already (audit's, for many nodes at once): its interruption now with
 * every pod on it, every PDB, its owners' startups; the plan on the slow estimate (drain_plan_whole_grace)
 * and the graded verdict. */
struct drain_node_listed {
        struct drain_inputs_options options;
        const char *node;
        uint64_t deadline_usec, margin_usec;
        const struct drain_startup *startups;
        size_t n_startups;
        const cJSON *pdbs;        /* PodDisruptionBudget objects (a list's items) */
        const cJSON *const *pods; /* the node's Pod objects, planned in that order */
        size_t n_pods;
};
int drain_node_plan_listed(const struct drain_node_listed *l, struct drain_plan **ret,
                           struct drain_grade_result *ret_grade);

/* ==== drain ledger (ledger.c): what the executors of one process share ====
 * One PodDisruptionBudget informer for every executor of a loop, and the PDB slots they take. A drain that
 * would evict a pod under PDB P asks the ledger for a slot first. The ledger grants at most
 * disruptionsAllowed (the latest status seen) minus the slots granted and not yet reflected in that status,
 * none while P's status is behind its spec (observedGeneration) or was just contradicted by a 429, nor
 * to a member while one with an earlier deadline that joined under 3 s ago has not yet said what it
 * wants; when several pods wait for P, the earliest last safe moment goes first (EDF, as drain_plan_make
 * plans it), and between nodes a tie goes to the earlier deadline, then the node name first in byte
 * order.
 * A grant is reflected (and released) by the first status change after its eviction was answered; a 429
 * gives the slot back and marks the status stale until it changes, or for a jittered floor. Members are
 * woken (not polled) whenever a PDB changes, a member joins or leaves, or a slot may be theirs. The ledger
 * also plans every node being drained at once, one joint plan shared by the members (drain_ledger_plan):
 * made anew at most once per burst of changes, not once per member and event (with D drains of P pods that
 * was D² × P pod parses a round, and D copies of every other drain's pods). */
struct drain_ledger;

/* retry_floor_usec: how long a status contradicted by a 429 is distrusted when nothing else is heard
 * (jittered); 0 = 200 ms. The client is borrowed and must outlive the ledger; every member must leave
 * before it is freed. */
int drain_ledger_new(struct kube_client *c, uint64_t retry_floor_usec, struct drain_ledger **ret);
struct drain_ledger *drain_ledger_free(struct drain_ledger *l);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct drain_ledger *, drain_ledger_free);

/* ==== estimates learnt from the cluster's ordinary life (estimates.c) ====
 * A pod watch counts every graceful stop it sees end and every pod it sees Ready for the pod's owner
 * (drain_owner_key), into a store the drains plan with (drain_ledger_use_shutdowns); the store is read from
 * ConfigMap NAMESPACE/NAME (data "estimates.json", drain_shutdowns_to_json()) at the start and written back
 * when it changed, merged with what other processes wrote (docs/contracts.md §6.4). */
struct drain_estimates_options {
        const char *namespace;       /* NULL: POD_NAMESPACE, else "default" */
        const char *name;            /* NULL: "spotdrain-estimates" */
        const char *node;            /* learn from this node's pods only (the agent); NULL: every pod */
        bool keep;                   /* read and write the ConfigMap */
        uint64_t save_interval_usec; /* between writes of what changed; 0 = 10 s */
        uint64_t save_jitter_usec;   /* on demand: up to this much more, at random (0: none) */
        /* The ConfigMap is read only when a drain asks (drain_estimates_refresh) and before each write,
         * which comes save_interval (+ jitter) after the first sample not written yet; once written, the
         * owners only read are forgotten unless a drain holds the store (the agent: nothing read while
         * idle but its own samples). Else: read at the start, written every save_interval it changed. */
        bool read_on_demand;
        double expected_shutdown_fraction; /* an unseen owner's expected stop, for the generation; 0 = 0.5 */
};
struct drain_estimates;
int drain_estimates_start(struct kube_client *c, const struct drain_estimates_options *o,
                          struct drain_estimates **ret);
struct drain_estimates *drain_estimates_free(struct drain_estimates *e);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct drain_estimates *, drain_estimates_free);
/* The store (owned by e). */
struct drain_shutdowns *drain_estimates_store(const struct drain_estimates *e);
/* A drain starts (read_on_demand): the ConfigMap is read now, and what was read is held until
 * drain_estimates_release(). */
int drain_estimates_refresh(struct drain_estimates *e);
/* The drain ended: what changed is written now (then what was only read is forgotten). */
void drain_estimates_release(struct drain_estimates *e);
/* The ledger plans with s (borrowed; it must outlive the ledger) instead of a store of its own. */
void drain_ledger_use_shutdowns(struct drain_ledger *l, struct drain_shutdowns *s);

/* ==== executor (executor.c) ==== */

struct drain_exec_options {
        const char *node;
        const char *kind; /* notice kind; the taint value. NULL = "manual" */
        /* Recorded with the drain on the node (SPOTDRAIN_ANNOTATION_DRAIN), so that a resume can check the
         * record against the node's providerID and the notice it came from; NULL or "" = not recorded. */
        const char *instance_id, *event_id;
        uint64_t notice_usec;   /* engine clock; 0 = now */
        uint64_t deadline_usec; /* engine clock: the instance is gone */
        uint64_t margin_usec;   /* safety margin kept before the deadline */
        enum drain_policy policy;
        const char *taint_key; /* NULL: SPOTDRAIN_TAINT_INTERRUPTION */
        bool taint_no_execute; /* the taint's effect is NoExecute, not NoSchedule */
        /* SPOTDRAIN_LABEL_EXCLUDE_LB is set on the node (where absent) and answered before any eviction. */
        bool exclude_from_load_balancers;
        /* With that label: pods behind a Service (one selects them) keep running this long after the label
         * was answered, the load balancers' deregistration delay, before they are evicted (unless their
         * last safe moment comes first); 0 = none. */
        uint64_t lb_deregistration_usec;
        /* ELBv2 (borrowed, must outlive the executor; NULL: target groups are not looked at) and the node's
         * instance_id: the pods behind an instance target group of a TargetGroupBinding wait until the
         * instance is out of healthy there (never past their last safe moment) instead of
         * lb_deregistration_usec; a group whose deregistration delay is longer than the time left raises
         * lb-deregistration-too-slow. With deregister_targets (drain.deregister_targets) the executor
         * deregisters the instance from those groups itself at the start. */
        struct elbv2_client *elbv2;
        bool deregister_targets;
        /* Cordon, taint and label only: nothing is evicted or deleted; the drain ends when the pods are
         * gone (another drainer's work) or at the deadline. */
        bool cordon_only;
        /* The deadline is the user's choice (spotdrain drain --budget), not the instance's end: the pods
         * still on the node at it are left, not killed. */
        bool deadline_chosen;
        /* Nor was one chosen: deadline_usec is only a far end to plan against (spotdrain drain without
         * --budget or --deadline), which the drain's words leave out. */
        bool no_deadline;
        /* Pods left alone entirely: in these namespaces (NULL-terminated; NULL: none), or matching this
         * label selector (kubectl's syntax; NULL or "": none). */
        const char *const *skip_namespaces;
        const char *skip_pod_selector;
        /* When the drain ends with the node empty (nothing left on it but DaemonSet and mirror pods), or
         * at the deadline (the instance is gone), the node is tainted SPOTDRAIN_TAINT_OUT_OF_SERVICE. */
        bool out_of_service_taint;
        bool evict_daemonsets;
        /* Pods with emptyDir volumes are left on the node (kubectl drain without --delete-emptydir-data);
         * by default they are evicted with a warning, their data dying with the node anyway. */
        bool leave_emptydir;
        uint64_t default_startup_usec; /* owners without a measurement; 0 = 30 s */
        /* Of a pod's grace period, what its stop is expected to take before one of its kind was seen
         * stopping: the drain-infeasible verdict goes by it (forcing allows the whole grace). 0 = 0.5. */
        double expected_shutdown_fraction;
        uint64_t retry_floor_usec;           /* 0 = 200 ms */
        enum drain_surge_mode surge;         /* drain.surge (surge.h); 0 = off */
        const char *const *critical_classes; /* NULL-terminated; NULL: the planner's defaults */
        /* Never evicted; NULL: POD_NAMESPACE / POD_NAME from the environment. */
        const char *self_namespace, *self_name;
        /* Shared by every executor of the process (borrowed; must outlive the executor): one PDB informer,
         * PDB slots given out across nodes by earliest deadline, plans made across the nodes draining
         * together. NULL: a private one (a drain on its own). */
        struct drain_ledger *ledger;
        /* With a private ledger: the drain goes behind the drains of other nodes recorded on them, and
         * learns from their pods (drain_peers_new()). For a drain that is one process per node,
         * the agent's. */
        bool follow_peers;
        /* The estimates kept in the ConfigMap (borrowed; must outlive the executor; NULL: none): a private
         * ledger plans with their store, and the first verdict waits (3 s at most) for their read. */
        struct drain_estimates *estimates;
        /* spotdrain_drain_{budget,predicted}_seconds{node}; borrowed, must outlive the executor; NULL =
         * not reported. */
        struct metrics *metrics;
        /* The post-mortem of a pod deleted at its last safe moment, or of a Job's or bare pod evicted:
         * the last lines of each container kept with its alert (alerts.log_tail_lines; 0 none), and the
         * directory of its file (alerts.postmortem_dir; NULL none). */
        unsigned log_tail_lines;
        const char *postmortem_dir;
};
/* Fills everything but node, kind, notice and deadline from the configuration (borrows its strings). */
void drain_exec_options_from_config(const struct spotdrain_config *cfg, struct drain_exec_options *o);

enum drain_exec_outcome {
        DRAIN_EXEC_DRAINED,         /* every pod to go was gone before the deadline */
        DRAIN_EXEC_DEADLINE_MISSED, /* the deadline came with pods left */
        DRAIN_EXEC_ERROR,           /* could not drain at all (e.g. no such node) */
};

struct drain_exec_result {
        enum drain_exec_outcome outcome;
        int error;                 /* DRAIN_EXEC_ERROR: negative errno */
        const char *message;       /* a line for humans; borrowed from the executor */
        unsigned evicted;          /* evictions accepted */
        unsigned forced;           /* deleted around their PDB */
        unsigned killed_predicted; /* the first plan's pods that could not finish a graceful stop */
        /* Pods killed: gone with their node while they still ran (kube_pod_killed_with_node()), killed at
         * the end of their grace, or still on the node at an instance's deadline (not deadline_chosen). */
        unsigned killed;
        unsigned left;      /* pods to go still on the node at the end */
        bool pods_unseen;   /* the node's pods were never listed: left says nothing */
        unsigned blocked;   /* 429 answers */
        unsigned multi_pdb; /* pods the eviction API refused for having several PDBs */
        bool infeasible;    /* drain-infeasible was raised */
        bool at_risk;       /* drain-at-risk was raised */
        uint64_t notice_usec, started_usec, cordoned_usec, planned_usec, finished_usec;
        /* The first judgement: after the first plan once what it rests on is read (the pods' siblings'
         * startup times), when outlook_first is made; 0 before. */
        uint64_t judged_usec;
        uint64_t predicted_finish_usec; /* the first plan's; 0 when it never planned */
        /* drain.lb_deregistration_seconds: pods behind a Service the first plan held for the load
         * balancers, and until when (engine clock; 0: none held). */
        unsigned lb_held;
        uint64_t lb_held_until_usec;
        /* The two estimates (drain_outlook) at the first judgement of the drain and at its latest: what
         * the alerts, the live view, the summary and the result print. Unknown without a deadline. */
        struct drain_outlook outlook_first, outlook;
};

struct drain_exec;
typedef void (*drain_exec_done_fn)(struct drain_exec *x, const struct drain_exec_result *r, void *userdata);

/* Starts draining o->node on the client's loop. done runs once, from the loop, when the drain ends (it must
 * not free x; free it after). The client and bus (may be NULL) are borrowed and must outlive x. */
int drain_exec_start(struct kube_client *c, struct alert_bus *bus, const struct drain_exec_options *o,
                     drain_exec_done_fn done, void *userdata, struct drain_exec **ret);
/* A drain that ended before its deadline still captures the pods left on the node shortly before it
 * (pod-killed): until then (engine clock) it is to be kept; 0 when it has nothing more to do (or has not
 * ended). NULL-safe. */
uint64_t drain_exec_lingers_until(const struct drain_exec *x);
/* Lets an ended drain's plan go (drain_exec_plan() is NULL from then): a caller that keeps drains lingering
 * by the hundred (the controller) would otherwise keep an old joint plan, as large as every drain under way
 * when it was made, for each. NULL-safe; no effect on a drain that has not ended. */
void drain_exec_release_plan(struct drain_exec *x);
/* Grades the drain as it stands now, which updates its result's outlook (the live view's predicted forced
 * and killed). Nothing for a drain without a deadline, or ended. 0, or a negative errno. */
int drain_exec_update_outlook(struct drain_exec *x);
/* Stops whatever is under way (no callback). NULL-safe; returns NULL. */
struct drain_exec *drain_exec_free(struct drain_exec *x);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct drain_exec *, drain_exec_free);

/* The latest plan (NULL before the first one); valid until control returns to the loop. It is the ledger's
 * joint plan: with a shared ledger it covers every node draining beside this one. */
const struct drain_plan *drain_exec_plan(const struct drain_exec *x);
/* This drain's node in it (drain_exec_plan() plans every node draining in the process). */
const struct drain_plan_node *drain_exec_plan_node(const struct drain_exec *x);
/* Pods of the latest plan still to go: of one plan PDB index (-1: those without a PDB), or all of them. */
#define DRAIN_EXEC_ALL_PDBS INT_MIN
unsigned drain_exec_pods_left(const struct drain_exec *x, int pdb);
/* The result so far (final once done has run). */
const struct drain_exec_result *drain_exec_result(const struct drain_exec *x);

const char *drain_exec_outcome_to_string(enum drain_exec_outcome o);
