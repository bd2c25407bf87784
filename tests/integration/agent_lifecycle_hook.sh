#!/usr/bin/env bash
# Issue 17, item 3 (NTH #607): `spotdrain agent` completes its instance's termination lifecycle action from IMDS
# mode. The simulator's IMDS says autoscaling/target-lifecycle-state Terminated; with agent.lifecycle_hook_name
# set, the agent drains the node, heartbeats while the drain outlasts a short interval, and once the drain ended
# sends CompleteLifecycleAction (InstanceId, no token, CONTINUE) signed with the instance role's credentials that
# the simulator's IMDS handed out. The group comes from IMDS tags/instance. SIGKILLed mid-drain and restarted,
# the agent resumes and completes exactly once; restarted after the completion, it does not send it again.
# Unset, the agent drains and completes nothing; with instance metadata tags off and no agent.asg_name it
# refuses to start; --dry-run says what it would complete and sends nothing.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq curl
[ -x "$SPOTDRAIN_AGENT" ] || fail "$SPOTDRAIN_AGENT not built"
HOOK=spotdrain-terminate

# spot-a's two pods need 6 s each to exit and their PDB lets one go at a time: the drain takes ~12 s, longer
# than the 1 s heartbeat interval.
scenario() {
	cat <<EOF
name: $1
mode: agent
budget_seconds: 3600
autoscaling: {instance_metadata_tags: $2}
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot, allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, allocatable: {cpu: "8", memory: 32Gi, pods: 58}}
workloads:
  - {name: slow, namespace: shop, kind: Deployment, replicas: 2, placement: {spot-a: 2},
     requests: {cpu: 100m, memory: 128Mi}, termination_grace_seconds: 30, shutdown_seconds: 6,
     startup_seconds: 1, pdb: {max_unavailable: 1}}
events:
  - {at: 2, type: asg-lifecycle-terminate, node: spot-a}
EOF
}

# start_agent LOG [agent flags...]: the DaemonSet's binary against the last sim, with nothing in its environment
# that could stand in for the instance role's credentials.
start_agent() {
	local out=$1
	shift
	env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN -u AWS_PROFILE -u AWS_ROLE_ARN \
		-u AWS_WEB_IDENTITY_TOKEN_FILE -u AWS_CONTAINER_CREDENTIALS_FULL_URI \
		-u AWS_CONTAINER_CREDENTIALS_RELATIVE_URI -u AWS_ENDPOINT_URL AWS_ENDPOINT_URL_AUTO_SCALING="$ASG_URL" \
		NODE_NAME=spot-a POD_NAMESPACE=kube-system POD_NAME=spotdrain-agent-test \
		"$SPOTDRAIN_AGENT" agent --kubeconfig "$SIM_KUBECONFIG" --imds-endpoint "$IMDS" --metrics-listen off \
		--poll-interval 0.5 "$@" >>"$out" 2>&1 &
	AGENT_PID=$!
	SIM_PIDS+=("$AGENT_PID")
}

sim_for() {
	start_sim "$1" <(scenario "$1" "$2")
	IMDS=$(jq -r '.imds_by_node["spot-a"]' "$SIM_ENDPOINTS")
	ASG_URL=$(sim_endpoint autoscaling)
	K8S=$SIM_URL
}

completes() { grep -c "sim autoscaling: CompleteLifecycleAction for" "$SIM_LOG" || true; }
role_beats() { grep -c "sim autoscaling: RecordLifecycleActionHeartbeat for i-[0-9a-f]* of group $GROUP, hook $HOOK, at [0-9.]* s, by the instance role" "$SIM_LOG" || true; }
beats_at_least() { [ "$(role_beats)" -ge "$1" ]; }
completed_once() { [ "$(completes)" -ge 1 ]; }
pods_on_a() { curl -sSf "$K8S/api/v1/pods?fieldSelector=spec.nodeName%3Dspot-a" | jq '[.items[] | select(.metadata.deletionTimestamp == null)] | length'; }
drained() { [ "$(pods_on_a)" -eq 0 ]; }
drain_ended() { grep -q "agent: drain ended" "$1"; }

# ---- 1: the key unset: the drain, no Auto Scaling call; tags off and no asg_name: no start; dry run ----
sim_for nohook false
GROUP=spotdrain-nohook
start_agent "$TEST_TMP/agent-nohook.log"
wait_for 40 drain_ended "$TEST_TMP/agent-nohook.log" || { cat "$TEST_TMP/agent-nohook.log" >&2; fail "the drain did not end"; }
drained || fail "spot-a still has pods"
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" || fail "the agent did not exit 0 on SIGTERM"
[ "$(completes)" -eq 0 ] || fail "an agent without agent.lifecycle_hook_name completed the action"
! grep -q "sim autoscaling:" "$SIM_LOG" || fail "an agent without agent.lifecycle_hook_name called Auto Scaling"
log "unset: drained, no Auto Scaling call"

rc=0
env SPOTDRAIN_AGENT_LIFECYCLE_HOOK_NAME=$HOOK timeout 20 "$SPOTDRAIN_AGENT" agent --kubeconfig "$SIM_KUBECONFIG" \
	--imds-endpoint "$IMDS" --metrics-listen off --node-name spot-a >"$TEST_TMP/agent-notags.log" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || { cat "$TEST_TMP/agent-notags.log" >&2; fail "without the group the agent exited $rc, want 1"; }
grep -q "Auto Scaling group is unknown.*set agent.asg_name or turn on instance metadata tags" "$TEST_TMP/agent-notags.log" ||
	{ cat "$TEST_TMP/agent-notags.log" >&2; fail "no clear error for the unknown group"; }
log "tags off, no agent.asg_name: refused at start"

