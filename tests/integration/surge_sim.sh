#!/usr/bin/env bash
# Surge before evict (#20) end to end through `spotdrain simulate --json`: a one-replica Deployment under
# minAvailable: 1 drains on its replacement's startup plus its own stop, with no PDB breach, nothing forced or
# killed and its replica count put back; the same with an HPA (rollout path) and with no room elsewhere (the
# surge-no-room alert, the replacement capacity asked for at the notice); drain.surge: off and a
# StatefulSet (never surged) still end forced, which is what the surge saves.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq

# TIME_SCALE (default 10) scenario seconds a real second, and SURGE_SCALE (default 2) for the runs that assert
# no drain-infeasible: the first verdict waits 5 scenario s (SURGE_VERDICT_WAIT_USEC) for the surge's reads of
# the Deployment and its HPA, half a real second at 10, which a loaded 2-core machine (`stress -c 2`, load 18)
# overran, and the HPA case was judged infeasible before its rollout was known; at 2 the reads get 2.5 s. All
# runs go at once (each mostly waits on its clock), so the test takes about the slowest one.
start() { # NAME SCALE SCENARIO [simulate flags...]: the result in $TEST_TMP/NAME.json, the log in NAME.log
	local name=$1 scale=$2 scenario=$3
	shift 3
	{
		local rc=0
		"$SPOTDRAIN" simulate "$scenario" --json --time-scale "$scale" "$@" >"$TEST_TMP/$name.json" \
			2>"$TEST_TMP/$name.log" || rc=$?
		echo "$rc" >"$TEST_TMP/$name.rc"
	} &
}
finished() { # NAME: waits for start's run, which must have written a result
	# The slowest, at scale 2, ends by its node's deadline: 125 scenario s, about 63 s.
	wait_for 120 test -e "$TEST_TMP/$1.rc" || fail "$1: simulate did not end"
	[ -s "$TEST_TMP/$1.json" ] ||
		{ cat "$TEST_TMP/$1.log" >&2; fail "$1: simulate exited $(cat "$TEST_TMP/$1.rc") with no result"; }
	jq -c '{nodes, pdb_breaches, replicas_changed, alerts: [.alerts[].kind]}' "$TEST_TMP/$1.json"
}
printf 'drain:\n  surge: "off"\n' >"$TEST_TMP/off.yaml"
sed -e 's/kind: Deployment/kind: StatefulSet/' -e 's/, strategy: {max_surge: 1, max_unavailable: 0}//' \
	"$ROOT/examples/surge-single-replica.yaml" >"$TEST_TMP/sts.yaml"
start single "${SURGE_SCALE:-2}" "$ROOT/examples/surge-single-replica.yaml" --log-level info
start hpa "${SURGE_SCALE:-2}" "$ROOT/examples/surge-hpa.yaml" --log-level info
start noroom "${TIME_SCALE:-10}" "$ROOT/examples/surge-no-room.yaml" --log-level info
start off "${TIME_SCALE:-10}" "$ROOT/examples/surge-single-replica.yaml" --config "$TEST_TMP/off.yaml"
start sts "${TIME_SCALE:-10}" "$TEST_TMP/sts.yaml" --log-level info

# The notice is at 5 s; startup 20 s + stop 5 s: drained no sooner than 5 + 25 (the scenario's own times, which a
# loaded machine can only lengthen), and before the node's deadline with nothing forced. How far before is
# bench/drain's figure (`bench.py examples`: drain time against the scenario's lower bound), not an assertion here:
# at --time-scale 10 a tenth of a second of scheduling delay is a scenario second.
surged_ok() { # NAME
	jq -e '.pdb_breaches == 0 and (has("replicas_changed") | not) and
		.nodes[0].pods_forced == 0 and .nodes[0].pods_killed == 0 and .nodes[0].pods_graceful == 1 and
		.nodes[0].drained_at >= 30 and .nodes[0].drained_at < .nodes[0].deadline_at and
		([.alerts[].kind] | index("drain-infeasible") | not) and ([.alerts[].kind] | index("pods-forced") | not)' \
		"$TEST_TMP/$1.json" >/dev/null || fail "$1: not drained through surge: $(cat "$TEST_TMP/$1.json")"
	[ "$(cat "$TEST_TMP/$1.rc")" -eq 0 ] || fail "$1: simulate exited $(cat "$TEST_TMP/$1.rc")"
}

log "single replica under minAvailable: 1, drain.surge blocked (the default): replicas raised, then restored"
finished single
surged_ok single
grep -q 'deployment shop/checkout surged for the drain of spot-a: replicas raised' "$TEST_TMP/single.log" ||
	fail "single: the replicas were not raised"
grep -q 'deployment shop/checkout restored after the drain of spot-a' "$TEST_TMP/single.log" ||
	fail "single: the Deployment was not restored"

