/* The simulator's world: scenario, Kubernetes objects and controllers, clock, change log, result.
 *
 * Contract between the model (scenario.c, model.c, render.c) and the HTTP surfaces (server.c and later IMDS,
 * SQS, EC2, STS surfaces). The model is single-threaded state guarded by one mutex: every function below
 * except sim_new/sim_free/sim_lock/sim_unlock/sim_wait must be called with the lock held. Objects cross this
 * boundary as Kubernetes JSON (cJSON, rendered exactly as kube-apiserver would render them), so the server
 * can filter by label and field selectors generically and stream watch events.
 *
 * Modelling choices where Kubernetes/AWS leave room:
 * - Every write operation and sim_list/sim_get first run whatever became due (sim_advance), so answers are
 *   always current. Timed actions carry their own due time (a pod exits exactly at its exit instant).
 * - At a node's deadline the instance is gone: every pod on it is removed and the Node object is deleted at
 *   once (no NotReady phase). spot-interruption, scheduled-change and asg-lifecycle-terminate all set
 *   deadline = at + budget_seconds; rebalance-recommendation only records its time.
 * - The starting world: a workload's placement is exact on the nodes it names; its other pods go first-fit
 *   to the other nodes first. Starting pods were created an hour before t=0 and turned Ready startup_seconds
 *   later, so creation → Ready reflects the startup time. DaemonSet pods run on every node and tolerate all.
 * - Result accounting counts evictable pods only (not DaemonSet pods): pods_evictable are those on the node
 *   from its first notice (rebalance or interruption) on; pods_graceful/pods_killed how they left. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

struct sim;
struct ynode;

/* Resource kinds the simulated API server serves. */
enum sim_kind {
        SIM_NAMESPACE,
        SIM_NODE,
        SIM_POD,
        SIM_PDB,
        SIM_REPLICASET,
        SIM_DEPLOYMENT,
        SIM_STATEFULSET,
        SIM_DAEMONSET,
        SIM_EVENT, /* core/v1 Event (events.k8s.io/v1 is served from the same store) */
        SIM_LEASE,
        SIM_HPA, /* autoscaling/v2 HorizontalPodAutoscaler, one per Deployment whose scenario has hpa */
        SIM_CONFIGMAP, /* stored as given, like leases (spotdrain keeps its estimates in one) */
        /* storage.k8s.io/v1, one per volume of a pod of a workload with volume_detach_seconds, from the
         * pod's binding until that long after the pod is gone (the CSI driver's detach) */
        SIM_VOLUMEATTACHMENT,
        SIM_SERVICE, /* core/v1, one per workload whose scenario has service: true (type LoadBalancer) */
        /* elbv2.k8s.aws/v1beta1 TargetGroupBinding (a CRD of the AWS Load Balancer Controller), one per
         * workload whose scenario has target_group */
        SIM_TARGETGROUPBINDING,
        _SIM_KIND_MAX,
};

struct sim_options {
        double time_scale; /* scenario seconds per real second; default 1 */
        const char *mode;  /* "agent" | "controller" | NULL (the scenario's) */
        uint64_t seed;     /* 0: the scenario's */
        bool manual_clock; /* tests: the clock only moves through sim_set_now() */
};

/* ---- life cycle ---- */
/* Loads and validates a scenario file. Errors name file, line and key: "FILE:LINE: workloads[2].pdb: ..." */
int sim_scenario_load(const char *path, struct ynode **ret_tree, char **ret_error);
/* Builds the world from a loaded scenario (pods placed, PDB status computed, all pods Running and Ready at
 * t=0). */
int sim_new(const struct ynode *scenario, const struct sim_options *opt, struct sim **ret, char **ret_error);
struct sim *sim_free(struct sim *s);

void sim_lock(struct sim *s);
void sim_unlock(struct sim *s);
/* With the lock held: waits (releasing it meanwhile) until the resource version passes after_rv, the clock
 * reaches the next due action, or timeout_usec passes. */
void sim_wait(struct sim *s, uint64_t after_rv, uint64_t timeout_usec);
/* sim_wait for a change alone: returns on a new resourceVersion or at the timeout, whatever falls due
 * before (the ticker of sim serve runs that, and its changes wake this). For the many watchers of a large
 * run: it costs no look at what falls due, on every wake-up of each. */
void sim_wait_change(struct sim *s, uint64_t after_rv, uint64_t timeout_usec);
/* sim_wait_change for a change of a pod bound to the node of index node (sim_node_index): the watches of
 * one node's pods are not woken by the change of every pod of a large cluster. */
