#!/usr/bin/env bash
# Two `spotdrain controller` processes against `spotdrain sim serve`: exactly one holds the lease and acts;
# SIGKILL of the leader in the middle of a drain hands the lease over, and the other finishes the drain
# (resumed from the node's spotdrain.io/drain annotation) before its deadline with no pod killed. How soon the
# lease moves (within its 15 s and one retry) is test_leader's test_handover_on_kill, on a clock of its own;
# here it is logged, not bounded: on a shared machine the wall clock measures the neighbours.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq curl

# 8 pods whose PDB lets one go at a time, 3 s to be Ready elsewhere: the drain takes ~30 s.
cat >"$TEST_TMP/scenario.yaml" <<'EOF'
name: controller-leader
mode: controller
budget_seconds: 120
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 8, placement: {spot-a: 8},
     requests: {cpu: 250m, memory: 256Mi}, termination_grace_seconds: 30, shutdown_seconds: 1, startup_seconds: 3,
     pdb: {max_unavailable: 1}}
events:
  - {at: 4, type: spot-interruption, node: spot-a}
EOF

start_sim leader "$TEST_TMP/scenario.yaml"
QUEUE_URL=$(jq -r '.queue_url // empty' "$TEST_TMP/leader/endpoints.json")
[ -n "$QUEUE_URL" ] || skip "sim serve does not offer an SQS queue yet"
LEASE=$SIM_URL/apis/coordination.k8s.io/v1/namespaces/default/leases/spotdrain-controller

declare -A PID
start_controller() { # NAME
	AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY AWS_REGION=us-east-1 \
		POD_NAMESPACE=default POD_NAME="$1" \
		"$SPOTDRAIN" controller --queue-url "$QUEUE_URL" --kubeconfig "$SIM_KUBECONFIG" --metrics-listen off \
		>"$TEST_TMP/$1.log" 2>&1 &
	PID[$1]=$!
	SIM_PIDS+=("$!")
}
holder() { curl -sSf "$LEASE" | jq -r '.spec.holderIdentity // ""'; }
held_by() { [ "$(holder)" = "$1" ]; }
annotated() { curl -sSf "$SIM_URL/api/v1/nodes/spot-a" | jq -e '.metadata.annotations["spotdrain.io/drain"] != null' >/dev/null; }
drained() { sim_result "$SIM_URL" | jq -e '.nodes[] | select(.name == "spot-a") | .drained_at != null' >/dev/null; }

log "two controllers: the first takes the lease, the second waits"
start_controller ctl-1
wait_for 10 held_by ctl-1 || { cat "$TEST_TMP/ctl-1.log" >&2; fail "ctl-1 did not take the lease"; }
start_controller ctl-2

log "the leader drains spot-a (recorded on the node); the other does nothing"
wait_for 20 annotated || { cat "$TEST_TMP/ctl-1.log" >&2; fail "no drain started"; }
grep -q "draining spot-a" "$TEST_TMP/ctl-2.log" && fail "the follower acted"
held_by ctl-1 || fail "lease moved"

log "SIGKILL the leader mid-drain: the other takes over and finishes the drain in time"
drained && fail "drain already over: the scenario is too short to test a hand-over"
kill -KILL "${PID[ctl-1]}"
start=$(date +%s%N)
wait_for 60 held_by ctl-2 || { cat "$TEST_TMP/ctl-2.log" >&2; fail "no hand-over"; }
log "hand-over after $((($(date +%s%N) - start) / 1000000)) ms"
wait_for 90 drained || { cat "$TEST_TMP/ctl-2.log" >&2; fail "the drain was not finished"; }
grep -q "resuming the drain of spot-a" "$TEST_TMP/ctl-2.log" || fail "the drain was not resumed from the annotation"
sim_result "$SIM_URL" | jq -e '.nodes[] | select(.name == "spot-a") | .pods_killed == 0 and .drained_at != null and
	.drained_at <= .deadline_at' >/dev/null || fail "pods killed, or drained late: $(sim_result "$SIM_URL" | jq -c .nodes)"

log "SIGTERM → exit 0"
kill -TERM "${PID[ctl-2]}"
rc=0
wait "${PID[ctl-2]}" || rc=$?
[ "$rc" -eq 0 ] || fail "ctl-2 exited $rc"
stop_sim "$SIM_PID"
echo "ok"
