/* dispatch: the one dispatcher (DESIGN.md, data path). Every source (the IMDS agent, the SQS controller,
 * simulate's direct delivery) turns what it reads into struct notice and submits it here; nothing below
 * knows which source it was.
 *
 * instance ID → node through a providerID index fed by a node informer (or one fixed entry: the agent knows
 * its own node); one drain per node (a rebalance then an interruption upgrades it, an earlier deadline
 * restarts it); dedupe on (event_id, instance_id[, state]); unknown instances retried until a node with
 * that providerID appears, else reported and dropped (and not remembered: a message that comes back is
 * waited for again, since a queue shared by several clusters holds other clusters' notices). Pure
 * bookkeeping on the loop: every effect goes through struct dispatch_ops.
 *
 * What a notice of a known node does:
 *   spot-interruption, capacity-reservation-interruption, asg-lifecycle-terminate
 *                           drain by its deadline (none: emergency_usec from now)
 *   state-change            a node not draining yet is drained as an emergency
 *   rebalance-recommendation  soft taint (ops->soft_taint add) and a replacement request; the taint is
 *                           removed again when no interruption followed within rebalance_revert_usec of
 *                           the notice time. A later interruption upgrades the node to a drain (the taint
 *                           stays: the node is going).
 *   scheduled-change        drained maintenance_lead_usec before it starts, by its start: one not due yet
 *                           is kept with a timer (DISPATCH_DEFER) and the same event seen again while it
 *                           waits is a duplicate; canceled (or completed/closed) before it is due, it is
 *                           dropped; canceled after its drain began (under way or finished), the drain is
 *                           stopped and the node made schedulable again (ops->uncordon), unless another
 *                           notice joined the drain. AWS Health has no canceled: closed before the
 *                           window's start (notice_time < start_time) is a cancellation.
 *                           A reboot (IMDS system-reboot/instance-reboot, AWS Health *_REBOOT_MAINTENANCE_*)
 *                           that completed (IMDS completed, AWS Health closed) is waited on: once the node
 *                           is Ready again and still cordoned with the drain record of that very event
 *                           (so spotdrain cordoned it, for this reboot), it is made schedulable
 *                           (ops->uncordon), unless another notice drives a drain there. The node's state
 *                           comes through dispatch_node_update(), asked for with ops->node_refresh.
 *
 * Those are the default actions; dispatch_options.actions chooses another per kind (notices.KIND.action,
 * enum dispatch_action): drain (a rebalance recommendation drained is planned against two minutes, the
 * least a spot warning after it would give), cordon (ops->cordon: nothing new lands there, no pod is
 * evicted), taint (what a rebalance recommendation does by default: the soft taint, a replacement request,
 * the revert) or ignore (heard and told to ops->notice_seen, acted on by nothing: DISPATCH_DONE, its message
 * deleted as handled). A later notice whose action drains upgrades a cordoned or tainted node. A lifecycle
 * hook whose notice is cordoned or tainted is completed at once (nothing is left to wait for); one ignored
 * is left alone (to its heartbeat timeout and default result).
 *   asg-lifecycle-launch    handed to ops->lifecycle_launch (the controller completes it once the instance's
 *                           node is Ready); its action is ignore (left to its hook's default result) or
 *                           anything else (completed). Never a drain, never deduplicated here: a message
 *                           delivered again while the action waits must join it, not be deleted. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/notice.h"
#include "spotdrain/util.h"

struct loop;
struct spotdrain_config;

enum dispatch_verdict {
        DISPATCH_DONE,    /* nothing to wait for: delete the message now */
        DISPATCH_PENDING, /* ops->ticket_done(ticket) comes when the drain ends or the instance is dropped */
        /* Not due yet: the dispatcher starts the drain itself when it is due (at *ret_defer_until); a
         * message may be brought back then (it starts or joins that drain, or is a duplicate). */
        DISPATCH_DEFER,
        /* The instance is no node of this cluster (a state change or scheduled change, which do not wait for
         * one): nothing was done; a shared queue's message is left for the cluster it belongs to. */
        DISPATCH_FOREIGN,
};

/* What a notice of a kind does (notices.KIND.action). DISPATCH_ACTION_DEFAULT is the kind's own (taint
 * for a rebalance recommendation, drain for the others). */
