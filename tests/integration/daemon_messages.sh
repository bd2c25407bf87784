#!/usr/bin/env bash
# Issue 32, item 5: the daemons say what is wrong, each in one sentence that says what to do.
#   - a queue given as an ARN (or any non-URL): the URL to give instead, exit 2;
#   - an unknown SPOTDRAIN_* variable: a warning with the name it most likely meant; an unknown key of a file:
#     refused with the key it most likely meant;
#   - the controller without POD_NAMESPACE: where its Lease is kept, and how to say otherwise;
#   - the controller whose Kubernetes API server does not answer: a warning with the server's address and the
#     cause, and /readyz naming the check "kubernetes".
# Missing AWS credentials are test_awscreds' (test_none_found).
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tools

log "a queue ARN or name instead of its URL"
rc=0
"$SPOTDRAIN" controller --queue-url arn:aws:sqs:eu-west-1:123456789012:spot-events 2>"$TEST_TMP/arn.err" || rc=$?
[ "$rc" -eq 2 ] || fail "a queue ARN: exit $rc, expected 2"
grep -qx 'spotdrain controller: give the queue URL, not its ARN: https://sqs.eu-west-1.amazonaws.com/123456789012/spot-events' \
	"$TEST_TMP/arn.err" || fail "a queue ARN: $(cat "$TEST_TMP/arn.err")"
rc=0
"$SPOTDRAIN" controller --queue-url spot-events 2>"$TEST_TMP/name.err" || rc=$?
[ "$rc" -eq 2 ] || fail "a queue name: exit $rc, expected 2"
grep -qF "give the queue URL, not its ARN: https://sqs.REGION.amazonaws.com/ACCOUNT/NAME (got 'spot-events')" \
	"$TEST_TMP/name.err" || fail "a queue name: $(cat "$TEST_TMP/name.err")"

log "unknown SPOTDRAIN_ variables and keys"
SPOTDRAIN_DRAIN_BUDGET=90 SPOTDRAIN_NOT_A_KEY=1 "$SPOTDRAIN" check-config >/dev/null 2>"$TEST_TMP/env.err" ||
	fail "check-config refused the environment: $(cat "$TEST_TMP/env.err")"
grep -q 'warning unknown environment variable SPOTDRAIN_DRAIN_BUDGET is ignored: did you mean SPOTDRAIN_DRAIN_BUDGET_SECONDS?$' \
	"$TEST_TMP/env.err" || fail "no did-you-mean for SPOTDRAIN_DRAIN_BUDGET: $(cat "$TEST_TMP/env.err")"
grep -q 'warning unknown environment variable SPOTDRAIN_NOT_A_KEY is ignored: spotdrain reads SPOTDRAIN_ and a configuration key' \
	"$TEST_TMP/env.err" || fail "no warning for SPOTDRAIN_NOT_A_KEY: $(cat "$TEST_TMP/env.err")"
# A variable that is a key's is read, not warned about.
SPOTDRAIN_DRAIN_BUDGET_SECONDS=90 "$SPOTDRAIN" check-config >"$TEST_TMP/known.out" 2>"$TEST_TMP/known.err"
! grep -q 'unknown environment variable' "$TEST_TMP/known.err" || fail "a key's variable was warned about"
printf 'drain:\n  budgt_seconds: 90\n' >"$TEST_TMP/typo.yaml"
rc=0
"$SPOTDRAIN" check-config --config "$TEST_TMP/typo.yaml" 2>"$TEST_TMP/typo.err" || rc=$?
[ "$rc" -eq 1 ] || fail "an unknown key: exit $rc, expected 1"
grep -qF "typo.yaml:2: unknown key 'drain.budgt_seconds' (did you mean 'drain.budget_seconds'?)" "$TEST_TMP/typo.err" ||
	fail "no did-you-mean for drain.budgt_seconds: $(cat "$TEST_TMP/typo.err")"

log "the controller: no POD_NAMESPACE, an API server that does not answer"
start_sim ctl "$ROOT/examples/drain-8.yaml"
QUEUE_URL=$(sim_endpoint queue_url)
DEAD_PORT=$(free_port)
sed "s#server: .*#server: http://127.0.0.1:$DEAD_PORT#" "$SIM_KUBECONFIG" >"$TEST_TMP/dead.kubeconfig"
METRICS_PORT=$(free_port)
env -u POD_NAMESPACE AWS_ACCESS_KEY_ID="$SIM_AWS_KEY_ID" AWS_SECRET_ACCESS_KEY="$SIM_AWS_SECRET" \
	AWS_REGION=us-east-1 "$SPOTDRAIN" controller --queue-url "$QUEUE_URL" --kubeconfig "$TEST_TMP/dead.kubeconfig" \
	--metrics-listen "127.0.0.1:$METRICS_PORT" >"$TEST_TMP/controller.log" 2>&1 &
CTL_PID=$!
SIM_PIDS+=("$CTL_PID")
reported() {
	grep -q "warning cannot reach the Kubernetes API server at http://127.0.0.1:$DEAD_PORT (.*Failed to connect.*): no node can be drained; check the server address" \
		"$TEST_TMP/controller.log"
}
wait_for 30 reported || { cat "$TEST_TMP/controller.log" >&2; fail "no warning naming the unreachable API server"; }
readyz() {
	curl -s "127.0.0.1:$METRICS_PORT/readyz" >"$TEST_TMP/readyz" || true
	grep -q "kubernetes.*http://127.0.0.1:$DEAD_PORT" "$TEST_TMP/readyz"
}
wait_for 10 readyz || fail "/readyz does not name the Kubernetes API server: $(cat "$TEST_TMP/readyz")"
grep -q 'warning POD_NAMESPACE is not set: the Lease spotdrain-controller and the estimates are kept in namespace default; set POD_NAMESPACE' \
	"$TEST_TMP/controller.log" || fail "the Lease's namespace was not told: $(head -n 20 "$TEST_TMP/controller.log")"
stop_controller
log "ok"
