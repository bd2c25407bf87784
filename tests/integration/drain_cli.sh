#!/usr/bin/env bash
# spotdrain plan, audit and drain against `spotdrain sim serve`: plan says seed-504 is infeasible (exit 4) and
# names the value that would fit, and its tuned variant feasible (exit 0); audit finds the PDBs; drain empties a
# node without breaching a PDB (exit 0), misses the deadline under policy respect when a PDB allows nothing
# (exit 3), and fails on a node that does not exist (exit 1); bad usage exits 2.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tools

expect_exit() {
	local want=$1 rc=0
	shift
	"$@" || rc=$?
	[ "$rc" -eq "$want" ] || fail "exit $rc, expected $want: $*"
}

log "plan: seed-504 is infeasible through its PDBs (without surge before evict, which would start replacements)"
start_sim seed "$ROOT/examples/seed-504.yaml"
printf 'drain:\n  surge: "off"\n' >"$TEST_TMP/nosurge.yaml"
expect_exit 4 "$SPOTDRAIN" plan spot-a --kubeconfig "$SIM_KUBECONFIG" --config "$TEST_TMP/nosurge.yaml" >"$TEST_TMP/plan-504.txt"
cat "$TEST_TMP/plan-504.txt"
grep -q 'PDB shop/api allows 1 disruption' "$TEST_TMP/plan-504.txt" || fail "plan does not name the PDB"
grep -q 'would fit' "$TEST_TMP/plan-504.txt" || fail "plan does not say which value would fit"
expect_exit 4 "$SPOTDRAIN" plan spot-a --kubeconfig "$SIM_KUBECONFIG" --config "$TEST_TMP/nosurge.yaml" --json >"$TEST_TMP/plan-504.json"
jq -e '.nodes[0].verdict != "FEASIBLE" and .nodes[0].limiting_pdb == "shop/api" and .nodes[0].grade == "infeasible"
	and (.nodes[0].grade_reason | test("stopped at once")) and .nodes[0].stop_within == null' \
	"$TEST_TMP/plan-504.json" >/dev/null || fail "plan --json: wrong verdict, grade or limiting PDB"

log "audit: seed-504 has PDBs too tight for their worst node"
expect_exit 4 "$SPOTDRAIN" audit --kubeconfig "$SIM_KUBECONFIG" --json >"$TEST_TMP/audit.json"
cat "$TEST_TMP/audit.json"
jq -e '[.pdbs[] | select(.pdb == "api" and .feasible == false and .grade == "infeasible" and
	.fit_max_unavailable > 1)] | length == 1' \
	"$TEST_TMP/audit.json" >/dev/null || fail "audit does not report shop/api with a value that fits"
# Spot nodes only by default (seed-504's od-* hold more of each PDB's pods), each finding with its capacity
# type and zone; the findings first, sorted by how far over the budget they are.
jq -e '([.pdbs[] | select(.worst_node != "spot-a" or .capacity_type != "spot" or .zone != "us-east-1a")] | length == 0)
	and .pdbs[0].pdb == "api" and .pdbs[0].over_budget_seconds > 0' \
	"$TEST_TMP/audit.json" >/dev/null || fail "audit judges a node that is not spot, or lacks capacity type and zone"
expect_exit 4 "$SPOTDRAIN" audit --kubeconfig "$SIM_KUBECONFIG" >"$TEST_TMP/audit.txt"
cat "$TEST_TMP/audit.txt"
grep -Eq '^shop/api +spot-a +spot +us-east-1a ' "$TEST_TMP/audit.txt" || fail "the audit table lacks capacity type and zone"
# --all-nodes judges on-demand nodes too (scheduled events reach them): their worse cases come first.
expect_exit 4 "$SPOTDRAIN" audit --kubeconfig "$SIM_KUBECONFIG" --all-nodes --json >"$TEST_TMP/audit-all.json"
cat "$TEST_TMP/audit-all.json"
jq -e '[.pdbs[] | select(.capacity_type == "on-demand")] | length >= 1' "$TEST_TMP/audit-all.json" >/dev/null ||
	fail "audit --all-nodes judges no on-demand node"
jq -e '[.pdbs[] | select(.feasible == false) | .over_budget_seconds // 1e9] as $o | $o == ($o | sort | reverse)' \
	"$TEST_TMP/audit-all.json" >/dev/null || fail "audit findings are not sorted by how far over the budget they are"
expect_exit 2 "$SPOTDRAIN" plan spot-a --kubeconfig "$SIM_KUBECONFIG" --all-nodes
# A budget long enough for every wave: no findings.
expect_exit 0 "$SPOTDRAIN" audit --kubeconfig "$SIM_KUBECONFIG" --budget 3600

