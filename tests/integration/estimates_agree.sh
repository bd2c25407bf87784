#!/usr/bin/env bash
# Issue 32, item 2: one drain, one pair of estimates (the pods never seen stopping taken to stop at once, and
# to take their whole grace), the same on every surface at the same moment.
#   Each example is served by `sim serve` and its first interrupted node asked, on the cluster as it stands
#   before anyone drains it, with a budget of 120 s: `plan --json` (the pair), `plan` (its ESTIMATE line and its
#   table, which is the whole grace's), `audit` and `audit --json`, then `drain` itself: its line before it
#   acts, its live view's first prediction, its alert (when the drain does not fit), its report and its result
#   JSON.
#   `simulate` of the same example (its drain judged at the notice, 120 s from the deadline the notice states
#   to the second) prints the pair on its timeline's plan line, in the alerts of its result and as each
#   node's estimates_at_start; the result's
#   times add up with what its drain-completed says.
#   Counts must be equal; a time printed in whole seconds within the second of the others.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tools

# text JSON: the pair as drain_outlook_format prints it, from plan's estimates object.
text_of() {
	jq -r 'def s(x): if x == null then "never" else (x | round | tostring) end;
		if .unseen then
			"last pod gone unforced in \(s(.stops_at_once.unforced)) / \(s(.stops_at_whole_grace.unforced))\(if .stops_at_whole_grace.unforced == null then "" else " s" end), \(.stops_at_once.forced) / \(.stops_at_whole_grace.forced) forced, \(.stops_at_once.killed) / \(.stops_at_whole_grace.killed) killed"
		else
			"every stop known: last pod gone unforced in \(s(.stops_at_once.unforced))\(if .stops_at_once.unforced == null then "" else " s" end), \(.stops_at_once.forced) forced, \(.stops_at_once.killed) killed"
		end' <<<"$1"
}

# same NAME A B: the pairs A and B (estimates objects) agree: counts and verdicts equal, times within 1 s.
same() {
	jq -e -n --argjson a "$2" --argjson b "$3" '
		def near(x; y): (x == null and y == null) or (x != null and y != null and ((x - y) | fabs) <= 1);
		$a.unseen == $b.unseen and
		([ "stops_at_once", "stops_at_whole_grace" ] | all(. as $k |
			$a[$k].forced == $b[$k].forced and $a[$k].killed == $b[$k].killed and $a[$k].to_go == $b[$k].to_go and
			$a[$k].verdict == $b[$k].verdict and near($a[$k].unforced; $b[$k].unforced)))' >/dev/null ||
		fail "$1: $(jq -c . <<<"$2") is not $(jq -c . <<<"$3")"
}

# contains NAME FILE TEXT
contains() {
	grep -qF -- "$3" "$2" || fail "$1: no \"$3\" in $2: $(grep -v debug "$2" | head -5)"
}

