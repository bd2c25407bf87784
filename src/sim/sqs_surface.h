/* The simulator's SQS surface: one libmicrohttpd listener serving one standard queue per scenario, named
 * "spotdrain-SCENARIO", URL http://HOST:PORT/123456789012/spotdrain-SCENARIO (SIM_SQS_ACCOUNT).
 *
 * Protocols: AWS JSON 1.0 (POST, X-Amz-Target: AmazonSQS.<Action>, application/x-amz-json-1.0; what
 * spotdrain and current SDKs speak) and the query protocol (form-encoded Action=...&Version=2012-11-05, XML
 * answers in the 2012-11-05 namespace; what Debian's botocore 1.29 / aws CLI 2.9 speak), with the error
 * codes, statuses and x-amzn-query-error header of the real service (fixtures/sqs). Actions:
 * ReceiveMessage, DeleteMessage, DeleteMessageBatch, ChangeMessageVisibility, GetQueueAttributes,
 * GetQueueUrl. Every request must carry a valid SigV4 signature (service "sqs", any region) by a key the
 * secret lookup knows; the default lookup knows SIM_SQS_ACCESS_KEY_ID / SIM_SQS_SECRET_ACCESS_KEY.
 * Signature errors answer SignatureDoesNotMatch, unknown keys InvalidClientTokenId (403).
 *
 * Delivery: each scenario event of a node becomes the message EC2 would route to the queue, sent at its
 * scenario time (SentTimestamp is that instant on the wall clock, sim_wall_usec):
 *   rebalance-recommendation → EventBridge "EC2 Instance Rebalance Recommendation"
 *   spot-interruption        → EventBridge "EC2 Spot Instance Interruption Warning" (time = the notice,
 *                              detail.instance-action terminate, resources = arn:aws:ec2:ZONE:instance/ID)
 *   scheduled-change         → EventBridge "AWS Health Event" (AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED,
 *                              startTime = the deadline)
 *   asg-lifecycle-terminate  → EventBridge "EC2 Instance-terminate Lifecycle Action" (group
 *                              "spotdrain-SCENARIO", hook SIM_SQS_LIFECYCLE_HOOK)
 *   asg-launch               → EventBridge "EC2 Instance-launch Lifecycle Action" (the same group, hook
 *                              SIM_SQS_LAUNCH_HOOK), at the launch
 * Event and message ids are deterministic (a hash of scenario, instance, kind and time).
 *
 * Queue semantics, in scenario seconds: visibility timeout (default 30 s, or the request's), a new receipt
 * handle per receive (only the latest handle of a message in the queue is valid; anything else answers
 * ReceiptHandleIsInvalid), ApproximateReceiveCount, long polling (WaitTimeSeconds 0..20 of scenario time)
 * that answers as soon as a message is visible. The surface checks the model on every request and while a
 * long poll waits (it wakes at the model's next due action and at the next visibility expiry), so it needs
 * no ticker of its own. On a manual clock, call sim_sqs_kick() after sim_set_now() to wake waiting polls.
 *
 * Locking: the surface has its own lock and takes the model's lock (sim_lock) inside it, briefly; never
 * call into the surface with the model's lock held. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/sigv4_check.h"

struct sim;
struct sim_sqs;
struct sim_sts;

#define SIM_SQS_ACCOUNT           "123456789012"
#define SIM_SQS_ACCESS_KEY_ID     "AKIDEXAMPLE"
#define SIM_SQS_SECRET_ACCESS_KEY "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define SIM_SQS_LIFECYCLE_HOOK    "spotdrain-terminate"
#define SIM_SQS_LAUNCH_HOOK       "spotdrain-launch"
#define SIM_SQS_VISIBILITY        30

/* Starts the listener on host (an address to bind, port chosen by the kernel; NULL = "127.0.0.1"). The
 * model's clock should have been started (sim_start). s must outlive the surface. */
int sim_sqs_start(struct sim *s, const char *host, struct sim_sqs **ret);
/* Stops the listener; long polls under way end at once. NULL-safe; returns NULL. */
struct sim_sqs *sim_sqs_stop(struct sim_sqs *q);
/* "http://127.0.0.1:PORT" (the endpoint URL) and the queue URL. */
const char *sim_sqs_url(const struct sim_sqs *q);
const char *sim_sqs_queue_url(const struct sim_sqs *q);
const char *sim_sqs_queue_name(const struct sim_sqs *q);

/* Replaces the secret lookup (e.g. with the STS surface's, for temporary credentials); NULL restores the
 * default. The lookup is called from the listener's threads. */
void sim_sqs_set_secret_lookup(struct sim_sqs *q, sigv4_secret_lookup_fn lookup, void *userdata);

/* Verifies with the STS surface: its secret lookup (its issued temporary credentials and the scenario's
 * long-term key) and session tokens (X-Amz-Security-Token must be the token issued with the key; none for
 * the long-term key), answering InvalidClientTokenId otherwise. t must outlive q; NULL restores the default.
 */
void sim_sqs_use_sts(struct sim_sqs *q, struct sim_sts *t);

/* Wakes every waiting long poll to look at the model again (after sim_set_now on a manual clock). */
void sim_sqs_kick(struct sim_sqs *q);

struct sim_sqs_fault {
        bool access_denied;     /* every request answers AccessDenied (403), as after an IAM change */
        bool nonexistent_queue; /* every request answers NonExistentQueue, as after a rename */
        unsigned error_500;     /* the next N requests answer InternalError (500) */
        /* Share (0..1) of the messages delivered twice, as a standard queue does: a second copy with the
         * same MessageId and body, received and deleted independently. Chosen per event, deterministically.
         */
        double duplicate_rate;
        /* Share (0..1) of the requests answered as SQS throttles, drawn per request from a hash of seed and
         * the request's index (so a run with the same seed and requests meets the same throttles). A
         * throttled request alternates between the two forms of the real service: its modeled
         * RequestThrottled (403; JSON __type com.amazonaws.sqs#RequestThrottled, query code
         * RequestThrottled) and the common ThrottlingException (400; JSON __type
         * com.amazon.coral.availability#ThrottlingException). Both carry x-amzn-query-error "CODE;Sender".
         */
        double throttle_rate;
        uint64_t seed;
};
int sim_sqs_set_fault(struct sim_sqs *q, const struct sim_sqs_fault *f);

struct sim_sqs_stats {
        uint64_t requests;      /* every request answered */
        uint64_t receives;      /* ReceiveMessage calls */
        uint64_t delivered;     /* messages handed out (each receive of each message) */
        uint64_t deleted;       /* messages deleted */
        uint64_t auth_failures; /* requests refused for their signature or key */
        uint64_t throttled;     /* requests answered with a throttle (throttle_rate) */
        /* VisibilityTimeout (s) of the latest ReceiveMessage (else the default) and of the latest
         * successful ChangeMessageVisibility. */
        unsigned receive_visibility, change_visibility;
        unsigned waiting; /* long polls waiting right now */
        size_t messages;  /* messages in the queue (visible or in flight) */
};
int sim_sqs_stats(struct sim_sqs *q, struct sim_sqs_stats *ret);
/* Waits (bounded by timeout_usec of real time) until at least n long polls are waiting; for tests that
 * must act while a poll is under way. 0 or -ETIMEDOUT. */
int sim_sqs_wait_polls(struct sim_sqs *q, unsigned n, uint64_t timeout_usec);
