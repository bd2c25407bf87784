/* controller: queue mode. One elected replica long-polls an SQS queue fed by EventBridge (and Auto Scaling),
 * turns each message into notices (notice.h) and drains any node of the cluster through the engine.
 *
 * Pieces, bottom up:
 *   dispatch  (dispatch.h)  the one dispatcher of every mode, fed here with the notices of each message
 *                           and a providerID index from the node informer.
 *   leader    (leader.c)    a coordination.k8s.io/v1 Lease, client-go semantics: expiry judged by when this
 *                           replica last saw the record change (no clock-skew assumptions), renewal every
 *                           renew period, leadership given up when no renewal succeeded for the renew
 *                           deadline, the lease released on a clean stop.
 *   asg       (asg.c)       which Auto Scaling groups are this cluster's and their hooks' timeouts, over
 *                           the Auto Scaling client (asg.h, shared with the agent): its two lifecycle
 *                           calls, RecordLifecycleActionHeartbeat and CompleteLifecycleAction.
 *   controller (controller.c) the SQS message lifecycle, readiness, and the glue: the node informer, the
 *                           drains (engine.h), resume of drains recorded on nodes
 * (SPOTDRAIN_ANNOTATION_DRAIN, keys.h).
 *
 * Message lifecycle: a message whose notices start or join a drain stays hidden (ChangeMessageVisibility,
 * extended before it runs out) until the drain ends, then it is deleted (DeleteMessageBatch). Messages that
 * need no drain (rebalance once acted on, ASG test notification, duplicates, a state change of an unknown
 * or finished instance, bodies with nothing to act on) are deleted at once. A future maintenance window is
 * put back with a visibility that brings it back when it is due. A malformed or unrecognized message is
 * logged with its MessageId, counted and left to the queue's redrive policy, hidden for a long timeout so
 * that it is not received over and over. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/asg.h"
#include "spotdrain/awsreq.h"
#include "spotdrain/dispatch.h"
#include "spotdrain/metrics.h"
#include "spotdrain/notice.h"
#include "spotdrain/util.h"

/* The controller's configuration (controller.*). Its keys: controller_config_section (its settings.c). */
struct controller_settings {
        uint64_t first_visibility_usec; /* a notice's hidden time until its drain is recorded */
        int64_t receivers;              /* ReceiveMessage calls in flight at once */
        char **allowed_accounts;        /* accounts besides the queue's whose notices are taken */
        char **asg_names;               /* Auto Scaling groups whose lifecycle actions are this cluster's */
        char *cluster_name;             /* else: groups tagged kubernetes.io/cluster/NAME are (asg_owners) */
        char *managed_tag;              /* "KEY" or "KEY=VALUE": only instances carrying it are drained */
        uint64_t delete_unknown_after_usec; /* a notice for no node here is deleted after this; 0 = never */
        bool verify_sns_signature;          /* SNS-wrapped messages must carry SNS's valid signature */
        uint64_t
            heartbeat_interval_usec;   /* lifecycle heartbeat period; 0 = half the hook's HeartbeatTimeout */
        uint64_t heartbeat_until_usec; /* heartbeats stop this long after the lifecycle notice */
        uint64_t launch_ready_timeout_usec; /* a launch action not Ready this long after it: ABANDON */
        /* The eviction webhook (admission.h): off while admission_listen is unset. */
        char *admission_listen;
        char *admission_cert_file, *admission_key_file;
        char **admission_agent_users; /* system:serviceaccount:NS:NAME of each agent release */
};
struct config_section;
extern const struct config_section controller_config_section;

struct alert_bus;
struct aws_credentials;
struct kube_client;
struct loop;
struct metrics;
struct spotdrain_config;

#define CONTROLLER_LEASE_NAME "spotdrain-controller"

/* ==== leader election ==== */

struct leader_options {
        const char *namespace;        /* required */
        const char *name;             /* NULL = CONTROLLER_LEASE_NAME */
        const char *identity;         /* NULL = $POD_NAME, else HOSTNAME_PID */
        uint64_t lease_duration_usec; /* 0 = 15 s (engine clock) */
        uint64_t renew_deadline_usec; /* leader gives up when no renewal succeeded this long; 0 = 10 s */
        uint64_t renew_period_usec;   /* 0 = 5 s */
        uint64_t retry_period_usec;   /* candidates; 0 = 2 s */
        void (*started)(void *userdata);
        void (*stopped)(void *userdata); /* only after started */
        void *userdata;
};

struct leader;
int leader_new(struct kube_client *kube, const struct leader_options *o, struct leader **ret);
/* Starts campaigning. */
int leader_start(struct leader *le);
/* Stops campaigning; a leader releases the lease (best effort, asynchronous: keep the loop running a little
 * and see leader_released()). No callback after this. */
