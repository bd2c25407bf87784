#!/usr/bin/env bash
# Issue 19, item 3: the one-shot commands say what is wrong in one plain sentence, at once. `drain` against a
# missing node, a closed port, a server that never answers, one that refuses the credentials or one that
# speaks no TLS where the kubeconfig says https exits 1 well before its 60 s budget (`within`: a bound waited on
# with lib.sh's WAIT_SLACK, not slept; the server's own 4 s answer limit is the product's figure), naming
# the server's URL and what to check, with no errno text tacked on; `plan` and `audit` the same. A drain whose server fails after its first answer never saw the
# node's pods: it never says "0 pods left" (exit 3, "left": null).
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tools
requires python3
REFUSE=$ROOT/tests/tools/refusing_api.py
SERVERS=()
# Stops the refusing servers before lib.sh's cleanup.
stop_servers() {
	local p
	signal_ours TERM "${SERVERS[@]}"
	for p in "${SERVERS[@]}"; do
		wait "$p" 2>/dev/null
	done
}
trap 'rc=$?; set +e; stop_servers; (exit $rc); cleanup' EXIT

# refusing MODE: starts tests/tools/refusing_api.py; sets url.
refusing() {
	local pf=$TEST_TMP/port-$1
	python3 "$REFUSE" --mode "$1" --port-file "$pf" >"$TEST_TMP/refusing-$1.log" 2>&1 &
	SERVERS+=($!)
	wait_for 10 test -s "$pf" || fail "refusing_api.py --mode $1 did not come up"
	url=http://127.0.0.1:$(cat "$pf")
}

# kubeconfig_for URL FILE: the simulator's kubeconfig, pointed at URL.
kubeconfig_for() {
	sed "s#server: .*#server: $1#" "$SIM_KUBECONFIG" >"$2"
}

# within SECONDS WANT_RC ERR_FILE COMMAND...: runs COMMAND in the background; it must end within SECONDS times
# WAIT_SLACK (waited on as a condition, see wait_for: below the drains' 60 s budget) with WANT_RC; its stderr
# goes to ERR_FILE.
within() {
	ended "$1" "$3" "${@:4}"
	[ "$WITHIN_RC" -eq "$2" ] || fail "exit $WITHIN_RC, expected $2: ${*:4}"
}
# ended SECONDS ERR_FILE COMMAND...: within's wait, its exit status in WITHIN_RC.
ended() {
	local limit=$1 err=$2 pid
	shift 2
	"$@" >"$err.out" 2>"$err" &
	pid=$!
	if ! wait_for "$limit" eval "! kill -0 $pid"; then
		kill -KILL "$pid" 2>/dev/null || true
		fail "still running after $((limit * WAIT_SLACK))s: $*"
	fi
	WITHIN_RC=0
	wait "$pid" || WITHIN_RC=$?
	cat "$err"
}
# answered SECONDS WANT_RC ERR_FILE COMMAND...: within, against a server that answers; tried again (three
# tries) while COMMAND says the server gave no answer within its 4 s: on a loaded machine (stress -c 2) a
# server of this test missed that limit, and the case then said nothing about what it checks.
answered() {
	local try
	for try in 1 2 3; do
		ended "$1" "$3" "${@:4}"
		grep -q '(no answer within 4 s)' "$3" || break
		log "no answer within 4 s, try $try of 3 (a loaded machine)"
	done
	[ "$WITHIN_RC" -eq "$2" ] || fail "exit $WITHIN_RC, expected $2: ${*:4}"
}

# plain FILE: one sentence, no errno words after it ("...: No such file or directory").
plain() {
	[ "$(wc -l <"$1")" -eq 1 ] || fail "not one line: $(cat "$1")"
	! grep -Eq ': (No such file or directory|Connection refused|Permission denied|Input/output error|Connection timed out|Bad message)$' "$1" ||
		fail "errno text tacked on: $(cat "$1")"
}

# Any scenario with a node spot-a: the errors come before anything is drained.
start_sim tuned "$ROOT/examples/pdb-tuned.yaml"

