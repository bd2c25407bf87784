/* Shared by the files of the executor (executor.c and the parts carved out of it): a drain's state, its
 * pods, and the calls between its parts. Not part of the public interface. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "drain/drain_internal.h"
#include "spotdrain/alert.h"
#include "spotdrain/config.h"
#include "spotdrain/engine.h"
#include "spotdrain/keys.h"
#include "spotdrain/kube.h"
#include "spotdrain/metrics.h"
#include "spotdrain/node.h"
#include "spotdrain/surge.h"

enum xpod_state {
        XPOD_IDLE,     /* nothing asked yet */
        XPOD_EVICTING, /* eviction under way */
        XPOD_BLOCKED,  /* 429 (or a failure): retried when a slot frees, or at retry_at */
        XPOD_MULTI,    /* 500: several PDBs; only the force path can move it */
        XPOD_EVICTED,  /* eviction accepted; waiting for it to be gone */
        XPOD_DELETING, /* forced delete under way */
        XPOD_FORCED,   /* deleted around its PDB; waiting for it to be gone */
        XPOD_GONE,
};

struct xpod {
        struct drain_exec *x;
        char *namespace, *name, *uid;
        char *key; /* namespace/name, for the ledger */
        enum xpod_state state;
        struct kube_call *call;
        uint64_t retry_at; /* engine clock: the earliest next eviction of a pod outside PDB accounting */
        uint64_t force_at; /* engine clock: the earliest next forced delete after one failed */
        char *grant_pdb;   /* the PDB whose ledger slot the eviction under way holds, NULL none */
        bool warned;
        /* not part of the drain (emptyDir data kept, or a namespace or selector skipped, by configuration)
         */
        bool leave;
        /* Its last state once it is gone after a delete: until its replacement should be Ready (ghost_until)
         * the plan still sees it as deleting, so that the slot it will give back is foreseen. */
        struct drain_pod_memo *ghost; /* as parsed for the plans: a fifth of the object */
        uint64_t ghost_until, gone_at;
        /* Engine clock: when our eviction or forced delete of it was accepted (0: not ours), the start of
         * the graceful stop observed when it is gone; forced_grace the grace that delete gave it. */
        uint64_t stop_at;
        int64_t forced_grace;
        struct drain_postmortem *pm; /* its post-mortem, for a pod that leaves no trace (postmortem.c) */
        bool pm_forced;              /* pm is its forced delete's */
        /* Taken again: shortly before the node's end, still on it (pod-killed); once its containers
         * stopped, while the API still serves it (postmortem). */
        struct drain_postmortem *pm_killed, *pm_after;
        /* Stopped by us, and gone only once its deletionTimestamp had come: its grace ran out, the kubelet
         * killed it. Or gone with its node (gone_with_node, kube_pod_killed_with_node()) while something of
         * it still ran. */
        bool killed, gone_with_node;
        struct drain_pod_memo *memo; /* as last parsed for the plans */
};

struct drain_exec {
        struct kube_client *c;
        struct loop *loop;
        struct alert_bus *bus;
        struct metrics *metrics;
        drain_exec_done_fn done;
        void *userdata;

        char *node, *kind, *taint_key, *self_namespace, *self_name, *instance_id, *event_id;
        char **critical;
        size_t n_critical;
        uint64_t deadline, margin, default_startup, floor;
        double expected_shutdown_fraction;
        enum drain_policy policy;
        bool evict_daemonsets, leave_emptydir, cordon_only, no_execute, out_of_service;
        bool deadline_chosen; /* o->deadline_chosen: pods left at it are not killed by it */
        bool no_deadline;     /* o->no_deadline */
        char **skip_namespaces;
        struct kube_selector skip_selector; /* present: pods it matches are left */
        unsigned log_tail_lines;
        char *postmortem_dir;
        struct drain_surge *surge;    /* the Deployments it surges (surge.h) */
        int wait_outcome, wait_error; /* finish() waiting for their restores: its outcome + 1, error */

