/* The drain engine's calls between its own files: what include/spotdrain/engine.h, the interface for the
 * callers outside src/drain, leaves out. Included by the engine's files (through drain_internal.h) and by
 * the unit tests of its parts. Not part of the public interface. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/engine.h"

struct alert_bus;
struct kube_informer;
struct kube_pod;

/* ==== observed stops and startups (shutdowns.c): struct drain_shutdowns ==== */
int drain_shutdowns_new(struct drain_shutdowns **ret);
struct drain_shutdowns *drain_shutdowns_free(struct drain_shutdowns *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct drain_shutdowns *, drain_shutdowns_free);
/* unseen_usec: what the owner's stop was expected to take before any was seen. */
int drain_shutdowns_observe(struct drain_shutdowns *s, const char *owner_key, uint64_t usec,
                            uint64_t unseen_usec);
/* A pod that was stopping is gone (now): records how long its graceful stop took, from start (0: its
 * deletionTimestamp less its grace period, for a pod someone else deleted), unless that was no graceful
 * stop's length: a pod gone with its instance (within a second of deadline_usec, its node's), or cut short
 * by a grace its delete shortened (its deletionGracePeriodSeconds, or forced_grace seconds when > 0).
 * unseen as drain_shutdowns_observe()'s: expected_fraction of its grace period. 0, or -ENOMEM. */
int drain_shutdowns_observe_stop(struct drain_shutdowns *s, const struct kube_pod *kp, const char *owner_key,
                                 uint64_t start, int64_t forced_grace, uint64_t deadline_usec,
                                 double expected_fraction);
/* The median and the longest of the owner's stops; false when none was observed. */
bool drain_shutdowns_get(const struct drain_shutdowns *s, const char *owner_key, uint64_t *ret_median,
                         uint64_t *ret_max);
/* Moves whenever a stop raises what its owner's stops are expected to take (the median, or before the
 * first one unseen_usec): drains judged on the earlier expectation are judged again. NULL-safe: 0. */
unsigned drain_shutdowns_generation(const struct drain_shutdowns *s);
/* The same for one pod (uid may be NULL): a pod counted before (by a drain and the learner, say) is not
 * counted again. */
int drain_shutdowns_observe_pod(struct drain_shutdowns *s, const char *owner_key, const char *uid,
                                uint64_t usec, uint64_t unseen_usec);
/* Creation → Ready of one of the owner's pods, once per pod; and the median of the latest of them. */
int drain_shutdowns_observe_startup(struct drain_shutdowns *s, const char *owner_key, const char *uid,
                                    uint64_t usec);
bool drain_shutdowns_startup(const struct drain_shutdowns *s, const char *owner_key, uint64_t *ret_median);
/* Every owner's startup median (owner keys owned by the result: drain_startups_free()). */
int drain_shutdowns_startups(const struct drain_shutdowns *s, struct drain_startup **ret, size_t *ret_n);
/* Moves with every sample taken or loaded: what there is to keep. NULL-safe: 0. */
unsigned drain_shutdowns_changes(const struct drain_shutdowns *s);
/* {"version": 1, "owners": {KEY: {"stops_ms": [...], "stops_at": [...], "startups_ms": [...],
 * "startups_at": [...], "stops_seen": N, "startups_seen": N, "updated": RFC3339}}}: the latest samples
 * oldest first and when each was seen (unix seconds), how many were ever seen, when the latest was
 * (docs/contracts.md §6.4). */
int drain_shutdowns_to_json(const struct drain_shutdowns *s, cJSON **ret);
/* Merges such a document in: per owner the union of the samples held here and read (a sample is its value
 * and time: one read again counts once; without "*_at", as an earlier version wrote, its time is the
 * entry's "updated"), the latest kept; a bad entry is passed over. -EINVAL when the document is not of
 * version 1. ret_taken (may be NULL): how many owners gained samples. */
int drain_shutdowns_merge_json(struct drain_shutdowns *s, const cJSON *root, size_t *ret_taken);
/* Drops the owners none of whose samples this process saw itself (only read: another process's, kept in
 * the ConfigMap, which is where they are read again when needed). */
void drain_shutdowns_forget_foreign(struct drain_shutdowns *s);
/* How many owners have estimates. */
size_t drain_shutdowns_owners(const struct drain_shutdowns *s);

