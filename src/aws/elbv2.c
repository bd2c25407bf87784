/* aws/elbv2: DescribeTargetHealth, DescribeTargetGroupAttributes and DeregisterTargets in the query
 * protocol, answers read with the AWS XML reader (awsxml.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/awsxml.h"
#include "spotdrain/core.h"
#include "spotdrain/elbv2.h"

#define ELBV2_TIMEOUT_USEC (10ULL * 1000000ULL)
#define ELBV2_ATTEMPTS     3

struct elbv2_client {
        struct aws_client *aws;
};

/* Action, Version, TargetGroupArn and the targets. */
static int form(const char *action, const char *arn, const char *const *ids, size_t n, char **ret)
{
        struct buf b = {};
        int r;

        if (isempty(arn))
                return -EINVAL;
        r = aws_form_add(&b, "Action", action);
        if (r >= 0)
                r = aws_form_add(&b, "Version", ELBV2_API_VERSION);
        if (r >= 0)
                r = aws_form_add(&b, "TargetGroupArn", arn);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                char key[48];
                snprintf(key, sizeof(key), "Targets.member.%zu.Id", i + 1);
                r = aws_form_add(&b, key, ids[i]);
        }
        if (r < 0) {
                buf_free(&b);
                return -ENOMEM;
        }
        *ret = b.data;
        return 0;
}

int elbv2_health_body(const char *arn, const char *const *ids, size_t n, char **ret)
{
        return form("DescribeTargetHealth", arn, ids, n, ret);
}

int elbv2_attributes_body(const char *arn, char **ret)
{
        return form("DescribeTargetGroupAttributes", arn, NULL, 0, ret);
}

int elbv2_deregister_body(const char *arn, const char *const *ids, size_t n, char **ret)
{
        return n == 0 ? -EINVAL : form("DeregisterTargets", arn, ids, n, ret);
}

static void copy(char *dst, size_t size, const char *src)
{
        snprintf(dst, size, "%s", src ? src : "");
}

