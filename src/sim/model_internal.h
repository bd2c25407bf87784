/* The simulator model's private state, shared by scenario.c, model.c and render.c only. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "sim/model.h"
#include "spotdrain/pdb.h"

/* ---- the parsed scenario (docs/contracts.md §3) ---- */
enum sim_wl_kind {
        SIM_WL_DEPLOYMENT,
        SIM_WL_STATEFULSET,
        SIM_WL_DAEMONSET,
        SIM_WL_JOB,
        SIM_WL_POD,
};

struct sim_sc_node {
        char *name, *instance_id, *zone, *capacity_type, *instance_type;
        char *cpu, *memory; /* the quantities as written, for rendering */
        int64_t cpu_millis, memory_bytes, pods;
};

struct sim_sc_placement {
        size_t node; /* index into nodes */
        int count;
};

struct sim_sc_workload {
        char *name, *ns;
        enum sim_wl_kind kind;
        int replicas;
        struct sim_sc_placement *placement;
        size_t n_placement;
        char *cpu, *memory; /* NULL: no request */
        int64_t cpu_millis, memory_bytes;
        int64_t grace;
        double shutdown, startup;
        char *priority_class;
        bool has_priority;
        int32_t priority;
        cJSON *annotations; /* object of strings */
        bool emptydir;
        bool has_pdb;
        struct pdb_spec pdb;
        bool pdb_always_allow;
        /* Deployments: the RollingUpdate strategy (default 25% / 25%, as the API server defaults it) */
        struct intorstr max_surge, max_unavailable;
        /* Deployments: a HorizontalPodAutoscaler targets it (autoscaling/v2, served, never acting) */
        bool has_hpa;
        int hpa_min, hpa_max;
        /* its pods mount a volume (a VolumeAttachment on their node), detached this long after they are
         * gone; < 0: no volume */
        double volume_detach;
        bool has_service; /* a LoadBalancer Service selects its pods */
        /* target_group: the Service's pods are in an ELBv2 target group (the ELBv2 surface, elbv2.c) bound
         * by a TargetGroupBinding; implies has_service */
        bool has_tg;
        bool tg_ip;         /* targetType ip (the pods' IPs), else instance (the nodes' instances) */
        double tg_delay;    /* deregistration_delay.timeout_seconds */
        double tg_reaction; /* the controller deregisters a labelled node's instance this long after */
};

/* A VolumeAttachment (volumes.c): attached from its pod's binding, deleted detach_at after the pod left. */
struct sim_va {
        char *name, *uid, *node, *pv;
        double created, detach_at; /* detach_at < 0: attached */
        uint64_t rv;
};

struct sim_sc_event {
        double at;
        char *type;
        size_t node;     /* node events */
        size_t workload; /* rollout, scale: index into workloads */
        int replicas;    /* scale */
        /* scheduled-change: the maintenance's IMDS Code (instance-retirement unless given); a reboot's
         * (system-reboot, instance-reboot) node goes down at the deadline and is Ready again after
         * reboot_seconds, instead of going away. */
        char *code;
        double reboot_seconds;
        /* asg-launch: the new node's name and instance, when it joins and when it turns Ready (seconds
         * after the event; ready_after < 0: never) */
        char *launch_name, *launch_instance;
        double join_after, ready_after;
};

struct sim_sc_itype {
        char *name;
        char *cpu, *memory; /* as written */
        int64_t cpu_millis, memory_bytes;
};

struct sim_scenario {
        char *name, *mode;
        double budget;
        uint64_t seed;
        struct sim_sc_node *nodes;
        size_t n_nodes;
        struct sim_sc_workload *workloads;
        size_t n_workloads;
        struct sim_sc_event *events; /* sorted by time, stable */
        size_t n_events;
        double node_launch_seconds;
        struct sim_sc_itype *itypes;
        size_t n_itypes;
        double api_error_rate;
        int64_t api_latency_ms;
        int hook_heartbeat_timeout; /* autoscaling.heartbeat_timeout_seconds */
        /* pod_removal_seconds: how long a pod whose containers stopped stays readable (Terminating, with
         * terminated container statuses and its logs) before its kubelet's final delete removes it. */
        double pod_removal;
        bool no_instance_metadata_tags; /* autoscaling.instance_metadata_tags: false */
};

