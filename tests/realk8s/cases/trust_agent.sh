#!/usr/bin/env bash
# Trust, enforced by kube-apiserver itself: the chart installed by Helm in agent mode, and the agent of
# spot-a holding the token the TokenRequest API binds to the chart's pod on spot-a (the API server puts the
# node's name in it). The chart's ValidatingAdmissionPolicy, evaluated by the API server's own CEL, lets that
# token write node spot-a and delete spot-a's pods, and refuses the same on spot-b; the chart's RBAC refuses
# what the agent never needs (Secrets). A token not bound to a pod is refused any write.
# shellcheck source=tests/realk8s/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

"$RK_HERE/run" "$RK_HERE/scenarios/trust.yaml" --prepare --spotdrain "$SPOTDRAIN" --dir "$CASE_TMP/run" \
	>"$CASE_TMP/prepared.json" || fail "the scenario could not be set up"
A=$(jq -r '.kubeconfigs["spot-a"]' "$CASE_TMP/prepared.json")
[ -f "$A" ] || fail "no kubeconfig for spot-a's agent"
as_a() { "$KUBECTL" --kubeconfig "$A" "$@"; }
pod_on() { k get pods -n shop --field-selector "spec.nodeName=$1" -o jsonpath='{.items[0].metadata.name}'; }

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

log "it deletes spot-a's pods, not spot-b's"
pb=$(pod_on spot-b)
[ -n "$pb" ] || fail "no pod on spot-b"
refused "may not delete pod shop/$pb" as_a delete pod -n shop "$pb" --wait=false
k get pod -n shop "$pb" >/dev/null 2>&1 || fail "spot-b's pod $pb was deleted"
pa=$(pod_on spot-a)
as_a delete pod -n shop "$pa" --wait=false >/dev/null || fail "spot-a's agent cannot delete its own pod $pa"

log "its RBAC holds nothing it does not need"
refused "forbidden" as_a get secrets -n kube-system

log "a token of the same ServiceAccount bound to no pod names no node: every write refused"
sa=$(k get pods -n spotdrain -o jsonpath='{.items[0].spec.serviceAccountName}')
[ -n "$sa" ] || fail "no chart pod"
# The token goes into a kubeconfig of the case's own, never onto a command line or into the log.
sed "s/token: .*/token: $(k create token -n spotdrain "$sa")/" "$A" >"$CASE_TMP/unbound.kubeconfig"
refused "does not name one node" "$KUBECTL" --kubeconfig "$CASE_TMP/unbound.kubeconfig" cordon spot-a
echo ok
