#!/usr/bin/env bash
# Issue 6 acceptance, end to end through `spotdrain simulate` (the real controller on the simulator's SQS, the
# real agent on its IMDS, the provisioner on its EC2 surface): in the rebalance-early scenario (a full cluster,
# a rebalance recommendation at t=0, the interruption notice at t=60) the replacement is requested at the
# recommendation (before the notice: how soon after it is a figure for a benchmark, not a bound for a test on a
# shared machine), is not the m5.32xlarge on offer (provision.max_memory 72Gi, smallest fit first), is
# Ready before the notice, and the drain completes with no pod forced or killed. The same scenario without
# provisioning stalls: the evicted pods stay Pending, the PDB blocks, pods are forced around it and the drain
# ends much later; provisioning only at the notice (provision.triggers) comes too late to help as much.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq

# The shipped instance type catalog, wherever the test runs from.
export SPOTDRAIN_CATALOG=$ROOT/data/instance-types.json
# The acceptance runs go at --time-scale 2: the replacement (45 s to Ready) must be Ready before the notice at
# t=60, which leaves a loaded machine room for the request. The comparison runs only compare outcomes, at a
# faster scale.
SCALE=${PROVISION_TIME_SCALE:-2}
FAST=10
WITH=$ROOT/examples/rebalance-early.yaml
WITHOUT=$ROOT/examples/rebalance-early-noprov.yaml

printf 'provision:\n  max_memory: 72Gi\n' >"$TEST_TMP/early.yaml"
printf 'provision:\n  max_memory: 72Gi\n  triggers: [spot-interruption]\n' >"$TEST_TMP/late.yaml"

# run NAME SCALE SCENARIO MODE [ARGS...]: the JSON result in $TEST_TMP/NAME.json; exit 0 or 3 expected (the run
# is bounded by simulate itself: the scenario's length plus slack).
run() {
	local name=$1 scale=$2 scenario=$3 mode=$4 rc=0
	shift 4
	"$SPOTDRAIN" simulate "$scenario" --json --mode "$mode" --time-scale "$scale" "$@" \
		>"$TEST_TMP/$name.json" 2>"$TEST_TMP/$name.err" || rc=$?
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then
		cat "$TEST_TMP/$name.err" >&2
		fail "$name: simulate exited $rc"
	fi
}

# figures NAME: one line for the log (and the report).
figures() {
	jq -r --arg n "$1" '"\($n): replacements=\([.replacements[] | "\(.instance_type)@\(.zone) requested \(.requested_at) ready \(.ready_at)"])"
		+ " drained_at=\(.nodes[0].drained_at) forced=\(.nodes[0].pods_forced) killed=\(.nodes[0].pods_killed)"
		+ " pdb_breaches=\(.pdb_breaches)"' "$TEST_TMP/$1.json"
}

# The acceptance on a run with provisioning.
check_early() {
	local name=$1 f=$TEST_TMP/$1.json
	jq -e '.replacements | length == 1' "$f" >/dev/null || fail "$name: one replacement expected: $(figures "$name")"
	jq -e '.replacements[0].requested_at >= 0 and .replacements[0].requested_at < .nodes[0].notice_at' "$f" \
		>/dev/null || fail "$name: the replacement was not requested at the recommendation (t=0, before the notice): $(figures "$name")"
	jq -e '.replacements[0].instance_type != "m5.32xlarge"' "$f" >/dev/null ||
		fail "$name: the 32xlarge was launched: $(figures "$name")"
	jq -e '(.replacements[0].ready_at | type) == "number" and .replacements[0].ready_at < .nodes[0].notice_at' "$f" \
		>/dev/null || fail "$name: the replacement was not Ready before the notice: $(figures "$name")"
	jq -e '.nodes[0].name == "spot-a" and .nodes[0].notice_at == 60 and (.nodes[0].drained_at | type) == "number"
		and .nodes[0].drained_at <= .nodes[0].deadline_at and .nodes[0].pods_killed == 0
		and .nodes[0].pods_forced == 0 and .pdb_breaches == 0' "$f" >/dev/null ||
		fail "$name: the drain did not complete cleanly: $(figures "$name")"
	jq -e '[.alerts[] | select(.kind == "replacement-launched")] | length == 1' "$f" >/dev/null ||
		fail "$name: no replacement-launched alert"
	jq -e '[.alerts[] | select(.kind == "drain-completed" and .node == "spot-a")] | length == 1' "$f" >/dev/null ||
		fail "$name: no drain-completed alert"
}