enum dispatch_action {
        DISPATCH_ACTION_DEFAULT,
        DISPATCH_ACTION_DRAIN,
        DISPATCH_ACTION_CORDON,
        DISPATCH_ACTION_TAINT,
        DISPATCH_ACTION_IGNORE,
        _DISPATCH_ACTION_MAX,
};
const char *dispatch_action_to_string(enum dispatch_action a);

/* The dispatcher's configuration (notices.*): per kind, what its notices do. Its keys:
 * notices_config_section (src/dispatch/settings.c). */
struct notices_settings {
        int action[_NOTICE_KIND_MAX];   /* enum dispatch_action */
        uint64_t rebalance_revert_usec; /* notices.rebalance_revert_seconds */
        uint64_t maintenance_lead_usec; /* notices.maintenance_lead_seconds */
        uint64_t min_budget_usec;       /* notices.min_budget_seconds */
};
struct config_section;
extern const struct config_section notices_config_section;

struct dispatch_ops {
        /* Starts draining node by deadline (engine clock), or restarts a drain under way with an earlier
         * deadline. The end is reported with dispatch_drain_finished(). */
        int (*drain)(void *userdata, const char *node, const struct notice *n, uint64_t deadline_usec);
        /* Stops a drain under way without a result (dispatch_reset). */
        void (*drain_stop)(void *userdata, const char *node);
        /* Adds (add) or removes the PreferNoSchedule rebalance taint. */
        int (*soft_taint)(void *userdata, const char *node, bool add);
        /* Replacement capacity ahead of the interruption; the provisioning core of a later issue. */
        int (*replacement_request)(void *userdata, const char *node, const struct notice *n);
        /* A canceled scheduled change whose drain had begun: make the node schedulable again (after
         * drain_stop). */
        int (*uncordon)(void *userdata, const char *node);
        /* A notice whose action is cordon: make the node unschedulable, evict nothing. */
        int (*cordon)(void *userdata, const char *node);
        /* A completed reboot is waited on: pass the Node object to dispatch_node_update() (now or later;
         * called again every few seconds until the node is settled). May be NULL when every change of the
         * node reaches dispatch_node_update() anyway. */
        void (*node_refresh)(void *userdata, const char *node);
        /* Every notice taken in (not a duplicate), once, before it is acted on. One whose instance is not
         * known as a node yet is told when that is settled: with its node when the node turns up, with
         * node NULL when it is dropped (or at once, NULL, for a state change or scheduled change, which
         * do not wait). */
        void (*notice_seen)(void *userdata, const char *node, const struct notice *n);
        /* Auto Scaling lifecycle hook: heartbeat while the drain runs, CONTINUE once it ended. */
        int (*lifecycle_heartbeat)(void *userdata, const struct notice *n);
        int (*lifecycle_complete)(void *userdata, const struct notice *n);
        /* The heartbeat period of a lifecycle action (e.g. bounded by its hook's HeartbeatTimeout); 0 or
         * absent: heartbeat_usec. Asked at every arming; dispatch_lifecycle_rearm() when it changed. */
        uint64_t (*lifecycle_interval)(void *userdata, const struct notice *n);
        /* The deadline a lifecycle action's hook grants (engine clock); 0 or absent: the notice's own.
         * A drain the action drives is planned again at dispatch_lifecycle_rearm() when it changed. */
        uint64_t (*lifecycle_deadline)(void *userdata, const struct notice *n);
        /* An Auto Scaling launch lifecycle action (asg-lifecycle-launch; drains nothing): the verdict
         * (DISPATCH_PENDING: ticket_done follows once the action is completed), or a negative errno.
         * Absent: DISPATCH_DONE (nothing here can complete it). */
        int (*lifecycle_launch)(void *userdata, const struct notice *n, uint64_t ticket);
        /* A DISPATCH_PENDING ticket is finished. error 0: acted on (its drain ended); -ENXIO: the instance
         * never turned up as a node (reported; not this cluster's: its lifecycle action, if any, is left
         * alone, and so should the message be, for the cluster it belongs to); another error: nothing
         * could be started (let the message come back). */
        void (*ticket_done)(void *userdata, uint64_t ticket, int error);
};

