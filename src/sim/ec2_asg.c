/* The Auto Scaling group: its description, desired capacity, tags and lifecycle hooks. */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sim/aws_request.h"
#include "sim/ec2_internal.h"
#include "sim/ec2_surface.h"
#include "sim/elbv2.h"
#include "sim/model.h"
#include "sim/server.h"
#include "sim/sqs_surface.h"
#include "sim/sts_surface.h"
#include "spotdrain/core.h"
#include "spotdrain/provision.h"
#include "spotdrain/util.h"

/* ---- Auto Scaling ---- */

static unsigned group_live(struct sim_ec2 *e)
{
        unsigned n = 0;
        for (size_t i = 0; i < sim_ec2_view_count(e); i++) {
                struct view v;
                if (sim_ec2_view_at(e, i, &v) && v.in_group && (v.code == 0 || v.code == 16))
                        n++;
        }
        return n;
}

void sim_ec2_act_describe_groups(struct sim_ec2 *e, const cJSON *p, struct answer *a)
{
        const char *name = sim_ec2_param(p, "AutoScalingGroupNames.member.1");
        char when[40], rid[37];
        const cJSON *t;

        sim_ec2_request_id(e, rid);
        sim_ec2_ans_printf(
            a,
            "<DescribeAutoScalingGroupsResponse xmlns=\"%s\"><DescribeAutoScalingGroupsResult>"
            "<AutoScalingGroups>",
            ASG_XMLNS);
        if (name && !streq(name, e->group)) {
                sim_ec2_ans_printf(
                    a,
                    "</AutoScalingGroups></DescribeAutoScalingGroupsResult><ResponseMetadata>"
                    "<RequestId>%s</RequestId></ResponseMetadata></DescribeAutoScalingGroupsResponse>",
                    rid);
                return;
        }
        format_rfc3339(e->created_usec, when, sizeof(when));
        sim_ec2_ans_printf(a, "<member>");
        sim_ec2_ans_elem(a, "AutoScalingGroupName", e->group);
        sim_ec2_ans_printf(a,
                           "<AutoScalingGroupARN>arn:aws:autoscaling:%s:%s:autoScalingGroup:"
                           "3f2d9c1e-7b5a-4e8f-9a61-0c2b7d4e5f60:autoScalingGroupName/",
                           e->region, SIM_EC2_ACCOUNT);
        sim_ec2_ans_text(a, e->group);
        sim_ec2_ans_printf(
            a,
            "</AutoScalingGroupARN><MinSize>0</MinSize><MaxSize>%d</MaxSize><DesiredCapacity>%d"
            "</DesiredCapacity><DefaultCooldown>300</DefaultCooldown><AvailabilityZones>",
            e->max, e->desired);
        for (size_t i = 0; i < sim_node_count(e->sim); i++) {
                bool dup = false;
                for (size_t k = 0; k < i && !dup; k++)
                        dup = streq(sim_node_zone(e->sim, k), sim_node_zone(e->sim, i));
                if (!dup)
                        sim_ec2_ans_elem(a, "member", sim_node_zone(e->sim, i));
        }
        sim_ec2_ans_printf(a,
                           "</AvailabilityZones><LoadBalancerNames/><TargetGroupARNs/><HealthCheckType>EC2"
                           "</HealthCheckType><HealthCheckGracePeriod>300</HealthCheckGracePeriod>");
        sim_ec2_ans_elem(a, "CreatedTime", when);
        sim_ec2_ans_printf(a, "<Instances>");
        for (size_t i = 0; i < sim_ec2_view_count(e); i++) {
                struct view v;
                if (!sim_ec2_view_at(e, i, &v) || !v.in_group || v.code == 48)
                        continue;
                sim_ec2_ans_printf(a, "<member>");
                sim_ec2_ans_elem(a, "InstanceId", v.id);
                sim_ec2_ans_elem(a, "InstanceType", v.type);
                sim_ec2_ans_elem(a, "AvailabilityZone", v.zone);
                const char *hooked = sim_launch_hook_state(e->sim, v.id);
                sim_ec2_ans_elem(a, "LifecycleState",
                                 hooked         ? hooked
                                 : v.code == 0  ? "Pending"
                                 : v.code == 16 ? "InService"
                                                : "Terminating");
                sim_ec2_ans_printf(a, "<HealthStatus>Healthy</HealthStatus><ProtectedFromScaleIn>false"
                                      "</ProtectedFromScaleIn></member>");
        }
        sim_ec2_ans_printf(a, "</Instances><Tags>");
        cJSON_ArrayForEach (t, e->group_tags) {
                sim_ec2_ans_printf(a, "<member>");
                sim_ec2_ans_elem(a, "ResourceId", e->group);
                sim_ec2_ans_printf(a, "<ResourceType>auto-scaling-group</ResourceType>");
                sim_ec2_ans_elem(a, "Key", t->string);
                sim_ec2_ans_elem(a, "Value", t->valuestring);
                sim_ec2_ans_printf(a, "<PropagateAtLaunch>false</PropagateAtLaunch></member>");
        }
        sim_ec2_ans_printf(
            a,
            "</Tags><NewInstancesProtectedFromScaleIn>false</NewInstancesProtectedFromScaleIn>"
            "</member></AutoScalingGroups></DescribeAutoScalingGroupsResult><ResponseMetadata>"
            "<RequestId>%s</RequestId></ResponseMetadata></DescribeAutoScalingGroupsResponse>",
            rid);
}

