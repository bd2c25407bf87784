/* controller/asg: the two Amazon EC2 Auto Scaling calls a termination lifecycle hook needs, in the query
 * protocol (form POST to "/", Action=...&Version=2011-01-01, XML answers and ErrorResponse documents),
 * signed with SigV4 for service "autoscaling". Async on the core loop, fire-and-forget with a callback. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/awsxml.h"
#include "spotdrain/controller.h"
#include "spotdrain/core.h"
#include "spotdrain/notice.h"
#include "spotdrain/sigv4.h"

#define ASG_API_VERSION  "2011-01-01"
#define ASG_TIMEOUT_USEC (20ULL * 1000000ULL)

struct asg_call;

struct asg_client {
        struct loop *loop;
        char *endpoint, *region;
        asg_credentials_fn creds;
        void *creds_userdata;
        struct asg_call *calls; /* in flight, for cancellation */
};

struct asg_call {
        struct asg_client *c;
        struct asg_call *next;
        struct http_call *http;
        asg_done_fn done;
        void *userdata;
};

/* RFC 3986 unreserved characters stay; everything else is %XX (form values as the SDKs encode them). */
static int form_append(struct buf *b, const char *key, const char *value)
{
        int r = buf_printf(b, "%s%s=", b->len ? "&" : "", key);
        for (const unsigned char *p = (const unsigned char *)value; r >= 0 && *p; p++) {
                if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                    *p == '-' || *p == '_' || *p == '.' || *p == '~')
                        r = buf_append(b, p, 1);
                else
                        r = buf_printf(b, "%%%02X", *p);
        }
        return r;
}

int asg_lifecycle_body(const struct notice *n, const char *action, const char *result, char **ret)
{
        struct buf b = {};
        int r;

        if (!n || !action || isempty(n->asg_name) || isempty(n->lifecycle_hook_name) ||
            (isempty(n->lifecycle_action_token) && isempty(n->instance_id)))
                return -EINVAL;
        r = form_append(&b, "Action", action);
        if (r >= 0)
                r = form_append(&b, "Version", ASG_API_VERSION);
        if (r >= 0)
                r = form_append(&b, "AutoScalingGroupName", n->asg_name);
        if (r >= 0)
                r = form_append(&b, "LifecycleHookName", n->lifecycle_hook_name);
        /* The token names the action precisely; the instance is sent too, as the SDKs allow both. */
        if (r >= 0 && !isempty(n->lifecycle_action_token))
                r = form_append(&b, "LifecycleActionToken", n->lifecycle_action_token);
        if (r >= 0 && !isempty(n->instance_id))
                r = form_append(&b, "InstanceId", n->instance_id);
        if (r >= 0 && result)
                r = form_append(&b, "LifecycleActionResult", result);
        if (r < 0) {
                buf_free(&b);
                return -ENOMEM;
        }
        *ret = b.data;
        return 0;
}

static void call_unlink(struct asg_call *call)
{
        for (struct asg_call **p = &call->c->calls; *p; p = &(*p)->next)
                if (*p == call) {
                        *p = call->next;
                        break;
                }
}

static void on_http_done(const struct http_response *resp, void *userdata)
{
        struct asg_call *call = userdata;
        struct aws_error e = {};
        _cleanup_free_ char *message = NULL;
        int error = 0;

        call_unlink(call);
        if (resp->error < 0) {
                error = resp->error;
                message = strdup(resp->errbuf);
        } else if (resp->status < 200 || resp->status >= 300) {
                error = http_status_to_errno(resp->status);
                if (resp->body && aws_error_parse(resp->body, resp->body_len, &e) >= 0)
                        message = strprintf("%s: %s", e.code ? e.code : "?", e.message ? e.message : "");
                aws_error_clear(&e);
        }
        if (call->done)
                call->done(error, message, call->userdata);
        free(call);
}

