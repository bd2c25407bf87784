/* controller/trust: which queue messages may make this controller act (issue #15, docs/security.md).
 *
 * Anyone allowed to send to the queue can write any body, so what a notice says about itself is a claim.
 * A notice is taken only when the account it names is the queue's own (from the queue URL) or one of
 * controller.allowed_accounts, and the region it names (if any) is the cluster's. The parser already refuses
 * a source that does not go with its detail-type (aws.ec2 for EC2 events, aws.autoscaling, aws.health). A
 * refused message is left in the queue (its redrive policy takes it to the dead-letter queue), counted, and
 * alerted once per sender and reason within TRUST_ALERT_INTERVAL_USEC. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/notice.h"

enum trust_verdict {
        TRUST_OK,
        TRUST_NO_ACCOUNT,      /* the body names no account */
        TRUST_FOREIGN_ACCOUNT, /* neither the queue's account nor an allowed one */
        TRUST_FOREIGN_REGION,  /* another region than the cluster's */
        _TRUST_VERDICT_MAX,
};

struct trust_policy {
        char queue_account[NOTICE_ACCOUNT_SIZE]; /* "" when the queue URL names none */
        char *const *allowed_accounts;           /* NULL-terminated, borrowed; may be NULL */
        const char *region;                      /* the cluster's; NULL or "" = any */
};

/* The account of an SQS queue URL ("https://sqs.us-east-1.amazonaws.com/123456789012/name"): its first path
 * segment when that is 12 digits. 0, or -EINVAL when the URL names no account. */
int trust_queue_account(const char *queue_url, char ret[NOTICE_ACCOUNT_SIZE]);

/* The verdict on one notice; why (if given) gets one line for the log and the alert. */
enum trust_verdict trust_check(const struct trust_policy *p, const struct notice *n, char *why,
                               size_t why_size);

/* "no-account", "foreign-account", "foreign-region": the metric label of a refusal. */
const char *trust_verdict_label(enum trust_verdict v);

/* Alerts about refusals, at most one per (sender, reason) per interval: a flood of forged messages must not
 * become a flood of webhooks. Remembers up to TRUST_LIMITER_SLOTS senders (the oldest is forgotten). */
#define TRUST_ALERT_INTERVAL_USEC (UINT64_C(3600) * 1000000)
#define TRUST_LIMITER_SLOTS       64

struct trust_limiter_slot {
        char sender[254]; /* an account, or a node name (the eviction webhook's denials; 253 at most) */
        int reason;
        uint64_t last_usec;
};
struct trust_limiter {
        struct trust_limiter_slot slots[TRUST_LIMITER_SLOTS];
};

/* True when a refusal of sender for reason (a verdict, or a caller's own code) may be alerted now; records
 * it. */
bool trust_limiter_allow(struct trust_limiter *l, const char *sender, int reason, uint64_t now_usec);