int sim_scenario_parse(const struct ynode *root, const char *file, struct sim_scenario **ret,
                       char **ret_error);
struct sim_scenario *sim_scenario_free(struct sim_scenario *sc);
void sim_sc_node_clear(struct sim_sc_node *n);

/* ---- the world ---- */
struct sim_ns {
        char *name, *uid;
        uint64_t rv;
};

/* Intrusive lists of pods, kept in creation order (the order of sim.pods), so that walking one visits its
 * pods in the same order as a scan of every pod would. */
enum sim_pod_link {
        SIM_LINK_NODE,    /* the pods bound to one node */
        SIM_LINK_WL,      /* the pods of one workload */
        SIM_LINK_TIMED,   /* pods with a due time: terminating, or bound and not yet Ready */
        SIM_LINK_PENDING, /* unscheduled pods that are not terminating */
        _SIM_LINK_MAX,
};

struct sim_pod;

struct sim_plist {
        struct sim_pod *head, *tail;
};

struct sim_node {
        struct sim_plist pods; /* bound to it */
        /* Signalled when a change of a pod bound to it is logged (sim_emit): the watches of one node's pods
         * wait on it, not on the change of every pod of the cluster. */
        pthread_cond_t pods_cond;
        struct sim_node *hnext;                /* in sim.node_hash */
        long index;                            /* in sim.nodes (sim_node_index_add) */
        int64_t used_cpu, used_mem, used_pods; /* requests of the pods bound to it, terminating included */
        char *name, *uid, *instance_id, *zone, *instance_type, *capacity_type, *ip;
        const struct sim_sc_node *sc;
        struct sim_sc_node *owned_sc;         /* a launched node's own description (sc points to it) */
        cJSON *labels, *annotations, *taints; /* taints: array, NULL when none */
        bool unschedulable, removed;
        bool not_ready; /* a launched node that has not turned Ready yet (asg-launch) */
        double
            ready_since; /* when it turned Ready (the Ready condition's lastTransitionTime); 0: at birth */
        uint64_t rv;
        /* interruption accounting; times < 0 mean never */
        bool noticed; /* any notice (rebalance or interruption): evictable pods are tallied from here on */
        bool interrupted;
        const char *notice_kind; /* the scenario event's type */
        double rebalance_at, notice_at, deadline_at, cordoned_at, drained_at;
        int pods_evictable, pods_graceful, pods_forced, pods_killed;
        /* a scheduled maintenance's Code; a reboot: down from rebooted_at until back_at, then Ready again
         * (uncordoned_at: the first uncordon after it is back); times < 0 mean never */
        const char *maint_code;
        bool reboot, down;
        double reboot_seconds, rebooted_at, back_at, uncordoned_at;
        /* when it got node.kubernetes.io/exclude-from-external-load-balancers (< 0: it has not): the AWS
         * Load Balancer Controller deregisters its instance from instance target groups then */
        double lb_excluded_at;
};

/* A Deployment's ReplicaSet of an earlier template, kept while pods of it remain. */
struct sim_old_rs {
        char *hash, *name, *uid;
};

