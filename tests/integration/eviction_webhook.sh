#!/usr/bin/env bash
# Issue #15: the controller's eviction webhook, as the chart renders it. The controller release is rendered
# (helm template: Helm's genCA/genSignedCert make the serving certificate), and a real
# `spotdrain controller` runs with the rendered configuration and certificate against sim serve. Then
# AdmissionReview v1 requests, built as kube-apiserver builds them for the agent's pods/eviction CREATEs, go
# over TLS to the Service name the ValidatingWebhookConfiguration names, verified against its caBundle:
# - the agent on spot-a evicting a pod of spot-a: allowed;
# - the same agent evicting a pod of od-1: denied (403, says which node);
# - a pod the cluster does not have: denied; a token without the node-name claim: denied;
# - anyone else (the webhook configuration would not send it; if it comes anyway): allowed, unjudged;
# - not an AdmissionReview v1: 400.
# The denials are counted by reason on /metrics and raised as eviction-denied.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=tests/integration/webhook_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/webhook_lib.sh"
webhook_requirements

cat >"$TEST_TMP/values.yaml" <<'EOF'
mode: controller
controller:
  queueURL: https://sqs.us-east-1.amazonaws.com/123456789012/spotdrain-events
  evictionWebhook:
    enabled: true
    agentServiceAccounts: [{namespace: kube-system, name: spotdrain-agent}]
EOF
log "the controller release, rendered with the eviction webhook"
helm_render "$ROOT/helm/spotdrain" spotdrain kube-system "$TEST_TMP/values.yaml" >"$TEST_TMP/release.yaml" ||
	fail "the chart does not render"
PORT=$(free_port)
METRICS_PORT=$(free_port)
webhook_config "$TEST_TMP/release.yaml" "$PORT"

webhook_sim
QUEUE_URL=$(sim_endpoint queue_url)

log "controller with the rendered configuration and certificate"
AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=secret AWS_REGION=us-east-1 \
	"$SPOTDRAIN" controller --config "$TEST_TMP/spotdrain.yaml" --queue-url "$QUEUE_URL" \
	--kubeconfig "$SIM_KUBECONFIG" --no-leader-election --metrics-listen "127.0.0.1:$METRICS_PORT" \
	>"$TEST_TMP/controller.log" 2>&1 &
CTL_PID=$!
SIM_PIDS+=("$CTL_PID")

own_allowed() { [ "$(verdict "$AGENT" spot-a "$POD_A")" = allowed ]; }
metric() { curl -sSf "127.0.0.1:$METRICS_PORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

log "the agent on spot-a evicts its own pod $POD_A: allowed (once the controller has listed the pods)"
wait_for 20 own_allowed || { cat "$TEST_TMP/controller.log" >&2; fail "the own pod's eviction was not allowed"; }

log "the agent on spot-a evicts $POD_OD of od-1: denied"
v=$(verdict "$AGENT" spot-a "$POD_OD") || fail "no answer"
[[ $v == "denied 403 "*"may not evict pod shop/$POD_OD, which is bound to node od-1"* ]] || fail "got: $v"
log "the agent on od-1 evicts the same pod: allowed"
[ "$(verdict "$AGENT" od-1 "$POD_OD")" = allowed ] || fail "od-1's agent was refused its own pod"

log "a pod the cluster does not have, and a token without the node claim: denied"
v=$(verdict "$AGENT" spot-a ghost) || fail "no answer"
[[ $v == "denied 403 "*"knows no pod shop/ghost"* ]] || fail "got: $v"
v=$(verdict "$AGENT" - "$POD_A") || fail "no answer"
[[ $v == "denied 403 "*"does not name one node"* ]] || fail "got: $v"

log "anyone else: not judged"
[ "$(verdict system:serviceaccount:kube-system:spotdrain spot-a "$POD_OD")" = allowed ] ||
	fail "the controller's own eviction was judged"
[ "$(verdict system:serviceaccount:other:spotdrain-agent spot-a "$POD_OD")" = allowed ] ||
	fail "an agent of another release was judged"

log "not an AdmissionReview v1: 400"
out=$(post '{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}}')
[ "$(tail -n1 <<<"$out")" = 400 ] || fail "a v1beta1 review got: $out"

log "what is not a review: another path 404, GET 405, over 1 MiB 413"
code() { curl -sS --max-time 5 --cacert "$TEST_TMP/ca.pem" --resolve "$HOST:$PORT:127.0.0.1" -o /dev/null -w '%{http_code}' "$@"; }
[ "$(code --data-binary '{}' "https://$HOST:$PORT/mutate")" = 404 ] || fail "another path was not 404"
[ "$(code "https://$HOST:$PORT$WPATH")" = 405 ] || fail "a GET was not 405"
head -c $((1024 * 1024 + 1)) /dev/zero | tr '\0' ' ' >"$TEST_TMP/big.json"
[ "$(code -H 'Content-Type: application/json' --data-binary "@$TEST_TMP/big.json" "https://$HOST:$PORT$WPATH")" = 413 ] ||
	fail "a body over 1 MiB was not 413"
log "a client that does not trust the caBundle's CA gets no answer"
! curl -sS --max-time 5 --resolve "$HOST:$PORT:127.0.0.1" --data-binary '{}' "https://$HOST:$PORT$WPATH" 2>/dev/null ||
	fail "the serving certificate verified without the caBundle"

log "the denials on /metrics and as alerts"
[ "$(metric 'spotdrain_admission_reviews_total{verdict="denied",reason="other-node"}')" = 1 ] ||
	fail "other-node denials: $(metric 'spotdrain_admission_reviews_total{verdict="denied",reason="other-node"}')"
[ "$(metric 'spotdrain_admission_reviews_total{verdict="denied",reason="unknown-pod"}')" = 1 ] || fail "unknown-pod"
[ "$(metric 'spotdrain_admission_reviews_total{verdict="denied",reason="no-node-claim"}')" = 1 ] || fail "no claim"
[ "$(metric 'spotdrain_admission_reviews_total{verdict="not-matched",reason=""}')" = 2 ] || fail "not matched"
grep -q 'alert=eviction-denied' "$TEST_TMP/controller.log" || fail "no eviction-denied alert"

kill -TERM "$CTL_PID"
wait "$CTL_PID" || fail "controller exited $? after SIGTERM"
log "ok"
