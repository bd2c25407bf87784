# shellcheck shell=bash
# Helpers of the real control plane tier's cases (sourced): the cluster that tests/realk8s/check started
# ($RK_DIR), or one of the case's own. Each case exits 0 on success, 77 when skipped.
set -euo pipefail
RK_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$RK_HERE/../.." && pwd)
SPOTDRAIN=${SPOTDRAIN:-$ROOT/build/spotdrain}
CASE_TMP=$(mktemp -d "${TMPDIR:-/tmp}/realk8s-case.XXXXXX")
OWN_CLUSTER=

skip() { echo "skipped: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
log() { echo "--- $*"; }

# The admission webhook server a world set up by rk_prepare (below) left running.
RK_ADMISSION_PID=""
rk_unprepare() {
	[ -z "$RK_ADMISSION_PID" ] || kill "$RK_ADMISSION_PID" 2>/dev/null || true
	RK_ADMISSION_PID=""
}
rk_cleanup() {
	rk_unprepare
	[ -n "$OWN_CLUSTER" ] && "$RK_HERE/cluster" down "$OWN_CLUSTER" >/dev/null 2>&1
	rm -rf "$CASE_TMP"
}
trap rk_cleanup EXIT

"$RK_HERE/cluster" have || skip "the tier's peers are not built (tests/realk8s/setup)"
[ -x "$SPOTDRAIN" ] || skip "$SPOTDRAIN not built"
command -v jq >/dev/null || skip "jq not installed"
if [ -z "${RK_DIR:-}" ]; then
	OWN_CLUSTER=$CASE_TMP/cluster
	"$RK_HERE/cluster" up "$OWN_CLUSTER" >/dev/null || fail "the cluster did not start"
	RK_DIR=$OWN_CLUSTER
fi
# shellcheck disable=SC1091
. "$RK_DIR/env"
export RK_DIR

k() { "$KUBECTL" --kubeconfig "$RK_KUBECONFIG" "$@"; }

# play SCENARIO MODE [run's options...]: the scenario played by tests/realk8s/run; its result JSON in
# $CASE_TMP/result.json, its exit status in PLAY_RC, its run directory (logs, kubeconfigs) in $CASE_TMP/run.
play() {
	PLAY_RC=0
	"$RK_HERE/run" "$1" --mode "$2" "${@:3}" --json --spotdrain "$SPOTDRAIN" --dir "$CASE_TMP/run" \
		>"$CASE_TMP/result.json" \
		2>"$CASE_TMP/run.err" || PLAY_RC=$?
	cat "$CASE_TMP/run.err" >&2
	[ "$PLAY_RC" -le 3 ] && [ "$PLAY_RC" -ne 1 ] && [ "$PLAY_RC" -ne 2 ] || fail "run $1 --mode $2 exited $PLAY_RC"
	jq -c '.nodes[]' "$CASE_TMP/result.json"
}

# rk_prepare SCENARIO NAME [run's options...]: the scenario's world set up by tests/realk8s/run --prepare (the
# chart installed, nothing played); its JSON in $CASE_TMP/prepared-NAME.json, its run directory
# $CASE_TMP/run-NAME. --prepare leaves the chart's admission webhook server running: its PID in
# RK_ADMISSION_PID, stopped by rk_unprepare (the next rk_prepare, and the case's end, call it).
rk_prepare() {
	rk_unprepare
	"$RK_HERE/run" "$1" --prepare --spotdrain "$SPOTDRAIN" --dir "$CASE_TMP/run-$2" "${@:3}" \
		>"$CASE_TMP/prepared-$2.json" || fail "$1 could not be set up on the real cluster"
	RK_ADMISSION_PID=$(jq -r '.processes.admission // empty' "$CASE_TMP/prepared-$2.json")
}

# res JQ: a jq query on the last play's result.
res() { jq -r "$@" "$CASE_TMP/result.json"; }