/* ==== planner input from Kubernetes objects (inputs.c) ==== */
/* struct drain_inputs owns a struct drain_input and everything it points to. */
int drain_inputs_new(const struct drain_inputs_options *o, struct drain_inputs **ret);
struct drain_inputs *drain_inputs_free(struct drain_inputs *di);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct drain_inputs *, drain_inputs_free);
int drain_inputs_add_node(struct drain_inputs *di, const char *name, uint64_t deadline_usec,
                          uint64_t margin_usec, size_t *ret_index);
/* A PodDisruptionBudget object. Add every PDB before the pods: a pod's PDBs are found when it is added. */
int drain_inputs_add_pdb(struct drain_inputs *di, const cJSON *pdb);
/* A Pod object on node (an index from drain_inputs_add_node). ret_index may be NULL. */
int drain_inputs_add_pod(struct drain_inputs *di, size_t node, const cJSON *pod, size_t *ret_index);
/* Copies the measurements (owner keys included). */
int drain_inputs_add_startups(struct drain_inputs *di, const struct drain_startup *s, size_t n);
/* The input as it stands (valid until the next add or free). */
const struct drain_input *drain_inputs_get(struct drain_inputs *di);
/* The plans of the input borrow its pods' names (drain_input.plans_borrow_names): they must be freed
 * before it. */
void drain_inputs_plans_borrow_names(struct drain_inputs *di);
/* When node's drain started (its notice, engine clock; default: the input's now). On DRAIN_SHUTDOWN_SAFE a
 * pod never seen stopping whose grace period is longer than start to deadline - margin is given
 * expected_shutdown_fraction of it (capped at the time left) rather than the whole of it. */
int drain_inputs_set_node_start(struct drain_inputs *di, size_t node, uint64_t start_usec);
/* When healthy pods of the PDB added last were lost to something outside this process's drains (engine
 * clock, ascending; drain_pdb_in.lost_usec): copied. */
int drain_inputs_set_pdb_lost(struct drain_inputs *di, const uint64_t *lost_usec, size_t n);
/* Pod i can surge (drain_pod_in.can_surge), and since when its replacement was asked for (0: not yet). */
int drain_inputs_set_surge(struct drain_inputs *di, size_t i, bool can_surge, uint64_t surged_usec);
/* drain.lb_deregistration_seconds: the pods added from first_pod on that a Service of services (an array
 * of Service objects) selects are behind_service; node's are held until until_usec (0: none). */
void drain_inputs_mark_services(struct drain_inputs *di, size_t first_pod, const cJSON *services);
int drain_inputs_set_node_lb_hold(struct drain_inputs *di, size_t node, uint64_t until_usec);
/* Pod i is behind an instance target group (drain_lb_targets): it waits until its node's instance left
 * healthy there, expected at until_usec (0: it has), instead of the node's lb hold (behind_service is
 * cleared). */
int drain_inputs_set_lb_target(struct drain_inputs *di, size_t i, uint64_t until_usec);
/* Pod i (an index from drain_inputs_add_pod) was deleting and is gone since gone_usec (engine clock). */
int drain_inputs_set_gone(struct drain_inputs *di, size_t i, uint64_t gone_usec);
/* Pod i is being deleted since deleted_usec (engine clock), though its object does not say so yet: an
 * eviction or a delete of it was accepted and its watch event is still on the way. No change to a pod
 * whose object says it is deleting. */
int drain_inputs_set_deleting(struct drain_inputs *di, size_t i, uint64_t deleted_usec);
/* The input's now, and a node added to it by name: cheap, unlike drain_inputs_get(), which estimates every
 * pod's shutdown again. */
uint64_t drain_inputs_now(const struct drain_inputs *di);
bool drain_inputs_find_node(const struct drain_inputs *di, const char *name, size_t *ret_index);
/* How many pods were added so far (the index the next one gets). */
size_t drain_inputs_n_pods(const struct drain_inputs *di);
size_t drain_inputs_n_nodes(const struct drain_inputs *di);
/* The parsed pod of input index i (valid as drain_inputs_get()'s input). */
const struct kube_pod *drain_inputs_pod(const struct drain_inputs *di, size_t i);
/* "NAMESPACE/KIND/NAME" of the pod's owner, the key of startup measurements; NULL for a bare pod or ENOMEM.
 */
