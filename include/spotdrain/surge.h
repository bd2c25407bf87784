/* surge: a drain's replacements started before their pods go (drain.surge; src/drain/surge.c).
 *
 * A pod whose PDB allows no disruption (a one-replica Deployment under minAvailable: 1, maxUnavailable: 0)
 * can only be forced out around it. When its owner is a Deployment (through a ReplicaSet) whose strategy is
 * RollingUpdate with maxSurge >= 1, the drain starts the replacement first:
 *  - no HPA targets the Deployment: its spec.replicas is raised by its pods on the node that surge;
 *  - an HPA owns the replica count: the rollout is restarted (the kubectl.kubernetes.io/restartedAt template
 *    annotation, as `kubectl rollout restart` writes it), so that maxSurge brings the new pod up first.
 * Once the new pods are Ready elsewhere (the node is cordoned) the PDB allows the evictions, which the
 * executor carries out as any other; once no pod of the Deployment is left on the node the replica count is
 * put back.
 *
 * Safety: StatefulSets, bare pods and Jobs never surge (nothing but a Deployment's ReplicaSet pods can).
 * The change and its record are one PATCH: SPOTDRAIN_ANNOTATION_SURGE (keys.h) on the Deployment holds
 * {"node": NODE, "replicas": ORIGINAL, "to": RAISED, "mode": "scale"|"rollout", "started": RFC3339}, with a
 * resourceVersion precondition. The restore is one PATCH too (replicas back and the record removed; the
 * replicas are left alone when someone else changed them meanwhile). A drain that starts on a node and finds
 * a record naming that node adopts it (a restarted agent or controller): it is restored as its own. A
 * Deployment that carries another node's record is not surged again. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "spotdrain/drain.h"
#include "spotdrain/util.h"

struct alert_bus;
struct drain_inputs;
struct drain_plan_pod;
struct kube_client;
struct kube_pod;

struct drain_surge;

/* changed runs (from the loop) when what the plan depends on moved: a Deployment was learnt, raised or
 * restored. Once raised, a Deployment's pods are looked at (after 1 s, then up to every 5 s) until its new
 * pods are placed: when the scheduler finds no node for some, surge-no-room goes to bus (NULL: none), once,
 * naming their requests. The client and bus are borrowed and must outlive the object. */
int drain_surge_new(struct kube_client *c, const char *node, enum drain_surge_mode mode,
                    struct alert_bus *bus, void (*changed)(void *userdata), void *userdata,
                    struct drain_surge **ret);
/* Cancels whatever is under way: a restore not yet answered is left to the record. NULL-safe. */
struct drain_surge *drain_surge_free(struct drain_surge *sg);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct drain_surge *, drain_surge_free);

/* The reads of the drains of one process shared while under way: a drain learning a Deployment that
 * another drain's read of it (or of its namespace's HPAs) is still waiting for joins it, and both learn from
 * its answer. Hundreds of drains starting at once share a few hundred Deployments and a few namespaces:
 * one read each instead of one per drain, in the client's rate and in memory. Only the first reads are
 * shared; a restore reads for itself (its PATCH's precondition). drain_surge_share() must come before the
 * drain's first drain_surge_learn(); the reads object may be freed before or after the surges using it. */
struct drain_surge_reads;
int drain_surge_reads_new(struct kube_client *c, struct drain_surge_reads **ret);
struct drain_surge_reads *drain_surge_reads_free(struct drain_surge_reads *rd);
void drain_surge_share(struct drain_surge *sg, struct drain_surge_reads *rd);
/* Reads under way, and the Deployments waiting for them (for tests). */
void drain_surge_reads_count(const struct drain_surge_reads *rd, size_t *ret_reads, size_t *ret_waiting);

/* Starts reading the pod's Deployment, if it has one (the first plan waits for it). NULL-safe. */
void drain_surge_learn(struct drain_surge *sg, const struct kube_pod *p);
/* Pod i of di (added just now; NULL-safe): learns its Deployment (GET, and the namespace's HPAs) the first
 * time, and marks the pod in the input as able to surge, and since when it is surged. */
int drain_surge_input(struct drain_surge *sg, struct drain_inputs *di, size_t i);