struct sim_workload {
        struct sim_sc_workload *sc;
        struct sim_plist pods;
        cJSON *tmpl_labels; /* the labels its pods share (a StatefulSet's also name the pod) */
        bool dirty;         /* a pod of it changed since the last settle */
        char *uid, *rs_uid, *hash, *rs_name; /* a Deployment's: those of its current ReplicaSet */
        uint64_t rv, rs_rv;
        /* Deployments and StatefulSets: spec.replicas (the scenario's until a client changes it) */
        int replicas;
        /* Deployments: what clients can change (deployments.c): metadata.annotations beyond the revision,
         * the template's annotations, metadata.generation, and the ReplicaSets of earlier templates (a
         * pod's rev indexes old_rs; rev == n_old_rs is the current one). */
        cJSON *annotations, *tmpl_annotations;
        int64_t generation;
        char *hpa_uid; /* its HorizontalPodAutoscaler's (sc->has_hpa) */
        char *svc_uid; /* its Service's (sc->has_service) */
        char *tgb_uid; /* its TargetGroupBinding's (sc->has_tg) */
        struct sim_old_rs *old_rs;
        size_t n_old_rs;
        int next_ordinal_or_index;
        /* A rollout under way (ordinary.c): how many of its pods marked rollout are still to replace. */
        int rollout_left;
        /* last rendered status, to emit MODIFIED only on change */
        int st_replicas, st_ready;
        int st_updated, st_updated_ready; /* of them, a Deployment's pods of its current template */
};

struct sim_disrupted {
        char *pod;
        double at;
};

struct sim_pdb {
        char *name, *ns, *uid;
        cJSON *match_labels; /* object */
        struct pdb_spec spec;
        bool always_allow;
        uint64_t rv;
        double created;
        int current, desired, expected, allowed;
        bool computed;
        double cond_since;
        struct sim_disrupted *disrupted;
        size_t n_disrupted;
};

enum sim_phase {
        SIM_PENDING,
        SIM_RUNNING,
        SIM_SUCCEEDED,
        SIM_FAILED,
};

struct sim_pod_links {
        struct sim_pod *prev, *next;
        bool linked;
};

struct sim_pod {
        uint64_t seq;          /* creation order: sim.pods is sorted by it */
        struct sim_pod *hnext; /* chain of the namespace/name hash */
        struct sim_pod_links links[_SIM_LINK_MAX];
        char *name, *uid, *ip;
        struct sim_workload *wl;
        size_t rev; /* a Deployment's pod: its ReplicaSet (sim_workload.old_rs) */
        cJSON *labels;
        long node; /* index into nodes, -1 unscheduled */
        int ordinal;
        enum sim_phase phase;
        double created, scheduled_at, ready_at; /* ready_at: when Ready turns (or turned) true */
        bool ready;
        bool deleting;
        double deletion_ts, exit_at;
        bool sigtermed; /* a delete reached its running container: SIGTERM at sigterm_at */
        double sigterm_at;
        int64_t grace;
        /* Its containers stopped at exit_at (exit code 0, or 137 killed at the end of its grace): it stays
         * readable until remove_at (scenario pod_removal_seconds). */
        bool exited;
        int exit_code;
        double remove_at;
        bool node_gone; /* removed with its node (its terminate or reboot): what was running was killed */
        bool tallied, forced;
        bool rollout; /* to be replaced by its workload's rollout under way (ordinary.c) */
        uint64_t rv;
};

/* A stored object kept in its wire form (events, leases). */
struct sim_obj {
        enum sim_kind kind;
        char *ns, *name;
        cJSON *obj;
};

struct sim_logentry {
        uint64_t rv;
        enum sim_kind kind;
        const char *type;
        char *ns;
        cJSON *obj;
        long node; /* a pod's: the index of the node it was bound to then, -1 none */
};

/* An instance asked of the simulated EC2: it joins the cluster as a Ready node node_launch_seconds later. */
struct sim_launch {
        char *instance_id, *zone, *capacity_type;
        const struct sim_sc_itype *itype; /* NULL for an asg-launch: the first scenario node's size */
        double requested_at,
            ready_at; /* ready_at: when it joins (a hooked one NotReady until node_ready_at) */
        bool joined;
        /* asg-launch: launched under the group's launch hook (spotdrain-launch): its node's name, when it
         * turns Ready (< 0 never), and the lifecycle action's completion (result "" while pending) */
        bool hooked, node_ready;
        bool timed_out; /* nobody completed it: the hook's HeartbeatTimeout ran out, its default result */
        char *name;
        double node_ready_at, completed_at;
        double last_beat; /* the launch, or the last heartbeat: the action lives HeartbeatTimeout from it */
        char result[16];
};

