#!/usr/bin/env bash
# Trust, enforced by kube-apiserver itself: the chart installed by Helm in agent mode, and the agent of
# spot-a holding the token the TokenRequest API binds to the chart's pod on spot-a (the API server puts the
# node's name in it). The chart's ValidatingAdmissionPolicy, evaluated by the API server's own CEL, lets that
# token write node spot-a and delete spot-a's pods, and refuses the same on spot-b; the chart's RBAC refuses
# what the agent never needs (Secrets). A token not bound to a pod is refused any write. The chart's eviction
# webhook (agent.evictionWebhook), which the API server calls for the agent's pods/eviction CREATEs, is served
# by a local `spotdrain admission` over TLS (tests/realk8s/run start_admission): it lets spot-a's agent evict
# spot-a's pod and denies it spot-b's, which the policy cannot tell apart (an Eviction names only its pod).
# shellcheck source=tests/realk8s/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

rk_prepare "$RK_HERE/scenarios/trust.yaml" trust
A=$(jq -r '.kubeconfigs["spot-a"]' "$CASE_TMP/prepared-trust.json")
[ -f "$A" ] || fail "no kubeconfig for spot-a's agent"
[ -n "$RK_ADMISSION_PID" ] || fail "no spotdrain admission serving the chart's eviction webhook"
as_a() { "$KUBECTL" --kubeconfig "$A" "$@"; }
# A pod of the node that is not being deleted: the one spot-a's agent evicted may still be listed, and gone a
# moment later (its grace is 5 s), when the next step deletes it.
pod_on() {
	k get pods -n shop --field-selector "spec.nodeName=$1" -o json |
		jq -r '[.items[] | select(.metadata.deletionTimestamp == null)][0].metadata.name // empty'
}

# refused WHAT COMMAND...: the API server's answer to the command says WHAT (kubectl cordon exits 0 when
# the patch it sends is refused, so the answer is what counts; the objects are checked below).
refused() {
	local what=$1 out
	shift
	out=$("$@" 2>&1) || true
	grep -q "$what" <<<"$out" || fail "not refused by $what: $* ($out)"
	log "refused ($what): ${*:2}"
}

# A new ValidatingAdmissionPolicy is enforced once the API server's policy informer has it (about a second
# here): until then nothing is refused. A server-side dry run goes through admission and changes nothing.
enforced() { as_a cordon spot-b --dry-run=server 2>&1 | grep -q "may not write node spot-b"; }
for _ in $(seq 300); do enforced && break; sleep 0.1; done
enforced || fail "the chart's admission policy is not enforced 30 s after helm install"

log "spot-a's agent writes its own node"
as_a cordon spot-a >/dev/null || fail "spot-a's agent cannot cordon spot-a"
as_a uncordon spot-a >/dev/null || fail "spot-a's agent cannot uncordon spot-a"
as_a label node spot-a realk8s.spotdrain.test/trust=1 >/dev/null || fail "spot-a's agent cannot label spot-a"

log "and nobody else's"
refused "may not write node spot-b" as_a cordon spot-b
refused "may not write node spot-b" as_a label node spot-b realk8s.spotdrain.test/trust=1
refused "may not write node spot-b" as_a taint node spot-b spotdrain.io/interruption=x:NoSchedule

[ -z "$(k get node spot-b -o jsonpath='{.spec.unschedulable}')" ] || fail "spot-b was cordoned"
[ -z "$(k get node spot-b -o jsonpath='{.metadata.labels.realk8s\.spotdrain\.test/trust}')" ] || fail "spot-b was labelled"
[ -z "$(k get node spot-b -o jsonpath='{.spec.taints}')" ] || fail "spot-b was tainted"

# evict POD [DRYRUN]: the agent of spot-a POSTs an Eviction of shop/POD; the API server's answer.
evict() {
	printf '{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"%s","namespace":"shop"}}\n' "$1" \
		>"$CASE_TMP/eviction.json"
	as_a create --raw "/api/v1/namespaces/shop/pods/$1/eviction${2:+?dryRun=All}" -f "$CASE_TMP/eviction.json" 2>&1
}
log "it evicts spot-a's pods, not spot-b's: the chart's eviction webhook, served by spotdrain admission"
pb=$(pod_on spot-b)
[ -n "$pb" ] || fail "no pod on spot-b"
denial="the agent on node spot-a may not evict pod shop/$pb, which is bound to node spot-b"
# The API server calls the webhook once its configuration informer has the URL the tier set; a dry run goes
# through admission and evicts nothing.
webhooked() { evict "$pb" dry | grep -qF "$denial"; }
for _ in $(seq 300); do webhooked && break; sleep 0.1; done
out=$(evict "$pb") && fail "spot-a's agent evicted spot-b's pod $pb: $out"
grep -qF "denied the request: $denial" <<<"$out" || fail "not denied by the webhook: $out"
log "refused (webhook): $(grep -o 'admission webhook.*' <<<"$out")"
k get pod -n shop "$pb" -o jsonpath='{.metadata.deletionTimestamp}' >"$CASE_TMP/dt" || fail "spot-b's pod $pb is gone"
[ ! -s "$CASE_TMP/dt" ] || fail "spot-b's pod $pb is being deleted"
pa=$(pod_on spot-a)
out=$(evict "$pa") || fail "spot-a's agent cannot evict its own pod $pa: $out"
[ -n "$(k get pod -n shop "$pa" -o jsonpath='{.metadata.deletionTimestamp}' 2>/dev/null || echo gone)" ] ||
	fail "spot-a's pod $pa was not evicted"
grep -qF "allowed: pod shop/$pa is bound to node spot-a" "$CASE_TMP/run-trust/admission.log" ||
	fail "spotdrain admission never judged spot-a's own eviction: $(tail -n 5 "$CASE_TMP/run-trust/admission.log")"
log "allowed (webhook): spot-a's agent evicted its own pod $pa"

log "it deletes spot-a's pods, not spot-b's"
refused "may not delete pod shop/$pb" as_a delete pod -n shop "$pb" --wait=false
k get pod -n shop "$pb" >/dev/null 2>&1 || fail "spot-b's pod $pb was deleted"
pa=$(pod_on spot-a)
as_a delete pod -n shop "$pa" --wait=false >/dev/null || fail "spot-a's agent cannot delete its own pod $pa"

log "its RBAC holds nothing it does not need"
refused "forbidden" as_a get secrets -n kube-system

log "a token of the same ServiceAccount bound to no pod names no node: every write refused"
# The agent's: the DaemonSet's pod (the chart's admission Deployment has a ServiceAccount of its own, and its
# pod's name may list first).
sa=$(k get pods -n spotdrain -o json |
	jq -r '[.items[] | select(.metadata.ownerReferences[0].kind == "DaemonSet")][0].spec.serviceAccountName // empty')
[ -n "$sa" ] || fail "no agent pod of the chart"
# The token goes into a kubeconfig of the case's own, never onto a command line or into the log.
sed "s/token: .*/token: $(k create token -n spotdrain "$sa")/" "$A" >"$CASE_TMP/unbound.kubeconfig"
refused "does not name one node" "$KUBECTL" --kubeconfig "$CASE_TMP/unbound.kubeconfig" cordon spot-a
echo ok
