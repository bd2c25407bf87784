#!/usr/bin/env bash
# Issue 32, item 3: `spotdrain drain NODE` is safe by default, as `kubectl drain` is.
#   A node without a notice, no flags: no deadline is invented and every PDB is respected: the pods whose PDB
#   lets them go are evicted, those of a PDB that lets none go are asked again and again, and nothing is
#   deleted around a PDB, even with a configuration whose drain.budget_seconds (3) and drain.policy (force)
#   made the old default delete them after a few seconds. Before it acts the drain says its plan in one line.
#   A node whose drain record names a notice: the drain takes that notice's deadline and the policy configured.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tools

cat >"$TEST_TMP/safe.yaml" <<'YAML'
name: safe-default
nodes:
  - {name: spot-a, capacity_type: spot, allocatable: {cpu: "8", memory: 32Gi, pods: 50}}
  - {name: od-1, allocatable: {cpu: "8", memory: 32Gi, pods: 50}}
  - {name: od-2, allocatable: {cpu: "8", memory: 32Gi, pods: 50}}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 6, placement: {od-1: 4, spot-a: 2},
     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1, pdb: {max_unavailable: 1}}
  - {name: db, namespace: shop, kind: Deployment, replicas: 2, placement: {od-1: 2},
     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1, pdb: {min_available: "100%"}}
events: []
YAML
printf 'drain:\n  budget_seconds: 3\n  policy: force\n' >"$TEST_TMP/old-default.yaml"
start_sim safe "$TEST_TMP/safe.yaml"
KC=(--kubeconfig "$SIM_KUBECONFIG" --config "$TEST_TMP/old-default.yaml")

writes() {
	curl -sSf "$SIM_URL/sim/v1/writes" | jq -r '.writes[].what'
}

log "a node with a notice: its deadline, the policy configured"
deadline=$(date -u -d '+60 sec' +%Y-%m-%dT%H:%M:%SZ)
kubectl --kubeconfig "$SIM_KUBECONFIG" annotate node spot-a \
	"spotdrain.io/drain={\"kind\":\"spot-interruption\",\"deadline\":\"$deadline\",\"started\":\"$deadline\"}" >/dev/null
rc=0
"$SPOTDRAIN" drain spot-a "${KC[@]}" --json >"$TEST_TMP/notice.json" 2>"$TEST_TMP/notice.err" || rc=$?
cat "$TEST_TMP/notice.json"
[ "$rc" -eq 0 ] || fail "drain of the node with a notice exited $rc"
jq -e --arg d "$deadline" '.deadline == $d and .outcome == "drained" and .killed == 0' "$TEST_TMP/notice.json" \
	>/dev/null || fail "the drain of a node with a notice did not take the notice's deadline $deadline"
grep -Eq "^node/spot-a: 2 pods to move; (stops never seen|every stop known).*, 0 (/ 0 )?forced, 0 (/ 0 )?killed; deadline $deadline of its spot-interruption notice, policy force$" \
	"$TEST_TMP/notice.err" || fail "no plan line for the node with a notice: $(grep -v debug "$TEST_TMP/notice.err" | head -3)"

log "a node without a notice, no flags: no deadline, PDBs respected"
"$SPOTDRAIN" drain od-1 "${KC[@]}" --dry-run >"$TEST_TMP/dry.out" || fail "drain --dry-run failed"
head -n 1 "$TEST_TMP/dry.out" | grep -q '^DEADLINE none: planned against one 30 days away' ||
	fail "drain --dry-run does not say that there is no deadline: $(head -n 1 "$TEST_TMP/dry.out")"
"$SPOTDRAIN" drain od-1 "${KC[@]}" >"$TEST_TMP/od-1.out" 2>"$TEST_TMP/od-1.err" &
DRAIN_PID=$!
SIM_PIDS+=("$DRAIN_PID")
start=$(curl -sSf "$SIM_URL/sim/v1/clock" | jq .now)
# Until the web pods are evicted and the old default's 3 s deadline is long past.
settled() {
	[ "$(writes | grep -c 'POST /api/v1/namespaces/shop/pods/web-.*/eviction')" -ge 4 ] &&
		curl -sSf "$SIM_URL/sim/v1/clock" | jq -e --argjson t "$start" '.now > $t + 8'
}
wait_for 60 settled || { cat "$TEST_TMP/od-1.err" >&2; fail "the drain did not evict under the PDBs"; }
kill -0 "$DRAIN_PID" 2>/dev/null || fail "the drain ended while a PDB held two pods: it invented a deadline"
kill -TERM "$DRAIN_PID"
wait "$DRAIN_PID" || true
head -n 1 "$TEST_TMP/od-1.out"
grep -Eq '^node/od-1: [0-9]+ pods to move, predicted finish never \(2 wait for a PDB that allows no disruption now\), 0 expected forced; no deadline, every PDB respected' \
	"$TEST_TMP/od-1.out" || fail "no plan line before the drain acted: $(head -n 3 "$TEST_TMP/od-1.out")"
! writes | grep -q '^DELETE .*/pods/' || fail "the drain deleted pods: $(writes | grep '^DELETE')"
[ "$(kubectl --kubeconfig "$SIM_KUBECONFIG" get pods -n shop --field-selector spec.nodeName=od-1 --no-headers |
	grep -c '^db-')" -eq 2 ] || fail "the db pods, which their PDB keeps, left od-1"
[ "$(sim_result "$SIM_URL" | jq .pdb_breaches)" -eq 0 ] || fail "a PDB was breached"
# Nobody kills the pods a PDB holds when there is no deadline: they wait, and no verdict cries "in time".
grep -q 'od-1: [0-9]* pods left, 0 forced, 2 waiting for a PDB' "$TEST_TMP/od-1.err" ||
	fail "the status does not say that 2 pods wait for a PDB"
! grep -Eq 'alert=drain-(infeasible|at-risk)|predicted killed' "$TEST_TMP/od-1.err" ||
	fail "a drain without a deadline was judged against one"
log "ok"