struct sim_alert {
        char *kind, *node, *message;
        double at;
        cJSON *postmortem; /* NULL: none */
};

struct sim_write {
        char *surface, *what;
        double at;
};

#define SIM_LOG_MAX 20000

struct sim {
        pthread_mutex_t mutex;
        pthread_cond_t cond;
        struct sim_scenario *sc;
        char *mode;
        double time_scale;
        uint64_t seed, rng, fault_rng;
        bool manual_clock, started;
        bool building; /* sim_new: nothing enters the change log until the world is complete */
        double manual_now;
        uint64_t start_mono, epoch_usec; /* wall clock of scenario t=0 */
        double t;                        /* the time actions are stamped with */
        uint64_t rv;

        struct sim_ns *nss;
        size_t n_nss;
        struct sim_node **nodes;
        size_t n_nodes;
        /* The indices of the nodes given a notice that ends them (sim_node_due() may be >= 0), ascending:
         * what falls due is looked for among them, not among every node of a large cluster */
        size_t *due_nodes;
        size_t n_due_nodes;
        /* The nodes by name (sim_find_node); a power of two of buckets, at least twice the nodes */
        struct sim_node **node_hash;
        size_t node_hash_size;
        struct sim_workload *wls;
        size_t n_wls;
        struct sim_pdb **pdbs;
        size_t n_pdbs;
        struct sim_pod **pods; /* in creation order */
        size_t n_pods, cap_pods;
        uint64_t pod_seq;
        struct sim_pod **pod_hash; /* by namespace/name; a power of two of buckets */
        size_t pod_hash_size;
        struct sim_plist timed, pending;
        /* What sim_settle has to look at again: any change at all, nodes added (DaemonSets). */
        bool dirty, nodes_changed;
        size_t log_skip; /* sim_new: changes that would leave the log at once are not rendered */
        struct sim_obj **objs;
        size_t n_objs;
        size_t next_event;
        uint64_t pod_ip_counter;

        struct sim_logentry *log; /* ring */
        size_t log_start, log_len;
        uint64_t log_floor; /* changes with rv <= log_floor are forgotten */

        int pdb_breaches;
        uint64_t api_requests;
        struct sim_alert *alerts;
        size_t n_alerts;
        struct sim_write *writes;
        size_t n_writes;
        struct sim_launch *launches;
        size_t n_launches;
        struct sim_va **vas;
        size_t n_vas;
};

static inline void cJSON_Deletep(cJSON **p)
{
        cJSON_Delete(*p);
}

/* volumes.c: a pod of a workload with a volume bound to its node gets its VolumeAttachment; one gone
 * starts its detach; due detaches are deleted (sim_va_run), the earliest due in sim_va_next (-1: none). */
int sim_va_attach(struct sim *s, const struct sim_pod *p);
void sim_va_detach(struct sim *s, const struct sim_pod *p);
void sim_va_run(struct sim *s, double t);
double sim_va_next(const struct sim *s);
struct sim_va *sim_va_find(struct sim *s, const char *name);
void sim_va_free_all(struct sim *s);

/* render.c */
cJSON *sim_render_va(struct sim *s, const struct sim_va *va);
cJSON *sim_render_service(struct sim *s, const struct sim_workload *w);
cJSON *sim_render_tgb(struct sim *s, const struct sim_workload *w);

/* elbv2.c: the target group of a workload with target_group, as ELBv2 and its TargetGroupBinding name it:
 * "k8s-NAMESPACE-NAME" (at most 32 characters) and
 * arn:aws:elasticloadbalancing:REGION:123456789012:targetgroup/TGNAME/HEX16. */
