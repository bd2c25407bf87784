#!/usr/bin/env bash
# spotdrain under the API server's priority and fairness (sim serve --apf-qps): a drain of 40 pods against an
# API that lets each client 4 requests a second finishes in time with every pod evicted, while the server
# turns some requests away (429 with Retry-After, plain text, as kube-apiserver): the client waits them out
# and goes slower instead of failing the evictions or hammering the server. With a kube.qps too low for the
# drain, its drain-infeasible alert names the limit.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tools

cat >"$TEST_TMP/apf.yaml" <<'YAML'
name: apf
nodes:
  - {name: spot-a, capacity_type: spot, allocatable: {cpu: "64", memory: 256Gi, pods: 110}}
  - {name: od-1, capacity_type: on-demand, allocatable: {cpu: "64", memory: 256Gi, pods: 110}}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 40, placement: {spot-a: 40},
     requests: {cpu: 100m, memory: 64Mi}, termination_grace_seconds: 5, shutdown_seconds: 1,
     startup_seconds: 1}
api_priority_fairness: {qps: 50, burst: 50}
events: []
YAML

# The scenario's 50 a second, lowered by the flag: the flag wins.
start_sim apf "$TEST_TMP/apf.yaml" --apf-qps 4 --apf-burst 4
rc=0
"$SPOTDRAIN" drain spot-a --kubeconfig "$SIM_KUBECONFIG" --budget 60 --json >"$TEST_TMP/drain.json" \
	2>"$TEST_TMP/drain.log" || rc=$?
cat "$TEST_TMP/drain.json"
[ "$rc" -eq 0 ] || { tail -20 "$TEST_TMP/drain.log"; fail "drain exited $rc, expected 0 (drained in time)"; }
jq -e '.outcome == "drained" and .evicted == 40 and .forced == 0' "$TEST_TMP/drain.json" >/dev/null ||
	fail "drain --json: not every pod evicted"

curl -sSf "$SIM_URL/sim/v1/faults" >"$TEST_TMP/faults.json"
sim_result "$SIM_URL" >"$TEST_TMP/result.json"
rejected=$(jq .api_apf_rejected "$TEST_TMP/faults.json")
requests=$(jq .api_requests "$TEST_TMP/result.json")
log "priority and fairness turned away $rejected of $requests requests"
[ "$rejected" -gt 0 ] || fail "the server never throttled the drain: the test does not exercise the slow-down"
# A client that only retried each throttled request (client-go's 10 times) without slowing down would have most
# of its requests turned away at 4 a second; one that follows Retry-After and halves its rate, few.
[ $((rejected * 4)) -lt "$requests" ] ||
	fail "$rejected of $requests requests turned away: the client does not slow down"

log "a plain 429 answer is what kube-apiserver sends"
curl -sS -o "$TEST_TMP/body" -D "$TEST_TMP/headers" -H 'Authorization: Bearer probe' \
	"$SIM_URL/api/v1/nodes" "$SIM_URL/api/v1/nodes" "$SIM_URL/api/v1/nodes" "$SIM_URL/api/v1/nodes" \
	"$SIM_URL/api/v1/nodes" "$SIM_URL/api/v1/nodes" >/dev/null
grep -qi '^HTTP/1.1 429' "$TEST_TMP/headers" || fail "no 429 for a client over its rate"
grep -qi '^Retry-After: 1' "$TEST_TMP/headers" || fail "no Retry-After"
grep -qi '^X-Kubernetes-PF-FlowSchema-UID:' "$TEST_TMP/headers" || fail "no X-Kubernetes-PF-FlowSchema-UID"

log "a kube.qps too low for the drain: the drain-infeasible alert says the limit is why"
start_sim lowqps "$TEST_TMP/apf.yaml" --apf-qps 0
printf 'kube:\n  qps: 2\n  burst: 4\n' >"$TEST_TMP/lowqps.yaml"
rc=0
"$SPOTDRAIN" drain spot-a --kubeconfig "$SIM_KUBECONFIG" --config "$TEST_TMP/lowqps.yaml" --budget 10 --json \
	>"$TEST_TMP/low.json" 2>"$TEST_TMP/low.log" || rc=$?
[ "$rc" -eq 3 ] || fail "drain at kube.qps 2 exited $rc, expected 3 (deadline missed)"
# 40 evictions and the node's 3 requests; 2 a second for what is left of the 5 s to the deadline less the
# margin when the drain is planned, plus 4.
grep -q 'drain of spot-a cannot finish in time: it needs at least 43 API requests before its deadline.*kube.qps 2 allows [0-9]' \
	"$TEST_TMP/low.log" || { cat "$TEST_TMP/low.log"; fail "no drain-infeasible naming the API limit"; }
jq -e '.infeasible == true' "$TEST_TMP/low.json" >/dev/null || fail "drain --json: not infeasible"
log "ok"
