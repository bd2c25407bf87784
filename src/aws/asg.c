/* aws/asg: the one Amazon EC2 Auto Scaling client: the two calls a termination lifecycle hook needs
 * (fire-and-forget with a callback) and the raw call the other Auto Scaling calls use, in the query
 * protocol through the AWS request layer (awsreq.h), SigV4 service "autoscaling". The controller (its
 * lifecycle messages, its group ownership and hook caches) and the agent (lifecycle hooks from IMDS mode)
 * both call it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/asg.h"
#include "spotdrain/awsreq.h"
#include "spotdrain/core.h"
#include "spotdrain/notice.h"

#define ASG_TIMEOUT_USEC (20ULL * 1000000ULL)

struct asg_client {
        struct aws_client *aws;
};

int asg_lifecycle_body(const struct notice *n, const char *action, const char *result, char **ret)
{
        struct buf b = {};
        int r;

        if (!n || !action || isempty(n->asg_name) || isempty(n->lifecycle_hook_name) ||
            (isempty(n->lifecycle_action_token) && isempty(n->instance_id)))
                return -EINVAL;
        r = aws_form_add(&b, "Action", action);
        if (r >= 0)
                r = aws_form_add(&b, "Version", ASG_API_VERSION);
        if (r >= 0)
                r = aws_form_add(&b, "AutoScalingGroupName", n->asg_name);
        if (r >= 0)
                r = aws_form_add(&b, "LifecycleHookName", n->lifecycle_hook_name);
        /* The token names the action precisely; the instance is sent too, as the SDKs allow both. */
        if (r >= 0 && !isempty(n->lifecycle_action_token))
                r = aws_form_add(&b, "LifecycleActionToken", n->lifecycle_action_token);
        if (r >= 0 && !isempty(n->instance_id))
                r = aws_form_add(&b, "InstanceId", n->instance_id);
        if (r >= 0 && result)
                r = aws_form_add(&b, "LifecycleActionResult", result);
        if (r < 0) {
                buf_free(&b);
                return -ENOMEM;
        }
        *ret = b.data;
        return 0;
}

struct lifecycle_call {
        asg_done_fn done;
        void *userdata;
};

static void lifecycle_answer(const struct aws_result *res, const char *body, size_t len, void *userdata)
{
        struct lifecycle_call *call = userdata;
        _cleanup_free_ char *message = NULL;

        if (res->cls != AWS_ERR_CANCELLED && call->done) {
                if (res->error < 0)
                        message = res->code[0] ? strprintf("%s: %s", res->code, res->message)
                                               : strdup(res->message);
                call->done(res->error, message, call->userdata);
        }
        free(call);
}

/* The action's name: the form's first field (Action=NAME&...). */
static char *form_action(const char *body)
{
        const char *a = startswith(body, "Action=") ? body + strlen("Action=") : NULL;
        return a ? strndup(a, strcspn(a, "&")) : NULL;
}

int asg_call(struct asg_client *c, const char *body, aws_call_fn done, void *userdata)
{
        _cleanup_free_ char *action = form_action(body);

        if (!action)
                return -EINVAL;
        return aws_request_start(c->aws, &(struct aws_call_params){ .action = action, .body = body }, done,
                                 userdata, NULL);
}

static int lifecycle_send(struct asg_client *c, const char *action, const struct notice *n,
                          const char *result, asg_done_fn done, void *userdata)
{
        _cleanup_free_ char *body = NULL;
        struct lifecycle_call *call;
        int r;

        r = asg_lifecycle_body(n, action, result, &body);
        if (r < 0)
                return r;
        call = calloc(1, sizeof(*call));
        if (!call)
                return -ENOMEM;
        *call = (struct lifecycle_call){ .done = done, .userdata = userdata };
        r = asg_call(c, body, lifecycle_answer, call);
        if (r < 0)
                free(call);
        return r;
}

int asg_complete_lifecycle(struct asg_client *c, const struct notice *n, const char *result,
                           asg_done_fn done, void *userdata)
{
        return lifecycle_send(c, "CompleteLifecycleAction", n, result ? result : "CONTINUE", done, userdata);
}

int asg_heartbeat(struct asg_client *c, const struct notice *n, asg_done_fn done, void *userdata)
{
        return lifecycle_send(c, "RecordLifecycleActionHeartbeat", n, NULL, done, userdata);
}

bool asg_no_such_action(const char *message)
{
        return startswith(message ? message : "", "ValidationError");
}

const char *asg_client_endpoint(const struct asg_client *c)
{
        return aws_client_endpoint(c->aws);
}

int asg_client_new(struct loop *l, const char *endpoint, const char *region, asg_credentials_fn creds,
                   void *creds_userdata, struct asg_client **ret)
{
        void *c;
        int r = aws_service_client_new(l, region,
                                       &(struct aws_client_config){
                                           .service = "autoscaling",
                                           .protocol = AWS_PROTOCOL_QUERY,
                                           .endpoint = { .service_id = "AUTO_SCALING",
                                                         .legacy_id = "AUTOSCALING",
                                                         .host = "autoscaling",
                                                         .configured = endpoint,
                                                         .region = region },
                                           .credentials = creds,
                                           .credentials_userdata = creds_userdata,
                                           .timeout_usec = ASG_TIMEOUT_USEC,
                                           .notify_cancel = true,
                                       },
                                       sizeof(struct asg_client), &c);
        if (r >= 0)
                *ret = c;
        return r;
}

struct asg_client *asg_client_free(struct asg_client *c)
{
        if (!c)
                return NULL;
        aws_client_free(c->aws);
        free(c);
        return NULL;
}