char *sim_tg_name(const struct sim_workload *w);
char *sim_tg_arn(const struct sim *s, const struct sim_workload *w);
/* The region of the scenario's nodes: the first node's zone without its letter (us-east-1 without any). */
char *sim_region(const struct sim *s);
cJSON *sim_render_node(struct sim *s, const struct sim_node *n);
cJSON *sim_render_pod(struct sim *s, const struct sim_pod *p);
cJSON *sim_render_pdb(struct sim *s, const struct sim_pdb *d);
cJSON *sim_render_ns(struct sim *s, const struct sim_ns *n);
/* kind: SIM_DEPLOYMENT, SIM_REPLICASET, SIM_STATEFULSET or SIM_DAEMONSET */
cJSON *sim_render_workload(struct sim *s, const struct sim_workload *w, enum sim_kind kind);
cJSON *sim_render_status(int code, const char *status, const char *reason, const char *message);
char *sim_timestamp(const struct sim *s, double t, char buf[static 32]);

/* deployments.c: the Deployment controller (scale, rolling update), HorizontalPodAutoscalers;
 * deployment_writes.c: the scale subresource, PATCH/PUT of Deployments. */
void sim_deployment_reconcile(struct sim *s, struct sim_workload *w);
/* The ReplicaSet the pod belongs to: its hash, name and uid. */
void sim_pod_rs(const struct sim_pod *p, const char **ret_hash, const char **ret_name, const char **ret_uid);
struct sim_workload *sim_find_deployment(struct sim *s, const char *ns, const char *name);
cJSON *sim_render_hpa(struct sim *s, const struct sim_workload *w);
cJSON *sim_render_scale(struct sim *s, const struct sim_workload *w);
void sim_workload_clear_deploy(struct sim_workload *w);
/* PATCH (merge, strategic merge or JSON patch) and PUT of a Deployment: 200 with it, 404, 409 on a stale
 * resourceVersion, 422 for what the simulator does not change. */
int sim_deployment_patch(struct sim *s, const char *ns, const char *name, const char *content_type,
                         const cJSON *patch, struct sim_answer *ret);
int sim_deployment_replace(struct sim *s, const char *ns, const char *name, const cJSON *obj,
                           struct sim_answer *ret);

/* model.c, for model_api.c and deployments.c */
int sim_pod_new(struct sim *s, struct sim_workload *w, int ordinal, struct sim_pod **ret);
const char *sim_pod_ns(const struct sim_pod *p);
bool sim_pod_evictable(const struct sim_pod *p);
int sim_emit(struct sim *s, enum sim_kind kind, const char *type, void *o);
void sim_settle(struct sim *s);
void sim_begin(struct sim *s); /* runs what is due and stamps the operation with sim_now() */
struct sim_pod *sim_find_pod(struct sim *s, const char *ns, const char *name);
struct sim_node *sim_find_node(struct sim *s, const char *name);
/* Indexes s->nodes[s->n_nodes - 1], n, by name (sim_find_node). */
int sim_node_index_add(struct sim *s, struct sim_node *n);
/* The cluster's ordinary life (ordinary.c): a rollout or scale event, and a rollout's next step once the
 * pod it replaced last has its successor Ready (from every settle). */
void sim_ordinary_event(struct sim *s, const struct sim_sc_event *e);
void sim_rollouts_step(struct sim *s);
int sim_pod_delete(struct sim *s, struct sim_pod *p, int64_t grace);
bool sim_pdb_matches(const struct sim_pdb *d, const struct sim_pod *p);
bool sim_pdb_is_disrupted(const struct sim_pdb *d, const char *pod);
char *sim_new_uid(struct sim *s);
void sim_rand_suffix(struct sim *s, char out[static 6]);
/* The next number of the seeded generator, and n characters of the generated-name alphabet (NUL-terminated:
 * out holds n + 1) (random.c). */
uint64_t sim_rng_next(struct sim *s);
uint64_t sim_splitmix64(uint64_t *state); /* one step of a generator of its own (faults) */
void sim_rand_chars(struct sim *s, char *out, size_t n);
void sim_node_cordon_changed(struct sim *s, struct sim_node *n);
void sim_node_uncordoned(struct sim *s, struct sim_node *n);
int sim_pdb_add(struct sim *s, struct sim_pdb *d);
struct sim_pdb *sim_pdb_free(struct sim_pdb *d);
/* The model's files for each other: model.c the clock and the timed actions, model_pods.c the pods,
 * model_nodes.c the nodes and the scenario events on them, model_settle.c the controllers, scheduler and
 * status, model_world.c the starting world, model_launch.c the launched instances. */
