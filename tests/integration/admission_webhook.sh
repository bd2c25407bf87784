#!/usr/bin/env bash
# The eviction webhook of an agent-only install (agent.evictionWebhook): the chart rendered in agent mode
# at its defaults, and a real `spotdrain admission` (no queue, no Lease) with the rendered configuration and
# certificate against sim serve. AdmissionReview v1 requests as kube-apiserver sends them, over TLS to the
# Service's name and verified against the rendered caBundle (webhook_lib.sh, shared with
# eviction_webhook.sh):
# - before its pod list is complete: /readyz 503, /healthz 200, the agent's own eviction denied;
# - /readyz answers 200 once the pod list is complete, and the own pod's eviction is then allowed;
# - the agent on spot-a evicting od-1's pod: denied (403, the node named), counted and alerted;
# - a controller, a kubelet, another release's agent: allowed unjudged;
# - SIGTERM: exit 0.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/webhook_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/webhook_lib.sh"
webhook_requirements

log "the agent release at its defaults (mode agent, agent.evictionWebhook on)"
helm_render "$ROOT/helm/spotdrain" spotdrain kube-system "$ROOT/helm/spotdrain/examples/agent-values.yaml" \
	>"$TEST_TMP/release.yaml" || fail "the chart does not render"
PORT=$(free_port)
METRICS_PORT=$(free_port)
webhook_config "$TEST_TMP/release.yaml" "$PORT"
[ "$AGENT" = system:serviceaccount:kube-system:spotdrain ] || fail "the webhook judges $AGENT, not the release's agent"

webhook_sim

# start_admission KUBECONFIG LOG: `spotdrain admission` with the rendered configuration, in the background
# (ADM_PID); answers PATH: its ops endpoint answers PATH (healthz, readyz) with 200.
start_admission() {
	"$SPOTDRAIN" admission --config "$TEST_TMP/spotdrain.yaml" --kubeconfig "$1" \
		--metrics-listen "127.0.0.1:$METRICS_PORT" >"$2" 2>&1 &
	ADM_PID=$!
	SIM_PIDS+=("$ADM_PID")
}
answers() { [ "$(curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$METRICS_PORT/$1")" = 200 ]; }

log "before its pod list is complete (an API server that does not answer): not ready, every agent's eviction denied"
DEAD=$(free_port)
sed "s|$SIM_URL|http://127.0.0.1:$DEAD|" "$SIM_KUBECONFIG" >"$TEST_TMP/dead.kubeconfig"
grep -q "127.0.0.1:$DEAD" "$TEST_TMP/dead.kubeconfig" || fail "no server URL to replace in $SIM_KUBECONFIG"
start_admission "$TEST_TMP/dead.kubeconfig" "$TEST_TMP/unsynced.log"
wait_for 20 answers healthz || { cat "$TEST_TMP/unsynced.log" >&2; fail "/healthz never answered"; }
code=$(curl -s -o "$TEST_TMP/readyz" -w '%{http_code}' "127.0.0.1:$METRICS_PORT/readyz")
if [ "$code" != 503 ] || ! grep -q "pod list is not complete" "$TEST_TMP/readyz"; then
	fail "ready without a pod list: $code $(cat "$TEST_TMP/readyz")"
fi
served() { verdict "$AGENT" spot-a "$POD_A" >"$TEST_TMP/v"; }
wait_for 20 served || fail "the webhook did not answer"
[[ $(cat "$TEST_TMP/v") == "denied 403 "*"has not listed the cluster's pods yet"* ]] ||
	fail "an eviction judged without a pod list: $(cat "$TEST_TMP/v")"
kill -TERM "$ADM_PID"
wait "$ADM_PID" || fail "spotdrain admission exited $? after SIGTERM, unsynced"

log "spotdrain admission with the rendered configuration and certificate"
start_admission "$SIM_KUBECONFIG" "$TEST_TMP/admission.log"
wait_for 20 answers readyz || { cat "$TEST_TMP/admission.log" >&2; fail "/readyz never answered 200"; }
grep -q "the pod list is complete" "$TEST_TMP/admission.log" || fail "ready before its pod list was complete"

log "the agent on spot-a evicts its own pod $POD_A: allowed"
[ "$(verdict "$AGENT" spot-a "$POD_A")" = allowed ] || fail "the own pod's eviction was not allowed"
log "the agent on spot-a evicts $POD_OD of od-1: denied"
v=$(verdict "$AGENT" spot-a "$POD_OD") || fail "no answer"
[[ $v == "denied 403 "*"may not evict pod shop/$POD_OD, which is bound to node od-1"* ]] || fail "got: $v"

log "users the match conditions do not send: allowed, not judged"
for u in system:serviceaccount:kube-system:spotdrain-controller system:node:spot-a \
	system:serviceaccount:other:spotdrain; do
	[ "$(verdict "$u" spot-a "$POD_OD")" = allowed ] || fail "$u was judged"
done
metric() { curl -sSf "127.0.0.1:$METRICS_PORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
[ "$(metric 'spotdrain_admission_reviews_total{verdict="denied",reason="other-node"}')" = 1 ] || fail "other-node"
[ "$(metric 'spotdrain_admission_reviews_total{verdict="not-matched",reason=""}')" = 3 ] || fail "not matched"
[ "$(metric 'spotdrain_admission_reviews_total{verdict="allowed",reason=""}')" = 1 ] || fail "allowed"
grep -q 'alert=eviction-denied' "$TEST_TMP/admission.log" || fail "no eviction-denied alert"

log "SIGTERM: a clean stop"
kill -TERM "$ADM_PID"
wait "$ADM_PID" || fail "spotdrain admission exited $? after SIGTERM"
grep -q "spotdrain admission stopped" "$TEST_TMP/admission.log" || fail "no clean stop"
log "ok"
