#!/usr/bin/env bash
# The same requests to the simulator (`spotdrain sim serve`) and to kube-apiserver, on the same scenario:
# status codes and the fields of the answers a client reads must agree (docs/fidelity.md).
#   an eviction a PDB refuses; an eviction of a pod already terminating; a strategic-merge and a JSON patch
#   of a node, and one whose test fails; a Lease updated with a stale resourceVersion.
# A watch from an old resourceVersion is not compared: kube-apiserver answers it from its watch cache while
# that still holds the version and with a 410 once it does not, which depends on the cluster's history
# (docs/fidelity.md).
# shellcheck source=tests/realk8s/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
SC=$RK_HERE/scenarios/fidelity.yaml

rk_prepare "$SC" fidelity
"$SPOTDRAIN" sim serve "$SC" --listen 127.0.0.1:0 --endpoints-out "$CASE_TMP/sim.json" >"$CASE_TMP/sim.log" 2>&1 &
SIM=$!
trap 'kill $SIM 2>/dev/null; wait $SIM 2>/dev/null; rk_cleanup' EXIT
for _ in $(seq 300); do [ -s "$CASE_TMP/sim.json" ] && break; sleep 0.1; done
SIM_URL=$(jq -r .kubernetes "$CASE_TMP/sim.json")
[ -n "$SIM_URL" ] && [ "$SIM_URL" != null ] || fail "sim serve wrote no endpoints"

# call WORLD METHOD PATH [BODY [CONTENT-TYPE]]: prints "CODE BODY" of the request to that world.
call() {
	local world=$1 method=$2 path=$3 body=${4:-} ctype=${5:-application/json} args=()
	if [ "$world" = real ]; then
		args=(--cacert "$RK_CA" --cert "$RK_DIR/pki/admin.crt" --key "$RK_DIR/pki/admin.key" "$RK_URL$path")
	else
		args=("$SIM_URL$path")
	fi
	[ -n "$body" ] && args+=(-H "Content-Type: $ctype" --data-binary "$body")
	curl -s -m 20 -X "$method" -w '\n%{http_code}' "${args[@]}"
}
code() { tail -n1 <<<"$1"; }
json() { sed '$d' <<<"$1"; }

# same WHAT JQ REAL SIM: the two answers' codes and what JQ reads of their bodies agree.
same() {
	local what=$1 q=$2 r=$3 s=$4 rv sv
	rv="$(code "$r") $(json "$r" | jq -c "$q" 2>/dev/null)"
	sv="$(code "$s") $(json "$s" | jq -c "$q" 2>/dev/null)"
	[ "$rv" = "$sv" ] || fail "$what: kube-apiserver answers $rv, the simulator $sv"
	log "$what: both $rv"
}

pod_of() { call "$1" GET "/api/v1/namespaces/shop/pods?labelSelector=app%3D$2" | sed '$d' | jq -r '.items[0].metadata.name'; }
evict() {
	call "$1" POST "/api/v1/namespaces/shop/pods/$2/eviction" \
		"{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":{\"name\":\"$2\",\"namespace\":\"shop\"}}"
}
STATUS='{kind, status, reason, code, causes: [.details.causes[]?.reason]}'

# The disruption controller publishes the PDB's status a moment after its pods are Ready.
for w in real sim; do
	for _ in $(seq 300); do
		[ "$(call $w GET /apis/policy/v1/namespaces/shop/poddisruptionbudgets/held | sed '$d' | jq -r '.status.currentHealthy // 0')" -ge 2 ] && break
		sleep 0.1
	done
done
same "eviction refused by a PDB" "$STATUS" "$(evict real "$(pod_of real held)")" "$(evict sim "$(pod_of sim held)")"

for w in real sim; do
	p=$(pod_of $w slow)
	call $w DELETE "/api/v1/namespaces/shop/pods/$p" >/dev/null
	eval "slow_$w=$p"
done
# shellcheck disable=SC2154 # set by the eval above
same "eviction of a terminating pod" '{kind, status, code}' "$(evict real "$slow_real")" "$(evict sim "$slow_sim")"

smp() { call "$1" PATCH /api/v1/nodes/spot-a '{"spec":{"unschedulable":true}}' application/strategic-merge-patch+json; }
same "strategic-merge patch of a node" '.spec.unschedulable' "$(smp real)" "$(smp sim)"
jp() { call "$1" PATCH /api/v1/nodes/spot-a '[{"op":"replace","path":"/spec/unschedulable","value":false}]' application/json-patch+json; }
same "JSON patch of a node" '.spec.unschedulable // false' "$(jp real)" "$(jp sim)"
bad_jp() { call "$1" PATCH /api/v1/nodes/spot-a '[{"op":"test","path":"/spec/unschedulable","value":true}]' application/json-patch+json; }
same "JSON patch whose test fails" '.kind, .code' "$(bad_jp real)" "$(bad_jp sim)"

LEASE='{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"fidelity","namespace":"default"},"spec":{"holderIdentity":"a","leaseDurationSeconds":15}}'
stale() {
	local w=$1 made rv
	made=$(call "$w" POST /apis/coordination.k8s.io/v1/namespaces/default/leases "$LEASE" | sed '$d')
	rv=$(jq -r .metadata.resourceVersion <<<"$made")
	call "$w" PUT /apis/coordination.k8s.io/v1/namespaces/default/leases/fidelity \
		"$(jq -c '.spec.holderIdentity = "b"' <<<"$made")" >/dev/null
	call "$w" PUT /apis/coordination.k8s.io/v1/namespaces/default/leases/fidelity \
		"$(jq -c --arg rv "$rv" '.metadata.resourceVersion = $rv | .spec.holderIdentity = "c"' <<<"$made")"
}
same "Lease update with a stale resourceVersion" '{kind, status, reason, code}' "$(stale real)" "$(stale sim)"
call real DELETE /apis/coordination.k8s.io/v1/namespaces/default/leases/fidelity >/dev/null
echo ok
