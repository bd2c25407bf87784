#!/usr/bin/env bash
# Graded verdicts and force timing (issue 18) through `spotdrain simulate --json`: a StatefulSet whose grace
# period is longer than the budget drains one at a time (at risk at the notice, no pod forced or killed, no
# PDB breach); one whose pods stop in a fifth of their grace is at risk, not infeasible; a drain that cannot
# finish even with instant stops (seed-504) is infeasible. Each verdict is said before the drain's first
# eviction, an order that holds on a loaded machine; how soon after the notice (well under 1 s) is a figure of
# bench/drain (BENCHMARKS.md (b), "infeas. s"). The three simulations run side by side.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq
pids=()

# TIME_SCALE (default 5) scenario seconds a real second.
for s in statefulset-long-grace statefulset-quick-stop seed-504; do
	"$SPOTDRAIN" simulate --json --time-scale "${TIME_SCALE:-5}" "$ROOT/examples/$s.yaml" \
		>"$TEST_TMP/$s.json" 2>"$TEST_TMP/$s.err" &
	pids+=("$s:$!")
done
for p in "${pids[@]}"; do
	rc=0
	wait "${p#*:}" || rc=$?
	[ "$rc" -eq 0 ] || { cat "$TEST_TMP/${p%%:*}.err"; fail "${p%%:*}: exit $rc, expected 0"; }
done
FIRST_ACT="$JQ_DEFS"' first_act("spot-a") as $act'

log "a grace period longer than the budget: one at a time, nobody forced, no breach"
jq -e '.pdb_breaches == 0 and (.nodes[0] | .pods_forced == 0 and .pods_killed == 0 and .pods_graceful == 3
	and .verdict == "at-risk" and .drained_at <= .deadline_at)' "$TEST_TMP/statefulset-long-grace.json" \
	>/dev/null || fail "unexpected result: $(cat "$TEST_TMP/statefulset-long-grace.json")"
jq -e "$FIRST_ACT"' |
	([.alerts[] | select(.kind == "drain-infeasible" or .kind == "pods-forced")] | length == 0) and
	([.alerts[] | select(.kind == "drain-at-risk" and .node == "spot-a" and .at >= 5 and .at <= $act and
	  (.message | test("fits if data/quorum pods stop within [0-9]+ s of SIGTERM; their grace is 120 s; none seen stopping yet")))]
	 | length == 1)' "$TEST_TMP/statefulset-long-grace.json" >/dev/null ||
	fail "alerts: $(jq -c .alerts "$TEST_TMP/statefulset-long-grace.json")"

log "pods that stop in a fifth of their grace: at risk, not infeasible"
jq -e "$FIRST_ACT"' | .pdb_breaches == 0 and
	(.nodes[0] | .pods_forced == 0 and .pods_killed == 0 and .verdict == "at-risk")
	and ([.alerts[] | select(.kind == "drain-infeasible")] | length == 0)
	and ([.alerts[] | select(.kind == "drain-at-risk" and .at >= 5 and .at <= $act and
	  (.message | test("shop/db")))] | length == 1)' \
	"$TEST_TMP/statefulset-quick-stop.json" >/dev/null ||
	fail "unexpected result: $(cat "$TEST_TMP/statefulset-quick-stop.json")"

log "not even instant stops fit: infeasible before the first eviction"
jq -e "$FIRST_ACT"' | (.nodes[0] | .verdict == "infeasible" and .pods_killed == 0) and
	([.alerts[] | select(.kind == "drain-infeasible" and .at >= 5 and .at <= $act and
	  (.message | test("even if the pods never seen stopping stopped at once: PDB shop/api")))] | length == 1) and
	([.alerts[] | select(.kind == "drain-at-risk")] | length == 0)' "$TEST_TMP/seed-504.json" >/dev/null ||
	fail "unexpected result: $(jq -c '.nodes, .alerts' "$TEST_TMP/seed-504.json")"
log "ok"