SPOTDRAIN_AGENT_LIFECYCLE_HOOK_NAME=$HOOK SPOTDRAIN_AGENT_ASG_NAME=$GROUP \
	start_agent "$TEST_TMP/agent-dry.log" --dry-run
wait_for 30 grep -q "would complete the lifecycle action of i-[0-9a-f]* (group $GROUP, hook $HOOK) with CONTINUE" \
	"$TEST_TMP/agent-dry.log" || { cat "$TEST_TMP/agent-dry.log" >&2; fail "the dry run did not say what it would complete"; }
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" || fail "the dry-run agent did not exit 0 on SIGTERM"
! grep -q "sim autoscaling:" "$SIM_LOG" || fail "the dry-run agent called Auto Scaling"
! grep -Eq "c2ltdWxhdGVk|ASIASIMULATEDEXAMPLE" "$TEST_TMP"/agent-*.log || fail "an agent logged the credentials"
log "dry run: 'would complete', nothing sent"

# ---- 2: the key set: heartbeats, SIGKILL mid-drain, one completion after the drain ----
sim_for hook true
GROUP=spotdrain-hook
export SPOTDRAIN_AGENT_LIFECYCLE_HOOK_NAME=$HOOK SPOTDRAIN_AGENT_HEARTBEAT_INTERVAL_SECONDS=1
start_agent "$TEST_TMP/agent-1.log" --log-level debug
wait_for 30 beats_at_least 1 || { cat "$TEST_TMP/agent-1.log" >&2; fail "no heartbeat signed with the instance role"; }
[ "$(completes)" -eq 0 ] || fail "the action was completed while the drain runs"
drain_ended "$TEST_TMP/agent-1.log" && fail "the drain ended before the first heartbeat: the scenario is too fast to test a restart"
kill -KILL "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null || true
log "heartbeat by the instance role, agent SIGKILLed mid-drain"

start_agent "$TEST_TMP/agent-2.log" --log-level debug
wait_for 40 completed_once || { cat "$TEST_TMP/agent-2.log" >&2; fail "the restarted agent did not complete the action"; }
# The drain carries on from its record or from the notice, whichever the restarted agent reads first.
grep -Eq "resuming the drain of node spot-a|draining node spot-a" "$TEST_TMP/agent-2.log" ||
	fail "the restarted agent did not take the drain up again"
line=$(grep "sim autoscaling: CompleteLifecycleAction for" "$SIM_LOG")
grep -Eq "for i-[0-9a-f]+ of group $GROUP, hook $HOOK, result CONTINUE, at [0-9.]+ s, by the instance role" <<<"$line" ||
	fail "completion not as wanted: $line"
wait_for 10 grep -q "completed the lifecycle action" "$TEST_TMP/agent-2.log" || fail "the agent did not log the completion"
done_at=$(sed -E 's/.*, at ([0-9.]+) s,.*/\1/' <<<"$line")
drained_at=$(curl -sSf "$K8S/sim/v1/result" | jq -r '.nodes[] | select(.name == "spot-a") | .drained_at')
[ "$drained_at" != null ] || fail "the sim saw no drain of spot-a"
awk -v c="$done_at" -v d="$drained_at" 'BEGIN { exit !(c >= d) }' ||
	fail "completed at $done_at s, before the drain ended at $drained_at s"
log "completed once at $done_at s, the drain ended at $drained_at s; $(role_beats) heartbeats"

# The same action after the completion: recorded on the node, not sent again by a restarted agent.
node_record=$(curl -sSf "$K8S/api/v1/nodes/spot-a" | jq -r '.metadata.annotations["spotdrain.io/lifecycle-completed"]')
grep -Eq "^$GROUP/$HOOK/i-[0-9a-f]+$" <<<"$node_record" || fail "no completion record on the node: $node_record"
kill -KILL "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null || true
start_agent "$TEST_TMP/agent-3.log" --log-level debug
wait_for 30 grep -q "was completed before a restart" "$TEST_TMP/agent-3.log" ||
	{ cat "$TEST_TMP/agent-3.log" >&2; fail "the agent restarted after the completion did not find its record"; }
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" || fail "the agent did not exit 0 on SIGTERM"
[ "$(completes)" -eq 1 ] || fail "$(completes) completions, want exactly 1"
! grep -Eq "c2ltdWxhdGVk|ASIASIMULATEDEXAMPLE" "$TEST_TMP"/agent-*.log || fail "an agent logged the credentials"

# The simulator takes the instance role's credentials from a real client too (botocore signs with the
# session token), and refuses the key with another token.
AWS=$(command -v aws 2>/dev/null) || { log "ok (no aws CLI: the CLI checks skipped)"; exit 0; }
role_cli() {
	env -u AWS_PROFILE -u AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID=ASIASIMULATEDEXAMPLE \
		AWS_SECRET_ACCESS_KEY=c2ltdWxhdGVkLXNlY3JldC1rZXktZm9yLXRlc3Rz AWS_SESSION_TOKEN="$1" \
		AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_PAGER= \
		"$AWS" autoscaling describe-lifecycle-hooks --auto-scaling-group-name "$GROUP" \
		--endpoint-url "$ASG_URL" --region us-east-1 --output json
}
role_cli c2ltdWxhdGVkLXNlc3Npb24tdG9rZW4tZm9yLXRlc3Rz | jq -e --arg h "$HOOK" \
	'.LifecycleHooks[0].LifecycleHookName == $h' >/dev/null || fail "the aws CLI with the role's credentials was refused"
! role_cli wrong-token >/dev/null 2>&1 || fail "the role's key with another session token was taken"
log "ok: aws CLI confirms the hook with the role's credentials; one completion, $(role_beats) heartbeats"
