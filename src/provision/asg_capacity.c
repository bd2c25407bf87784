/* Auto Scaling mode: a replacement is one more instance in the node group's Auto Scaling group.
 *
 * Idempotency without local state: the target capacity is written on the group as the tag
 * spotdrain.io/replaced-INSTANCE before the desired capacity is raised. A second call (a duplicate notice, a
 * restart) finds the tag and only makes sure the desired capacity reached that target; it never adds again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/awsreq.h"
#include "spotdrain/awsxml.h"
#include "spotdrain/core.h"
#include "spotdrain/keys.h"
#include "spotdrain/provision.h"

#define ASG_VERSION "2011-01-01"

static void copy(char *dst, size_t size, const char *src)
{
        snprintf(dst, size, "%s", src ? src : "");
}

static int tag_key(const char *instance_id, char *buf, size_t size)
{
        int k = snprintf(buf, size, SPOTDRAIN_TAG_REPLACED_PREFIX "%s", instance_id);
        return k < 0 || (size_t)k >= size ? -EINVAL : 0;
}

static int int_text(const struct awsxml_node *n, const char *path, int *ret)
{
        const char *s = awsxml_find_text(n, path);
        char *end;
        if (isempty(s))
                return -EBADMSG;
        long v = strtol(s, &end, 10);
        if (*end || v < 0 || v > 100000)
                return -EBADMSG;
        *ret = (int)v;
        return 0;
}

int asg_parse_group(long status, const char *body, size_t len, const char *replaced_instance,
                    struct ec2_result *res, struct asg_group *ret)
{
        _cleanup_(awsxml_freep) struct awsxml *x = NULL;
        const struct awsxml_node *g;
        struct asg_group out = {};
        char key[128] = "";

        ec2_result_from_answer(0, status, body, len, res);
        if (res->error < 0)
                return res->error;
        if (awsxml_parse(body ? body : "", body ? len : 0, &x, NULL) < 0) {
                res->error = -EBADMSG;
                copy(res->message, sizeof(res->message), "unreadable answer");
                return -EBADMSG;
        }
        g = awsxml_find(awsxml_root(x), "DescribeAutoScalingGroupsResult/AutoScalingGroups/member");
        if (!g) {
                res->error = -ENOENT;
                copy(res->code, sizeof(res->code), "ValidationError");
                copy(res->message, sizeof(res->message), "AutoScalingGroup not found");
                return -ENOENT;
        }
        copy(out.name, sizeof(out.name), awsxml_find_text(g, "AutoScalingGroupName"));
        if (int_text(g, "DesiredCapacity", &out.desired) < 0 || int_text(g, "MinSize", &out.min) < 0 ||
            int_text(g, "MaxSize", &out.max) < 0) {
                res->error = -EBADMSG;
                copy(res->message, sizeof(res->message), "group without its sizes");
                return -EBADMSG;
        }
        AWSXML_FOREACH(m, awsxml_child(g, "Instances"), "member")
        out.instances++;
        if (replaced_instance && tag_key(replaced_instance, key, sizeof(key)) == 0)
                AWSXML_FOREACH(t, awsxml_child(g, "Tags"), "member")
        if (streq(awsxml_find_text(t, "Key"), key))
                copy(out.replaced_tag_value, sizeof(out.replaced_tag_value), awsxml_find_text(t, "Value"));
        *ret = out;
        return 0;
}

struct describe_ctx {
        char *instance;
        asg_group_fn done;
        void *userdata;
};

static void describe_free(struct describe_ctx *d)
{
        free(d->instance);
        free(d);
}

static void describe_answer(const struct aws_result *a, const char *body, size_t len, void *userdata)
{
        struct describe_ctx *d = userdata;
        struct asg_group g = {};
        struct ec2_result res = {};

        if (a->status == 0)
                ec2_result_from_aws(a, &res);
        else
                (void)asg_parse_group(a->status, body, len, d->instance, &res, &g);
        d->done(&res, res.error < 0 ? NULL : &g, d->userdata);
        describe_free(d);
}

int asg_describe_group(struct ec2_client *c, const char *group, const char *replaced_instance,
                       asg_group_fn done, void *userdata)
{
        struct buf b = {};
        struct describe_ctx *d;
        int r;

        if (isempty(group))
                return -EINVAL;
        d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        *d = (struct describe_ctx){ .done = done, .userdata = userdata };
        if (replaced_instance && !(d->instance = strdup(replaced_instance))) {
                free(d);
                return -ENOMEM;
        }
        r = aws_form_add(&b, "Action", "DescribeAutoScalingGroups");
        r = r ?: aws_form_add(&b, "Version", ASG_VERSION);
        r = r ?: aws_form_add(&b, "AutoScalingGroupNames.member.1", group);
        r = r ?: buf_append(&b, "", 1);
        r = r ?: ec2_call(c, true, b.data, describe_answer, d);
        buf_free(&b);
        if (r < 0)
                describe_free(d);
        return r;
}

/* ---- raising the desired capacity ---- */