static void asg_ok(struct sim_ec2 *e, struct answer *a, const char *action)
{
        char rid[37];
        sim_ec2_request_id(e, rid);
        sim_ec2_ans_printf(
            a,
            "<%sResponse xmlns=\"%s\"><ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata>"
            "</%sResponse>",
            action, ASG_XMLNS, rid, action);
}

/* The zone of the group with the fewest live instances. */
static const char *emptiest_zone(struct sim_ec2 *e)
{
        const char *best = NULL;
        unsigned best_n = 0;
        for (size_t z = 0; z < sim_node_count(e->sim); z++) {
                const char *zone = sim_node_zone(e->sim, z);
                unsigned n = 0;
                for (size_t i = 0; i < sim_ec2_view_count(e); i++) {
                        struct view v;
                        if (sim_ec2_view_at(e, i, &v) && v.in_group && (v.code == 0 || v.code == 16) &&
                            streq(v.zone, zone))
                                n++;
                }
                if (!best || n < best_n) {
                        best = zone;
                        best_n = n;
                }
        }
        return best;
}

void sim_ec2_act_set_desired(struct sim_ec2 *e, const cJSON *p, struct answer *a)
{
        const char *name = sim_ec2_param(p, "AutoScalingGroupName"),
                   *d = sim_ec2_param(p, "DesiredCapacity");
        char *end = NULL;
        long want = d ? strtol(d, &end, 10) : -1;

        if (!name || !d || !end || *end || want < 0) {
                asg_error(e, a, 400, "ValidationError",
                          "AutoScalingGroupName and DesiredCapacity are required");
                return;
        }
        if (!streq(name, e->group)) {
                asg_error(e, a, 400, "ValidationError",
                          "AutoScalingGroup name not found - no such group: %s", name);
                return;
        }
        if (want > e->max) {
                asg_error(e, a, 400, "ValidationError",
                          "New SetDesiredCapacity value %ld is above max value %d for the AutoScalingGroup.",
                          want, e->max);
                return;
        }
        if (want != e->desired)
                e->stats.desired_changes++;
        e->desired = (int)want;
        /* Scale out at once (the sim's group does not scale in: nodes only leave when interrupted). */
        const char *type = sim_node_count(e->sim) > 0 ? sim_node_instance_type(e->sim, 0) : NULL;
        const char *capacity = sim_node_count(e->sim) > 0 ? sim_node_capacity_type(e->sim, 0) : "on-demand";
        for (unsigned live = group_live(e); type && live < (unsigned)e->desired; live++) {
                const char *zone = emptiest_zone(e);
                int r = zone ? sim_ec2_launch(e, type, zone, NULL, capacity, NULL, true, NULL) : -EINVAL;
                if (r < 0) {
                        log_debug_errno(r, "sim ec2: group %s could not launch %s", e->group, type);
                        break;
                }
        }
        asg_ok(e, a, "SetDesiredCapacity");
}

void sim_ec2_act_tags(struct sim_ec2 *e, const cJSON *p, struct answer *a)
{
        for (unsigned k = 1; k <= MAX_INDEX; k++) {
                const char *id = sim_ec2_param(p, "Tags.member.%u.ResourceId", k);
                const char *key = sim_ec2_param(p, "Tags.member.%u.Key", k);
                const char *val = sim_ec2_param(p, "Tags.member.%u.Value", k);
                if (!key)
                        break;
                if (!streq(id, e->group)) {
                        asg_error(e, a, 400, "ValidationError", "AutoScalingGroup name not found - %s",
                                  id ? id : "(none)");
                        return;
                }
                if (sim_ec2_param_set(e->group_tags, key, val ? val : "") < 0)
                        a->oom = true;
        }
        asg_ok(e, a, "CreateOrUpdateTags");
}

/* CompleteLifecycleAction, RecordLifecycleActionHeartbeat: taken for the group's own hooks; another
 * group's is refused as Auto Scaling refuses an action it has no record of. The action is named by its
 * LifecycleActionToken or, as the API allows, by its InstanceId alone. Each is logged with the scenario
 * time it came at and whether the instance role's credentials (IMDS) signed it: the record tests read. */
