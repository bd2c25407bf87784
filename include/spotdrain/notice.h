/* aws/notice: every form an interruption notice arrives in (EventBridge events in SQS bodies, SNS envelopes,
 * direct Auto Scaling lifecycle messages, IMDS documents) normalized into one `struct notice`
 * (docs/contracts.md §2).
 *
 * The parser is pure: no I/O, no logging above debug, bounded input, bounded nesting, one SNS unwrap level
 * plus one for good measure, and a human-readable reason for every refusal. Both front ends (the IMDS agent
 * and the SQS controller) and `spotdrain event parse` go through notice_parse().
 *
 * Deadlines (the instant the instance is expected to be gone or stopped):
 *   spot-interruption (EventBridge)  event time + 120 s (EventBridge `time` is when the warning was sent)
 *   spot-interruption (IMDS)         the document's `time` (when the action happens)
 *   capacity-reservation-interruption  detail.instance-termination-time, else event time + 120 s
 *   rebalance-recommendation         none (0, rendered null)
 *   scheduled-change                 start of the window (AWS Health startTime, IMDS NotBefore)
 *   state-change                     stopping/stopped/shutting-down/terminated: the notice time itself, i.e.
 *                                    already passed: the instance is going now, drain as an emergency
 *   asg-lifecycle-terminate          notice time + opts->asg_deadline_usec, default 3600 s: Auto Scaling
 * holds a terminating instance in Terminating:Wait until the hook is completed or its heartbeat timeout
 * (default 3600 s) runs out. 120 s would be wrong for an on-demand scale-in; when the ASG is spot-backed and
 * the termination is a reclaim, a spot warning arrives too and the dispatcher keeps the earlier deadline.
 * Set it to the hook's HeartbeatTimeout when the controller sends no heartbeats. asg-test-notification none
 *   asg-lifecycle-launch             none: the instance is launching, nothing is going away
 *
 * Dedupe: standard queues and EventBridge deliver duplicates; two deliveries of one message give notices
 * with the same event_id. event_id is the EventBridge `id` (also inside an SNS envelope: SNS-wrapped and
 * bare give the same notice), the `RequestId` of a direct Auto Scaling message (else its
 * LifecycleActionToken), the IMDS scheduled event's EventId, and for the other IMDS documents (which carry
 * no id) a stable id built from the path, instance and time. One AWS Health event can name several instances
 * and an IMDS schedule several events: key a dedupe table on (event_id, instance_id), plus `state` for
 * scheduled changes (an IMDS event keeps its EventId when it is canceled or completed).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum notice_kind {
        NOTICE_SPOT_INTERRUPTION,
        NOTICE_REBALANCE_RECOMMENDATION,
        NOTICE_SCHEDULED_CHANGE,
        NOTICE_STATE_CHANGE,
        NOTICE_ASG_LIFECYCLE_TERMINATE,
        NOTICE_ASG_TEST_NOTIFICATION,
        /* EC2 Capacity Reservation Instance Interruption Warning: an interruptible Capacity Reservation's
         * owner reclaims its capacity; the instance is terminated two minutes later, as a spot one. */
        NOTICE_CAPACITY_RESERVATION_INTERRUPTION,
        /* An Auto Scaling launch lifecycle action (autoscaling:EC2_INSTANCE_LAUNCHING): drains nothing; the
         * controller completes it with CONTINUE once the instance's node is Ready (ABANDON after
         * controller.launch_ready_timeout_seconds). */
        NOTICE_ASG_LIFECYCLE_LAUNCH,
        _NOTICE_KIND_MAX,
};

/* Largest body notice_parse() accepts (the old SQS message limit; interruption events are < 2 KiB). */
#define NOTICE_BODY_MAX (256u * 1024u)
/* Deepest JSON nesting accepted (real events nest 5 deep). */
#define NOTICE_NESTING_MAX 32
/* Most notices one body can produce (AWS Health affected entities, IMDS scheduled events). */
#define NOTICE_LIST_MAX 1024
/* EventBridge spot warning: the interruption comes two minutes after the event time. */
#define NOTICE_SPOT_WARNING_USEC (120ULL * 1000000ULL)
/* Auto Scaling lifecycle hook default heartbeat timeout (see the table above). */
#define NOTICE_ASG_DEFAULT_DEADLINE_USEC (3600ULL * 1000000ULL)

/* String field sizes, NUL included. Longer values are refused (Auto Scaling names are at most 255). */
#define NOTICE_INSTANCE_ID_SIZE 20 /* "i-" + 17 hex */
#define NOTICE_SOURCE_SIZE      16
#define NOTICE_REGION_SIZE      32
#define NOTICE_ACTION_SIZE      96
#define NOTICE_ID_SIZE          128
#define NOTICE_NAME_SIZE        256
#define NOTICE_STATE_SIZE       32
#define NOTICE_ACCOUNT_SIZE     13 /* 12 digits */

/* A flat value: copy it by assignment, free an array of them with free(). Empty strings and zero times mean
 * "absent"; notice_format_json() leaves absent fields out (deadline is rendered null instead). */