struct raise_ctx {
        struct ec2_client *client;
        char *group, *instance;
        unsigned n;
        int target;
        asg_raise_fn done;
        void *userdata;
};

static void raise_release(void *userdata)
{
        struct raise_ctx *x = userdata;
        free(x->group);
        free(x->instance);
        free(x);
}

static void raise_finish(struct raise_ctx *x, const struct ec2_result *res, int desired)
{
        x->done(res, desired, x->userdata);
        raise_release(x);
}

static void set_desired_answer(const struct aws_result *a, const char *body, size_t len, void *userdata)
{
        struct raise_ctx *x = userdata;
        struct ec2_result res;

        ec2_result_from_aws(a, &res);
        log_debug("asg: SetDesiredCapacity %s %d → %ld", x->group, x->target, a->status);
        raise_finish(x, &res, x->target);
}

static int set_desired(struct raise_ctx *x)
{
        struct buf b = {};
        char num[16];
        int r;

        snprintf(num, sizeof(num), "%d", x->target);
        r = aws_form_add(&b, "Action", "SetDesiredCapacity");
        r = r ?: aws_form_add(&b, "Version", ASG_VERSION);
        r = r ?: aws_form_add(&b, "AutoScalingGroupName", x->group);
        r = r ?: aws_form_add(&b, "DesiredCapacity", num);
        r = r ?: aws_form_add(&b, "HonorCooldown", "false");
        r = r ?: buf_append(&b, "", 1);
        r = r ?: ec2_call(x->client, true, b.data, set_desired_answer, x);
        buf_free(&b);
        return r;
}

static void tag_answer(const struct aws_result *a, const char *body, size_t len, void *userdata)
{
        struct raise_ctx *x = userdata;
        struct ec2_result res;

        ec2_result_from_aws(a, &res);
        if (res.error == 0) {
                int r = set_desired(x);
                if (r == 0)
                        return;
                res.error = r;
        }
        raise_finish(x, &res, 0);
}

static int write_tag(struct raise_ctx *x)
{
        struct buf b = {};
        char key[128], num[16];
        int r;

        r = tag_key(x->instance, key, sizeof(key));
        if (r < 0)
                return r;
        snprintf(num, sizeof(num), "%d", x->target);
        r = aws_form_add(&b, "Action", "CreateOrUpdateTags");
        r = r ?: aws_form_add(&b, "Version", ASG_VERSION);
        r = r ?: aws_form_add(&b, "Tags.member.1.ResourceId", x->group);
        r = r ?: aws_form_add(&b, "Tags.member.1.ResourceType", "auto-scaling-group");
        r = r ?: aws_form_add(&b, "Tags.member.1.Key", key);
        r = r ?: aws_form_add(&b, "Tags.member.1.Value", num);
        r = r ?: aws_form_add(&b, "Tags.member.1.PropagateAtLaunch", "false");
        r = r ?: buf_append(&b, "", 1);
        r = r ?: ec2_call(x->client, true, b.data, tag_answer, x);
        buf_free(&b);
        return r;
}

static void raise_group(const struct ec2_result *res, const struct asg_group *g, void *userdata)
{
        struct raise_ctx *x = userdata;
        struct ec2_result out = *res;
        int r;

        if (res->error < 0) {
                raise_finish(x, res, 0);
                return;
        }
        if (g->replaced_tag_value[0]) {
                /* Asked before: bring the group up to the recorded target, never beyond. */
                x->target = atoi(g->replaced_tag_value);
                if (g->desired >= x->target) {
                        raise_finish(x, res, g->desired);
                        return;
                }
                r = set_desired(x);
        } else {
                x->target = g->desired + (int)x->n;
                if (x->target > g->max)
                        x->target = g->max;
                if (x->target <= g->desired) {
                        out.error = -ENOSPC;
                        snprintf(out.message, sizeof(out.message), "group %.200s is at its max size %d",
                                 g->name, g->max);
                        raise_finish(x, &out, g->desired);
                        return;
                }
                r = write_tag(x);
        }
        if (r < 0) {
                out.error = r;
                raise_finish(x, &out, 0);
        }
}

int asg_raise_desired(struct ec2_client *c, const char *group, const char *instance_id, unsigned n,
                      asg_raise_fn done, void *userdata)
{
        struct raise_ctx *x;
        int r;

        if (isempty(group) || isempty(instance_id) || n == 0)
                return -EINVAL;
        x = calloc(1, sizeof(*x));
        if (!x)
                return -ENOMEM;
        *x = (struct raise_ctx){ .client = c, .n = n, .done = done, .userdata = userdata };
        x->group = strdup(group);
        x->instance = strdup(instance_id);
        if (!x->group || !x->instance) {
                raise_release(x);
                return -ENOMEM;
        }
        r = asg_describe_group(c, group, instance_id, raise_group, x);
        if (r < 0)
                raise_release(x);
        return r;
}
