/* aws/notice: Auto Scaling lifecycle messages, straight to the queue or as an EventBridge detail. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "notice_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

#define ASG_TEST_NOTIFICATION "autoscaling:TEST_NOTIFICATION"
#define ASG_TERMINATING       "autoscaling:EC2_INSTANCE_TERMINATING"
#define ASG_LAUNCHING         "autoscaling:EC2_INSTANCE_LAUNCHING"

/* ---- Auto Scaling ---- */

/* Field `index` (0 = "arn") of "arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE", copied into dst when it is
 * non-empty, shorter than size and made of [a-z0-9-] only; dst is left as it was otherwise. */
static void arn_field(const char *arn, int index, char *dst, size_t size)
{
        if (!startswith(arn, "arn:"))
                return;
        const char *p = arn;
        for (int i = 0; i < index; i++) {
                p = strchr(p, ':');
                if (!p)
                        return;
                p++;
        }
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : 0;
        if (len == 0 || len >= size)
                return;
        for (size_t i = 0; i < len; i++)
                if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '-'))
                        return;
        memcpy(dst, p, len);
        dst[len] = 0;
}

/* "arn:aws:autoscaling:us-east-1:123456789012:..." → "123456789012"; dst unchanged when there is none. */
static void account_from_arn(const char *arn, char *dst)
{
        char id[NOTICE_ACCOUNT_SIZE] = "";

        arn_field(arn, 4, id, sizeof(id));
        if (notice_account_valid(id))
                memcpy(dst, id, sizeof(id));
}

/* The account an Auto Scaling message names (`AccountId`), over the one its group ARN gave. */
static int asg_account(struct ctx *c, const cJSON *o, const char *where, const char *pfx, struct notice *n)
{
        char path[64];
        const char *account;

        snprintf(path, sizeof(path), "%sAccountId", pfx);
        int r = notice_get_account(c, o, "AccountId", where, path, &account);
        if (r >= 0 && account)
                memcpy(n->account, account, strlen(account) + 1);
        return r;
}

/* A lifecycle message: the `detail` of an EventBridge event (env_id/env_time set) or a message Auto Scaling
 * sent straight to the queue (or through SNS). */
int notice_asg_lifecycle(struct ctx *c, const cJSON *o, const char *where, const char *pfx,
                         const char *env_id, uint64_t env_time)
{
        char path[64];
        const char *transition, *event, *s;
        int r;

#define P(key) (snprintf(path, sizeof(path), "%s%s", pfx, key), path)
        r = notice_get_str(c, o, "LifecycleTransition", where, P("LifecycleTransition"), false, &transition);
        if (r >= 0)
                r = notice_get_str(c, o, "Event", where, P("Event"), false, &event);
        if (r < 0)
                return r;

        if (streq(event, ASG_TEST_NOTIFICATION) || streq(transition, ASG_TEST_NOTIFICATION)) {
                struct notice *n;
                uint64_t t = env_time;
                if (!env_time && (r = notice_get_time(c, o, "Time", where, P("Time"), true, &t)) < 0)
                        return r;
                if (!env_id &&
                    (r = notice_get_str(c, o, "RequestId", where, P("RequestId"), true, &env_id)) < 0)
                        return r;
                r = notice_get_str(c, o, "AutoScalingGroupName", where, P("AutoScalingGroupName"), false,
                                   &s);
                if (r < 0)
                        return r;
                r = notice_push(c, NOTICE_ASG_TEST_NOTIFICATION, &n);
                if (r >= 0)
                        r = SET(c, n->event_id, env_id, where, "id");
                if (r >= 0 && s)
                        r = SET(c, n->asg_name, s, where, P("AutoScalingGroupName"));
                if (r < 0)
                        return r;
                n->notice_time = t;
                const cJSON *arn = notice_get(o, "AutoScalingGroupARN");
                if (cJSON_IsString(arn) && arn->valuestring) {
                        arn_field(arn->valuestring, 3, n->region, sizeof(n->region));
                        account_from_arn(arn->valuestring, n->account);
                }
                return asg_account(c, o, where, pfx, n);
        }
        if (!transition) {
                if (event)
                        return notice_fail(c, -EOPNOTSUPP,
                                           "Auto Scaling notification '%s' is not a lifecycle hook message",
                                           Q(event));
                return notice_fail(c, -EBADMSG, "%s without %s", where, P("LifecycleTransition"));
        }
        bool launching = streq(transition, ASG_LAUNCHING);
        if (!launching && !streq(transition, ASG_TERMINATING))
                return notice_fail(c, -EOPNOTSUPP, "%s: unknown lifecycle transition '%s'", where,
                                   Q(transition));

        const char *iid, *hook, *group, *token;
        uint64_t t = env_time;
        r = notice_get_instance(c, o, "EC2InstanceId", where, P("EC2InstanceId"), &iid);
        if (r >= 0)
                r = notice_get_str(c, o, "LifecycleHookName", where, P("LifecycleHookName"), true, &hook);
        if (r >= 0)
                r = notice_get_str(c, o, "AutoScalingGroupName", where, P("AutoScalingGroupName"), true,
                                   &group);
        if (r >= 0)
                r = notice_get_str(c, o, "LifecycleActionToken", where, P("LifecycleActionToken"), true,
                                   &token);
        if (r >= 0 && !env_time)
                r = notice_get_time(c, o, "Time", where, P("Time"), true, &t);
        if (r >= 0 && !env_id) {
                r = notice_get_str(c, o, "RequestId", where, P("RequestId"), false, &env_id);
                if (r >= 0 && !env_id)
                        env_id = token;
        }
        if (r < 0)
                return r;

        struct notice *n;
        r = notice_push(c, launching ? NOTICE_ASG_LIFECYCLE_LAUNCH : NOTICE_ASG_LIFECYCLE_TERMINATE, &n);
        if (r >= 0)
                r = SET(c, n->lifecycle_hook_name, hook, where, P("LifecycleHookName"));
        if (r >= 0)
                r = SET(c, n->asg_name, group, where, P("AutoScalingGroupName"));
        if (r >= 0)
                r = SET(c, n->lifecycle_action_token, token, where, P("LifecycleActionToken"));
        if (r >= 0)
                r = SET(c, n->event_id, env_id, where, "RequestId");
        if (r < 0)
                return r;
#undef P
        memcpy(n->instance_id, iid, strlen(iid) + 1);
        n->notice_time = t;
        /* A launching instance is not going anywhere: its hook's time is the controller's to manage. */
        if (!launching)
                n->deadline =
                    notice_add_sat(t, c->opts->asg_deadline_usec ?: NOTICE_ASG_DEFAULT_DEADLINE_USEC);
        return asg_account(c, o, where, pfx, n);
}
