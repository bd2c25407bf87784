#!/usr/bin/env bash
# Issue 32, item 1: a pod gone because its node went was killed, and `spotdrain drain` says so everywhere.
#   seed-504 through `sim serve` at 4 times real time: the scenario's own notice ends spot-a at 125 s (31 s
#   real), before the end of a manual drain given 60 s; PDB shop/api lets its 10 pods on spot-a go one at a
#   time (15 s of startup each), so some are still there when the node goes. The drain reports them killed:
#   outcome deadline-missed, `killed` equal to the simulator's own pods_killed (and more than 0), exit 3, a
#   pod-killed alert with a post-mortem for each, a killed bar for each in the report.
#   drain-8 (no notice, a drain that fits): 0 killed, exit 0.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tools

clock_past() {
	curl -sSf "$SERVE_URL/sim/v1/clock" | jq -e --argjson t "$1" '.now > $t'
}

# trial NAME SCENARIO: serves SCENARIO, waits past its notice, drains spot-a for 60 s with --json and a
# report; leaves rc, result.json, drain.log, report.html and sim.json (the simulator's spot-a) in TEST_TMP/NAME.
trial() {
	local name=$1 scenario=$2 rc=0
	mkdir -p "$TEST_TMP/$name"
	cd "$TEST_TMP/$name" || return
	if ! serve_here "$scenario" --time-scale 4 || ! wait_for 20 clock_past 6; then
		echo "sim serve did not come up" >error
		return
	fi
	"$SPOTDRAIN" drain spot-a --budget 60 --kubeconfig kubeconfig --json --report report.html \
		>result.json 2>drain.log || rc=$?
	echo "$rc" >rc
	curl -sSf "$SERVE_URL/sim/v1/result" | jq '[.nodes[] | select(.name == "spot-a")][0] // {}' >sim.json
	kill -TERM "$SERVE_PID"
	wait "$SERVE_PID" || true
}

trial seed-504 "$ROOT/examples/seed-504.yaml" &
trial drain-8 "$ROOT/examples/drain-8.yaml" &
wait

check() {
	local name=$1 dir=$TEST_TMP/$1
	[ ! -e "$dir/error" ] || fail "$name: $(cat "$dir/error")"
	log "$name: exit $(cat "$dir/rc")"
	cat "$dir/result.json"
	jq -c . "$dir/sim.json"
}

check seed-504
dir=$TEST_TMP/seed-504
killed=$(jq -r .killed "$dir/result.json")
sim_killed=$(jq -r '.pods_killed // 0' "$dir/sim.json")
[ "$sim_killed" -gt 0 ] || fail "seed-504: the simulator killed no pod on spot-a; the case tests nothing"
[ "$killed" = "$sim_killed" ] || fail "seed-504: drain says $killed killed, the simulator $sim_killed"
[ "$(cat "$dir/rc")" -eq 3 ] || fail "seed-504: drain exited $(cat "$dir/rc") with pods killed, not 3"
jq -e '.outcome == "deadline-missed" and (.message | test("killed with it"))' "$dir/result.json" >/dev/null ||
	fail "seed-504: the result does not say that the node went with pods on it"
alerts=$(grep -c 'alert=pod-killed .*postmortem=true' "$dir/drain.log" || true)
[ "$alerts" -eq "$killed" ] || fail "seed-504: $alerts pod-killed alerts with a post-mortem for $killed pods killed"
# One killed bar per pod, and the legend's.
bars=$(grep -o '<rect class="pod-bar killed"' "$dir/report.html" | wc -l)
[ "$bars" -eq $((killed + 1)) ] || fail "seed-504: the report draws $((bars - 1)) killed pods, not $killed"

check drain-8
dir=$TEST_TMP/drain-8
[ "$(cat "$dir/rc")" -eq 0 ] || fail "drain-8: drain exited $(cat "$dir/rc"), not 0"
jq -e '.outcome == "drained" and .killed == 0 and .left == 0' "$dir/result.json" >/dev/null ||
	fail "drain-8: the result is not a drain with nothing killed"
[ "$(jq -r '.pods_killed // 0' "$dir/sim.json")" -eq 0 ] || fail "drain-8: the simulator killed pods"
! grep -q 'alert=pod-killed' "$dir/drain.log" || fail "drain-8: a pod-killed alert for a drain that fit"
log "ok"
