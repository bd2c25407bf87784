/* controller/launch: Auto Scaling launch lifecycle actions (asg-lifecycle-launch, issue #17 item 2).
 *
 * A capacity-rebalance replacement (or any scale-out) of a group with a launch hook waits in Pending:Wait
 * until the hook is completed or times out with its default result, often ABANDON: the new instance is then
 * terminated. A launch wait completes the action with CONTINUE once the instance's node (matched by
 * spec.providerID) has joined and is Ready, and with ABANDON when it is not Ready within the timeout
 * (controller.launch_ready_timeout_seconds from the notice's time, within the hook's GlobalTimeout).
 * While it waits, heartbeats keep the action alive when the hook's HeartbeatTimeout is shorter than that.
 *
 * Trust: the group must be this cluster's (controller.asg_names, else the kubernetes.io/cluster/NAME tag
 * through ops->owned) before anything is sent. Without either, only a node that joined here proves the
 * action ours: CONTINUE once it is Ready, ABANDON only when it joined and never turned Ready; one that never
 * joined is left alone (another cluster's, on a shared queue).
 *
 * One wait per action (its token): a message delivered again joins the wait under way. A completion that
 * failed retryably is sent again with backoff; the wait's tickets (its queue messages) are finished only
 * once the completion succeeded (or Auto Scaling has no such action any more), so the message stays in the
 * queue until then and a restarted controller picks the action up again from it.
 *
 * Pure bookkeeping on the loop: the Auto Scaling calls and the answers go through struct launch_ops and
 * launch_*_answer(), by the id the op was given, so a wait may go while a call is in flight. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "spotdrain/notice.h"

struct loop;

enum launch_result {
        LAUNCH_CONTINUED, /* CONTINUE sent: the node was Ready */
        LAUNCH_ABANDONED, /* ABANDON sent: not Ready in time */
        LAUNCH_FOREIGN,   /* not this cluster's group (or never joined here): left alone */
        LAUNCH_GONE,      /* Auto Scaling had no such action any more (completed or timed out already) */
        LAUNCH_FAILED,    /* the completion failed for good: the message comes back and it is tried again */
        _LAUNCH_RESULT_MAX,
};
/* "continue", "abandon", "foreign", "gone", "failed": the metric label. */
const char *launch_result_label(enum launch_result r);

struct launch_ops {
        /* Whether the action's group is this cluster's: 1, 0, -ENODATA when nothing says (no asg_names, no
         * cluster_name), -EINPROGRESS when launch_owned_answer(id) follows, another errno when unknown. */
        int (*owned)(void *userdata, const struct notice *n, uint64_t id);
        /* CompleteLifecycleAction with result, or RecordLifecycleActionHeartbeat (result NULL): 0 when sent,
         * launch_call_answer(id) following. */
        int (*call)(void *userdata, const struct notice *n, const char *result, uint64_t id);
        /* The hook's HeartbeatTimeout and GlobalTimeout (0, or a negative errno while unknown). May be NULL.
         */
        int (*hook)(void *userdata, const struct notice *n, uint64_t *ret_heartbeat_usec,
                    uint64_t *ret_global_usec);
        /* The wait ended with result (node: the instance's node, NULL when none joined). */
        void (*finished)(void *userdata, const struct notice *n, const char *node, enum launch_result r,
                         const char *why);
        /* The Node object of an instance as the informer has it now, or NULL. May be NULL. */
        const cJSON *(*node_of)(void *userdata, const char *instance_id);
        /* A ticket of the wait is finished: 0 delete its message; -ENXIO not this cluster's (leave it);
         * another errno: let it come back. */
        void (*ticket_done)(void *userdata, uint64_t ticket, int error);
};

struct launch_options {
        uint64_t ready_timeout_usec; /* 0 = 600 s */
        uint64_t heartbeat_usec; /* controller.heartbeat_interval_seconds; 0 = half the HeartbeatTimeout */
        unsigned attempts;       /* completions tried before giving up for now; 0 = 6 */
        uint64_t backoff_base_usec; /* 0 = 1 s */
        uint64_t backoff_max_usec;  /* 0 = 30 s */
};

struct launch_stats {
        uint64_t waits, joined, heartbeats, retries;
        uint64_t results[_LAUNCH_RESULT_MAX];
        unsigned waiting;
};

struct launch;
int launch_new(struct loop *l, const struct launch_options *o, const struct launch_ops *ops, void *userdata,
               struct launch **ret);
/* Drops every wait without a callback (their messages come back to whoever leads next). NULL-safe. */
struct launch *launch_free(struct launch *la);

/* A launch notice of a message (ticket): 0 (ticket_done follows), or a negative errno. */
int launch_submit(struct launch *la, const struct notice *n, uint64_t ticket);
/* A Node object as the informer has it (added or modified): a waiting instance's node joined / is Ready. */
void launch_node_update(struct launch *la, const cJSON *node);
/* The node informer has listed every node: timeouts may be judged now (before, "never joined" is not
 * known). */
void launch_nodes_synced(struct launch *la);
/* Forgets every wait without callbacks (leadership lost). */
void launch_reset(struct launch *la);

void launch_owned_answer(struct launch *la, uint64_t id, int owned);
/* error 0: done; gone: Auto Scaling has no such action (a ValidationError); retryable: try again later. */
void launch_call_answer(struct launch *la, uint64_t id, int error, bool retryable, bool gone,
                        const char *message);
/* The hooks' timeouts became known (re-arms the heartbeats and the deadline). */
void launch_hooks_changed(struct launch *la);

void launch_stats(const struct launch *la, struct launch_stats *ret);
