/* aws/asg: the Amazon EC2 Auto Scaling client (query protocol, SigV4 "autoscaling", API 2011-01-01): the
 * lifecycle calls of the controller's lifecycle messages and of the agent's IMDS lifecycle state, and the
 * raw call every other Auto Scaling call goes through. */
#pragma once

#include "spotdrain/awsreq.h"
#include "spotdrain/notice.h"
#include "spotdrain/util.h"

#define ASG_API_VERSION "2011-01-01"

struct aws_credentials;
struct loop;

typedef const struct aws_credentials *(*asg_credentials_fn)(void *userdata);
struct asg_client;
/* endpoint NULL: $AWS_ENDPOINT_URL_AUTO_SCALING, $AWS_ENDPOINT_URL_AUTOSCALING, $AWS_ENDPOINT_URL, else
 * https://autoscaling.REGION.amazonaws.com (.com.cn for cn- regions; aws_endpoint_resolve()). region is
 * required. */
int asg_client_new(struct loop *l, const char *endpoint, const char *region, asg_credentials_fn creds,
                   void *creds_userdata, struct asg_client **ret);
struct asg_client *asg_client_free(struct asg_client *c); /* cancels calls in flight; NULL-safe */
DEFINE_TRIVIAL_CLEANUP_FUNC(struct asg_client *, asg_client_free);
/* done(error, "Code: Message" or NULL, userdata); error 0 or a negative errno. done may be NULL. */
typedef void (*asg_done_fn)(int error, const char *message, void *userdata);
int asg_complete_lifecycle(struct asg_client *c, const struct notice *n, const char *result,
                           asg_done_fn done, void *userdata);
int asg_heartbeat(struct asg_client *c, const struct notice *n, asg_done_fn done, void *userdata);
/* Whether a lifecycle call's failure message says Auto Scaling holds no such action (any more: completed
 * already, or its hook timed out): ValidationError, final, not to be retried. */
bool asg_no_such_action(const char *message);
/* The form body of an action (pure; tests). */
int asg_lifecycle_body(const struct notice *n, const char *action, const char *result, char **ret);
const char *asg_client_endpoint(const struct asg_client *c);
/* Any other action: body is the whole form (Action=...&Version=2011-01-01&...). done runs exactly once, on
 * the loop: with the answer, or with AWS_ERR_CANCELLED (-ECANCELED) from asg_client_free(), where the
 * lifecycle calls end silently. */
int asg_call(struct asg_client *c, const char *body, aws_call_fn done, void *userdata);
