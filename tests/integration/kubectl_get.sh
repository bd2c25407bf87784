#!/usr/bin/env bash
# kubectl 1.27 and 1.33 against `spotdrain sim serve`: discovery, get with server-side tables, selectors,
# paging, cordon/uncordon, an eviction moving ALLOWED DISRUPTIONS, a protobuf DELETE, watch, and the life cycle.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tools

log "a bad scenario fails with the loader's message"
printf 'name: bad\nnodes: []\n' >"$TEST_TMP/bad.yaml"
rc=0
"$SPOTDRAIN" sim serve "$TEST_TMP/bad.yaml" >"$TEST_TMP/bad.log" 2>&1 || rc=$?
cat "$TEST_TMP/bad.log"
[ "$rc" -eq 1 ] || fail "bad scenario: exit $rc, want 1"
grep -q 'bad.yaml' "$TEST_TMP/bad.log" || fail "bad scenario: the message does not name the file"

# Real time: a replacement takes 3 s to become Ready, long enough to see ALLOWED DISRUPTIONS at 0.
start_sim get "$ROOT/examples/drain-8.yaml"
grep -q "$SIM_URL" "$SIM_KUBECONFIG" || fail "kubeconfig does not name $SIM_URL"

log "a busy port fails with exit 1, a bad flag with exit 2"
rc=0
"$SPOTDRAIN" sim serve "$ROOT/examples/drain-8.yaml" --listen "${SIM_URL#http://}" >"$TEST_TMP/busy.log" 2>&1 || rc=$?
cat "$TEST_TMP/busy.log"
[ "$rc" -eq 1 ] || fail "second server on ${SIM_URL#http://}: exit $rc, want 1"
rc=0
"$SPOTDRAIN" sim serve "$ROOT/examples/drain-8.yaml" --time-scale 0 >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "--time-scale 0: exit $rc, want 2"

pdb_allowed() { # kubectl: ALLOWED DISRUPTIONS of shop/web
	"$@" get pdb -A --no-headers | awk '$1 == "shop" && $2 == "web" { print $5 }'
}
pdb_allowed_is() { # WANT kubectl...
	local want=$1
	shift
	[ "$(pdb_allowed "$@")" = "$want" ]
}
node_status_is() { # NODE WANT kubectl...
	local node=$1 want=$2
	shift 2
	[ "$("$@" get nodes --no-headers | awk -v n="$node" '$1 == n { print $2 }')" = "$want" ]
}

