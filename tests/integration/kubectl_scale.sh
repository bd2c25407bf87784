#!/usr/bin/env bash
# kubectl 1.27 and 1.33 against `spotdrain sim serve`: `kubectl scale` through the scale subresource, `kubectl
# rollout restart` rolling the Deployment under maxSurge / maxUnavailable, `kubectl rollout status` seeing it
# through, the HorizontalPodAutoscaler listed, and bad input refused with a clear Status.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tools

# Fast enough that a 20 s startup passes in a second, slow enough to see the rollout's surge pod.
start_sim hpa "$ROOT/examples/surge-hpa.yaml" --time-scale 10
API=$SIM_URL/apis/apps/v1/namespaces/shop/deployments/checkout

ready_pods() { # kubectl...: Running 1/1 pods of checkout
	"$@" get pods -n shop --no-headers | awk '$1 ~ /^checkout-/ && $2 == "1/1" && $3 == "Running"' | wc -l
}
ready_pods_are() { # WANT kubectl...
	local want=$1
	shift
	[ "$(ready_pods "$@")" -eq "$want" ]
}
# The Deployment's READY column (status.readyReplicas) is WANT/WANT: its controller counts the pods after they
# turn Ready, a moment later, as in a cluster.
deploy_ready_is() { # WANT kubectl...
	local want=$1
	shift
	"$@" get deploy -n shop checkout >"$TEST_TMP/deploy" && grep -q "$want/$want" "$TEST_TMP/deploy"
}
pods_are() { # WANT kubectl...: checkout pods, whatever their state
	local want=$1
	shift
	[ "$("$@" get pods -n shop --no-headers | awk '$1 ~ /^checkout-/' | wc -l)" -eq "$want" ]
}

n=1
for v in 1.27 1.33; do
	kubectl=$(kubectl_for "$v")
	K=("$kubectl" --kubeconfig "$SIM_KUBECONFIG")
	log "kubectl $v: scale $n -> $((n + 2))"
	"${K[@]}" scale -n shop deployment/checkout --replicas=$((n + 2)) | tee "$TEST_TMP/scale"
	grep -q 'scaled' "$TEST_TMP/scale" || fail "$v: kubectl scale did not say scaled"
	[ "$(curl -sSf "$API/scale" | jq .spec.replicas)" -eq $((n + 2)) ] || fail "$v: Scale spec.replicas"
	wait_for 20 ready_pods_are $((n + 2)) "${K[@]}" || fail "$v: want $((n + 2)) Ready pods"
	wait_for 10 deploy_ready_is $((n + 2)) "${K[@]}" || fail "$v: READY column: $(cat "$TEST_TMP/deploy")"
	cat "$TEST_TMP/deploy"

	log "kubectl $v: --current-replicas precondition"
	rc=0
	"${K[@]}" scale -n shop deployment/checkout --current-replicas=99 --replicas=1 >"$TEST_TMP/pre" 2>&1 || rc=$?
	cat "$TEST_TMP/pre"
	[ "$rc" -ne 0 ] || fail "$v: a wrong --current-replicas must fail"
	[ "$(curl -sSf "$API/scale" | jq .spec.replicas)" -eq $((n + 2)) ] || fail "$v: the failed scale changed replicas"

	log "kubectl $v: scale back to $n"
	"${K[@]}" scale -n shop deployment/checkout --replicas=$n >/dev/null
	wait_for 20 pods_are $n "${K[@]}" || fail "$v: want $n pods after scaling down"

	log "kubectl $v: rollout restart"
	before=$("${K[@]}" get pods -n shop -o json | jq -r '[.items[].metadata.name] | sort | join(" ")')
	rev_before=$(curl -sSf "$API" | jq -r '.metadata.annotations["deployment.kubernetes.io/revision"]')
	"${K[@]}" rollout restart -n shop deployment/checkout | tee "$TEST_TMP/restart"
	grep -q 'restarted' "$TEST_TMP/restart" || fail "$v: rollout restart did not say restarted"
	curl -sSf "$API" >"$TEST_TMP/deploy.json"
	jq -e '.spec.template.metadata.annotations["kubectl.kubernetes.io/restartedAt"] | test("^[0-9]{4}-")' \
		"$TEST_TMP/deploy.json" >/dev/null || fail "$v: no restartedAt annotation on the template"
	[ "$(jq -r '.metadata.annotations["deployment.kubernetes.io/revision"]' "$TEST_TMP/deploy.json")" -gt "$rev_before" ] ||
		fail "$v: the revision did not move"
	timeout 30 "${K[@]}" rollout status -n shop deployment/checkout --timeout=25s | tee "$TEST_TMP/status" ||
		fail "$v: rollout status did not see the rollout through"
	grep -q 'successfully rolled out' "$TEST_TMP/status" || fail "$v: rollout status"
	wait_for 20 pods_are $n "${K[@]}" || fail "$v: want $n pods after the rollout"
	after=$("${K[@]}" get pods -n shop -o json | jq -r '[.items[].metadata.name] | sort | join(" ")')
	[ "$before" != "$after" ] || fail "$v: the rollout replaced no pod"
	rs=$(curl -sSf "$SIM_URL/apis/apps/v1/namespaces/shop/replicasets" | jq -r '.items[0].metadata.name')
	"${K[@]}" get pods -n shop -o json | jq -e --arg rs "$rs" \
		'all(.items[]; .metadata.ownerReferences[0].name == $rs)' >/dev/null ||
		fail "$v: the pods left are not the new ReplicaSet's ($rs)"

	log "kubectl $v: the HPA"
	"${K[@]}" get hpa -n shop | tee "$TEST_TMP/hpa.txt"
	grep -q '^checkout ' "$TEST_TMP/hpa.txt" || fail "$v: no HPA listed"
done

log "the HPA targets the Deployment"
curl -sSf "$SIM_URL/apis/autoscaling/v2/namespaces/shop/horizontalpodautoscalers/checkout" |
	jq -e '.spec.scaleTargetRef.kind == "Deployment" and .spec.scaleTargetRef.name == "checkout"' >/dev/null ||
	fail "HPA scaleTargetRef"

log "bad input is refused with a Status that says why"
code=$(curl -s -o "$TEST_TMP/bad.json" -w '%{http_code}' -X PATCH -H 'Content-Type: application/merge-patch+json' \
	--data '{"spec":{"replicas":-1}}' "$API/scale")
cat "$TEST_TMP/bad.json"
[ "$code" = 422 ] || fail "negative replicas: HTTP $code, want 422"
jq -e '.message | test("greater than or equal to 0")' "$TEST_TMP/bad.json" >/dev/null || fail "negative replicas message"
code=$(curl -s -o "$TEST_TMP/bad.json" -w '%{http_code}' -X PATCH -H 'Content-Type: application/merge-patch+json' \
	--data '{"spec":{"paused":true}}' "$API")
[ "$code" = 422 ] || fail "unmodelled field: HTTP $code, want 422"
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
	--data '{"metadata":{"name":"checkout","resourceVersion":"1"},"spec":{"replicas":3}}' "$API/scale")
[ "$code" = 409 ] || fail "stale resourceVersion: HTTP $code, want 409"
code=$(curl -s -o /dev/null -w '%{http_code}' "$SIM_URL/apis/apps/v1/namespaces/shop/deployments/nope/scale")
[ "$code" = 404 ] || fail "scale of a missing Deployment: HTTP $code, want 404"

stop_sim "$SIM_PID"
log "ok"
