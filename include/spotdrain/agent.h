/* agent: the DaemonSet front end. Polls this instance's IMDS for notices and acts on this node.
 *
 * Each tick (every poll interval, 1 s by default, engine clock) GETs the four notice paths at once:
 * spot/instance-action, events/recommendations/rebalance, events/maintenance/scheduled and
 * autoscaling/target-lifecycle-state. 404 means nothing. Every document goes through notice_parse() and
 * each notice is submitted to the one dispatcher (dispatch.h), told that this instance is this node: it
 * dedupes (the document's identity: event_id, instance and state), keeps one drain for the node and
 * applies the rules below through the actions. A notice that could not be acted on is tried again on the
 * next poll. When no path answers at all the next tick comes after a jittered backoff instead (at most
 * 5 s).
 *
 * What the dispatcher does with a notice (the same in every mode):
 *   spot-interruption, asg-lifecycle-terminate  drain by the notice's deadline (actions.drain)
 *   rebalance-recommendation  soft taint SPOTDRAIN_TAINT_REBALANCE (keys.h):PreferNoSchedule
 * (actions.soft_taint) and a replacement request (actions.replacement_request); both reverted (the taint
 * removed) when no interruption follows within rebalance_revert of the notice time scheduled-change (active)
 * drain maintenance_lead before the event starts, with its start as deadline scheduled-change (canceled)
 * undo: the pending drain is dropped, or the node made schedulable again when the drain already began
 * (actions.uncordon) A notice still in IMDS after a restart is seen again on the first poll and acted on
 * again: the actions must be idempotent (a drain of a node already draining carries on). The agent's own pod
 * (POD_NAMESPACE/POD_NAME) is passed with every drain so that it is never evicted.
 *
 * Identity: the node is agent_options.node_name, else $NODE_NAME, else IMDS local-hostname; the instance
 * ID comes from IMDS instance-id. With a Kubernetes client, a node whose spec.providerID names another
 * instance is warned about (the agent may be reading the wrong IMDS). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/dispatch.h"
#include "spotdrain/imds.h"
#include "spotdrain/metrics.h"
#include "spotdrain/notice.h"
#include "spotdrain/util.h"

/* The agent's configuration (node_name, agent.*). Its keys: agent_node_config_section, agent_config_section
 * (its settings.c). */
struct agent_settings {
        char *node_name;
        uint64_t asg_deadline_usec;
        uint64_t estimates_write_usec;    /* agent.estimates_write_interval_seconds */
        char *lifecycle_hook_name;        /* set: the agent completes its termination lifecycle action */
        char *asg_name;                   /* the group; NULL: IMDS tags/instance/aws:autoscaling:groupName */
        uint64_t heartbeat_interval_usec; /* lifecycle heartbeats; 0 = half of asg_deadline_usec */
};
struct config_section;
extern const struct config_section agent_node_config_section;
extern const struct config_section agent_config_section;

struct alert_bus;
struct drain_exec;
struct imds_client;
struct kube_client;
struct loop;
struct spotdrain_config;

#define AGENT_DEFAULT_POLL_USEC        (1000ULL * 1000ULL)
#define AGENT_DEFAULT_BACKOFF_MAX_USEC (5ULL * 1000ULL * 1000ULL)

struct agent_drain_request {
        const char *node;
        const struct notice *notice; /* kind, instance, notice time, action */
        uint64_t deadline_usec;     /* engine clock: the instance is gone (maintenance: the window starts) */
        const char *self_namespace; /* the agent's own pod, never evicted; NULL when unknown */
        const char *self_name;
        /* The IMDS the agent reads: the instance role's credentials sign the drain's ELBv2 calls
         * (drain.target_groups); NULL: the default address. */
        const char *imds_endpoint;
};

/* What the agent does to its node. Every function returns 0 once the action has started (or is already
 * under way), <0 when it could not start; the agent logs failures. A drain that could not start is asked
 * for again on the next poll (the notice was not taken in); the other actions are not retried. Any member
 * may be NULL (then that action is skipped). These are the dispatcher's effects (dispatch_ops) on the one
 * node. */
struct agent_actions {
        int (*drain)(void *userdata, const struct agent_drain_request *req);
        /* Adds (add) or removes the PreferNoSchedule rebalance taint. */
        int (*soft_taint)(void *userdata, const char *node, bool add);
        /* Replacement capacity ahead of an interruption; the provisioning core of a later issue. */
        int (*replacement_request)(void *userdata, const char *node, const struct notice *n);
        /* A canceled maintenance whose drain had begun: make the node schedulable again. */
        int (*uncordon)(void *userdata, const char *node);
        /* A notice whose kind's action is cordon (notices.KIND.action): unschedulable, nothing evicted. */
        int (*cordon)(void *userdata, const char *node);
        /* Every notice, once, as it is first seen (before the action). */
        void (*notice_seen)(void *userdata, const char *node, const struct notice *n);
};