void sim_wait_node_change(struct sim *s, long node, uint64_t after_rv, uint64_t timeout_usec);
/* The index of the node of that name (not removed), -1 none. With the lock held. */
long sim_node_index(struct sim *s, const char *name);
/* Wakes every sim_wait (a change happened). */
void sim_broadcast(struct sim *s);

/* ---- clock ----
 * Scenario seconds since start = real elapsed seconds × time_scale. The scenario's t=0 is the wall-clock
 * moment of sim_start() (epoch below). */
void sim_start(struct sim *s);       /* starts the clock; before it, sim_now() is 0 */
double sim_now(const struct sim *s); /* scenario seconds */
/* Wall-clock usec of scenario time t: the epoch plus t seconds (not divided by time_scale), i.e. the instant
 * as a client on the engine clock (core.h clk_*, scaled by the same factor from sim_start on) sees it. */
uint64_t sim_wall_usec(const struct sim *s, double t);
double sim_time_scale(const struct sim *s);
/* Manual clock only (sim_options.manual_clock): sets the scenario time; never moves backwards. Call
 * sim_advance() (or any operation below, which advances first) to run what became due. */
void sim_set_now(struct sim *s, double t);
/* Runs every timed action due at or before sim_now(): scenario events, pods turning Ready, pods exiting,
 * pods killed at the end of their grace, nodes terminated at their deadline, replacements created and
 * scheduled, PDB status recomputed. Returns the scenario time of the next due action, or a negative number
 * when none. */
double sim_advance(struct sim *s);
bool sim_finished(
    const struct sim *s); /* every scenario event happened and every interrupted node is gone */

/* ---- objects (JSON in the Kubernetes wire form) ---- */
uint64_t sim_resource_version(const struct sim *s); /* the store's current resourceVersion */
/* A new array of the objects of a kind (all namespaces when ns is NULL); the caller filters and owns it. */
int sim_list(struct sim *s, enum sim_kind kind, const char *ns, cJSON **ret_items);
/* A filter that sim_list_filtered applies to the model's objects before rendering them, so that a narrow
 * list of a large cluster costs what it keeps. Every field is optional. */
struct sim_list_filter {
        const char *node_name; /* pods: only those bound to this node ("": only unscheduled ones) */
        /* pods and nodes: keeps the object only when this answers true for its metadata.labels */
        bool (*labels)(const cJSON *labels, void *userdata);
        void *userdata;
        /* pods without node_name: a page of the list, max > 0 of them after the first skip kept, so that
         * a list of a large cluster in pages renders each page only */
        size_t skip, max;
};
/* sim_list without the objects the filter rejects (same order); filter NULL = sim_list. */
int sim_list_filtered(struct sim *s, enum sim_kind kind, const char *ns,
                      const struct sim_list_filter *filter, cJSON **ret_items);
/* Part of a list of pods (filter->node_name unset) in creation order, as they are now: at most max of those
 * created after the pod of creation number `after` and up to `upto` (a number from sim_pods_last_created()),
 * and *ret_last the number of the last one looked at (so the next part starts after it; `after` once none is
 * left). A watch sends a large cluster's pods this way, a part at a time, each under the lock for a moment
 * rather than all of them for seconds. */
int sim_list_pods_part(struct sim *s, const char *ns, const struct sim_list_filter *filter, uint64_t after,
                       uint64_t upto, size_t max, cJSON **ret_items, uint64_t *ret_last);
/* The creation number of the newest pod (0: none yet). */
uint64_t sim_pods_last_created(const struct sim *s);
/* -ENOENT when absent. */
int sim_get(struct sim *s, enum sim_kind kind, const char *ns, const char *name, cJSON **ret_obj);

/* Answers of the write operations: an HTTP status and the JSON body to send (an object or a metav1 Status).
 */
struct sim_answer {
        int status;
        cJSON *body;
};

/* POST .../pods/NAME/eviction, exactly as kube-apiserver's eviction REST: 201 Success, 429 TooManyRequests
 * with cause DisruptionBudget, 500 for several PDBs, 404 when the pod is gone, 409 on a UID precondition
 * mismatch. eviction: the request body (policy/v1 or v1beta1 Eviction; its deleteOptions honoured). client:
 * the user agent, for the result's accounting. */
int sim_evict(struct sim *s, const char *ns, const char *name, const cJSON *eviction, const char *client,
              struct sim_answer *ret);
/* DELETE pod: grace_seconds < 0 means the pod's own; uid precondition optional. Counts a PDB breach when it
 * drops a PDB below its desired healthy count. Answers 200 with the pod (now carrying deletionTimestamp) or
 * a Status. */