char *drain_owner_key(const struct kube_pod *p);
/* A label selector that finds the pod's siblings: its labels without the per-pod ones (StatefulSet pod name
 * and index, Job completion index). NULL when the pod has no labels, or ENOMEM. */
char *drain_sibling_selector(const struct kube_pod *p);

/* ==== drain ledger (ledger.c): its members, plans and slots ==== */
/* A member's place in a joint plan: its node's index and its pods, n_pods of them from first_pod on. */
struct drain_ledger_slice {
        size_t node, first_pod, n_pods;
};
/* One plan of every drain of a ledger, with the input it was made from; reference counted, since a member
 * that left may still read its last one. */
struct drain_joint {
        unsigned refs;
        struct drain_inputs *inputs;
        struct drain_plan *plan;
        uint64_t made_usec;    /* engine clock */
        unsigned startups_gen; /* the ledger's startup measurements it was made with (its startups_gen) */
        /* The same drains with shutdowns on DRAIN_SHUTDOWN_EXPECTED, made on the first ask. */
        struct drain_inputs *expected_inputs;
        /* The plans of expected_inputs that grading its nodes made (drain_grade_node_cached). */
        struct drain_grade_cache *grades;
};
struct drain_joint *drain_joint_ref(struct drain_joint *j);
struct drain_joint *drain_joint_unref(struct drain_joint *j); /* NULL-safe; returns NULL */

struct drain_ledger_member_ops {
        /* A drain of another process (drain_peers_new()): planned with the others, and its pods'
         * wants rank like theirs but are never granted here. */
        bool remote;
        /* Something the member's plan depends on changed, or a slot may be waiting for it. */
        void (*wake)(void *userdata);
        /* Adds the member's node and pods to a joint input (or nothing, e.g. before its pods are listed).
         * slice is NULL for a plan the member will not act on; otherwise the member fills it in and keeps
         * what it needs to act on the plan handed over by planned(). */
        int (*add_inputs)(void *userdata, struct drain_inputs *di, struct drain_ledger_slice *slice);
        /* Appends the namespaces of its pods (borrowed until the next call into the member) to *ns. */
        int (*namespaces)(void *userdata, const char ***ns, size_t *n);
        /* The new joint plan (take a reference to keep it) and the member's slice, NULL when it added
         * nothing. */
        void (*planned)(void *userdata, struct drain_joint *j, const struct drain_ledger_slice *slice);
};
/* userdata identifies the member in every call below; node is its node's name (copied), deadline_usec
 * (engine clock) that node's deadline. */
int drain_ledger_join(struct drain_ledger *l, const struct drain_ledger_member_ops *ops, void *userdata,
                      const char *node, uint64_t deadline_usec);
/* Drops the member's waits; grants it still holds count as spent until the next status change. */
void drain_ledger_leave(struct drain_ledger *l, void *userdata);
/* The shared PDB informer (borrowed) and whether it has listed once. */
const struct kube_informer *drain_ledger_pdbs(const struct drain_ledger *l);
bool drain_ledger_synced(const struct drain_ledger *l);
/* Something a plan depends on changed (a member's pods): the next drain_ledger_plan() makes a new one. */
void drain_ledger_touch(struct drain_ledger *l);
/* Makes the joint plan anew (with o, on DRAIN_SHUTDOWN_SAFE) when something changed since the last one or
 * it is older than a second, and hands it to every member (planned()) before it returns. A burst of changes
 * costs one plan: a new one is made at most every few times the last one took; until then member keeps the
 * plan it has and is woken once the new one is made. */
int drain_ledger_plan(struct drain_ledger *l, void *member, const struct drain_inputs_options *o);
/* The current joint plan's input on DRAIN_SHUTDOWN_EXPECTED (made once per joint plan), what the graded
 * verdict (drain_grade_node) goes by, and the index of node in it; borrowed from the joint plan, as is
 * *ret_grades (may be NULL), the cache of that input's grading plans (drain_grade_node_cached). -ENOENT
 * when there is no joint plan or node is not in it. */
int drain_ledger_expected(struct drain_ledger *l, const struct drain_inputs_options *o, const char *node,
                          const struct drain_input **ret, size_t *ret_node,
                          struct drain_grade_cache ***ret_grades);
/* Slots. pdb and pod are "namespace/name". A member states every pod it wants to evict now between
 * drain_ledger_begin() and drain_ledger_end(); pods it no longer states stop waiting at the end. */
