#!/usr/bin/env bash
# The cluster's ordinary life in scenarios (issue 18): `{at, type: rollout, workload}` replaces a workload's
# pods one at a time, `{at, type: scale, workload, replicas}` sets its replicas; bad events are refused with
# their path. What the controller sees of a rollout feeds its stop estimates: a StatefulSet whose 60 s grace
# would not fit one at a time, restarted before the interruption, is judged with the stops the rollout
# showed (fits), while without the rollout the same drain is at risk.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq curl

scenario() { # EVENTS...: the scenario with these event lines
	cat <<'YAML'
name: ordinary-life
mode: controller
budget_seconds: 120
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, instance_type: m5.2xlarge,
     allocatable: {cpu: "8", memory: 32Gi, pods: 58}}
workloads:
  - {name: db, namespace: shop, kind: StatefulSet, replicas: 3, placement: {spot-a: 3},
     requests: {cpu: 250m, memory: 256Mi}, termination_grace_seconds: 60, shutdown_seconds: 3,
     startup_seconds: 2, pdb: {max_unavailable: 1}}
  - {name: web, namespace: shop, kind: Deployment, replicas: 4, placement: {od-1: 4},
     termination_grace_seconds: 10, shutdown_seconds: 1, startup_seconds: 1}
events:
YAML
	local e
	for e in "$@"; do echo "  - $e"; done
}

log "bad events are refused, with the key's path"
bad() { # EVENT MESSAGE
	scenario "$1" >"$TEST_TMP/bad.yaml"
	local rc=0
	"$SPOTDRAIN" simulate "$TEST_TMP/bad.yaml" >/dev/null 2>"$TEST_TMP/err" || rc=$?
	[ "$rc" -eq 1 ] && grep -q "$2" "$TEST_TMP/err" || fail "$1: exit $rc, $(cat "$TEST_TMP/err")"
}
bad '{at: 1, type: rollout, workload: nope}' 'events\[0\].workload: no workload named "nope"'
bad '{at: 1, type: scale, workload: web}' 'events\[0\].replicas: required'
bad '{at: 1, type: rollout, workload: web, replicas: 2}' 'events\[0\].replicas: only a scale event'
bad '{at: 1, type: rollout, node: spot-a}' 'events\[0\].node: a rollout event names a workload'
bad '{at: 1, type: spot-interruption, node: spot-a, workload: web}' 'only rollout and scale events'

log "scale: down to 2, then up to 5"
scenario '{at: 1, type: scale, workload: shop/web, replicas: 2}' '{at: 8, type: scale, workload: web, replicas: 5}' \
	>"$TEST_TMP/scale.yaml"
start_sim scale "$TEST_TMP/scale.yaml"
web() { # the web pods not terminating
	curl -sSf "$SIM_URL/api/v1/namespaces/shop/pods" |
		jq '[.items[] | select(.metadata.name | startswith("web-")) | select(.metadata.deletionTimestamp == null)] | length'
}
at_least() { curl -sSf "$SIM_URL/sim/v1/clock" | jq -e --argjson t "$1" '.now >= $t' >/dev/null; }
wait_for 10 at_least 2.5 || fail "the clock does not move"
[ "$(web)" -eq 2 ] || fail "after the scale-down: $(web) web pods"
wait_for 15 at_least 9 || fail "the clock does not move"
[ "$(web)" -eq 5 ] || fail "after the scale-up: $(web) web pods"
curl -sSf "$SIM_URL/apis/apps/v1/namespaces/shop/deployments/web" | jq -e '.spec.replicas == 5' >/dev/null ||
	fail "the Deployment does not say 5 replicas"

log "a rollout before the interruption: its stops are learnt, the drain fits"
for run in rollout control; do
	if [ "$run" = rollout ]; then
		scenario '{at: 2, type: rollout, workload: db}' '{at: 40, type: spot-interruption, node: spot-a}'
	else
		scenario '{at: 40, type: spot-interruption, node: spot-a}'
	fi >"$TEST_TMP/$run.yaml"
	"$SPOTDRAIN" simulate --json --time-scale 5 "$TEST_TMP/$run.yaml" >"$TEST_TMP/$run.json" 2>"$TEST_TMP/$run.err" ||
		fail "$run: $(tail -5 "$TEST_TMP/$run.err")"
done
jq -e '.nodes[0] | .verdict == "fits" and .pods_killed == 0 and .pods_forced == 0' "$TEST_TMP/rollout.json" \
	>/dev/null || fail "rollout: $(jq -c '.nodes, .alerts' "$TEST_TMP/rollout.json")"
jq -e '.nodes[0].verdict == "at-risk"' "$TEST_TMP/control.json" >/dev/null ||
	fail "control: $(jq -c '.nodes' "$TEST_TMP/control.json")"
echo ok