void leader_stop(struct leader *le);
bool leader_released(const struct leader *le); /* the release answered (or there was nothing to release) */
struct leader *leader_free(struct leader *le); /* NULL-safe */
DEFINE_TRIVIAL_CLEANUP_FUNC(struct leader *, leader_free);
bool leader_is_leader(const struct leader *le);
const char *leader_identity(const struct leader *le);
/* The holder this replica last saw (NULL when none). */
const char *leader_observed_holder(const struct leader *le);
unsigned leader_transitions(const struct leader *le); /* times this replica became leader */

/* ==== which Auto Scaling groups are this cluster's ====
 * A group is when it carries the tag kubernetes.io/cluster/NAME (any value: "owned" or "shared", as EKS
 * managed node groups and eksctl write it). One DescribeAutoScalingGroups per group, retried with backoff
 * while the answer is retryable (throttled, 5xx, no answer), the answer kept ASG_OWNERS_TTL_USEC. */
#define ASG_CLUSTER_TAG_PREFIX  "kubernetes.io/cluster/"
#define ASG_OWNERS_TTL_USEC     (600ULL * 1000000ULL)
#define ASG_OWNERS_ATTEMPTS     5u /* retries after the first call */
#define ASG_OWNERS_BACKOFF_USEC (500ULL * 1000ULL)

/* From a DescribeAutoScalingGroups answer (pure): 1 when group carries the cluster's tag, 0 when it does
 * not or the answer lists no such group, -EBADMSG for an unreadable answer, -EINVAL without a group or
 * cluster. */
int asg_group_tagged(const char *body, size_t len, const char *group, const char *cluster);

struct asg_owners;
struct asg_owners_stats {
        uint64_t lookups, retries, failures, cached;
};
/* owned: 1, 0, or a negative errno (the lookup failed: the caller leaves the action alone; -ECANCELED
 * from asg_owners_free()). */
typedef void (*asg_owned_fn)(int owned, void *userdata);
/* c is borrowed and must outlive the cache. */
int asg_owners_new(struct loop *l, struct asg_client *c, const char *cluster, struct asg_owners **ret);
/* Every waiter is told -ECANCELED. NULL-safe. */
struct asg_owners *asg_owners_free(struct asg_owners *o);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct asg_owners *, asg_owners_free);
/* 1 or 0 at once when the answer is known; -EINPROGRESS when done will be called with it (never from
 * inside this call); another negative errno when no lookup could start (done is not called). */
int asg_owners_check(struct asg_owners *o, const char *group, asg_owned_fn done, void *userdata);
void asg_owners_stats(const struct asg_owners *o, struct asg_owners_stats *ret);

/* The lifecycle hooks' own timeouts, read with DescribeLifecycleHooks once per group and hook (retried with
 * backoff while retryable) and kept for the controller's life: a hook's HeartbeatTimeout bounds the first
 * heartbeat. asg_hook_timeouts() reads one hook's from an answer: 0, -ENOENT (not listed), -EBADMSG. */
int asg_hook_timeouts(const char *body, size_t len, const char *hook, uint64_t *ret_heartbeat_usec,
                      uint64_t *ret_global_usec);
struct asg_hooks;
typedef void (*asg_hooks_fn)(void *userdata); /* an answer (or a failure) arrived */
int asg_hooks_new(struct loop *l, struct asg_client *c, asg_hooks_fn changed, void *userdata,
                  struct asg_hooks **ret);
struct asg_hooks *asg_hooks_free(struct asg_hooks *h);
/* 0 and the timeouts when known; else -EINPROGRESS (asked now, or still asking: changed() follows); a
 * lookup that failed is asked again. */
int asg_hooks_get(struct asg_hooks *h, const char *group, const char *hook, uint64_t *ret_heartbeat_usec,
                  uint64_t *ret_global_usec);

/* ==== the controller ==== */

struct controller_options {
        const char *queue_url;      /* required */
        const char *region;         /* NULL: config aws.region, $AWS_REGION... (sqs.h) */
        const char *sqs_endpoint;   /* NULL: sqs.h's rules */
        const char *asg_endpoint;   /* NULL: asg_client_new's rules */
        const char *elbv2_endpoint; /* NULL: elbv2_client_new's rules (drain.target_groups) */
        /* Credentials: a callback returning borrowed credentials (tests, a provider's copy). */
        const struct aws_credentials *(*credentials)(void *userdata);
        void *credentials_userdata;
        const struct spotdrain_config *cfg; /* drain options; may be NULL */
        struct metrics *metrics;            /* what the drains report; borrowed; may be NULL */
        const char *lease_namespace;        /* NULL: $POD_NAMESPACE, else "default" */
        const char *identity;               /* NULL: leader_options' default */
        bool no_leader_election;            /* act at once (a single replica) */
        unsigned polls;                     /* receives in flight; 0 = cfg's controller.receivers, else 10 */
        unsigned failures_unreadable; /* receive failures in a row that make the queue unreadable; 0 = 3 */
        uint64_t visibility_usec; /* a handled message is kept hidden this long, renewed at 1/2; 0 = 60 s */
        uint64_t malformed_visibility_usec; /* 0 = 600 s */
        uint64_t access_check_usec;         /* a follower re-proves access this often; 0 = 60 s */
        struct dispatch_options dispatch;
        struct leader_options leader; /* durations only (namespace, identity, callbacks are set here) */
};