# near_text TEXT LINE: LINE holds the pair TEXT (text_of) but for a second in its times: the same words and
# counts, each time within 1 s ("never" only with "never").
near_text() {
	local head=${1%%last pod gone unforced in *} a b i
	[[ $2 == *"${head}last pod gone unforced in "* ]] || return 1
	a=${1#*last pod gone unforced in }
	b=${2#*"${head}last pod gone unforced in "}
	# The counts, after the times' comma, exactly; the times, before it, within a second.
	[ "${a#*, }" = "${b#*, }" ] || return 1
	read -r -a a <<<"${a%%,*}"
	read -r -a b <<<"${b%%,*}"
	[ "${#a[@]}" -eq "${#b[@]}" ] || return 1
	for i in "${!a[@]}"; do
		if [[ ${a[$i]} =~ ^[0-9]+$ && ${b[$i]} =~ ^[0-9]+$ ]]; then
			[ $((a[i] - b[i])) -le 1 ] && [ $((b[i] - a[i])) -le 1 ] || return 1
		elif [ "${a[$i]}" != "${b[$i]}" ]; then
			return 1
		fi
	done
}

trial() {
	local name=$1 node=$2 dir=$TEST_TMP/$1 rc=0
	mkdir -p "$dir"
	cd "$dir" || return 1
	# At time scale 1: scaled, the agent's estimates differ (reported in issue 32's notes).
	"$SPOTDRAIN" simulate "$ROOT/examples/$name.yaml" --mode agent --json >simulate.json 2>simulate.err &
	local sim_pid=$!
	"$SPOTDRAIN" simulate "$ROOT/examples/$name.yaml" --mode agent >simulate.out 2>&1 &
	local text_pid=$!
	serve_here "$ROOT/examples/$name.yaml" --time-scale 10 || {
		echo "sim serve did not come up" >error
		return
	}
	local kc=(--kubeconfig kubeconfig)
	"$SPOTDRAIN" plan "$node" --budget 120 "${kc[@]}" --json >plan.json 2>plan.err || true
	"$SPOTDRAIN" plan "$node" --budget 120 "${kc[@]}" >plan.out 2>&1 || true
	"$SPOTDRAIN" audit --budget 120 "${kc[@]}" --json >audit.json 2>audit.err || true
	"$SPOTDRAIN" audit --budget 120 "${kc[@]}" >audit.out 2>&1 || true
	"$SPOTDRAIN" drain "$node" --budget 120 --policy force "${kc[@]}" --dry-run >dry.out 2>&1 || true
	"$SPOTDRAIN" drain "$node" --budget 120 --policy force "${kc[@]}" --json --report report.html >drain.json \
		2>drain.err || rc=$?
	echo "$rc" >drain.rc
	kill -TERM "$SERVE_PID"
	wait "$SERVE_PID" || true
	wait "$sim_pid" || true
	wait "$text_pid" || true
}

check() {
	local name=$1 node=$2 dir=$TEST_TMP/$1
	[ ! -e "$dir/error" ] || fail "$name: $(cat "$dir/error")"
	local pair text
	pair=$(jq -c '.nodes[0].estimates' "$dir/plan.json")
	[ "$pair" != null ] && [ -n "$pair" ] || fail "$name: plan --json has no estimates: $(head -c 300 "$dir/plan.json")"
	text=$(text_of "$pair")
	log "$name $node: $text"
	# plan: the ESTIMATE line.
	contains "$name plan" "$dir/plan.out" "ESTIMATE stops never seen taken at once / at their whole grace: $text"
	# drain --dry-run prints plan's very output.
	contains "$name drain --dry-run" "$dir/dry.out" "$text"
	# audit: the node's pair in each finding of that node, and its ESTIMATE line.
	jq -c --arg n "$node" '.pdbs[] | select(.worst_node == $n) | .estimates' "$dir/audit.json" | while read -r a; do
		same "$name audit --json" "$a" "$pair"
	done
	if jq -e --arg n "$node" 'any(.pdbs[]; .worst_node == $n)' "$dir/audit.json" >/dev/null; then
		contains "$name audit" "$dir/audit.out" "ESTIMATE $node: stops never seen taken at once / at their whole grace: $text"
	fi
	# drain: the line before it acts, the first live view line, the alert if any, the result's pair.
	same "$name drain --json" "$(jq -c .estimates_at_start "$dir/drain.json")" "$pair"
	contains "$name drain's first line" "$dir/drain.err" "node/$node:"
	grep -m1 "^node/$node:" "$dir/drain.err" | grep -qF "$text" || fail "$name: drain's first line: $(grep -m1 "^node/$node:" "$dir/drain.err")"
	grep -m1 "predicted: " "$dir/drain.err" | grep -qF "$text" ||
		fail "$name: the live view's first prediction: $(grep -m1 'predicted: ' "$dir/drain.err")"
	grep -qF "$text" "$dir/report.html" || fail "$name: the report does not have the pair"
	if grep -q "alert=drain-infeasible\|alert=drain-at-risk" "$dir/drain.err"; then
		grep -m1 "alert=drain-infeasible\|alert=drain-at-risk" "$dir/drain.err" | grep -qF "$text" ||
			fail "$name: the drain's alert: $(grep -m1 'alert=drain-' "$dir/drain.err")"
		grep -m1 "alert=drain-infeasible\|alert=drain-at-risk" "$dir/drain.err" | grep -q "forced_at_once=$(jq .stops_at_once.forced <<<"$pair") forced_whole_grace=$(jq .stops_at_whole_grace.forced <<<"$pair")" ||
			fail "$name: the alert's fields do not carry the pair"
	fi
	# The exit status says what the result says, and the alert does not contradict either (item 4): a drain
	# that fits by forcing is "cannot finish in time without forcing", and may exit 0 "drained".
	local rc
	rc=$(cat "$dir/drain.rc")
	if grep -q "alert=drain-infeasible" "$dir/drain.err" && [ "$(jq .stops_at_once.killed <<<"$pair")" -eq 0 ]; then
		grep -m1 "alert=drain-infeasible" "$dir/drain.err" | grep -q "cannot finish in time without forcing:" ||
			fail "$name: a drain that forcing makes fit is told it cannot finish in time"
	fi
	if [ "$rc" -eq 0 ] && grep -q "cannot finish in time:" "$dir/drain.err"; then
		fail "$name: the drain exited 0, in time, beside an alert that it cannot finish in time"
	fi
	if jq -e '.killed > 0 or .outcome == "deadline-missed"' "$dir/drain.json" >/dev/null; then
		[ "$rc" -eq 3 ] || fail "$name: the drain killed pods or missed its deadline and exited $rc"
	else
		[ "$rc" -eq 0 ] || fail "$name: the drain exited $rc for $(jq -c '{outcome, killed}' "$dir/drain.json")"
	fi
	# simulate: the pair its drain made at the notice, on its plan line and in its result's alert (if any).
	# Counts equal, times within the second: simulate judges at its own notice, which a loaded machine may
	# put a second of scenario time later (t=1.8 s once, in a make check: 59 s where the others said 60).
	local line
	line=$(grep "$node .*plan: " "$dir/simulate.out" | head -1)
	near_text "$text" "$line" || fail "$name: simulate's plan line: $line"
	jq -r --arg n "$node" '.alerts[] | select(.node == $n and (.kind == "drain-infeasible" or .kind == "drain-at-risk"))
		| .message' "$dir/simulate.json" | while read -r m; do
		grep -qF "$text" <<<"$m" || fail "$name: simulate's result has the alert \"$m\""
	done
	# Its result carries the same pair per node (the counts), from the alert that ended the drain.
	jq -e --arg n "$node" --argjson p "$pair" '.nodes[] | select(.name == $n) | .estimates_at_start as $e |
		$e != null and ([ "stops_at_once", "stops_at_whole_grace" ] | all(. as $k |
			$e[$k].forced == $p[$k].forced and $e[$k].killed == $p[$k].killed))' "$dir/simulate.json" >/dev/null ||
		fail "$name: simulate's result has $(jq -c --arg n "$node" '.nodes[] | select(.name == $n) | .estimates_at_start' "$dir/simulate.json") beside plan's $pair"
	# Its times add up: "after the notice" + "before the deadline" is the notice's window (DEADLINE - NOTICE of
	# the result, one origin), less the time the agent took to receive the notice, never more; and "before the
	# deadline" is DEADLINE - DRAINED, but for the moment the drain saw its last pod go (a watch event later
	# than the simulator's own clock, under load: at --time-scale 10 a 0.1 s lag is 1 s of scenario time, and
	# a run beside the real tier's saw 1.01 s; 2 s, as for the notice's reception above).
	local said
	said=$(jq -r --arg n "$node" '.alerts[] | select(.kind == "drain-completed" and .node == $n) | .message' \
		"$dir/simulate.json" | sed -nE 's/.* ([0-9.]+) s after the notice \(([0-9.]+) s before the deadline\).*/\1 \2/p')
	if [ -n "$said" ]; then
		read -r after before <<<"$said"
		jq -e --arg n "$node" --argjson a "$after" --argjson b "$before" '.nodes[] | select(.name == $n) |
			($a + $b) <= (.deadline_at - .notice_at) + 0.15 and ($a + $b) >= (.deadline_at - .notice_at) - 2 and
			((.deadline_at - .drained_at - $b) | fabs) <= 2' \
			"$dir/simulate.json" >/dev/null ||
			fail "$name: $(jq -c --arg n "$node" '.nodes[] | select(.name == $n) | {notice_at, deadline_at, drained_at}' \
				"$dir/simulate.json") beside \"$after s after the notice ($before s before the deadline)\""
	fi
}

trial seed-504 spot-a &
trial pdb-tuned spot-a &
trial mass-interruption spot-00 &
wait
check seed-504 spot-a
check pdb-tuned spot-a
check mass-interruption spot-00
log "ok"