int sim_delete_pod(struct sim *s, const char *ns, const char *name, int64_t grace_seconds, const char *uid,
                   const char *client, struct sim_answer *ret);
/* PATCH node (strategic merge or merge patch of spec.unschedulable, spec.taints,
 * metadata.labels/annotations), or JSON patch (content_type application/json-patch+json). Answers 200 with
 * the node, 404, 409 on a resourceVersion precondition mismatch, 422 on a malformed patch. */
int sim_patch(struct sim *s, enum sim_kind kind, const char *ns, const char *name, const char *content_type,
              const cJSON *patch, struct sim_answer *ret);
/* POST (create) and PUT (replace) for events and leases (and nodes through PUT: labels, annotations,
 * spec.unschedulable, spec.taints). POST also creates PodDisruptionBudgets (policy/v1 spec: selector
 * matchLabels, minAvailable or maxUnavailable, unhealthyPodEvictionPolicy). 409 AlreadyExists / Conflict (a
 * stale metadata.resourceVersion) as kube-apiserver answers; 405 for other kinds. */
int sim_create(struct sim *s, enum sim_kind kind, const char *ns, const cJSON *obj, struct sim_answer *ret);
int sim_replace(struct sim *s, enum sim_kind kind, const char *ns, const char *name, const cJSON *obj,
                struct sim_answer *ret);

/* The scale subresource of a Deployment (autoscaling/v1 Scale): GET, and PUT (content_type NULL) or
 * PATCH (merge, strategic merge or JSON patch of spec.replicas). 200 with the Scale, 404, 409 on a stale
 * resourceVersion, 422 on a bad replica count. */
int sim_scale_get(struct sim *s, const char *ns, const char *name, struct sim_answer *ret);
int sim_scale_write(struct sim *s, const char *ns, const char *name, const char *content_type,
                    const cJSON *body, struct sim_answer *ret);

/* ---- pod logs ----
 * What the kubelet knows of a pod's one container ("app"), from which the surface makes up the lines it
 * wrote (podlog.c): times in scenario seconds (the starting world's are before 0). */
struct sim_pod_log_facts {
        char name[254], workload[254], node[254], uid[40];
        bool started;     /* the container started (the pod was bound): started_at, ready_at */
        bool terminating; /* a delete sent it SIGTERM: sigterm_at, exit_at, grace */
        double started_at;
        double ready_at; /* it turned (or turns) Ready */
        double sigterm_at;
        double exit_at; /* it exits, on its own or killed at the end of its grace period */
        int64_t grace;  /* the grace period that delete gave */
        bool graceful;  /* its own shutdown ends within the grace period (it logs its exit) */
};
/* -ENOENT when the pod is gone. */
int sim_pod_log_facts(struct sim *s, const char *ns, const char *name, struct sim_pod_log_facts *ret);

/* ---- change log (for watch) ----
 * Every change gets the next resourceVersion. The log keeps the most recent changes; asking for an older
 * version answers -ESTALE (the server sends a 410 Expired ERROR event). */
struct sim_change {
        uint64_t rv;
        enum sim_kind kind;
        const char *type; /* "ADDED", "MODIFIED", "DELETED" */
        const cJSON *object;
        long node; /* a pod's: the index of the node it was bound to (sim_node_index), -1 none */
};
/* Calls fn for each change of kind (ns NULL = all) with rv > after_rv, in order. */
int sim_changes_since(struct sim *s, enum sim_kind kind, const char *ns, uint64_t after_rv,
                      void (*fn)(const struct sim_change *c, void *userdata), void *userdata);

/* ---- provisioning (the simulated EC2) ----
 * Launches an instance of one of the scenario's provisioning.instance_types: it joins the cluster as a
 * Ready, schedulable node (named ip-10-0-X-Y.ec2.internal) provisioning.node_launch_seconds later, and is
 * listed in the result's replacements. -EINVAL for an unknown instance type, an empty zone or a capacity
 * type other than "spot" / "on-demand". ret_instance_id (optional, "i-0" + 16 hex digits) is the caller's.
 */
int sim_launch_instance(struct sim *s, const char *instance_type, const char *zone,
                        const char *capacity_type, char **ret_instance_id);

/* asg-launch events (docs/contracts.md §3): instances the group launched under its launch hook. Launches are
 * indexed 0..sim_launch_count()-1 (CreateFleet's among them); sim_launch_hook() answers -ENOENT for one
 * not launched under the hook, else its instance and launch time (scenario seconds). */