void drain_ledger_begin(struct drain_ledger *l, void *member);
/* 1: the slot is granted, evict now (then report the answer); 0: wait (the member is woken when a slot
 * may be its); -ENOMEM. */
int drain_ledger_want(struct drain_ledger *l, void *member, const char *pdb, const char *pod,
                      uint64_t last_safe_usec);
void drain_ledger_end(struct drain_ledger *l, void *member);
enum drain_ledger_answer {
        DRAIN_LEDGER_ACCEPTED, /* the eviction went through (or may have): spent until the status moves */
        DRAIN_LEDGER_REFUSED,  /* 429: the slot comes back and the status is distrusted */
        DRAIN_LEDGER_FAILED,   /* nothing happened: the slot comes back */
};
void drain_ledger_answer(struct drain_ledger *l, void *member, const char *pdb, const char *pod,
                         enum drain_ledger_answer a);
/* Counters for tests and benchmarks. */
struct drain_ledger_stats {
        unsigned granted, refused, waiting;
        unsigned
            rechecks;    /* times the ledger looked again with nothing heard (settle, a distrusted status) */
        unsigned losses; /* healthy pods lost to something outside the ledger, not yet back (drain_pdb_in) */
        unsigned plans;  /* joint plans made */
};
void drain_ledger_stats(const struct drain_ledger *l, struct drain_ledger_stats *ret);
/* Startup measurements shared by the drains of the ledger: one sibling list per owner, not one per drain. */
bool drain_ledger_startup(const struct drain_ledger *l, const char *owner_key, uint64_t *ret_usec);
int drain_ledger_add_startups(struct drain_ledger *l, const struct drain_startup *s, size_t n);
/* The sibling list of an owner under way, asked by one drain for all: drain_ledger_startup_asking() as it
 * goes out, drain_ledger_startup_answered() when it is answered, failed or cancelled (after
 * drain_ledger_add_startups), which wakes the members that waited for it. drain_ledger_startup_wait()
 * returns false when no list of the owner is under way (the member asks itself), else true, and the member
 * is woken at its answer; drain_ledger_startup_awaited() tells whether a member still waits for one. */
int drain_ledger_startup_asking(struct drain_ledger *l, const char *owner_key);
bool drain_ledger_startup_wait(struct drain_ledger *l, void *member, const char *owner_key);
bool drain_ledger_startup_awaited(const struct drain_ledger *l, const void *member);
void drain_ledger_startup_answered(struct drain_ledger *l, const char *owner_key);
/* Whether the ledger's joint plan j was made with every startup measurement it has (the next one is on its
 * way otherwise: the members that asked for a plan are woken with it). */
bool drain_ledger_startups_planned(const struct drain_ledger *l, const struct drain_joint *j);
/* The surges' reads shared by the drains of the ledger (include/spotdrain/surge.h), made at the first call;
 * NULL without memory (each drain then reads for itself). */
struct drain_surge_reads;
struct drain_surge_reads *drain_ledger_surge_reads(struct drain_ledger *l);
/* Pods listed by a drain (its pods' siblings): each one starting (scheduled, not Ready, not deleting) is a
 * healthy pod lost at its creation to whatever PDBs select it, and expected back a startup later. This is
 * how a drain that starts after another process's eviction (another node's agent) sees that the PDB's
 * shortfall is a replacement on its way rather than a pod down for good; drops of currentHealthy seen in
 * the watch are recorded by the ledger itself. */
void drain_ledger_note_starting(struct drain_ledger *l, const cJSON *items);
/* A drain that ends hands over its pods that are gone but whose replacements are not Ready yet (until):
 * the drains still going plan with the PDB slots they give back. Takes the reference to pod (released on
 * failure too). */
struct drain_pod_memo;
int drain_ledger_keep_ghost(struct drain_ledger *l, const char *node, uint64_t deadline_usec,
                            uint64_t margin_usec, struct drain_pod_memo *pod, uint64_t gone_usec,
                            uint64_t until_usec);
/* Until when a pod gone after its delete is still planned (drain_ledger_keep_ghost(), an executor's own):
 * a while after its replacement, deleted at its delete, should be Ready by the owner's startup estimate. */
