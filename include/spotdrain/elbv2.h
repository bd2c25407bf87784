/* aws/elbv2: the Elastic Load Balancing v2 client (query protocol, SigV4 "elasticloadbalancing", API
 * 2015-12-01) through the one AWS request layer: the health of targets, a target group's deregistration
 * delay, and DeregisterTargets (drain.deregister_targets). */
#pragma once

#include <stddef.h>

#include "spotdrain/awsreq.h"
#include "spotdrain/util.h"

#define ELBV2_API_VERSION "2015-12-01"

struct loop;
struct elbv2_client;

typedef const struct aws_credentials *(*elbv2_credentials_fn)(void *userdata);
/* endpoint NULL: $AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2, $AWS_ENDPOINT_URL, else
 * https://elasticloadbalancing.REGION.amazonaws.com. region is required. */
int elbv2_client_new(struct loop *l, const char *endpoint, const char *region, elbv2_credentials_fn creds,
                     void *creds_userdata, struct elbv2_client **ret);
struct elbv2_client *elbv2_client_free(struct elbv2_client *c); /* cancels calls in flight; NULL-safe */
DEFINE_TRIVIAL_CLEANUP_FUNC(struct elbv2_client *, elbv2_client_free);

/* One TargetHealthDescription: the target's id and port, its state ("healthy", "draining", "unused", ...)
 * and reason code ("" when none). */
struct elbv2_target_health {
        char id[128];
        int port;
        char state[32];
        char reason[64];
};

/* The form bodies (pure; tests). ids: n target ids (Targets.member.N.Id). */
int elbv2_health_body(const char *arn, const char *const *ids, size_t n, char **ret);
int elbv2_attributes_body(const char *arn, char **ret);
int elbv2_deregister_body(const char *arn, const char *const *ids, size_t n, char **ret);
/* A DescribeTargetHealth answer: its TargetHealthDescriptions (*ret freed by the caller). -EBADMSG when the
 * document is not one. */
int elbv2_parse_health(const char *xml, size_t len, struct elbv2_target_health **ret, size_t *ret_n);
/* A DescribeTargetGroupAttributes answer: deregistration_delay.timeout_seconds; -ENOENT when the answer has
 * no such attribute, -EBADMSG when it is not one. */
int elbv2_parse_delay(const char *xml, size_t len, unsigned *ret_seconds);

/* done(error, "Code: Message" or NULL, ...): error 0 or a negative errno; runs once on the loop, with
 * -ECANCELED from elbv2_client_free() (then it may start no call). */
typedef void (*elbv2_health_fn)(int error, const char *message, const struct elbv2_target_health *t,
                                size_t n, void *userdata);
typedef void (*elbv2_delay_fn)(int error, const char *message, unsigned seconds, void *userdata);
typedef void (*elbv2_done_fn)(int error, const char *message, void *userdata);
int elbv2_describe_health(struct elbv2_client *c, const char *arn, const char *const *ids, size_t n,
                          elbv2_health_fn done, void *userdata);
int elbv2_describe_delay(struct elbv2_client *c, const char *arn, elbv2_delay_fn done, void *userdata);
int elbv2_deregister(struct elbv2_client *c, const char *arn, const char *const *ids, size_t n,
                     elbv2_done_fn done, void *userdata);
const char *elbv2_client_endpoint(const struct elbv2_client *c);