for v in 1.27 1.33; do
	kubectl=$(kubectl_for "$v")
	K=("$kubectl" --kubeconfig "$SIM_KUBECONFIG")
	log "kubectl $v ($("$kubectl" version --client -o json | jq -r .clientVersion.gitVersion))"

	"${K[@]}" get nodes | tee "$TEST_TMP/nodes"
	[ "$(grep -c ' Ready ' "$TEST_TMP/nodes")" -eq 3 ] || fail "$v: want 3 Ready nodes"
	grep -q '^spot-a ' <<<"$("${K[@]}" get no spot-a --no-headers)" || fail "$v: short name no"

	"${K[@]}" get pods -A -o wide | tee "$TEST_TMP/pods"
	[ "$(awk '$1 == "shop" && $4 == "Running" && $8 ~ /^(spot-a|od-1|od-2)$/' "$TEST_TMP/pods" | wc -l)" -eq 8 ] ||
		fail "$v: want 8 Running shop pods on the nodes"
	[ "$(awk '$1 == "monitoring" && $4 == "Running"' "$TEST_TMP/pods" | wc -l)" -eq 3 ] ||
		fail "$v: want one DaemonSet pod per node"

	"${K[@]}" get pdb -A | tee "$TEST_TMP/pdb"
	head -n1 "$TEST_TMP/pdb" | grep -q 'ALLOWED DISRUPTIONS' || fail "$v: no ALLOWED DISRUPTIONS column"
	pdb_allowed_is 1 "${K[@]}" || fail "$v: web PDB should allow 1 disruption"

	log "$v: selectors and paging"
	[ "$("${K[@]}" get pods -A --field-selector spec.nodeName=od-1 --no-headers | wc -l)" -eq 1 ] ||
		fail "$v: field selector spec.nodeName=od-1"
	[ "$("${K[@]}" get pods -A --field-selector 'spec.nodeName!=spot-a,status.phase=Running' --no-headers |
		wc -l)" -eq 2 ] || fail "$v: field selector !="
	[ "$("${K[@]}" get pods -A --chunk-size=3 --no-headers | wc -l)" -eq 11 ] || fail "$v: paged list"
	[ "$("${K[@]}" get pods -A -o json --chunk-size=4 | jq '.items | length')" -eq 11 ] || fail "$v: paged json"
	"${K[@]}" get deploy,rs,ds -A
	grep -q '^shop ' <<<"$("${K[@]}" get ns)" || fail "$v: namespaces"

	log "$v: cordon and uncordon"
	"${K[@]}" cordon spot-a
	node_status_is spot-a Ready,SchedulingDisabled "${K[@]}" || fail "$v: cordon not shown"
	"${K[@]}" uncordon spot-a
	node_status_is spot-a Ready "${K[@]}" || fail "$v: uncordon not shown"

	log "$v: an eviction uses the PDB's one disruption until the replacement is Ready"
	pod=$("${K[@]}" get pods -n shop --field-selector spec.nodeName=spot-a -o name | sed -n 1p)
	pod=${pod#pod/}
	code=$(curl -s -o "$TEST_TMP/evict.json" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
		--data "{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":{\"name\":\"$pod\",\"namespace\":\"shop\"}}" \
		"$SIM_URL/api/v1/namespaces/shop/pods/$pod/eviction")
	[ "$code" = 201 ] || fail "$v: eviction of $pod answered $code: $(cat "$TEST_TMP/evict.json")"
	pdb_allowed_is 0 "${K[@]}" || fail "$v: ALLOWED DISRUPTIONS did not drop to 0"
	wait_for 20 pdb_allowed_is 1 "${K[@]}" || fail "$v: ALLOWED DISRUPTIONS did not come back to 1"
done

log "protobuf DELETE from kubectl 1.33 (a DaemonSet pod, no PDB)"
K=("$(kubectl_for 1.33)" --kubeconfig "$SIM_KUBECONFIG")
ds_pod=$("${K[@]}" get pods -n monitoring --field-selector spec.nodeName=od-2 -o name | sed -n 1p)
"${K[@]}" delete -n monitoring "$ds_pod" --grace-period=1 --wait=false
gone() { ! "${K[@]}" get -n monitoring "$ds_pod" >/dev/null 2>&1; }
wait_for 20 gone || fail "$ds_pod was not deleted"

log "watch: ADDED for every pod, then the stream ends at timeoutSeconds"
curl -sS -N "$SIM_URL/api/v1/namespaces/shop/pods?watch=true&timeoutSeconds=1" >"$TEST_TMP/watch"
[ "$(jq -r 'select(.type == "ADDED" and .object.metadata.namespace == "shop") | .object.metadata.name' \
	"$TEST_TMP/watch" | wc -l)" -ge 8 ] || fail "watch did not list the shop pods as ADDED"
[ "$(jq -r .object.metadata.namespace "$TEST_TMP/watch" | sort -u)" = shop ] || fail "watch crossed namespaces"
rv=$(curl -sSf "$SIM_URL/api/v1/pods?limit=1" | jq -r .metadata.resourceVersion)
curl -sS -N "$SIM_URL/api/v1/pods?watch=1&resourceVersion=$rv&allowWatchBookmarks=true&timeoutSeconds=3" \
	>"$TEST_TMP/watch2"
grep -q '"type":"BOOKMARK"' "$TEST_TMP/watch2" || fail "no BOOKMARK in a watch that asked for them"

log "errors are Status objects"
curl -s "$SIM_URL/api/v1/namespaces/shop/pods/nope" | jq -e '.kind == "Status" and .code == 404 and .reason == "NotFound"' ||
	fail "404 is not a Status"
curl -sSf "$SIM_URL/sim/v1/clock" | jq -e '.now > 0' || fail "/sim/v1/clock"
sim_result "$SIM_URL" | jq -e '.api_requests > 0' || fail "/sim/v1/result counts no requests"

stop_sim "$SIM_PID"
log "ok"
