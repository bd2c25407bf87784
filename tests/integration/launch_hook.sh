#!/usr/bin/env bash
# Issue 17, item 2: Auto Scaling launch lifecycle actions, against the simulator's Auto Scaling surface, with
# the AWS CLI tagging the group and reading its hooks and instances. The scenario's group launches three
# instances under its launch hook (HeartbeatTimeout 30 s, default result ABANDON); the simulator sends each
# launch's EventBridge message to its queue:
# - u-1, while the group is untagged: the controller (cluster "prod") leaves its action alone: no
#   CompleteLifecycleAction for it, ever; the simulated hook ends it with its default result at its timeout;
# - the AWS CLI tags the group; new-a joins NotReady and turns Ready 8 s after its launch: CONTINUE, recorded
#   by the simulator no earlier than the node's Ready time (the first completion the simulator takes is the
#   one it keeps: a second one would be refused);
# - new-b joins and never turns Ready: heartbeats keep its action alive past the hook's 30 s, and with
#   controller.launch_ready_timeout_seconds 32 it gets ABANDON; the controller is SIGKILLed while it waits
#   (after its first heartbeat), and the restarted one picks its message up again, heartbeats at once (the
#   next was due) and completes it.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq curl
requires aws

# The simulator's clock runs from its start, in real time; new-a and new-b launch at 20 s, after the untagged
# phase and the tagging (two AWS CLI runs and a controller's start and stop). At 8 s, on a loaded machine
# (stress -c 2, load 14 to 18) that phase took longer, and the untagged controller took and refused their
# launch messages too.
U1=i-0c00000000000000c
NEW_A=i-0a0000000000000aa
NEW_B=i-0b0000000000000bb
cat >"$TEST_TMP/scenario.yaml" <<EOF
name: launch
mode: controller
autoscaling: {heartbeat_timeout_seconds: 30}
nodes:
  - {name: od-1, zone: us-east-1a, capacity_type: on-demand, allocatable: {cpu: "8", memory: 32Gi, pods: 58}}
events:
  - {at: 1, type: asg-launch, node: u-1, instance_id: $U1, join_seconds: 1, ready_seconds: 2}
  - {at: 20, type: asg-launch, node: new-a, instance_id: $NEW_A, join_seconds: 2, ready_seconds: 8}
  - {at: 20, type: asg-launch, node: new-b, instance_id: $NEW_B, join_seconds: 2, ready_seconds: never}
EOF
start_sim launch "$TEST_TMP/scenario.yaml"
{ read -r QUEUE_URL && read -r ASG_URL; } < <(sim_endpoint queue_url autoscaling)
GROUP=spotdrain-launch

hooks=$(aws_sim "$ASG_URL" autoscaling describe-lifecycle-hooks --auto-scaling-group-name "$GROUP" \
	--lifecycle-hook-names spotdrain-launch)
jq -e '.LifecycleHooks | length == 1 and .[0].LifecycleTransition == "autoscaling:EC2_INSTANCE_LAUNCHING" and
	.[0].HeartbeatTimeout == 30 and .[0].DefaultResult == "ABANDON"' <<<"$hooks" >/dev/null ||
	fail "describe-lifecycle-hooks: $hooks"

completes() { grep -c "sim autoscaling: CompleteLifecycleAction for $1 " "$SIM_LOG" || true; }
beats() { grep -c "sim autoscaling: RecordLifecycleActionHeartbeat for $1 " "$SIM_LOG" || true; }
launch_of() { sim_result "$SIM_URL" | jq -c --arg n "$1" '.launches[] | select(.node == $n)'; }
result_is() { [ "$(launch_of "$1" | jq -r .result)" = "$2" ]; }
# controller: a controller of cluster "prod" on a new metrics port (PORT); metric RE: its /metrics has a line
# matching RE (within 10 s).
controller() {
	PORT=$(free_port)
	start_controller "$QUEUE_URL" "$PORT" --asg-endpoint "$ASG_URL" --no-leader-election --log-level debug
}
metric() { wait_for 10 sh -c "curl -sSf http://127.0.0.1:$PORT/metrics | grep -q '$1'"; }
# completed NODE RESULT: the simulator recorded that completion for NODE (within 45 s), and exactly one
# CompleteLifecycleAction for its instance reached Auto Scaling.
completed() {
	wait_for 45 result_is "$1" "$2" || { cat "$TEST_TMP/controller.log" >&2; fail "$1's action was not completed with $2"; }
	[ "$(completes "$3")" -eq 1 ] || fail "$1: want one CompleteLifecycleAction, got $(completes "$3")"
}
export SPOTDRAIN_CONTROLLER_CLUSTER_NAME=prod SPOTDRAIN_CONTROLLER_LAUNCH_READY_TIMEOUT_SECONDS=32