/* Acts on the latest plan, whose pods first .. first + n - 1 (of di) are the drain's own: raises the
 * Deployments whose pods the plan surges, restores those with no pod left on the node (every one of them
 * deleting or gone). NULL-safe. */
void drain_surge_round(struct drain_surge *sg, const struct drain_inputs *di, const struct drain_plan *plan,
                       size_t first, size_t n);

/* The drain ends: restores every Deployment still raised. 0 when nothing is left to restore (or the wait
 * was given up); 1 while restores are under way: done(userdata) then runs once from the loop, when they are
 * answered or after a bound (the record stays for the next drain of the node). NULL-safe. */
int drain_surge_finish(struct drain_surge *sg, void (*done)(void *userdata), void *userdata);

/* The Deployment a ReplicaSet's pod belongs to (named after its pod-template-hash), or NULL; the caller
 * frees it. */
char *drain_surge_deployment_of(const struct kube_pod *p);

/* Restores Deployment ns/name from the record naming sg's node that it carries (read first; nothing when
 * there is none), retrying with backoff until it is answered: the start-up sweep's way in. -EALREADY when
 * sg knows that Deployment already. */
int drain_surge_restore_record(struct drain_surge *sg, const char *ns, const char *name);
/* A Deployment is raised or being restored. NULL-safe. */
bool drain_surge_restoring(const struct drain_surge *sg);

/* Some Deployment is still being read: the first plan waits for it (briefly), so that the first verdict
 * knows which pods can surge. NULL-safe. */
bool drain_surge_learning(const struct drain_surge *sg);
/* The mode it was made with; DRAIN_SURGE_OFF for NULL. */
enum drain_surge_mode drain_surge_get_mode(const struct drain_surge *sg);
/* Deployments surged so far and restored (for results and tests). */
void drain_surge_counts(const struct drain_surge *sg, unsigned *ret_surged, unsigned *ret_restored);

/* The start-up sweep (src/drain/surge_sweep.c): a process that died after raising a Deployment left its
 * record behind, which only a later drain of the same node would adopt. The sweep lists the Deployments,
 * takes those whose record names node (any node when NULL: the controller; its own: the agent), and
 * restores each one whose drain is no longer under way: the node is gone, carries no drain record whose
 * deadline is still ahead, or has no pod of that Deployment left (a drain under way with pods of it on the
 * node adopts the record and restores it itself). Restores follow drain_surge's rules (replicas someone
 * else changed are left alone, the record removed); every API failure is retried with backoff. It starts at
 * once; freeing it cancels what is under way (the records stay for the next sweep). */
struct drain_surge_sweep;
int drain_surge_sweep_new(struct kube_client *c, const char *node, struct drain_surge_sweep **ret);
struct drain_surge_sweep *drain_surge_sweep_free(struct drain_surge_sweep *sw);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct drain_surge_sweep *, drain_surge_sweep_free);
/* Every record found was restored or left to its drain (true for NULL). */
bool drain_surge_sweep_done(const struct drain_surge_sweep *sw);
/* Records found, and Deployments restored so far. */
void drain_surge_sweep_counts(const struct drain_surge_sweep *sw, unsigned *ret_found,
                              unsigned *ret_restored);

/* Room for the surged pods (src/drain/room.c), as `plan` predicts it before anything is raised: a first fit
 * of want (core/v1 Pod objects, largest CPU request first) over the nodes other than node that the scheduler
 * would consider: Ready, not cordoned, no NoSchedule or NoExecute taint the pod does not tolerate, every
 * label of its nodeSelector. A node's room is its status.allocatable (cpu, memory, pods) less what the pods
 * bound to it request (the scheduler's count: every container, the larger init container, the overhead),
 * terminating ones included; pods that have ended (Succeeded, Failed) hold nothing. Optimistic where the
 * scheduler is stricter (affinity, topology spread, host ports, extended resources are not looked at): a
 * miss is a certainty, a fit only likely. nodes and pods are core/v1 lists' items arrays. */
struct drain_room {
        unsigned n_want;
        unsigned n_missing;         /* pods of want no node has room for */
        int64_t missing_cpu_millis; /* their requests, summed */
        int64_t missing_memory_bytes;
};
struct cJSON;
int drain_room_fit(const struct cJSON *nodes, const struct cJSON *pods, const char *node,
                   const struct cJSON *const *want, size_t n_want, struct drain_room *ret);