struct notice {
        enum notice_kind kind;
        /* "" for asg-test-notification, and for IMDS documents parsed without opts->instance_id */
        char instance_id[NOTICE_INSTANCE_ID_SIZE];
        char source[NOTICE_SOURCE_SIZE]; /* "sqs" | "imds" | the caller's override */
        uint64_t notice_time;            /* usec since the epoch, always set */
        uint64_t deadline;               /* usec; 0 = none */
        char action[NOTICE_ACTION_SIZE]; /* spot: terminate|stop|hibernate; state-change: the state;
                                            scheduled-change: the event code */
        char region[NOTICE_REGION_SIZE];
        /* The AWS account the body says it comes from: EventBridge `account`, an Auto Scaling message's
         * `AccountId` (else its group ARN's). A claim, not a proof: the controller checks it against the
         * queue's own account (anyone allowed to send to the queue can write any body). */
        char account[NOTICE_ACCOUNT_SIZE];
        char event_id[NOTICE_ID_SIZE];

        /* asg-lifecycle-terminate, asg-lifecycle-launch (group also for asg-test-notification) */
        char asg_name[NOTICE_NAME_SIZE];
        char lifecycle_hook_name[NOTICE_NAME_SIZE];
        char lifecycle_action_token[NOTICE_ID_SIZE];

        /* scheduled-change */
        uint64_t start_time;           /* usec; equals deadline */
        uint64_t end_time;             /* usec; 0 = not given */
        char state[NOTICE_STATE_SIZE]; /* IMDS State (active|canceled|completed), AWS Health statusCode
                                          (upcoming|open|closed) */
};

struct notice_parse_opts {
        const char *source;      /* overrides "sqs"/"imds" in the notices; NULL = by form */
        const char *instance_id; /* for IMDS documents, which name no instance (NULL: absent); validated */
        const char *region;      /* used when the document names no region */
        /* IMDS path the document was read from ("spot/instance-action", "events/recommendations/rebalance",
         * "events/maintenance/scheduled", "events/maintenance/history", "spot/termination-time",
         * "autoscaling/target-lifecycle-state"; a "/latest/meta-data/" prefix is allowed). NULL: the form is
         * detected, and IMDS forms are only accepted where they are unambiguous. */
        const char *imds_path;
        uint64_t now_usec;          /* notice time of IMDS documents that carry none; 0 = clk_now() */
        uint64_t asg_deadline_usec; /* 0 = NOTICE_ASG_DEFAULT_DEADLINE_USEC */
};

/* Parses one body (an SQS message Body, an EventBridge event, an SNS envelope or an IMDS document).
 * On success returns 0 with a malloc'ed array of *ret_n notices in *ret (free() it). A recognized body that
 * carries nothing to act on (an instance going to `running`, an empty IMDS schedule, an
 * AWS Health event of another service or category, an SNS subscription confirmation) gives 0 notices,
 * *ret = NULL and the reason why in `reason`.
 * Errors, each with a one-line reason in `reason` (if reason_size > 0):
 *   -EMSGSIZE      larger than NOTICE_BODY_MAX
 *   -ELOOP         nested deeper than NOTICE_NESTING_MAX, or SNS envelopes nested too deep
 *   -EBADMSG       malformed: not JSON, a required field missing or of the wrong type, a bad time or id
 *   -EOPNOTSUPP    well-formed but not a notice spotdrain knows (unknown source/detail-type, lifecycle
 *                  transition, IMDS state)
 *   -EINVAL        bad opts (an invalid opts->instance_id, an unknown opts->imds_path)
 *   -ENOMEM
 */
int notice_parse(const void *data, size_t len, const struct notice_parse_opts *opts, struct notice **ret,
                 size_t *ret_n, char *reason, size_t reason_size);

/* The notice as one line of docs/contracts.md §2 JSON (no newline), keys in this order:
 *   kind, instance_id (absent for asg-test-notification), source, notice_time, deadline (null when none),
 *   action, region, account, event_id, asg_name, lifecycle_hook_name, lifecycle_action_token,
 *   start_time and end_time (scheduled-change only; end_time absent when not given), state.
 * Empty string fields are left out; times are RFC 3339 UTC with Z, whole seconds. Returns 0 or -ENOMEM. */
int notice_format_json(const struct notice *n, char **ret);
/* A one-line human summary, e.g. "spot-interruption i-0abcd1234ef567890 terminate at 2024-05-14T10:23:53Z
 * (notice 2024-05-14T10:21:53Z, sqs, event 1e5527d7-...)". Returns 0 or -ENOMEM. */
int notice_format_human(const struct notice *n, char **ret);

const char *notice_kind_to_string(enum notice_kind k);
/* Returns the kind, or -EINVAL. */
int notice_kind_from_string(const char *s);

/* i-[0-9a-f]{8,17} */
bool notice_instance_id_valid(const char *s);
/* Twelve decimal digits, as AWS writes an account id. */
bool notice_account_valid(const char *s);

/* Times as AWS writes them: RFC 3339 ("2024-05-14T10:22:05.318Z", offsets allowed), RFC 1123
 * ("Tue, 28 May 2024 06:00:00 GMT") and the IMDS form ("28 May 2024 06:00:00 GMT"). -EINVAL otherwise. */
int notice_parse_time(const char *s, uint64_t *ret_usec);