log "the same with an HPA owning the replica count: the rollout is restarted instead"
finished hpa
surged_ok hpa
grep -q 'deployment shop/checkout surged for the drain of spot-a: rollout restarted' "$TEST_TMP/hpa.log" ||
	fail "hpa: the rollout was not restarted"

log "no room elsewhere: surge-no-room names the missing room, the replacement asked for at the notice takes the pod"
finished noroom
# The replacement node is Ready 30 s after it is asked for at the notice (5 s); the new pod starts there in 20 s,
# the old one stops in 5 s: drained after the replacement's Ready, through the surge, before the deadline. In
# order, not in seconds (a loaded machine stretches each step in scenario time): the replacement is asked for
# after the notice and is Ready before the pod is evicted, which waits for it; the drain ends before the deadline.
# (The result's times are rounded to the millisecond: no sum of them is compared for equality.)
jq -e "$JQ_DEFS"'.pdb_breaches == 0 and (has("replicas_changed") | not) and .nodes[0].pods_forced == 0 and
	.nodes[0].pods_killed == 0 and (.replacements | length) == 1 and
	.replacements[0].requested_at >= .nodes[0].notice_at and
	.replacements[0].ready_at < first_act("spot-a") and
	.nodes[0].drained_at > .replacements[0].ready_at + 20 and .nodes[0].drained_at < .nodes[0].deadline_at and
	([.alerts[] | select(.kind == "surge-no-room")] | length) == 1 and
	([.alerts[] | select(.kind == "surge-no-room")][0].message |
		test("surge of shop/checkout needs room for 1 pod \\(cpu 500m, memory 512Mi\\) on another node: none has it")) and
	([.alerts[] | select(.kind == "surge-no-room")][0].at < .replacements[0].ready_at)' "$TEST_TMP/noroom.json" \
	>/dev/null || fail "noroom: expected the surge to wait for the replacement: $(cat "$TEST_TMP/noroom.json")"
[ "$(cat "$TEST_TMP/noroom.rc")" -eq 0 ] || fail "noroom: simulate exited $(cat "$TEST_TMP/noroom.rc")"
# Where od-1 has room (the single-replica run above) nothing says otherwise.
jq -e '[.alerts[] | select(.kind == "surge-no-room")] | length == 0' "$TEST_TMP/single.json" >/dev/null ||
	fail "single: surge-no-room raised although od-1 has room"

log "plan predicts the missing room before anything is raised, and says so where there is room"
start_sim noroom "$ROOT/examples/surge-no-room.yaml"
"$SPOTDRAIN" plan spot-a --kubeconfig "$SIM_KUBECONFIG" >"$TEST_TMP/plan-noroom.txt"
grep -q '^ROOM surge needs room for 1 of its 1 pod (cpu 500m, memory 512Mi) that no other node has' \
	"$TEST_TMP/plan-noroom.txt" || fail "plan does not say the surged pod has no room: $(cat "$TEST_TMP/plan-noroom.txt")"
"$SPOTDRAIN" plan spot-a --kubeconfig "$SIM_KUBECONFIG" --json >"$TEST_TMP/plan-noroom.json"
jq -e '.nodes[0].surge_room == {"pods": 1, "missing_pods": 1, "missing_cpu": "500m", "missing_memory": "512Mi"}' \
	"$TEST_TMP/plan-noroom.json" >/dev/null || fail "plan --json: $(jq -c '.nodes[0]' "$TEST_TMP/plan-noroom.json")"
start_sim room "$ROOT/examples/surge-single-replica.yaml"
"$SPOTDRAIN" plan spot-a --kubeconfig "$SIM_KUBECONFIG" >"$TEST_TMP/plan-room.txt"
grep -q '^ROOM the 1 surged pod fits on other nodes' "$TEST_TMP/plan-room.txt" ||
	fail "plan does not find od-1's room: $(cat "$TEST_TMP/plan-room.txt")"

log "drain.surge: off: the pod is forced around its PDB at its last safe moment (a breach)"
finished off
jq -e '.pdb_breaches == 1 and .nodes[0].pods_forced == 1 and .nodes[0].drained_at > 80' "$TEST_TMP/off.json" \
	>/dev/null || fail "off: expected the forced drain: $(cat "$TEST_TMP/off.json")"

log "a StatefulSet is never surged"
finished sts
jq -e '.nodes[0].pods_forced == 1 and (has("replicas_changed") | not)' "$TEST_TMP/sts.json" >/dev/null ||
	fail "sts: expected it forced, not surged: $(cat "$TEST_TMP/sts.json")"
! grep -q 'surged for the drain' "$TEST_TMP/sts.log" || fail "sts: a StatefulSet was surged"

log "ok"