        struct kube_informer *pods_inf;
        unsigned long synced_generation; /* of pods_inf when the pods were last brought in line */
        bool pods_synced;
        /* PDBs and their slots, shared with the other executors of the process; own_ledger when private. */
        struct drain_ledger *ledger, *own_ledger;
        /* The drains of other processes ahead of this one, followed in own_ledger (drain_peers_new());
         * NULL: none followed. Freed when the drain leaves its ledger. */
        struct drain_peers *peers;
        bool joined;
        size_t judged_pods;        /* pods in the plan (all nodes) when infeasibility was last judged */
        uint64_t rejudge_at;       /* a re-judgement put off until then (drain_ledger_rejudge_at); 0: none */
        unsigned judged_shutdowns; /* drain_shutdowns_generation() then */
        bool judge_on_surge;       /* the first judgement waits for the Deployments surge still reads */
        struct timer *surge_verdict; /* ends that wait at its bound, should nothing else wake the drain */
        bool judge_on_estimates;     /* ... for the kept estimates being read (o->estimates) */
        struct drain_estimates *estimates;
        struct timer *estimates_wait; /* the bound of that wait */
        bool judge_on_startups;       /* ... for the lists of the pods' siblings (their startup times) */
        struct timer *startups_wait;  /* the bound of that wait */
        struct kube_call *cordon_call, *taint_call, *annotate_call;
        bool marks_started; /* the taint, label and record sent (marks_start()) */
        unsigned marks_conflicts;
        /* A scheduled change's node is read before its cordon (node_call): whether it was cordoned
         * already, by someone else, goes into the drain record, so that a reboot's return undoes only
         * spotdrain's own cordon. */
        struct kube_call *node_call;
        bool cordoned_before;
        /* The first cordon was answered (done or refused): evictions wait for it, as kubectl drain's do, so
         * that no replacement is scheduled back onto the node by a scheduler that has not seen the cordon
         * yet (the cordon and the first evictions go out on separate connections). */
        bool cordon_answered;
        /* The exclude-from-external-load-balancers label (exclude_lb): evictions wait for its answer as
         * for the cordon's, so that no pod goes while the node still gets new connections. */
        bool exclude_lb, lb_answered;
        /* drain.lb_deregistration_seconds: pods behind a Service (services, the cluster's) are held until
         * lb_hold, the label's answer plus lb_dereg. */
        uint64_t lb_dereg, lb_hold;
        cJSON *services;
        struct kube_call *lb_call, *services_call;
        struct timer *lb_retry;
        struct backoff lb_backoff;
        /* The target groups of the node's pods (o->elbv2): pods behind an instance target group wait for
         * the instance to be out of healthy there; lb_said: per group, its delay was judged against the
         * time left (lb-deregistration-too-slow). */
        struct drain_lb_targets *lbt;
        bool *lb_said;

        struct startup_call *startup_calls;
        size_t n_startup_calls, startups_pending;
        bool startups_started;

        struct xpod **pods;
        size_t n_pods;

        /* The ledger's joint plan of every node draining beside this one (a reference); plan and inputs
         * are its. This node's pods are slice.n_pods (n_own) from slice.first_pod on. */
        struct drain_joint *joint;
        const struct drain_plan *plan;
        struct drain_inputs *inputs;
        struct drain_ledger_slice slice;
        struct xpod **plan_pods; /* own pod index → its xpod, for the n_own */
        size_t n_own;
        struct xpod **next_map; /* plan_pods of the plan being made */

        /* act() of executor.c, which its parts (pods, plan, evictions) reach through here: they are below
         * the act loop and call none of its functions. */
        void (*act)(struct drain_exec *x);
        struct timer *kick, *wake, *cordon_retry;
        uint64_t watch_resumed_at; /* watch_check() resumed the pods' watch then */
        /* ... with the pods' informer at that generation; the silence it waits before the next resume when
         * none changed them since (0: the idle limit) */
        unsigned long watch_resume_gen;
        uint64_t watch_resume_every;
        struct timer *kill_timer; /* KILL_CAPTURE_LEAD_USEC before the deadline; outlives finish() */
        struct backoff cordon_backoff;
        uint64_t wake_at;
        bool finished;
        struct drain_exec_result result;
        char *message;
};

/* One list of sibling pods under way; the array is allocated once, so its elements can be userdata. */
struct startup_call {
        struct drain_exec *x;
        struct kube_call *call;
        char *owner_key;
};

/* executor_pods.c: the plan's own share, the tracked pods. */
const struct drain_plan_pod *own_plan_pod(const struct drain_exec *x, size_t i);
const struct drain_pod_in *own_pod_in(const struct drain_exec *x, const struct drain_input *in, size_t i);
const struct drain_plan_node *own_node(const struct drain_exec *x);
uint64_t exec_retry_delay(const struct drain_exec *x);
struct xpod *xpod_free(struct xpod *p);
struct xpod *xpod_find(const struct drain_exec *x, const char *ns, const char *name, const char *uid);
void xpod_answer(struct xpod *p, enum drain_ledger_answer a);
void xpod_cancel(struct xpod *p);
void xpod_gone(struct xpod *p);
int exec_sync_pods(struct drain_exec *x);