#define DISRUPTED_POD_TTL 120.0 /* the disruption controller drops a disruptedPods entry after 2 minutes */
void sim_pod_changed(struct sim *s, struct sim_pod *p);
void sim_pod_free(struct sim_pod *p);
int sim_add_label(cJSON *labels, const char *k, const char *v);
int sim_pod_labels(struct sim_pod *p);
void sim_pod_remove(struct sim *s, struct sim_pod *p);
void sim_pod_tally(struct sim *s, struct sim_pod *p);
void sim_pod_bind(struct sim *s, struct sim_pod *p, size_t node, bool emit);
void sim_pod_exit(struct sim *s, struct sim_pod *p);
void sim_node_free(struct sim_node *n);
int sim_node_new(struct sim *s, const struct sim_sc_node *sc, struct sim_node **ret);
bool sim_taints_block(const struct sim_node *n, const struct sim_pod *p);
void sim_node_terminate(struct sim *s, size_t ni);
void sim_node_reboot(struct sim *s, struct sim_node *n);
void sim_node_back(struct sim *s, struct sim_node *n);
double sim_node_due(const struct sim_node *n);
struct sim_node *sim_node_by_instance(struct sim *s, const char *instance_id);
void sim_apply_event(struct sim *s, const struct sim_sc_event *e);
int sim_launch_join(struct sim *s, const struct sim_launch *l);
void sim_reconcile_controllers(struct sim *s);
int sim_schedule_pending(struct sim *s, bool initial);
void sim_pdb_recompute(struct sim *s, struct sim_pdb *d, bool emit);
void sim_workload_status(struct sim *s, struct sim_workload *w, bool emit);

/* The API operations' files for each other: model_api.c list/get and what the others use, model_evict.c
 * eviction and delete, model_patch.c node patch/replace, model_store.c the stored objects. */
int sim_answer_obj(struct sim_answer *ret, int code, cJSON *obj); /* -ENOMEM when obj is NULL */
/* A PUT whose body has a metadata.name other than the name on the URL: kube-apiserver refuses to rename. */
bool sim_md_renames(const cJSON *md, const char *name);
int sim_rename_refused(struct sim_answer *ret);
const char *sim_resource_of(enum sim_kind kind, const cJSON *obj);
struct sim_obj *sim_find_obj(struct sim *s, enum sim_kind kind, const char *ns, const char *name);
struct sim_pdb *sim_find_pdb(struct sim *s, const char *ns, const char *name);
int sim_obj_set_string(cJSON *o, const char *k, const char *v);
int sim_node_replace(struct sim *s, const char *name, const cJSON *obj, struct sim_answer *ret);

/* model_api.c: the Status answers kube-apiserver gives (404 NotFound, 409 Conflict on a stale
 * resourceVersion, 422 Invalid), and whether a resourceVersion precondition is stale. */
int sim_answer_not_found(struct sim_answer *ret, const char *resource, const char *name);
int sim_answer_conflict(struct sim_answer *ret, const char *resource, const char *name);
int sim_answer_invalid(struct sim_answer *ret, const char *kind, const char *name, const char *why);
bool sim_rv_stale(const char *rv, uint64_t current);
/* A merge patch of labels or annotations into dst: a null value deletes its key, a null map clears dst.
 * -EINVAL (*ret_error says why) when patch is not a map of strings. */
int sim_merge_string_map(cJSON *dst, const cJSON *patch, const char **ret_error);
/* Answers a metav1 Status (details name/kind when name is set). */
int sim_answer_status(struct sim_answer *ret, int code, const char *reason, const char *message,
                      const char *name, const char *kind);