struct agent;

struct agent_options {
        const char *node_name;       /* NULL: $NODE_NAME, else IMDS local-hostname */
        const char *self_namespace;  /* NULL: $POD_NAMESPACE */
        const char *self_name;       /* NULL: $POD_NAME */
        const char *region;          /* for the notices; NULL: IMDS placement/region */
        uint64_t poll_interval_usec; /* engine clock; 0 = 1 s */
        /* The dispatcher's options (dispatch_options_from_config()); zero: its defaults. The heartbeat
         * period is the agent's own (below). */
        struct dispatch_options dispatch;
        uint64_t backoff_max_usec; /* when IMDS does not answer; 0 = 5 s */
        /* Deadline of an Auto Scaling Terminated state, from when it is seen (the lifecycle hook's
         * heartbeat timeout); 0 = NOTICE_ASG_DEFAULT_DEADLINE_USEC (1 h). */
        uint64_t asg_deadline_usec;
        /* Set: the Auto Scaling termination (IMDS target-lifecycle-state Terminated) is the action of this
         * hook, completed with CONTINUE once the node's drain ended and heartbeated while it runs
         * (agent/hook.h), signed with the instance role's credentials from IMDS. NULL: left alone. */
        const char *lifecycle_hook_name;
        const char *asg_name;             /* its group; NULL: IMDS tags/instance/aws:autoscaling:groupName */
        uint64_t heartbeat_interval_usec; /* 0 = half of asg_deadline_usec (the hook's HeartbeatTimeout) */
        const char *asg_endpoint;         /* NULL: $AWS_ENDPOINT_URL_AUTO_SCALING, ... (asg.h) */
        /* After the first tick in which every path answered (200 or 404): the agent works. */
        void (*on_ready)(struct agent *a, void *userdata);
        /* After every tick (for metrics snapshots). */
        void (*on_tick)(struct agent *a, void *userdata);
        void *userdata; /* of on_ready and on_tick */
};

/* imds is borrowed; kube (may be NULL: no providerID check) is borrowed; actions is copied,
 * actions_userdata borrowed. Nothing happens before agent_start(). */
int agent_new(struct loop *l, struct imds_client *imds, struct kube_client *kube,
              const struct agent_options *o, const struct agent_actions *actions, void *actions_userdata,
              struct agent **ret);
/* Looks up the identity (retrying with backoff while IMDS does not answer), then polls. */
int agent_start(struct agent *a);
/* Stops polling and every timer; no action runs after this. NULL-safe; returns NULL. */
struct agent *agent_free(struct agent *a);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct agent *, agent_free);

/* The node's drain ended (drained: every pod left in time): its lifecycle action is completed now. The
 * caller of the drain actions reports it (agent_engine_on_done). */
void agent_drain_ended(struct agent *a, bool drained);

const char *agent_node_name(const struct agent *a);   /* NULL until known */
const char *agent_instance_id(const struct agent *a); /* NULL until known */
bool agent_ready(const struct agent *a);
/* Ready, and the start-up calls to the API server (the node, the surge sweep) have answered. */
bool agent_settled(const struct agent *a);

struct agent_stats {
        uint64_t ticks;         /* polls of the four paths */
        uint64_t tick_errors;   /* ticks in which no path answered */
        uint64_t path_errors;   /* single GETs that failed (not 404) */
        uint64_t parse_errors;  /* documents notice_parse refused */
        uint64_t notices;       /* notices delivered (after dedupe) */
        uint64_t duplicates;    /* notices seen again and dropped */
        uint64_t drains;        /* drain actions started */
        uint64_t action_errors; /* actions that could not start */
        uint64_t last_ok_usec;  /* engine clock of the latest tick with an answer; 0 = never */
        uint64_t notice_counts[_NOTICE_KIND_MAX];
};
void agent_stats(const struct agent *a, struct agent_stats *ret);

/* Actions on Kubernetes through kube.h, userdata = struct kube_client *: soft_taint and uncordon as
 * documented above (uncordon also removes SPOTDRAIN_TAINT_INTERRUPTION); drain cordons the node and adds
 * the NoSchedule taint SPOTDRAIN_TAINT_INTERRUPTION=KIND — the first step of a drain; the drain engine
 * (engine.h, drain_exec_start) replaces this member to evict the pods. replacement_request is a no-op. */