#define USEC_PER_SEC UINT64_C(1000000)
#define MIN(a, b)    ((a) < (b) ? (a) : (b))
#define MAX(a, b)    ((a) > (b) ? (a) : (b))

/* How long before the deadline the pods still on the node are captured (pod-killed): late enough that a
 * pod about to stop has, and early enough that the instance's kubelet and the API still answer the few
 * reads (the instance's shutdown starts at the deadline; the reads take a round trip each). */
#define KILL_CAPTURE_LEAD_USEC (5 * UINT64_C(1000000))

/* executor_postmortem.c: the post-mortem captures. */
void exec_pod_stopped(struct drain_exec *x, struct xpod *p, enum alert_kind kind);
struct drain_postmortem *exec_capture(struct drain_exec *x, const struct xpod *p, enum alert_kind kind,
                                      const char *stage, const char *summary, const cJSON *last,
                                      const cJSON *seen);
void exec_postmortem_begin(struct drain_exec *x, struct xpod *p, const struct kube_pod *kp,
                           enum alert_kind kind, int64_t grace);
void exec_kill_capture_fire(void *userdata);
void exec_capture_after_stop(struct drain_exec *x, const cJSON *obj);

/* executor_kick.c: act soon. */
void exec_estimates_wait_fire(void *userdata);
void exec_startups_wait_fire(void *userdata);
void exec_estimates_read(void *userdata);
void exec_kick(struct drain_exec *x);

/* executor_evict.c: the evictions. */
int exec_issue(struct drain_exec *x, uint64_t now);
void exec_arm_wake(struct drain_exec *x, uint64_t at);

/* How long the first verdict may wait for surge's reads of the node's Deployments (the first plan waits
 * STARTUP_WAIT_USEC for them, which a loaded API server can outlast). */
#define SURGE_VERDICT_WAIT_USEC (5 * UINT64_C(1000000))

/* How long the first verdict may wait for the kept estimates the agent reads at the notice: one GET, but a
 * verdict without them would cry wolf for owners seen stopping fast before. */
#define ESTIMATES_VERDICT_WAIT_USEC (3 * UINT64_C(1000000))

/* How long the first verdict may wait for the lists of the pods' siblings (their startup times): the first
 * plan goes without them after STARTUP_WAIT_USEC, and an infeasible grade made on the default startup cries
 * wolf for pods that start fast whenever the API server answers slowly. */
#define STARTUPS_VERDICT_WAIT_USEC (3 * UINT64_C(1000000))
/* Some of the siblings' lists this drain's startup times wait for are still under way (its own, or another
 * drain's that it shares). */
static inline bool exec_startups_pending(const struct drain_exec *x)
{
        return x->startups_pending > 0 || drain_ledger_startup_awaited(x->ledger, x);
}
/* ... or answered, and the plan acted on not yet made with what they said (the ledger makes plans at most
 * so often: the drain is woken with the next). */
static inline bool exec_startups_unplanned(const struct drain_exec *x)
{
        return exec_startups_pending(x) || !drain_ledger_startups_planned(x->ledger, x->joint);
}

/* executor_plan.c: the plan and the verdict. */
int exec_add_inputs(void *userdata, struct drain_inputs *di, struct drain_ledger_slice *slice);
int exec_add_namespaces(void *userdata, const char ***ns, size_t *n);
void exec_planned(void *userdata, struct drain_joint *j, const struct drain_ledger_slice *slice);
int exec_replan(struct drain_exec *x, uint64_t now);
void exec_judge(struct drain_exec *x, uint64_t now, bool first);
void exec_judge_lb_delays(struct drain_exec *x);

/* executor_informers.c: the informers' callbacks. */
void exec_pods_changed(struct drain_exec *x);
void exec_surge_changed(void *userdata);
void exec_pods_added(void *userdata, const cJSON *obj);
void exec_pods_modified(void *userdata, const cJSON *old_obj, const cJSON *obj);
void exec_pods_deleted(void *userdata, const cJSON *obj);
void exec_informer_synced(void *userdata);
void exec_ledger_wake(void *userdata);