log "a node that does not exist"
answered 5 1 "$TEST_TMP/missing.err" "$SPOTDRAIN" drain no-such-node --kubeconfig "$SIM_KUBECONFIG" --budget 60
plain "$TEST_TMP/missing.err"
grep -q "^spotdrain drain: there is no node no-such-node at $SIM_URL " "$TEST_TMP/missing.err" ||
	fail "the missing node is not named with the server's URL"
answered 5 1 "$TEST_TMP/missing-plan.err" "$SPOTDRAIN" plan no-such-node --kubeconfig "$SIM_KUBECONFIG"
plain "$TEST_TMP/missing-plan.err"

log "a closed port"
kubeconfig_for http://127.0.0.1:1 "$TEST_TMP/closed.kubeconfig"
for verb in "drain spot-a --budget 60" "plan spot-a" "audit"; do
	# shellcheck disable=SC2086 # the verb and its arguments
	within 5 1 "$TEST_TMP/closed.err" "$SPOTDRAIN" $verb --kubeconfig "$TEST_TMP/closed.kubeconfig"
	plain "$TEST_TMP/closed.err"
	grep -q "^spotdrain ${verb%% *}: cannot reach the Kubernetes API server at http://127.0.0.1:1 " \
		"$TEST_TMP/closed.err" || fail "$verb: the unreachable server is not named"
	grep -q "check the server address of context .* of $TEST_TMP/closed.kubeconfig" "$TEST_TMP/closed.err" ||
		fail "$verb: no word on what to check"
done

log "a server that never answers"
refusing silent
kubeconfig_for "$url" "$TEST_TMP/silent.kubeconfig"
within 5 1 "$TEST_TMP/silent.err" "$SPOTDRAIN" drain spot-a --kubeconfig "$TEST_TMP/silent.kubeconfig" --budget 60
plain "$TEST_TMP/silent.err"
grep -q "cannot reach the Kubernetes API server at $url (no answer within 4 s)" "$TEST_TMP/silent.err" ||
	fail "the silent server is not told as such"

log "a server that refuses the credentials"
refusing unauthorized
kubeconfig_for "$url" "$TEST_TMP/unauth.kubeconfig"
for verb in "drain spot-a --budget 60" "plan spot-a" "audit"; do
	# shellcheck disable=SC2086
	answered 5 1 "$TEST_TMP/unauth.err" "$SPOTDRAIN" $verb --kubeconfig "$TEST_TMP/unauth.kubeconfig"
	plain "$TEST_TMP/unauth.err"
	grep -q "at $url refused the credentials (401 Unauthorized); check the token" "$TEST_TMP/unauth.err" ||
		fail "$verb: the refused credentials are not told"
done

log "no TLS where the kubeconfig says https"
kubeconfig_for "${url/http:/https:}" "$TEST_TMP/tls.kubeconfig"
answered 5 1 "$TEST_TMP/tls.err" "$SPOTDRAIN" drain spot-a --kubeconfig "$TEST_TMP/tls.kubeconfig" --budget 60
plain "$TEST_TMP/tls.err"
grep -q "no trusted TLS connection to the Kubernetes API server at ${url/http:/https:} .*check the certificate-authority" \
	"$TEST_TMP/tls.err" || fail "the TLS failure does not point at the CA"

log "a server that fails after its first answer: the pods were never seen"
refusing node-only
kubeconfig_for "$url" "$TEST_TMP/nodeonly.kubeconfig"
answered 15 3 "$TEST_TMP/nodeonly.err" "$SPOTDRAIN" drain spot-a --kubeconfig "$TEST_TMP/nodeonly.kubeconfig" \
	--budget 3 --json
jq -e '.outcome == "deadline-missed" and .left == null and (.message | test("before its pods could be listed"))' \
	"$TEST_TMP/nodeonly.err.out" >/dev/null || fail "unexpected result: $(cat "$TEST_TMP/nodeonly.err.out")"
! grep -q "0 pods left" "$TEST_TMP/nodeonly.err" "$TEST_TMP/nodeonly.err.out" || fail "says 0 pods left"
log "ok"