/* The defaults of the durations the configuration also sets (notices.maintenance_lead_seconds,
 * notices.rebalance_revert_seconds, notices.min_budget_seconds): its settings table takes them from here,
 * so that a dispatcher made without a configuration acts as one made with the default configuration. */
#define DISPATCH_DEFAULT_MAINTENANCE_LEAD_SECONDS 300
#define DISPATCH_DEFAULT_REVERT_SECONDS           600
#define DISPATCH_DEFAULT_MIN_BUDGET_SECONDS       30

struct dispatch_options {
        uint64_t unknown_retry_usec;    /* how long an unknown instance is waited for; 0 = 60 s */
        uint64_t heartbeat_usec;        /* lifecycle heartbeat period; 0 = 300 s */
        uint64_t heartbeat_until_usec;  /* no heartbeats this long after the first action; 0 = 48 h */
        uint64_t maintenance_lead_usec; /* a scheduled change is drained this long before; 0 = 300 s */
        /* A state change (stopping, terminated...) of a node not draining yet: drained as an emergency
         * with at least this much time (its own deadline has passed already); 0 = 30 s. */
        uint64_t emergency_usec;
        /* A drain is never planned against less time than this from now: a notice that arrives after its
         * deadline, or nearer to it (a backlog, a retry, a back-dated body), drains gracefully with this
         * budget; 0 = 30 s (notices.min_budget_seconds). */
        uint64_t min_budget_usec;
        size_t dedupe_max;              /* keys remembered; 0 = 4096 */
        uint64_t rebalance_revert_usec; /* soft taint removed when no interruption followed; 0 = 600 s */
        enum dispatch_action actions[_NOTICE_KIND_MAX]; /* per kind; DISPATCH_ACTION_DEFAULT = its own */
};
/* The options' actions as the configuration's notices.* keys give them. */
void dispatch_actions_from_settings(const struct notices_settings *s, struct dispatch_options *o);
/* The options every mode takes from the configuration, the one place they are read: the rebalance revert,
 * the maintenance lead, the minimum budget and each kind's action (all notices.*: the dispatcher's own
 * section; the first three were agent.* and drain.* keys, whose names are still read). A duration the caller
 * set already (a command-line flag) is kept. cfg may be NULL. */
void dispatch_options_from_config(const struct spotdrain_config *cfg, struct dispatch_options *o);
/* drain.cordon_only decides what a drain does (cordon, taint, label, no eviction); notices.KIND.action
 * whether a notice drains at all (cordon: the cordon alone). The warning when cordon_only is set but no kind
 * drains, so that it can never apply; NULL when the two agree. */
const char *dispatch_cordon_only_unused(const struct spotdrain_config *cfg);

struct dispatch_stats {
        uint64_t notices;           /* submitted */
        uint64_t duplicates;        /* absorbed: the dedupe table, or a scheduled change waiting already */
        uint64_t drains;            /* drains started (restarts included) */
        uint64_t upgrades;          /* a rebalanced node then interrupted, or a drain restarted earlier */
        uint64_t unknown_dropped;   /* instances that never turned up as a node */
        uint64_t resumed;           /* drains carried on from a node annotation */
        uint64_t reverted;          /* soft taints removed: no interruption followed the rebalance */
        uint64_t canceled;          /* scheduled changes canceled after their drain began */
        uint64_t action_errors;     /* ops that failed to start */
        uint64_t ignored;           /* notices whose kind's action is ignore */
        uint64_t cordoned;          /* nodes cordoned by a notice whose action is cordon */
        uint64_t reboot_uncordoned; /* nodes made schedulable again after the reboot they were drained for */
        unsigned reboots;           /* completed reboots waiting for their node to be Ready */
        unsigned draining;          /* drains under way now */
        unsigned unknown_pending;   /* notices waiting for their instance */
        unsigned scheduled;         /* scheduled changes waiting to be due */
        size_t nodes_indexed;       /* nodes with an EC2 providerID */
};

struct dispatch;
/* o may be NULL. ops is copied; userdata borrowed. */
int dispatch_new(struct loop *l, const struct dispatch_options *o, const struct dispatch_ops *ops,
                 void *userdata, struct dispatch **ret);