log "an untagged group: the launch action of u-1 is left alone"
controller
wait_for 20 grep -q "group $GROUP does not carry the tag kubernetes.io/cluster/prod" "$TEST_TMP/controller.log" ||
	{ cat "$TEST_TMP/controller.log" >&2; fail "the untagged group's launch action was not refused"; }
stop_controller
mv "$TEST_TMP/controller.log" "$TEST_TMP/controller-untagged.log"
[ "$(completes $U1)" -eq 0 ] || fail "the untagged group's launch action was completed"
! grep -q "$NEW_A\|$NEW_B" "$TEST_TMP/controller-untagged.log" ||
	fail "the untagged phase outlasted the launches at 20 s: its controller took their messages (a loaded machine)"

log "the AWS CLI tags the group; a new controller waits for new-a and new-b"
aws_sim "$ASG_URL" autoscaling create-or-update-tags --tags \
	"ResourceId=$GROUP,ResourceType=auto-scaling-group,Key=kubernetes.io/cluster/prod,Value=owned,PropagateAtLaunch=false"
controller
completed new-a CONTINUE $NEW_A
a=$(launch_of new-a)
jq -e '.ready_at != null and .completed_at >= .ready_at and .joined_at < .ready_at' <<<"$a" >/dev/null ||
	fail "new-a completed before its node was Ready: $a"
ready=$(curl -sSf "$SIM_URL/api/v1/nodes/new-a" | jq -r '.status.conditions[] | select(.type == "Ready") | .status')
[ "$ready" = True ] || fail "new-a is not Ready in the API: $ready"
log "new-a: $a"
result_is new-b null || fail "new-b was completed while it could still turn Ready: $(launch_of new-b)"
metric '^spotdrain_launch_hooks_waiting 1' || fail "the metrics do not show new-b waiting"

# Its first heartbeat (half the hook's 30 s after the launch) keeps the action past the hook's own timeout.
beats_at_least() { [ "$(beats "$1")" -ge "$2" ]; }
wait_for 30 beats_at_least $NEW_B 1 || { cat "$TEST_TMP/controller.log" >&2; fail "no heartbeat for new-b"; }
result_is new-b null || fail "new-b was completed before its timeout: $(launch_of new-b)"

log "SIGKILL while new-b waits; the restarted controller picks its message up again"
kill -KILL "$CTL_PID"
wait "$CTL_PID" 2>/dev/null || true
mv "$TEST_TMP/controller.log" "$TEST_TMP/controller-killed.log"
controller
completed new-b ABANDON $NEW_B
b=$(launch_of new-b)
# Completed by the controller, not by the hook's own 30 s HeartbeatTimeout (which the heartbeat pushed out).
jq -e '.ready_at == null and .completed_at - .launched_at >= 31 and .completed_by == "client"' <<<"$b" >/dev/null ||
	fail "new-b abandoned before the timeout, or by the hook's own timeout: $b"
grep -q "launch lifecycle action of $NEW_B (group $GROUP) completed with ABANDON" "$TEST_TMP/controller.log" ||
	fail "the restarted controller did not abandon new-b (no launch-abandoned alert in its log)"
# Whether the restarted controller heartbeats too depends on how much of the 30 s is left when its message
# comes back (a loaded machine leaves it none): the action was kept alive and completed by a controller.
[ "$(beats $NEW_B)" -ge 1 ] || fail "no heartbeat kept new-b's action alive"
metric '^spotdrain_launch_hooks_total{result="abandon"} 1' || fail "spotdrain_launch_hooks_total{result=\"abandon\"} is not 1"
log "new-b: $b ($(beats $NEW_B) heartbeats)"

states=$(aws_sim "$ASG_URL" autoscaling describe-auto-scaling-groups --auto-scaling-group-names "$GROUP" |
	jq -c '[.AutoScalingGroups[0].Instances[] | {(.InstanceId): .LifecycleState}] | add')
jq -e --arg a "$NEW_A" --arg b "$NEW_B" '.[$a] == "InService" and .[$b] == "Terminating"' <<<"$states" >/dev/null ||
	fail "describe-auto-scaling-groups: $states"
# u-1's action was left to its hook: its HeartbeatTimeout ran out (t = 31) to the default result.
wait_for 10 sh -c "curl -sSf $SIM_URL/sim/v1/result | jq -e '.launches[] | select(.node == \"u-1\") | .completed_by == \"timeout\"' >/dev/null" ||
	fail "u-1 was not left to its hook's timeout: $(launch_of u-1)"
[ "$(completes $U1)" -eq 0 ] || fail "the untagged group's launch action was completed later"
stop_controller
log "ok: untagged left alone, CONTINUE after Ready, ABANDON after the timeout across a SIGKILL"