/* Why a message was left in the queue without being acted on (the first three are controller/trust.h's). */
enum controller_reject {
        CONTROLLER_REJECT_NO_ACCOUNT = 1, /* the body names no account */
        CONTROLLER_REJECT_FOREIGN_ACCOUNT,
        CONTROLLER_REJECT_FOREIGN_REGION,
        CONTROLLER_REJECT_NO_NODE,       /* for an instance that is no node of this cluster */
        CONTROLLER_REJECT_BAD_SIGNATURE, /* SNS-wrapped, and SNS's signature does not verify */
        CONTROLLER_REJECT_UNMANAGED,     /* an instance without controller.managed_tag */
        _CONTROLLER_REJECT_MAX,
};
/* "no-account", "foreign-account", "foreign-region", "no-node", "bad-signature", "unmanaged": the metric
 * label and the alert's reason. */
const char *controller_reject_label(enum controller_reject why);

/* Why a body was left in the queue unread (notice_parse()'s errors). */
enum controller_malformed {
        CONTROLLER_MALFORMED_BODY,         /* not JSON, a field missing or of the wrong type */
        CONTROLLER_MALFORMED_UNRECOGNIZED, /* well-formed, not a notice spotdrain knows */
        CONTROLLER_MALFORMED_TOO_LARGE,
        CONTROLLER_MALFORMED_TOO_DEEP,
        _CONTROLLER_MALFORMED_MAX,
};
/* "malformed", "unrecognized", "too-large", "too-deep": the metric label. */
const char *controller_malformed_label(enum controller_malformed why);

/* How a launch lifecycle action's wait ended: "continue", "abandon", "foreign" (not this cluster's: left
 * alone), "gone" (Auto Scaling had it no more), "failed" (its message comes back); NULL past the last. */
#define CONTROLLER_LAUNCH_RESULTS 5
const char *controller_launch_result_label(unsigned i);

struct controller_stats {
        uint64_t receives, receive_failures, messages, deleted, delete_failures;
        uint64_t visibility_extends, visibility_failures;
        uint64_t malformed[_CONTROLLER_MALFORMED_MAX]; /* bodies left in the queue unread, by reason */
        uint64_t rejected[_CONTROLLER_REJECT_MAX]; /* well-formed messages left in the queue, by reason */
        uint64_t
            superseded; /* notices not acted on: a later one of their instance was handled (sequencing) */
        uint64_t unreadable;                      /* times the queue turned unreadable */
        uint64_t unreadable_failures;             /* calls answered with an error that means unreadable */
        uint64_t notice_counts[_NOTICE_KIND_MAX]; /* notices received (duplicates excluded), by kind */
        /* Launch lifecycle actions ended, by how (controller_launch_result_label()), and those waiting. */
        uint64_t launch_results[CONTROLLER_LAUNCH_RESULTS];
        unsigned launch_waiting;
        /* Termination lifecycle actions: completed, completions retried after a failure, given up. */
        uint64_t lifecycle_completions, lifecycle_retries, lifecycle_failures;
        unsigned in_flight; /* messages held while their drains run */
        bool leader, receiving, queue_ok;
        struct dispatch_stats dispatch;
};

struct controller;
/* kube, bus (may be NULL) are borrowed and must outlive the controller. */
int controller_new(struct loop *l, struct kube_client *kube, struct alert_bus *bus,
                   const struct controller_options *o, struct controller **ret);
/* Starts the node informer, proves access to the queue, campaigns (or receives at once). */
int controller_start(struct controller *c);
/* Hands over: stops receiving, makes held messages visible again, stops the drains (the next leader
 * resumes them from their annotation), releases the lease. done_cb runs once that is through (bounded). */
void controller_stop(struct controller *c, void (*done_cb)(void *userdata), void *userdata);
struct controller *controller_free(struct controller *c); /* NULL-safe */
DEFINE_TRIVIAL_CLEANUP_FUNC(struct controller *, controller_free);
/* /readyz: the queue was read (or proven readable) and is not unreadable now. */
bool controller_ready(const struct controller *c);
bool controller_is_leader(const struct controller *c);
void controller_stats(const struct controller *c, struct controller_stats *ret);
struct dispatch *controller_dispatch(struct controller *c);
struct leader *controller_leader(struct controller *c);

/* ---- metrics (metrics.c): the controller's families, beside the controller that counts them ---- */
/* The controller's families (SQS receives and deletes, messages left unread or rejected, notices, drains,
 * launch hooks, the queue's readability), for the registry of its front end (service_options.families). */
extern const struct metric_family_def controller_metric_families[];
extern const size_t controller_n_metric_families;
/* Counts into m what c did since *last (zero at first): counters by their deltas, gauges set; and moves
 * *last on. */
void controller_metrics_count(const struct controller *c, struct metrics *m, struct controller_stats *last);
