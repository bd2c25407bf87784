/* agent/hook: the agent's own Auto Scaling lifecycle calls (issue #17 item 3; NTH #607). With
 * agent.lifecycle_hook_name set, the IMDS target-lifecycle-state Terminated names a lifecycle action the
 * agent completes itself once its drain ended (CompleteLifecycleAction, InstanceId in place of the token,
 * CONTINUE) and heartbeats while the drain runs (RecordLifecycleActionHeartbeat), signed with the instance
 * role's credentials from IMDS iam/security-credentials/ROLE, in the region IMDS names.
 *
 * Nothing is made before the first call: the credentials provider and the Auto Scaling client come at the
 * notice, so an idle agent holds nothing of this. Each call is retried with backoff while it fails (not
 * after a ValidationError: Auto Scaling has no such action, e.g. it was completed already). A completion
 * is done at most once per action: it is recorded on the node (SPOTDRAIN_ANNOTATION_LIFECYCLE, the action's
 * GROUP/HOOK/INSTANCE) and a completion that finds its record there (an agent restarted after it) is not
 * sent again. Under --dry-run nothing is sent: "would complete ..." is logged instead. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "spotdrain/notice.h"
#include "spotdrain/util.h"

struct kube_client;
struct loop;

struct agent_hook_options {
        const char *region;        /* the signing region and the endpoint's (IMDS placement/region) */
        const char *imds_endpoint; /* where the instance role's credentials come from */
        const char *asg_endpoint;  /* NULL: asg_client_new's rules ($AWS_ENDPOINT_URL_AUTO_SCALING, ...) */
        struct kube_client *kube;  /* the completion record; may be NULL (then none is kept) */
        const char *node;
};

struct agent_hook;
/* Everything is copied; nothing is allocated but the object itself. */
int agent_hook_new(struct loop *l, const struct agent_hook_options *o, struct agent_hook **ret);
struct agent_hook *agent_hook_free(struct agent_hook *h); /* cancels the calls under way; NULL-safe */
DEFINE_TRIVIAL_CLEANUP_FUNC(struct agent_hook *, agent_hook_free);

/* n names the action (asg_name, lifecycle_hook_name, instance_id). 0 once the call is under way. */
int agent_hook_heartbeat(struct agent_hook *h, const struct notice *n);
int agent_hook_complete(struct agent_hook *h, const struct notice *n);

struct agent_hook_stats {
        unsigned heartbeats, completions; /* calls Auto Scaling accepted */
        unsigned failures;                /* calls given up */
        unsigned retries;
};
void agent_hook_stats(const struct agent_hook *h, struct agent_hook_stats *ret);

/* The completion record's value for an action: "GROUP/HOOK/INSTANCE" (pure). */
int agent_hook_record(const struct notice *n, char **ret);
