#!/usr/bin/env bash
# Issue 17, item 1: lifecycle heartbeats against the simulator's Auto Scaling surface. The group's termination
# hook has HeartbeatTimeout 120 s (read back with the AWS CLI's describe-lifecycle-hooks); a drain that takes
# ~150 s (one pod that needs 150 s to exit) runs under controller.heartbeat_interval_seconds 300, longer than
# the hook allows: the controller reads the hook with DescribeLifecycleHooks, plans the drain against what
# the hook grants (GlobalTimeout 12000 s, not an hour) and sends its first heartbeat before the 120 s run out
# (at half of them), with no CompleteLifecycleAction yet. SIGKILLed then, the
# controller is restarted; it resumes the drain from its record, gets the lifecycle message back once its
# visibility timeout ends, and heartbeats again at once, within 120 s of the last one; the drain ends with
# CONTINUE.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq
requires aws

cat >"$TEST_TMP/scenario.yaml" <<SCENARIO
name: hb
mode: controller
budget_seconds: 3600
autoscaling: {heartbeat_timeout_seconds: 120}
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot, allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, allocatable: {cpu: "8", memory: 32Gi, pods: 58}}
workloads:
  - {name: slow, namespace: shop, kind: Deployment, replicas: 1, placement: {spot-a: 1},
     requests: {cpu: 100m, memory: 128Mi}, termination_grace_seconds: 300, shutdown_seconds: 150,
     startup_seconds: 1}
events:
  - {at: 1, type: asg-lifecycle-terminate, node: spot-a}
SCENARIO
start_sim hb "$TEST_TMP/scenario.yaml"
{ read -r QUEUE_URL && read -r ASG_URL; } < <(sim_endpoint queue_url autoscaling)
GROUP=spotdrain-hb

hooks=$(aws_sim "$ASG_URL" autoscaling describe-lifecycle-hooks --auto-scaling-group-name "$GROUP")
jq -e '.LifecycleHooks | length == 1 and .[0].LifecycleHookName == "spotdrain-terminate" and
	.[0].HeartbeatTimeout == 120 and .[0].GlobalTimeout == 12000 and
	.[0].LifecycleTransition == "autoscaling:EC2_INSTANCE_TERMINATING"' <<<"$hooks" >/dev/null ||
	fail "describe-lifecycle-hooks: $hooks"
aws_sim "$ASG_URL" autoscaling describe-lifecycle-hooks --auto-scaling-group-name "$GROUP" \
	--lifecycle-hook-names other | jq -e '.LifecycleHooks == []' >/dev/null || fail "a hook not asked for is listed"

beats() { grep -c "sim autoscaling: RecordLifecycleActionHeartbeat for i-[0-9a-f]* of group $GROUP, hook spotdrain-terminate" "$SIM_LOG" || true; }
completes() { grep -c 'sim autoscaling: CompleteLifecycleAction for' "$SIM_LOG" || true; }
beats_at_least() { [ "$(beats)" -ge "$1" ]; }
now() { date +%s; }

export SPOTDRAIN_CONTROLLER_HEARTBEAT_INTERVAL_SECONDS=300
start_controller "$QUEUE_URL" "$(free_port)" --asg-endpoint "$ASG_URL" --no-leader-election --log-level debug
wait_for 30 grep -q "lifecycle hook spotdrain-terminate of group $GROUP: HeartbeatTimeout 120 s" "$TEST_TMP/controller.log" ||
	{ cat "$TEST_TMP/controller.log" >&2; fail "the controller did not read the hook's HeartbeatTimeout"; }
T0=$(now)
log "hook read at $T0; waiting for the first heartbeat"
wait_for 115 beats_at_least 1 || { cat "$TEST_TMP/controller.log" >&2; fail "no heartbeat within 115 s of the notice"; }
T1=$(now)
[ "$(completes)" -eq 0 ] || fail "the action was completed before the slow drain ended"
[ $((T1 - T0)) -ge 40 ] || fail "first heartbeat after $((T1 - T0)) s: want about half the HeartbeatTimeout"
grep -q "the drain of spot-a is planned against the time its lifecycle hook grants: 1[01][0-9][0-9][0-9] s from now" "$TEST_TMP/controller.log" ||
	fail "the drain was not planned against the hook's GlobalTimeout (12000 s)"
log "first heartbeat $((T1 - T0)) s after the notice (HeartbeatTimeout 120 s, interval 300 s), drain running"

kill -KILL "$CTL_PID"
wait "$CTL_PID" 2>/dev/null || true
mv "$TEST_TMP/controller.log" "$TEST_TMP/controller-killed.log"
start_controller "$QUEUE_URL" "$(free_port)" --asg-endpoint "$ASG_URL" --no-leader-election --log-level debug
wait_for 20 grep -q "resuming the drain of spot-a" "$TEST_TMP/controller.log" ||
	{ cat "$TEST_TMP/controller.log" >&2; fail "the restarted controller did not resume the drain"; }
wait_for 115 beats_at_least 2 || { cat "$TEST_TMP/controller.log" >&2; fail "no heartbeat after the restart"; }
T2=$(now)
[ $((T2 - T1)) -lt 120 ] || fail "the heartbeat after the restart came $((T2 - T1)) s after the last one"
[ "$(completes)" -eq 0 ] || fail "the action was completed before the slow drain ended"
log "heartbeat resumed $((T2 - T1)) s after the last one (SIGKILL in between)"

wait_for 150 grep -q "sim autoscaling: CompleteLifecycleAction for .* of group $GROUP, hook spotdrain-terminate, result CONTINUE" "$SIM_LOG" ||
	{ cat "$TEST_TMP/controller.log" >&2; fail "the drain's action was not completed"; }
stop_controller
log "ok: $(beats) heartbeats, $(completes) CompleteLifecycleAction"
