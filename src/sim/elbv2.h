/* The simulator's ELBv2 (Elastic Load Balancing v2, Version 2015-12-01, SigV4 service
 * "elasticloadbalancing", query protocol: form POST, XML answers in the ELBv2 namespace, errors as
 * <ErrorResponse><Error><Type/><Code/><Message/></Error><RequestId/></ErrorResponse>), served on the EC2
 * surface's listener (sim_ec2_url) beside EC2 and Auto Scaling.
 *
 * Each workload with target_group has one target group (sim_tg_arn), bound to its Service by a
 * TargetGroupBinding. Its targets, as the AWS Load Balancer Controller registers them:
 *   instance  every node's instance that joined (port 30080, the NodePort);
 *   ip        the workload's pods that have an IP and a node (port 8080).
 * A target is healthy until its deregistration begins, draining (Target.DeregistrationInProgress) for the
 * group's deregistration_delay.timeout_seconds, then gone from the listing (described by id: unused,
 * Target.NotRegistered). Deregistration begins, whichever comes first: with DeregisterTargets; for an
 * instance, target_group.reaction_seconds (default 0) after its node got
 * node.kubernetes.io/exclude-from-external-load-balancers (the controller's reaction), or when it is gone;
 * for an IP, when its pod starts terminating (it leaves the endpoints).
 *
 *   DescribeTargetHealth           TargetGroupArn, Targets.member.N.Id/Port (optional)
 *   DescribeTargetGroupAttributes  TargetGroupArn
 *   DeregisterTargets              TargetGroupArn, Targets.member.N.Id/Port; InvalidTarget for a target that
 *                                  is not registered (nothing is deregistered then)
 * An unknown ARN answers TargetGroupNotFound (400), a missing one ValidationError (400), another Version
 * InvalidAction (400), a throttle (sim_elbv2_set_throttle) Throttling (400). Locking: called with the
 * model's lock held (it reads the model). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct buf;
struct sim;
struct sim_elbv2;

int sim_elbv2_new(struct sim_elbv2 **ret);
struct sim_elbv2 *sim_elbv2_free(struct sim_elbv2 *e); /* NULL-safe; returns NULL */
/* Whether the action is ELBv2's (the listener then checks the signature for "elasticloadbalancing"). */
bool sim_elbv2_action(const char *action);
/* Answers the request whose form parameters are p (an object of strings) into body; rid is its request id.
 * 0, or -ENOMEM. */
int sim_elbv2_answer(struct sim_elbv2 *e, struct sim *s, const cJSON *p, const char *rid, unsigned *status,
                     struct buf *body);
/* The next n calls answer Throttling. */
void sim_elbv2_set_throttle(struct sim_elbv2 *e, unsigned n);

struct sim_elbv2_stats {
        uint64_t requests;
        uint64_t deregistered; /* targets DeregisterTargets deregistered */
};
void sim_elbv2_stats(const struct sim_elbv2 *e, struct sim_elbv2_stats *ret);