# Without provisioning: nothing launched, the evicted pods found no room (Pending), so the PDB blocked the drain
# until pods were forced around it, and it ended later than with provisioning.
check_stalled() {
	local name=$1 early=$2 f=$TEST_TMP/$1.json
	jq -e '.replacements == []' "$f" >/dev/null || fail "$name: something was launched: $(figures "$name")"
	jq -e '.nodes[0].pods_forced > 0 and .pdb_breaches > 0' "$f" >/dev/null ||
		fail "$name: the drain did not stall on the PDB: $(figures "$name")"
	jq -e --slurpfile e "$TEST_TMP/$early.json" '.nodes[0].drained_at > $e[0].nodes[0].drained_at' "$f" \
		>/dev/null || fail "$name: not slower than $early: $(figures "$name") / $(figures "$early")"
}

# Every run at once: each waits on its own scaled clock and takes little of a core, and none needs
# another's result; the checks, which compare them, follow in order.
pids=()
run ctl-early "$SCALE" "$WITH" controller --config "$TEST_TMP/early.yaml" &
pids+=($!)
run ctl-none "$FAST" "$WITHOUT" controller &
pids+=($!)
run ctl-late "$FAST" "$WITH" controller --config "$TEST_TMP/late.yaml" &
pids+=($!)
run agent-early "$SCALE" "$WITH" agent --config "$TEST_TMP/early.yaml" &
pids+=($!)
run agent-none "$FAST" "$WITHOUT" agent &
pids+=($!)
for pid in "${pids[@]}"; do
	wait "$pid" || fail "a simulate run failed (above)"
done

log "controller, provisioning from the rebalance recommendation"
figures ctl-early
check_early ctl-early
jq -e '.delivery == "sqs"' "$TEST_TMP/ctl-early.json" >/dev/null || fail "controller mode did not use SQS"

log "controller, no provisioning: the drain stalls on Pending pods"
figures ctl-none
check_stalled ctl-none ctl-early

log "controller, provisioning only at the interruption: Ready after the notice, the drain ends later"
figures ctl-late
jq -e '.replacements | length == 1 and .[0].requested_at >= 60 and .[0].ready_at > 60' "$TEST_TMP/ctl-late.json" \
	>/dev/null || fail "ctl-late: the replacement should start at the notice: $(figures ctl-late)"
# The last pods had nowhere to go until the late replacement turned Ready.
jq -e --slurpfile e "$TEST_TMP/ctl-early.json" '.nodes[0].drained_at > .replacements[0].ready_at
	and .nodes[0].drained_at > $e[0].nodes[0].drained_at' "$TEST_TMP/ctl-late.json" >/dev/null ||
	fail "ctl-late: the drain did not wait for the late replacement: $(figures ctl-late) / $(figures ctl-early)"

log "agent, provisioning from the rebalance recommendation"
figures agent-early
check_early agent-early
jq -e '.delivery == "imds"' "$TEST_TMP/agent-early.json" >/dev/null || fail "agent mode did not use IMDS"

log "agent, no provisioning"
figures agent-none
check_stalled agent-none agent-early

log "a bad provisioning setting is an error, not a silent no-op"
printf 'provision:\n  max_memory: lots\n' >"$TEST_TMP/bad.yaml"
rc=0
"$SPOTDRAIN" simulate "$WITH" --json --mode controller --time-scale "$FAST" --config "$TEST_TMP/bad.yaml" \
	>"$TEST_TMP/bad.out" 2>"$TEST_TMP/bad.err" || rc=$?
[ "$rc" -eq 1 ] || fail "bad max_memory: exit $rc, expected 1"
grep -q 'max_memory' "$TEST_TMP/bad.err" || fail "the error does not name the key: $(cat "$TEST_TMP/bad.err")"

echo "ok"
