#!/usr/bin/env bash
# Issue 17, item 2, through `spotdrain simulate` (controller mode): a capacity-rebalance replacement launched
# under the group's launch hook is completed with CONTINUE by the in-process controller once its node is
# Ready (not before), against the simulated Auto Scaling; a launch whose node never turns Ready gets ABANDON
# after controller.launch_ready_timeout_seconds, before the hook's own HeartbeatTimeout would end it; the
# interrupted node drains as ever.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq

cat >"$TEST_TMP/scenario.yaml" <<'EOF2'
name: launch-sim
mode: controller
autoscaling: {heartbeat_timeout_seconds: 60}
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot, allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, allocatable: {cpu: "8", memory: 32Gi, pods: 58}}
workloads:
  - {name: web, namespace: shop, replicas: 4, placement: {spot-a: 2}, requests: {cpu: 100m, memory: 128Mi},
     termination_grace_seconds: 10, shutdown_seconds: 2, startup_seconds: 2, pdb: {max_unavailable: 1}}
events:
  - {at: 2, type: rebalance-recommendation, node: spot-a}
  - {at: 3, type: asg-launch, node: spot-b, join_seconds: 5, ready_seconds: 20}
  - {at: 3, type: asg-launch, node: spot-c, join_seconds: 5, ready_seconds: never}
  - {at: 30, type: spot-interruption, node: spot-a}
EOF2
cat >"$TEST_TMP/config.yaml" <<'EOF2'
controller:
  launch_ready_timeout_seconds: 40
EOF2
"$SPOTDRAIN" simulate "$TEST_TMP/scenario.yaml" --config "$TEST_TMP/config.yaml" --mode controller \
	--time-scale 5 --json >"$TEST_TMP/result.json" 2>"$TEST_TMP/simulate.log" ||
	{ cat "$TEST_TMP/simulate.log" >&2; fail "simulate exited $?"; }
jq -e '.nodes[0].drained_at != null and .nodes[0].pods_killed == 0' "$TEST_TMP/result.json" >/dev/null ||
	fail "spot-a did not drain: $(jq -c .nodes "$TEST_TMP/result.json")"
jq -e '.launches[] | select(.node == "spot-b") | .result == "CONTINUE" and .completed_by == "client" and
	.completed_at >= .ready_at' "$TEST_TMP/result.json" >/dev/null ||
	fail "spot-b: $(jq -c .launches "$TEST_TMP/result.json")"
jq -e '.launches[] | select(.node == "spot-c") | .result == "ABANDON" and .completed_by == "client" and
	.ready_at == null and .completed_at - .launched_at >= 39 and .completed_at - .launched_at < 60' \
	"$TEST_TMP/result.json" >/dev/null || fail "spot-c: $(jq -c .launches "$TEST_TMP/result.json")"
jq -e '[.alerts[] | select(.kind == "launch-abandoned")] | length == 1' "$TEST_TMP/result.json" >/dev/null ||
	fail "no launch-abandoned alert: $(jq -c '[.alerts[].kind]' "$TEST_TMP/result.json")"
log "ok: $(jq -c '[.launches[] | {node, ready_at, completed_at, result}]' "$TEST_TMP/result.json")"
