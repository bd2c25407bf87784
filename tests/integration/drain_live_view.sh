#!/usr/bin/env bash
# Issue 19, item 1: `spotdrain drain` on a terminal (a tmux pane) keeps its status lines at the bottom,
# redrawn in place, and writes every log record above them: no snapshot of the pane, before or after an
# alert, shows a record inside a status line. Each status line is cut to the pane's width; the block is gone
# when the drain ends and a summary table is left; NO_COLOR takes the colour away; with stderr not a terminal
# there is no escape sequence at all and the status comes as plain log records.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tools
requires tmux
TMUX_SOCK=spotdrain-it-$$
tm() { tmux -L "$TMUX_SOCK" -f /dev/null "$@"; }
trap 'rc=$?; set +e; tm kill-server 2>/dev/null; (exit $rc); cleanup' EXIT

# A drain that cannot finish through its PDB (6 pods one at a time, 4 s each, 15 s budget): drain-infeasible
# at once, pods-forced at their last safe moment some seconds in, then the end; the status changes between.
SCENARIO=$ROOT/tests/integration/drain_live_view.yaml

TS='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z (debug|info|notice|warning|error) '
HEAD='^spot-a: [0-9]+ s to deadline, (planning|[0-9]+ pods left.*, [0-9]+ forced(; predicted: .*[0-9]+ killed)?)'
PDBLINE='^  (PDB [a-z]+/[a-z]+|without PDB): [0-9]+ left$'

# check_pane FILE WIDTH: one snapshot (wrapped lines joined) of a pane while the drain runs. Every line is
# a whole log record, a status line, or blank; the status lines come last, each within the width; no
# record's time stamp appears anywhere but at the start of a line.
check_pane() {
	local f=$1 width=$2 n=0 line seen_head=0 kind
	while IFS= read -r line; do
		n=$((n + 1))
		if [[ $line =~ ^$TS ]]; then
			kind=record
		elif [[ $line =~ $HEAD || $line =~ $PDBLINE ]]; then
			kind=status
		elif [ -z "$line" ] || [[ $line == EXIT=* ]]; then
			kind=blank
		else
			kind=other
		fi
		[[ ${line:1} =~ $TS ]] && fail "a log record inside line $n: '$line' (snapshot $f)"
		case $kind in
		record) [ "$seen_head" -eq 0 ] || fail "a log record below the status lines, line $n (snapshot $f)" ;;
		status)
			[[ $line =~ $HEAD ]] && seen_head=$((seen_head + 1))
			[ "${#line}" -lt "$width" ] || fail "status line $n wider than the pane: '$line'"
			;;
		other)
			# A record's continuation when the pane could not join it, or the summary after the end.
			[ "$seen_head" -eq 0 ] || fail "line $n is neither record nor status: '$line' (snapshot $f)"
			;;
		esac
	done <"$f"
	[ "$seen_head" -le 1 ] || fail "$seen_head status head lines in one snapshot (snapshot $f)"
}

# run_in_pane NAME WIDTH ENV...: starts the drain in a detached pane WIDTH columns wide.
run_in_pane() {
	local name=$1 width=$2
	shift 2
	tm new-session -d -s "$name" -x "$width" -y 40 \
		"env $* '$SPOTDRAIN' drain spot-a --kubeconfig '$SIM_KUBECONFIG' --budget 15 --policy force; echo EXIT=\$?; exec sleep 300"
}

pane_done() { tm capture-pane -p -t "$1" | grep -q '^EXIT='; }