/* Stops every timer; no op is called after this (drains are not stopped: see dispatch_reset). NULL-safe. */
struct dispatch *dispatch_free(struct dispatch *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct dispatch *, dispatch_free);

/* The providerID index, fed by a node informer: Node objects added/modified, deleted. A node whose reboot
 * completed is made schedulable here once it is Ready (see scheduled-change above). */
int dispatch_node_update(struct dispatch *d, const cJSON *node);
void dispatch_node_delete(struct dispatch *d, const cJSON *node);
/* The node's state alone, the index left as it is (the agent's fixed entry): what dispatch_node_update()
 * does besides indexing (a reboot waited on). */
int dispatch_node_seen(struct dispatch *d, const cJSON *node);
/* One fixed entry instead (the agent knows its own node and instance); a node's earlier entry is
 * replaced. Notices waiting for that instance are acted on now. */
int dispatch_node_set(struct dispatch *d, const char *node, const char *instance_id);
/* A scheduled reboot that completed (IMDS completed, AWS Health closed): what the dispatcher waits on to
 * uncordon its node. */
bool dispatch_notice_reboot_done(const struct notice *n);
/* How long after its deadline the notice arrived (now is the engine clock), 0 when not late or a state
 * change (whose deadline is its own time). */
uint64_t dispatch_late_usec(const struct notice *n, uint64_t now);
/* notice_format_human()'s line, and for a late notice what that means ("; arrived 240 s after its deadline:
 * drained with the minimum budget"): the notice-received alert's message in every front end. */
int dispatch_notice_summary(const struct notice *n, uint64_t now, char **ret);
/* The Node object's Ready condition is True. */
bool dispatch_node_ready(const cJSON *node);
/* The node of an instance, or NULL. */
const char *dispatch_node_for_instance(const struct dispatch *d, const char *instance_id);
/* "aws:///us-east-1a/i-0abc..." → "i-0abc..." (borrowed from provider_id), NULL when not an EC2 ID. */
const char *dispatch_instance_from_provider_id(const char *provider_id);

/* No message to answer for (a notice re-read every poll, a timer): no ops->ticket_done. */
#define DISPATCH_NO_TICKET UINT64_C(0)
/* One notice of a message. ticket identifies the message to ops->ticket_done. Returns the verdict (>= 0),
 * or a negative errno when nothing could be started (the message should come back later). */
int dispatch_submit(struct dispatch *d, const struct notice *n, uint64_t ticket, uint64_t *ret_defer_until);
/* The drain of node ended (drained: every pod left in time). Completes its tickets and lifecycle hooks. */
void dispatch_drain_finished(struct dispatch *d, const char *node, bool drained);
/* Carries on a drain recorded on a node (resume after a leader change). 0, or -EALREADY when the node is
 * handled already, -ETIME when the deadline has passed. */
int dispatch_resume(struct dispatch *d, const char *node, const char *kind, uint64_t deadline_usec);
/* The same from a Node object's SPOTDRAIN_ANNOTATION_DRAIN (keys.h): dispatch_resume()'s answer, -ENOENT
 * when the node has none, -EBADMSG when it cannot be read, -EPERM when it cannot be trusted (it names
 * another instance than the node's providerID, or none, or a kind that does not drain: reported, ignored).
 * A deadline further out than the kind allows from now is held to that (anyone who may patch the node could
 * have written the record). */
int dispatch_resume_recorded(struct dispatch *d, const cJSON *node);
/* Forgets everything under way (drains stopped through ops->drain_stop, tickets dropped without callback,
 * scheduled changes waiting and soft-taint reverts dropped, dedupe table kept): leadership was lost or the
 * controller stops. The providerID index is kept. */
void dispatch_reset(struct dispatch *d);
/* Re-arms every draining node's lifecycle heartbeat with the period ops.lifecycle_interval now gives,
 * counted from its last heartbeat (or its action's arrival), and plans a drain its action drives again
 * against ops.lifecycle_deadline. */
void dispatch_lifecycle_rearm(struct dispatch *d);
bool dispatch_node_draining(const struct dispatch *d, const char *node);
/* The deadline of the drain under way on node, 0 when none. */
uint64_t dispatch_node_deadline(const struct dispatch *d, const char *node);
void dispatch_stats(const struct dispatch *d, struct dispatch_stats *ret);
