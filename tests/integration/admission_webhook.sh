#!/usr/bin/env bash
# The eviction webhook of an agent-only install (agent.evictionWebhook): the chart rendered in agent mode
# at its defaults, and a real `spotdrain admission` (no queue, no Lease) with the rendered configuration and
# certificate against sim serve. AdmissionReview v1 requests as kube-apiserver sends them, over TLS to the
# Service's name and verified against the rendered caBundle (webhook_lib.sh, shared with
# eviction_webhook.sh):
# - /readyz answers 200 only once the pod list is complete, and the own pod's eviction is then allowed;
# - the agent on spot-a evicting od-1's pod: denied (403, the node named), counted and alerted;
# - a controller, a kubelet, another release's agent: allowed unjudged;
# - SIGTERM: exit 0.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/webhook_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/webhook_lib.sh"
webhook_requirements

log "the agent release at its defaults (mode agent, agent.evictionWebhook on)"
"$RENDER" "$ROOT/helm/spotdrain" spotdrain kube-system "$ROOT/helm/spotdrain/examples/agent-values.yaml" \
	>"$TEST_TMP/release.yaml" || fail "the chart does not render"
PORT=$(free_port)
METRICS_PORT=$(free_port)
webhook_config "$TEST_TMP/release.yaml" "$PORT"
[ "$AGENT" = system:serviceaccount:kube-system:spotdrain ] || fail "the webhook judges $AGENT, not the release's agent"

webhook_sim

log "spotdrain admission with the rendered configuration and certificate"
"$SPOTDRAIN" admission --config "$TEST_TMP/spotdrain.yaml" --kubeconfig "$SIM_KUBECONFIG" \
	--metrics-listen "127.0.0.1:$METRICS_PORT" >"$TEST_TMP/admission.log" 2>&1 &
ADM_PID=$!
SIM_PIDS+=("$ADM_PID")
ready() { [ "$(curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$METRICS_PORT/readyz")" = 200 ]; }
wait_for 20 ready || { cat "$TEST_TMP/admission.log" >&2; fail "/readyz never answered 200"; }
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