extern const struct agent_actions agent_kube_actions;

/* Actions through the drain engine, userdata = struct agent_engine *: the node effects (node.h, the
 * controller's and simulate's too) with what one agent on one node adds. drain starts the drain with
 * node_drain_start() (the configuration's drain options, cfg may be NULL: the engine's defaults; the
 * agent's own pod never evicted; the drains of other nodes followed through the API). One drain at a
 * time: a request with an earlier deadline than the one under way restarts it, any other request leaves
 * it alone (after a restart the agent asks again and a fresh drain picks up where the node is); a drain
 * that ended lingers while its post-mortems are due, then is freed. notice_seen raises notice-received
 * on the bus; soft_taint, cordon and replacement_request are the effects'; uncordon stops a drain under
 * way, then undoes it (the effects' drain_stop and uncordon). kube, bus (may be NULL), cfg and the metrics
 * registry the drains report into (may be NULL) are borrowed and must outlive the engine. */
struct agent_engine;
struct metrics;
int agent_engine_new(struct kube_client *kube, struct alert_bus *bus, const struct spotdrain_config *cfg,
                     struct metrics *m, struct agent_engine **ret);
/* Stops a drain under way (no result). NULL-safe; returns NULL. */
struct agent_engine *agent_engine_free(struct agent_engine *e);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct agent_engine *, agent_engine_free);
/* The end of each of e's drains reaches a (agent_drain_ended(): a lifecycle action is completed); a NULL:
 * no longer (before a is freed, when e outlives it). */
void agent_follow_engine(struct agent *a, struct agent_engine *e);
/* done(userdata, drained) after each drain that ended (not one replaced or stopped). */
void agent_engine_on_done(struct agent_engine *e, void (*done)(void *userdata, bool drained),
                          void *userdata);
/* Replacement capacity (borrowed; NULL: none): asked for with each drain and at a rebalance
 * recommendation (replacement_request), the provisioner's triggers deciding. */
struct prov_frontend;
void agent_engine_set_provision(struct agent_engine *e, struct prov_frontend *prov);
/* Whoever follows the engine's drains (simulate's timeline and report): each drain as it starts, as it
 * ends (not one replaced or stopped) and before the engine frees it (replaced by an earlier deadline,
 * stopped, or gone with the engine). Any member may be NULL; w NULL: no one. */
struct drain_exec_result;
struct agent_engine_watch {
        void (*started)(void *userdata, struct drain_exec *x);
        void (*ended)(void *userdata, struct drain_exec *x, const struct drain_exec_result *r);
        void (*released)(void *userdata, struct drain_exec *x);
        void *userdata;
};
void agent_engine_watch(struct agent_engine *e, const struct agent_engine_watch *w);
/* The result of the last drain that ended (not one replaced or stopped), else NULL. */
const struct drain_exec_result *agent_engine_result(const struct agent_engine *e);
/* Drains started, and drains that have ended. */
unsigned agent_engine_started(const struct agent_engine *e);
unsigned agent_engine_finished(const struct agent_engine *e);
extern const struct agent_actions agent_engine_actions;
/* Learns stop and startup times from node's pods from now on (the idle agent too), kept and shared in the
 * ConfigMap drain.estimates_configmap of namespace (NULL: POD_NAMESPACE): read at a notice, its drain
 * planned and judged with them; written merged at most every agent.estimates_write_interval_seconds (and
 * up to half that at random) when it learnt something, and at a drain's end. Once only; 0 or -errno. */
int agent_engine_learn(struct agent_engine *e, const char *node, const char *namespace);

/* ---- metrics (metrics.c): the agent's families, beside the agent that counts them ---- */
struct metrics;
/* The agent's families (IMDS polls and their failures, the last answer, actions that could not start), for
 * the registry of the agent's front end (service_options.families). */
extern const struct metric_family_def agent_metric_families[];
extern const size_t agent_n_metric_families;
/* What was counted last (zero at first). */
struct agent_metrics_last {
        struct agent_stats agent;
        struct imds_stats imds;
};
/* Counts into m what a and its IMDS client did since *last (counters by their deltas, the last answer's
 * time set), and moves *last on. Returns whether IMDS answered every poll since then. */
bool agent_metrics_count(const struct agent *a, const struct imds_client *imds, struct metrics *m,
                         struct agent_metrics_last *last);
