#!/usr/bin/env bash
# Issue 32, item 1, on the real control plane: `spotdrain drain` run by hand reports the pods that went with
# their node as killed and exits 3. seed-504's world set up (the chart installed, nothing played), spot-a
# drained by hand with a budget of 120 s and drain.policy force; 20 s in, the instance ends: its Node is
# deleted, and the real pod garbage collector removes the pods still on it. The drain counts them killed
# (at least one: its PDB lets shop/api go one at a time), says deadline-missed and exits 3. drain-8's world,
# drained by hand without a deadline (a node with no notice: as kubectl drain), ends drained, 0 killed, exit 0.
# shellcheck source=tests/realk8s/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

log "seed-504: the node goes 20 s into a manual drain"
rk_prepare "$ROOT/examples/seed-504.yaml" seed --mode agent
rc=0
"$SPOTDRAIN" drain spot-a --budget 120 --policy force --kubeconfig "$RK_KUBECONFIG" --json \
	>"$CASE_TMP/seed.json" 2>"$CASE_TMP/seed.err" &
pid=$!
start=$(date +%s)
# The drain has started (its first line) and 20 s passed: then the instance is gone.
for _ in $(seq 600); do grep -q '^node/spot-a:' "$CASE_TMP/seed.err" && break; sleep 0.1; done
grep -q '^node/spot-a:' "$CASE_TMP/seed.err" || fail "the drain never started: $(tail -3 "$CASE_TMP/seed.err")"
while [ $(($(date +%s) - start)) -lt 20 ]; do sleep 0.5; done
on_node=$(k get pods -A --field-selector spec.nodeName=spot-a -o json |
	jq '[.items[] | select(.metadata.ownerReferences[0].kind != "DaemonSet")] | length')
k delete node spot-a --wait=false >/dev/null
wait "$pid" || rc=$?
cat "$CASE_TMP/seed.json"
killed=$(jq -r .killed "$CASE_TMP/seed.json")
[ "$killed" -ge 1 ] && [ "$killed" -le "$on_node" ] ||
	fail "the drain says $killed killed, with $on_node pods on spot-a when its Node went"
[ "$rc" -eq 3 ] || fail "the drain exited $rc with $killed pods killed, not 3"
jq -e '.outcome == "deadline-missed"' "$CASE_TMP/seed.json" >/dev/null || fail "the outcome is not deadline-missed"
log "seed-504: $killed killed of $on_node on spot-a when its Node went; exit $rc"

log "drain-8: a manual drain that fits"
rk_prepare "$ROOT/examples/drain-8.yaml" fit --mode agent
rc=0
"$SPOTDRAIN" drain spot-a --kubeconfig "$RK_KUBECONFIG" --json >"$CASE_TMP/fit.json" 2>"$CASE_TMP/fit.err" ||
	rc=$?
cat "$CASE_TMP/fit.json"
[ "$rc" -eq 0 ] || fail "drain-8's drain exited $rc: $(tail -3 "$CASE_TMP/fit.err")"
jq -e '.outcome == "drained" and .killed == 0 and .left == 0' "$CASE_TMP/fit.json" >/dev/null ||
	fail "drain-8's drain is not drained with nothing killed"
echo ok