int elbv2_parse_health(const char *xml, size_t len, struct elbv2_target_health **ret, size_t *ret_n)
{
        _cleanup_(awsxml_freep) struct awsxml *x = NULL;
        int r = awsxml_parse(xml, len, &x, NULL);
        if (r < 0)
                return r;
        const struct awsxml_node *list =
            awsxml_find(awsxml_root(x), "/DescribeTargetHealthResponse/DescribeTargetHealthResult/"
                                        "TargetHealthDescriptions");
        if (!list)
                return -EBADMSG;
        size_t n = 0;
        AWSXML_FOREACH(m, list, "member")
        n++;
        struct elbv2_target_health *t = calloc(n ? n : 1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        size_t i = 0;
        AWSXML_FOREACH(m, list, "member")
        {
                const char *id = awsxml_find_text(m, "Target/Id"),
                           *state = awsxml_find_text(m, "TargetHealth/State");
                if (!id || !state) {
                        free(t);
                        return -EBADMSG;
                }
                copy(t[i].id, sizeof(t[i].id), id);
                copy(t[i].state, sizeof(t[i].state), state);
                copy(t[i].reason, sizeof(t[i].reason), awsxml_find_text(m, "TargetHealth/Reason"));
                const char *port = awsxml_find_text(m, "Target/Port");
                t[i].port = port ? atoi(port) : 0;
                i++;
        }
        *ret = t;
        *ret_n = n;
        return 0;
}

int elbv2_parse_delay(const char *xml, size_t len, unsigned *ret_seconds)
{
        _cleanup_(awsxml_freep) struct awsxml *x = NULL;
        int r = awsxml_parse(xml, len, &x, NULL);
        if (r < 0)
                return r;
        const struct awsxml_node *list = awsxml_find(
            awsxml_root(x),
            "/DescribeTargetGroupAttributesResponse/DescribeTargetGroupAttributesResult/Attributes");
        if (!list)
                return -EBADMSG;
        AWSXML_FOREACH(m, list, "member")
        {
                if (!streq_ptr(awsxml_find_text(m, "Key"), "deregistration_delay.timeout_seconds"))
                        continue;
                const char *v = awsxml_find_text(m, "Value");
                char *end;
                unsigned long s = v ? strtoul(v, &end, 10) : 0;
                if (!v || !*v || *end || s > 3600)
                        return -EBADMSG;
                *ret_seconds = (unsigned)s;
                return 0;
        }
        return -ENOENT;
}

/* ---- calls ---- */

enum call_kind {
        CALL_HEALTH,
        CALL_DELAY,
        CALL_DEREGISTER,
};

struct call {
        enum call_kind kind;
        void *done;
        void *userdata;
};

static void answered(const struct aws_result *res, const char *body, size_t len, void *userdata)
{
        struct call *call = userdata;
        _cleanup_free_ char *message = NULL;
        _cleanup_free_ struct elbv2_target_health *t = NULL;
        size_t n = 0;
        unsigned seconds = 0;
        int error = res->error;

        if (error < 0)
                message = res->code[0] ? strprintf("%s: %s", res->code, res->message) : strdup(res->message);
        else if (call->kind == CALL_HEALTH && (error = elbv2_parse_health(body, len, &t, &n)) < 0)
                message = strdup("DescribeTargetHealth: an answer that is not one");
        else if (call->kind == CALL_DELAY && (error = elbv2_parse_delay(body, len, &seconds)) < 0)
                message =
                    strdup(error == -ENOENT ? "no deregistration_delay.timeout_seconds attribute"
                                            : "DescribeTargetGroupAttributes: an answer that is not one");
        switch (call->kind) {
        case CALL_HEALTH:
                ((elbv2_health_fn)call->done)(error, message, t, n, call->userdata);
                break;
        case CALL_DELAY:
                ((elbv2_delay_fn)call->done)(error, message, seconds, call->userdata);
                break;
        case CALL_DEREGISTER:
                ((elbv2_done_fn)call->done)(error, message, call->userdata);
                break;
        }
        free(call);
}

static int send_call(struct elbv2_client *c, enum call_kind kind, const char *action, char *body, void *done,
                     void *userdata)
{
        struct call *call = calloc(1, sizeof(*call));
        int r;
        if (!call) {
                free(body);
                return -ENOMEM;
        }
        *call = (struct call){ kind, done, userdata };
        r = aws_request_start(c->aws, &(struct aws_call_params){ .action = action, .body = body }, answered,
                              call, NULL);
        free(body);
        if (r < 0)
                free(call);
        return r;
}

int elbv2_describe_health(struct elbv2_client *c, const char *arn, const char *const *ids, size_t n,
                          elbv2_health_fn done, void *userdata)
{
        char *body = NULL;
        int r = elbv2_health_body(arn, ids, n, &body);
        return r < 0 ? r : send_call(c, CALL_HEALTH, "DescribeTargetHealth", body, (void *)done, userdata);
}

int elbv2_describe_delay(struct elbv2_client *c, const char *arn, elbv2_delay_fn done, void *userdata)
{
        char *body = NULL;
        int r = elbv2_attributes_body(arn, &body);
        return r < 0
                   ? r
                   : send_call(c, CALL_DELAY, "DescribeTargetGroupAttributes", body, (void *)done, userdata);
}

int elbv2_deregister(struct elbv2_client *c, const char *arn, const char *const *ids, size_t n,
                     elbv2_done_fn done, void *userdata)
{
        char *body = NULL;
        int r = elbv2_deregister_body(arn, ids, n, &body);
        return r < 0 ? r : send_call(c, CALL_DEREGISTER, "DeregisterTargets", body, (void *)done, userdata);
}

const char *elbv2_client_endpoint(const struct elbv2_client *c)
{
        return aws_client_endpoint(c->aws);
}

int elbv2_client_new(struct loop *l, const char *endpoint, const char *region, elbv2_credentials_fn creds,
                     void *creds_userdata, struct elbv2_client **ret)
{
        void *c;
        int r = aws_service_client_new(l, region,
                                       &(struct aws_client_config){
                                           .service = "elasticloadbalancing",
                                           .protocol = AWS_PROTOCOL_QUERY,
                                           .endpoint = { .service_id = "ELASTIC_LOAD_BALANCING_V2",
                                                         .host = "elasticloadbalancing",
                                                         .configured = endpoint,
                                                         .region = region },
                                           .credentials = creds,
                                           .credentials_userdata = creds_userdata,
                                           .timeout_usec = ELBV2_TIMEOUT_USEC,
                                           .max_attempts = ELBV2_ATTEMPTS,
                                           .notify_cancel = true,
                                       },
                                       sizeof(struct elbv2_client), &c);
        if (r >= 0)
                *ret = c;
        return r;
}

struct elbv2_client *elbv2_client_free(struct elbv2_client *c)
{
        if (!c)
                return NULL;
        aws_client_free(c->aws);
        free(c);
        return NULL;
}