uint64_t drain_ledger_ghost_until(const struct drain_ledger *l, const struct kube_pod *kp,
                                  const char *owner_key, uint64_t default_startup_usec);
/* Graceful stops observed by the drains of the ledger (delete → gone), per owner. */
struct drain_shutdowns *drain_ledger_shutdowns(const struct drain_ledger *l);
/* When a drain of l may next be judged again mid-drain (engine clock), and the record of one that ran
 * from start to end: such re-judgements of every drain of l share a tenth of the time. NULL-safe. */
uint64_t drain_ledger_rejudge_at(const struct drain_ledger *l);
void drain_ledger_rejudged(struct drain_ledger *l, uint64_t start, uint64_t end);

/* ==== the verdict's alerts (verdict_alert.c) ==== */
/* Raises drain-infeasible or drain-at-risk on node as g grades it (node_index: the node in g->plan);
 * nothing for DRAIN_GRADE_FITS. */
void drain_grade_alert(struct alert_bus *bus, const char *node, const struct drain_grade_result *g,
                       size_t node_index);
/* Raises drain-infeasible on node because the client's kube.qps is too low for it (the figures in b). */
void drain_api_budget_alert(struct alert_bus *bus, const char *node, const struct drain_api_budget *b);

/* ==== estimates (estimates.c): their reads ==== */
/* The kept estimates were read (or found absent, or keep is off); on demand: since the last refresh. */
bool drain_estimates_loaded(const struct drain_estimates *e);
/* fn runs each time the ConfigMap was read (or found absent), from the loop; one at a time. fn NULL:
 * removes the one of userdata (another's stays). */
void drain_estimates_on_read(struct drain_estimates *e, void (*fn)(void *userdata), void *userdata);

/* ==== load balancer targets (lb_targets.c) ====
 * The target groups of the pods of one draining node: the AWS Load Balancer Controller's TargetGroupBindings
 * (elbv2.k8s.aws/v1beta1) and the Services they name, listed once; each group's deregistration delay
 * (DescribeTargetGroupAttributes), read once; for instance target groups, the node's instance asked about
 * (DescribeTargetHealth) every second until it is out of healthy there (with deregister, after spotdrain
 * deregistered it itself: drain.deregister_targets). ip target groups leave with their pods (the
 * controller deregisters a terminating pod's IP): their delay is read, nothing waits for them. */
struct drain_lb_group {
        char *arn;
        char *binding; /* "NAMESPACE/NAME" of its TargetGroupBinding */
        bool ip;       /* targetType ip, else instance */
        /* deregistration_delay.timeout_seconds; -1 until answered (its pods wait for the answer, so that
         * lb-deregistration-too-slow comes before they go), -2 when the answer was an error */
        long delay_seconds;
        bool out;          /* instance groups: the instance was seen out of healthy */
        uint64_t out_usec; /* then (engine clock) */
        char state[32];    /* its state then ("draining", "unused", ...) */
};
struct drain_lb_targets;
struct elbv2_client;
typedef void (*drain_lb_changed_fn)(void *userdata);
/* Starts the lists at once; fn runs on the loop whenever something was learnt (the lists, a delay, an
 * instance out). kc and elb are borrowed and must outlive it. */
int drain_lb_targets_new(struct kube_client *kc, struct elbv2_client *elb, const char *instance_id,
                         bool deregister, drain_lb_changed_fn fn, void *userdata,
                         struct drain_lb_targets **ret);
struct drain_lb_targets *drain_lb_targets_free(struct drain_lb_targets *t); /* NULL-safe */
DEFINE_TRIVIAL_CLEANUP_FUNC(struct drain_lb_targets *, drain_lb_targets_free);
/* The bindings and Services were listed (or could not be); true for NULL. */
bool drain_lb_targets_listed(const struct drain_lb_targets *t);
size_t drain_lb_targets_count(const struct drain_lb_targets *t);
const struct drain_lb_group *drain_lb_targets_group(const struct drain_lb_targets *t, size_t i);
/* The group whose Service selects the pod (instance groups only with instance_only), -1 when none. */
long drain_lb_targets_find(const struct drain_lb_targets *t, const struct kube_pod *kp, bool instance_only);

/* ==== executor (executor.c) ==== */
/* The names of the pods still to go, "ns/name" comma-separated (for deadline-missed and the CLI). */
char *drain_exec_left_names(const struct drain_exec *x);