static int asg_send(struct asg_client *c, const char *action, const struct notice *n, const char *result,
                    asg_done_fn done, void *userdata)
{
        _cleanup_free_ char *body = NULL, *url = NULL;
        const struct aws_credentials *creds;
        char **signed_headers = NULL;
        const char *headers[8];
        size_t nh = 0;
        struct asg_call *call;
        int r;

        r = asg_lifecycle_body(n, action, result, &body);
        if (r < 0)
                return r;
        url = strprintf("%s/", c->endpoint);
        if (!url)
                return -ENOMEM;
        creds = c->creds ? c->creds(c->creds_userdata) : NULL;
        if (!creds || isempty(creds->access_key_id) || isempty(creds->secret_access_key))
                return -ENOKEY;
        const char *base[] = { "Content-Type: application/x-www-form-urlencoded; charset=utf-8", NULL };
        r = sigv4_sign_headers(&(struct sigv4_request){ .method = "POST",
                                                        .url = url,
                                                        .headers = base,
                                                        .body = body,
                                                        .body_len = strlen(body),
                                                        .region = c->region,
                                                        .service = "autoscaling",
                                                        .time_usec = now_realtime_usec() },
                               creds, &signed_headers);
        if (r < 0)
                return r;
        headers[nh++] = base[0];
        for (size_t i = 0; signed_headers[i] && nh < ARRAY_SIZE(headers) - 1; i++)
                headers[nh++] = signed_headers[i];
        headers[nh] = NULL;
        call = calloc(1, sizeof(*call));
        if (!call) {
                sigv4_strv_free(signed_headers);
                return -ENOMEM;
        }
        *call = (struct asg_call){ .c = c, .done = done, .userdata = userdata };
        r = http_send(c->loop,
                      &(struct http_request){ .method = "POST",
                                              .url = url,
                                              .headers = headers,
                                              .body = body,
                                              .timeout_usec = ASG_TIMEOUT_USEC },
                      on_http_done, call, &call->http);
        sigv4_strv_free(signed_headers);
        if (r < 0) {
                free(call);
                return r;
        }
        call->next = c->calls;
        c->calls = call;
        return 0;
}

int asg_complete_lifecycle(struct asg_client *c, const struct notice *n, const char *result,
                           asg_done_fn done, void *userdata)
{
        return asg_send(c, "CompleteLifecycleAction", n, result ? result : "CONTINUE", done, userdata);
}

int asg_heartbeat(struct asg_client *c, const struct notice *n, asg_done_fn done, void *userdata)
{
        return asg_send(c, "RecordLifecycleActionHeartbeat", n, NULL, done, userdata);
}

const char *asg_client_endpoint(const struct asg_client *c)
{
        return c->endpoint;
}

int asg_client_new(struct loop *l, const char *endpoint, const char *region, asg_credentials_fn creds,
                   void *creds_userdata, struct asg_client **ret)
{
        struct asg_client *c;
        const char *env;

        if (!l || isempty(region) || !ret)
                return -EINVAL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->loop = l;
        c->creds = creds;
        c->creds_userdata = creds_userdata;
        if (!endpoint) {
                env = getenv("AWS_ENDPOINT_URL_AUTOSCALING");
                endpoint = !isempty(env) ? env : getenv("AWS_ENDPOINT_URL");
        }
        if (!isempty(endpoint)) {
                size_t len = strlen(endpoint);
                c->endpoint = strndup(endpoint, endpoint[len - 1] == '/' ? len - 1 : len);
        } else
                c->endpoint = strprintf("https://autoscaling.%s.amazonaws.com%s", region,
                                        startswith(region, "cn-") ? ".cn" : "");
        c->region = strdup(region);
        if (!c->endpoint || !c->region) {
                asg_client_free(c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

struct asg_client *asg_client_free(struct asg_client *c)
{
        if (!c)
                return NULL;
        while (c->calls) {
                struct asg_call *call = c->calls;
                c->calls = call->next;
                http_cancel(call->http);
                free(call);
        }
        free(c->endpoint);
        free(c->region);
        free(c);
        return NULL;
}