void sim_ec2_act_lifecycle(struct sim_ec2 *e, const cJSON *p, struct answer *a, const char *action,
                           bool role)
{
        const char *group = sim_ec2_param(p, "AutoScalingGroupName"),
                   *hook = sim_ec2_param(p, "LifecycleHookName");
        const char *instance = sim_ec2_param(p, "InstanceId"),
                   *token = sim_ec2_param(p, "LifecycleActionToken");
        const char *result = sim_ec2_param(p, "LifecycleActionResult");
        bool complete = streq(action, "CompleteLifecycleAction");

        if (!hook || (!instance && !token) || (complete && !result)) {
                asg_error(e, a, 400, "ValidationError",
                          "%s needs LifecycleHookName, InstanceId or "
                          "LifecycleActionToken%s",
                          action, complete ? " and LifecycleActionResult" : "");
                return;
        }
        if (!streq(group, e->group)) {
                asg_error(e, a, 400, "ValidationError",
                          "No active Lifecycle Action found with instance ID %s",
                          instance ? instance : token);
                return;
        }
        /* An instance launched under the launch hook: its one action, pending until completed. */
        const char *state = sim_launch_hook_state(e->sim, instance);
        if (state && sim_launch_hook_complete(e->sim, instance, complete ? result : NULL) < 0) {
                asg_error(e, a, 400, "ValidationError",
                          "No active Lifecycle Action found with instance ID %s", instance);
                return;
        }
        if (complete)
                e->stats.lifecycle_completes++;
        else
                e->stats.lifecycle_heartbeats++;
        log_info("sim autoscaling: %s for %s of group %s, hook %s%s%s, at %.3f s, by %s", action,
                 instance ? instance : token, group, hook, complete ? ", result " : "",
                 complete ? result : "", sim_now(e->sim), role ? "the instance role" : "other credentials");
        asg_ok(e, a, action);
}

/* One hook of the group, when the request lists it (or names none). */
static void hook_member(struct sim_ec2 *e, const cJSON *p, struct answer *a, const char *hook,
                        const char *transition, const char *default_result, int timeout)
{
        bool listed = !sim_ec2_param(p, "LifecycleHookNames.member.1");

        for (unsigned k = 1; k <= MAX_INDEX && !listed; k++) {
                const char *name = sim_ec2_param(p, "LifecycleHookNames.member.%u", k);
                if (!name)
                        break;
                listed = streq(name, hook);
        }
        if (!listed)
                return;
        sim_ec2_ans_printf(a, "<member>");
        sim_ec2_ans_elem(a, "LifecycleHookName", hook);
        sim_ec2_ans_elem(a, "AutoScalingGroupName", e->group);
        sim_ec2_ans_elem(a, "LifecycleTransition", transition);
        sim_ec2_ans_printf(a,
                           "<HeartbeatTimeout>%d</HeartbeatTimeout><GlobalTimeout>%d</GlobalTimeout>"
                           "<DefaultResult>%s</DefaultResult></member>",
                           timeout, timeout * 100 < 172800 ? timeout * 100 : 172800, default_result);
}

/* DescribeLifecycleHooks: the group's termination hook, the one the SQS surface's lifecycle messages name
 * (SIM_SQS_LIFECYCLE_HOOK), and when the scenario has asg-launch events its launch hook
 * (SIM_SQS_LAUNCH_HOOK, default result ABANDON); their HeartbeatTimeout from the scenario, GlobalTimeout
 * Auto Scaling's min(100 x HeartbeatTimeout, 48 h). LifecycleHookNames.member.N filters them as Auto Scaling
 * does. */
void sim_ec2_act_describe_hooks(struct sim_ec2 *e, const cJSON *p, struct answer *a)
{
        const char *group = sim_ec2_param(p, "AutoScalingGroupName");
        char rid[37];
        int timeout;

        if (!group) {
                asg_error(e, a, 400, "ValidationError", "AutoScalingGroupName is required");
                return;
        }
        if (!streq(group, e->group)) {
                asg_error(e, a, 400, "ValidationError", "Group %s not found", group);
                return;
        }
        timeout = sim_hook_heartbeat_timeout(e->sim); /* the sim's lock is held */
        e->stats.hook_describes++;
        sim_ec2_request_id(e, rid);
        sim_ec2_ans_printf(
            a, "<DescribeLifecycleHooksResponse xmlns=\"%s\"><DescribeLifecycleHooksResult><LifecycleHooks>",
            ASG_XMLNS);
        /* The launch hook, when the scenario launches under it: ABANDON by default, as many groups set it.
         */
        if (sim_has_launch_hook(e->sim))
                hook_member(e, p, a, SIM_SQS_LAUNCH_HOOK, "autoscaling:EC2_INSTANCE_LAUNCHING", "ABANDON",
                            timeout);
        hook_member(e, p, a, SIM_SQS_LIFECYCLE_HOOK, "autoscaling:EC2_INSTANCE_TERMINATING", "CONTINUE",
                    timeout);
        sim_ec2_ans_printf(a,
                           "</LifecycleHooks></DescribeLifecycleHooksResult><ResponseMetadata><RequestId>%s"
                           "</RequestId></ResponseMetadata></DescribeLifecycleHooksResponse>",
                           rid);
}