size_t sim_launch_count(const struct sim *s);
/* Launch actions not completed yet (by a client or their hook's timeout). */
size_t sim_launch_hooks_pending(const struct sim *s);
/* The scenario has asg-launch events: its group has a launch hook. */
bool sim_has_launch_hook(const struct sim *s);
int sim_launch_hook(const struct sim *s, size_t i, const char **ret_instance_id, double *ret_at);
/* CompleteLifecycleAction of a hooked launch: its result and time recorded (GET /sim/v1/result,
 * "launches"); result NULL: RecordLifecycleActionHeartbeat, the action kept another HeartbeatTimeout
 * (autoscaling.heartbeat_timeout_seconds; without one in time it ends with the hook's default result,
 * ABANDON). -ENOENT when the instance has no launch action pending (none, or completed already). */
int sim_launch_hook_complete(struct sim *s, const char *instance_id, const char *result);
/* An instance launched under the hook: its Auto Scaling lifecycle state ("Pending:Wait" until completed,
 * "InService" after CONTINUE, "Terminating" after ABANDON); NULL for any other instance. */
const char *sim_launch_hook_state(const struct sim *s, const char *instance_id);

/* ---- accounting and result (docs/contracts.md §4) ---- */
void sim_count_request(struct sim *s); /* every API request served */
cJSON *sim_result(struct sim *s);      /* the simulation result object */
/* Alerts the engine raised, recorded into the result (kind, node, at = sim_now(), and the post-mortem list
 * of an alert that carries one, copied; NULL none). */
void sim_record_alert(struct sim *s, const char *kind, const char *node, const char *message,
                      const cJSON *postmortem);
/* A write a client asked of a surface (surface "kubernetes", "sqs", "ec2"; what "PATCH /api/v1/nodes/n" or
 * the AWS action), whether it succeeded or not: GET /sim/v1/writes lists them, so that a client meant to
 * write nothing (--dry-run) can be shown to have written nothing. */
void sim_record_write(struct sim *s, const char *surface, const char *what);
cJSON *sim_writes(struct sim *s); /* {"writes": [{"at", "surface", "what"}, ...]} */

/* Scenario facts the other surfaces need. */
const char *sim_scenario_name(const struct sim *s);
const char *sim_mode(const struct sim *s);
double sim_budget_seconds(const struct sim *s);
/* The group's termination hook's HeartbeatTimeout (autoscaling.heartbeat_timeout_seconds, default 3600). */
int sim_hook_heartbeat_timeout(const struct sim *s);
/* The scenario's Auto Scaling group, "spotdrain-SCENARIO" (malloc'd). */
int sim_asg_group_name(const struct sim *s, char **ret);
/* Whether IMDS serves tags/instance (autoscaling.instance_metadata_tags, default true). */
bool sim_instance_metadata_tags(const struct sim *s);
size_t sim_node_count(const struct sim *s);
const char *sim_node_name(const struct sim *s, size_t i);
const char *sim_node_instance_id(const struct sim *s, size_t i);
const char *sim_node_zone(const struct sim *s, size_t i);
const char *sim_node_instance_type(const struct sim *s, size_t i);
const char *sim_node_capacity_type(const struct sim *s, size_t i); /* "spot" | "on-demand" */
const char *sim_node_ip(const struct sim *s, size_t i);            /* its InternalIP (IMDS local-ipv4) */
/* The node's interruption notice: kind ("spot-interruption", "scheduled-change", "asg-lifecycle-terminate"),
 * notice and deadline in scenario seconds. -ENOENT when none has happened yet. */
int sim_node_notice(const struct sim *s, size_t i, const char **ret_kind, double *ret_notice_at,
                    double *ret_deadline_at);
/* When the node got its rebalance recommendation, or a negative number. */
double sim_node_rebalance_at(const struct sim *s, size_t i);
/* The node was terminated (its object is gone). */
bool sim_node_gone(const struct sim *s, size_t i);
/* The node's scheduled maintenance: its IMDS Code, and whether it completed (a reboot that is back);
 * -ENOENT when it has none. */
int sim_node_maintenance(const struct sim *s, size_t i, const char **ret_code, bool *ret_completed);
/* A maintenance Code after which the instance comes back (system-reboot, instance-reboot). */
bool sim_maintenance_is_reboot(const char *code);

/* The scenario's faults (docs/contracts.md §3): share of API calls to answer 500, and added latency. */
double sim_api_error_rate(const struct sim *s);
int64_t sim_api_latency_ms(const struct sim *s);
/* A deterministic random number from the scenario's seed (for faults). */
uint64_t sim_random(struct sim *s);

/* Kind names: "pods", "nodes", ... (the REST resource), and back. */
const char *sim_kind_resource(enum sim_kind k);
int sim_kind_from_resource(const char *resource);
