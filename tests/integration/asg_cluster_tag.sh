#!/usr/bin/env bash
# Issue #15: with controller.cluster_name, the controller completes an Auto Scaling lifecycle action only
# for a group tagged kubernetes.io/cluster/NAME, looked up with DescribeAutoScalingGroups on the
# simulator's Auto Scaling surface. The AWS CLI, a client spotdrain does not control, sends the lifecycle
# message and sets the tag:
# - the group untagged: the node is drained, its lifecycle action left alone (no CompleteLifecycleAction
#   reaches Auto Scaling);
# - the group tagged by the AWS CLI (and read back by it): a new controller completes the action, CONTINUE.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq curl
requires aws

SPOT_A=i-0a00000000000000a

cat >"$TEST_TMP/scenario.yaml" <<EOF
name: tagged
mode: controller
nodes:
  - {name: spot-a, instance_id: $SPOT_A, zone: us-east-1a, capacity_type: spot,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, allocatable: {cpu: "8", memory: 32Gi, pods: 58}}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 2, placement: {spot-a: 2},
     requests: {cpu: 100m, memory: 128Mi}, termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1}
EOF
start_sim tagged "$TEST_TMP/scenario.yaml"
{ read -r QUEUE_URL && read -r SQS_URL && read -r ASG_URL; } < <(sim_endpoint queue_url sqs autoscaling)

GROUP=$(aws_sim "$ASG_URL" autoscaling describe-auto-scaling-groups | jq -r '.AutoScalingGroups[0].AutoScalingGroupName')
case $GROUP in "" | null) fail "the simulator names no Auto Scaling group" ;; esac
log "group $GROUP, untagged"

# lifecycle ID: the EventBridge event of the group's termination hook for spot-a.
lifecycle() {
	jq -cn --arg id "$1" --arg group "$GROUP" --arg instance "$SPOT_A" --arg time "$(date -u +%Y-%m-%dT%H:%M:%SZ)" '
	{version: "0", id: $id, "detail-type": "EC2 Instance-terminate Lifecycle Action", source: "aws.autoscaling",
	 account: "123456789012", time: $time, region: "us-east-1",
	 resources: ["arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:5e1c:autoScalingGroupName/" + $group],
	 detail: {LifecycleActionToken: ("87654321-4321-4321-4321-21098765" + ($id | .[-4:])), AutoScalingGroupName: $group,
	   LifecycleHookName: "spotdrain-terminate", EC2InstanceId: $instance,
	   LifecycleTransition: "autoscaling:EC2_INSTANCE_TERMINATING", Origin: "AutoScalingGroup", Destination: "EC2"}}'
}
send() { aws_sim "$SQS_URL" sqs send-message --queue-url "$QUEUE_URL" --message-body "$1" >/dev/null; }
completes() { grep -c 'sim autoscaling: CompleteLifecycleAction for' "$SIM_LOG" || true; }

# controller NAME: a controller of cluster "prod" on the queue, its log in TEST_TMP/NAME.log.
controller() {
	AWS_ACCESS_KEY_ID=$SIM_AWS_KEY_ID AWS_SECRET_ACCESS_KEY=$SIM_AWS_SECRET AWS_REGION=us-east-1 SPOTDRAIN_CONTROLLER_CLUSTER_NAME=prod \
		"$SPOTDRAIN" controller --queue-url "$QUEUE_URL" --asg-endpoint "$ASG_URL" --kubeconfig "$SIM_KUBECONFIG" \
		--no-leader-election --metrics-listen off --log-level debug >"$TEST_TMP/$1.log" 2>&1 &
	CTL_PID=$!
	SIM_PIDS+=("$CTL_PID")
}
stop_controller() {
	kill -TERM "$CTL_PID"
	wait "$CTL_PID" || fail "controller exited $? after SIGTERM"
}

log "an untagged group: the node is drained, its lifecycle action left alone"
controller first
send "$(lifecycle lifecycle-0001)"
wait_for 60 grep -q "group $GROUP does not carry the tag kubernetes.io/cluster/prod" "$TEST_TMP/first.log" ||
	{ cat "$TEST_TMP/first.log" >&2; fail "the untagged group's action was not refused"; }
grep -q 'DescribeAutoScalingGroups' "$TEST_TMP/first.log" || fail "no DescribeAutoScalingGroups in the log"
[ "$(completes)" -eq 0 ] || fail "a lifecycle action of an untagged group was completed"
stop_controller

log "the AWS CLI tags the group; a new controller completes the action"
aws_sim "$ASG_URL" autoscaling create-or-update-tags --tags \
	"ResourceId=$GROUP,ResourceType=auto-scaling-group,Key=kubernetes.io/cluster/prod,Value=owned,PropagateAtLaunch=false"
aws_sim "$ASG_URL" autoscaling describe-auto-scaling-groups --auto-scaling-group-names "$GROUP" |
	jq -e '.AutoScalingGroups[0].Tags | any(.Key == "kubernetes.io/cluster/prod" and .Value == "owned")' >/dev/null ||
	fail "the AWS CLI does not read the tag back"
controller second
send "$(lifecycle lifecycle-0002)"
wait_for 60 grep -q "sim autoscaling: CompleteLifecycleAction for $SPOT_A of group $GROUP, hook spotdrain-terminate, result CONTINUE" "$SIM_LOG" ||
	{ cat "$TEST_TMP/second.log" >&2; fail "the tagged group's action was not completed"; }
[ "$(completes)" -eq 1 ] || fail "want one CompleteLifecycleAction, got $(completes)"
stop_controller
log "ok"