# watch_pane NAME WIDTH: snapshots the pane until the drain ends (bounded), checking each one.
watch_pane() {
	local name=$1 width=$2 i=0 deadline
	deadline=$(($(date +%s) + 60))
	while ! pane_done "$name"; do
		[ "$(date +%s)" -lt "$deadline" ] || fail "the drain in $name did not end within 60 s"
		i=$((i + 1))
		tm capture-pane -p -J -t "$name" >"$TEST_TMP/$name.$i"
		check_pane "$TEST_TMP/$name.$i" "$width"
		cp "$TEST_TMP/$name.$i" "$TEST_TMP/$name.last"
		grep -Eq "$TS" "$TEST_TMP/$name.$i" && ! [ -e "$TEST_TMP/$name.first-record" ] &&
			echo "$i" >"$TEST_TMP/$name.first-record"
		grep -Eq "${TS}.*alert=pods-forced" "$TEST_TMP/$name.$i" && ! [ -e "$TEST_TMP/$name.forced" ] &&
			echo "$i" >"$TEST_TMP/$name.forced"
		sleep 0.1
	done
	log "$name: $i snapshots checked"
	tm capture-pane -p -J -t "$name" >"$TEST_TMP/$name.end"
}

start_sim live "$SCENARIO"
log "a 100-column pane"
run_in_pane wide 100
watch_pane wide 100
[ -e "$TEST_TMP/wide.forced" ] || fail "no pods-forced alert seen while the drain ran"
# Snapshots after the alert still had their status lines (and the records above).
grep -Eq "$HEAD" "$TEST_TMP/wide.$(cat "$TEST_TMP/wide.forced")" || fail "no status lines beside the alert"
cat "$TEST_TMP/wide.end"
! grep -Eq 's to deadline' "$TEST_TMP/wide.end" || fail "the status lines were left behind at the end"
grep -Eq '^NODE +OUTCOME +SECONDS +EVICTED +FORCED +LEFT' "$TEST_TMP/wide.end" || fail "no summary table"
grep -Eq '^spot-a +(drained|deadline-missed) ' "$TEST_TMP/wide.end" || fail "no summary row for spot-a"

log "a 50-column pane: status lines cut to the width"
start_sim narrow "$SCENARIO"
run_in_pane narrow 50
watch_pane narrow 50

log "colour, and NO_COLOR"
start_sim color "$SCENARIO"
run_in_pane color 100
wait_for 20 eval "tm capture-pane -p -t color | grep -Eq '$HEAD'" || fail "no status in the colour pane"
tm capture-pane -p -e -t color >"$TEST_TMP/color.esc"
grep 's to deadline' "$TEST_TMP/color.esc" | grep -q $'\033\\[' || fail "no colour on a terminal without NO_COLOR"
start_sim nocolor "$SCENARIO"
run_in_pane nocolor 100 NO_COLOR=1
wait_for 20 eval "tm capture-pane -p -t nocolor | grep -Eq '$HEAD'" || fail "no status in the NO_COLOR pane"
tm capture-pane -p -e -t nocolor >"$TEST_TMP/nocolor.esc"
! grep 's to deadline' "$TEST_TMP/nocolor.esc" | grep -q $'\033\\[' || fail "colour despite NO_COLOR"
wait_for 60 pane_done color || fail "the colour drain did not end"
wait_for 60 pane_done nocolor || fail "the NO_COLOR drain did not end"

log "not a terminal: plain records, no escape sequences"
start_sim plain "$SCENARIO"
rc=0
"$SPOTDRAIN" drain spot-a --kubeconfig "$SIM_KUBECONFIG" --budget 15 --policy force >"$TEST_TMP/plain.out" 2>"$TEST_TMP/plain.err" || rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || fail "drain exited $rc"
cat "$TEST_TMP/plain.err"
! grep -q $'[\033\r]' "$TEST_TMP/plain.err" "$TEST_TMP/plain.out" || fail "escape sequences with stderr not a terminal"
grep -Eq "^${TS}spot-a: [0-9]+ pods left, [0-9]+ forced; predicted: .*[0-9]+ killed node=spot-a$" "$TEST_TMP/plain.err" ||
	fail "no plain status record"
grep -Eq '^NODE +OUTCOME' "$TEST_TMP/plain.out" || fail "no summary table on stdout"
log "ok"