log "plan: the tuned variant is feasible"
start_sim tuned "$ROOT/examples/pdb-tuned.yaml"
expect_exit 0 "$SPOTDRAIN" plan spot-a --kubeconfig "$SIM_KUBECONFIG"
# Nothing was changed by plan.
kubectl --kubeconfig "$SIM_KUBECONFIG" get node spot-a --no-headers | grep -q ' Ready ' ||
	fail "plan changed the node"

log "plan: a grace period longer than the budget is at risk, not infeasible"
start_sim long "$ROOT/examples/statefulset-long-grace.yaml"
expect_exit 0 "$SPOTDRAIN" plan spot-a --kubeconfig "$SIM_KUBECONFIG" >"$TEST_TMP/plan-long.txt"
cat "$TEST_TMP/plan-long.txt"
grep -q '^GRADE at-risk: fits if data/quorum pods stop within 3[0-9] s of SIGTERM; their grace is 120 s' \
	"$TEST_TMP/plan-long.txt" || fail "plan does not grade the drain at risk with its stop time"
expect_exit 0 "$SPOTDRAIN" plan spot-a --kubeconfig "$SIM_KUBECONFIG" --json >"$TEST_TMP/plan-long.json"
jq -e '.nodes[0].grade == "at-risk" and .nodes[0].stop_within >= 30 and .nodes[0].stop_within < 40' \
	"$TEST_TMP/plan-long.json" >/dev/null || fail "plan --json: $(jq -c .nodes "$TEST_TMP/plan-long.json")"
# Nobody forced at once for a grace that cannot fit: the pods' last safe moments are after now.
jq -e '[.pods[] | select(.last_safe <= 0)] | length == 0' "$TEST_TMP/plan-long.json" >/dev/null ||
	fail "plan forces pods at once: $(jq -c .pods "$TEST_TMP/plan-long.json")"

log "usage"
expect_exit 2 "$SPOTDRAIN" drain
expect_exit 2 "$SPOTDRAIN" plan spot-a --budget soon
expect_exit 2 "$SPOTDRAIN" drain spot-a --budget 10 --deadline 2026-11-30T06:00:00Z
expect_exit 2 "$SPOTDRAIN" drain spot-a --policy maybe

log "drain: a feasible node"
cat >"$TEST_TMP/fast.yaml" <<'EOF'
name: fast
nodes:
  - {name: spot-a, allocatable: {cpu: "16", memory: 64Gi, pods: 110}}
  - {name: od-1, capacity_type: on-demand, allocatable: {cpu: "16", memory: 64Gi, pods: 110}}
workloads:
  - {name: api, namespace: shop, kind: Deployment, replicas: 6, placement: {spot-a: 4},
     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1, pdb: {max_unavailable: 1}}
  - {name: db, namespace: shop, kind: Deployment, replicas: 2, placement: {od-1: 2},
     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1, pdb: {min_available: "100%"}}
  - {name: agent, namespace: monitoring, kind: DaemonSet, termination_grace_seconds: 5, shutdown_seconds: 1,
     startup_seconds: 1}
events: []
EOF
start_sim fast "$TEST_TMP/fast.yaml"
expect_exit 1 "$SPOTDRAIN" drain no-such-node --kubeconfig "$SIM_KUBECONFIG" --budget 10
expect_exit 0 "$SPOTDRAIN" drain spot-a --kubeconfig "$SIM_KUBECONFIG" --budget 30 --json >"$TEST_TMP/drain.json"
cat "$TEST_TMP/drain.json"
jq -e '.outcome == "drained" and .evicted == 4 and .forced == 0 and .left == 0' "$TEST_TMP/drain.json" \
	>/dev/null || fail "drain --json: unexpected result"
sim_result "$SIM_URL" >"$TEST_TMP/result.json"
jq -e '.pdb_breaches == 0' "$TEST_TMP/result.json" >/dev/null || fail "the drain breached a PDB"
kubectl --kubeconfig "$SIM_KUBECONFIG" get node spot-a --no-headers | grep -q 'SchedulingDisabled' ||
	fail "spot-a not cordoned"
kubectl --kubeconfig "$SIM_KUBECONFIG" get node spot-a -o json |
	jq -e '.spec.taints[] | select(.key == "spotdrain.io/interruption" and .effect == "NoSchedule")' \
		>/dev/null || fail "spot-a not tainted"
kubectl --kubeconfig "$SIM_KUBECONFIG" get events -A | grep -q DrainCompleted ||
	fail "no DrainCompleted Event"

log "drain: policy respect leaves a pod no PDB lets go, and misses the deadline"
expect_exit 3 "$SPOTDRAIN" drain od-1 --kubeconfig "$SIM_KUBECONFIG" --budget 4 --policy respect --json \
	>"$TEST_TMP/respect.json"
cat "$TEST_TMP/respect.json"
jq -e '.outcome == "deadline-missed" and .forced == 0 and .left >= 2' "$TEST_TMP/respect.json" >/dev/null ||
	fail "drain --policy respect: unexpected result"
log "ok"
