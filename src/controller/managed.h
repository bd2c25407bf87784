/* controller/managed: with controller.managed_tag, the controller drains only instances carrying that tag
 * ("KEY": the key with any value; "KEY=VALUE": that value), as several handlers may share one queue. Each
 * instance is looked up once, with one DescribeInstances filtered on the tag (the instance is listed only
 * when it carries it), retried with backoff while the answer is retryable, the answer kept
 * MANAGED_KEEP_USEC; a message whose instances are not all known yet is parked and handed back once they
 * are. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "spotdrain/notice.h"
#include "spotdrain/sqs.h"

#define MANAGED_KEEP_USEC    (UINT64_C(3600) * 1000000)
#define MANAGED_SLOTS        4096 /* instances remembered; the oldest answer is forgotten first */
#define MANAGED_ATTEMPTS     5u   /* retries after the first call */
#define MANAGED_BACKOFF_USEC (UINT64_C(500) * 1000)

struct loop;
struct ec2_client;
struct managed_gate;

/* The DescribeInstances filter of a managed_tag: "tag-key=KEY" or "tag:KEY=VALUE" (ec2.h's form).
 * -EINVAL for an empty key. */
int managed_tag_filter(const char *tag, char **ret);

/* ec2 is borrowed and must outlive the gate. */
int managed_gate_new(struct loop *l, struct ec2_client *ec2, const char *tag, struct managed_gate **ret);
/* Parked messages are dropped (they come back from the queue when their visibility runs out). */
struct managed_gate *managed_gate_free(struct managed_gate *g);

/* A parked message handed back: error 0 once every instance is known (check it again), < 0 when a lookup
 * failed. The message is the callee's to clear. */
typedef void (*managed_resume_fn)(void *userdata, struct sqs_message *m, int error);

enum managed_verdict {
        MANAGED_PASS,   /* every instance the notices name carries the tag (or they name none) */
        MANAGED_PARKED, /* *msg was moved out: resume comes later */
        MANAGED_REFUSE, /* an instance without the tag: why names it */
        MANAGED_RETRY,  /* no lookup could start now (memory, too many parked): why says so */
};
enum managed_verdict managed_gate_check(struct managed_gate *g, struct sqs_message *msg,
                                        const struct notice *v, size_t n, managed_resume_fn resume,
                                        void *userdata, char *why, size_t why_size);

struct managed_stats {
        uint64_t lookups, retries, failures, managed, unmanaged;
};
void managed_gate_stats(const struct managed_gate *g, struct managed_stats *ret);
