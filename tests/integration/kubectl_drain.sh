#!/usr/bin/env bash
# `kubectl drain` (1.27 and 1.33, in parallel against two simulators) of a node carrying 8 pods under a
# maxUnavailable: 1 PDB: kubectl retries each 429 every 5 s until the previous replacement is Ready; the drain must
# succeed without breaching the PDB and leave the 8 replacements Running on the other nodes.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tools

declare -A url kc pid
for v in 1.27 1.33; do
	start_sim "drain-$v" "$ROOT/examples/drain-8.yaml" --time-scale 4
	url[$v]=$SIM_URL
	kc[$v]=$SIM_KUBECONFIG
	pid[$v]=$SIM_PID
done

declare -A drain_pid
for v in 1.27 1.33; do
	"$(kubectl_for "$v")" --kubeconfig "${kc[$v]}" drain spot-a --ignore-daemonsets --delete-emptydir-data \
		--timeout=90s >"$TEST_TMP/drain-$v.log" 2>&1 &
	drain_pid[$v]=$!
done
for v in 1.27 1.33; do
	rc=0
	wait "${drain_pid[$v]}" || rc=$?
	sed "s/^/[$v] /" "$TEST_TMP/drain-$v.log"
	[ "$rc" -eq 0 ] || fail "kubectl $v drain exited $rc"
	grep -q 'spot-a drained' "$TEST_TMP/drain-$v.log" || fail "kubectl $v did not report the node drained"
	grep -q 'disruption budget' "$TEST_TMP/drain-$v.log" ||
		fail "kubectl $v never met the PDB (the drain should have been throttled)"
done

for v in 1.27 1.33; do
	K=("$(kubectl_for "$v")" --kubeconfig "${kc[$v]}")
	sim_result "${url[$v]}" | tee "$TEST_TMP/result-$v.json"
	echo
	jq -e '.pdb_breaches == 0' "$TEST_TMP/result-$v.json" >/dev/null || fail "$v: PDB breached"
	running() {
		"${K[@]}" get pods -n shop -o wide --no-headers >"$TEST_TMP/pods-$v"
		[ "$(awk '$3 == "Running" && ($7 == "od-1" || $7 == "od-2")' "$TEST_TMP/pods-$v" | wc -l)" -eq 8 ]
	}
	wait_for 20 running || {
		cat "$TEST_TMP/pods-$v"
		fail "$v: the 8 replacements are not Running on od-1/od-2"
	}
	cat "$TEST_TMP/pods-$v"
	! grep -q ' spot-a ' "$TEST_TMP/pods-$v" || fail "$v: shop pods left on spot-a"
	grep -q '^spot-a  *Ready,SchedulingDisabled ' <<<"$("${K[@]}" get nodes --no-headers)" ||
		fail "$v: spot-a not cordoned"
	"${K[@]}" get pdb -n shop
	stop_sim "${pid[$v]}"
done
log "ok"
