#!/usr/bin/env bash
# statefulset-quick-stop in agent mode on the real control plane: four StatefulSet pods under maxUnavailable 1
# with a grace of 60 s that stop in 12 s. Only a drain that learns from the first stops that the next ones
# take 12 s, not 60, evicts the fourth before its last safe moment at its whole grace (55 s after the
# notice); one that learns nothing deletes it around its PDB there. kube-apiserver hands the stop the
# kubelet confirmed over with deletionTimestamp at that confirmation and a grace of 0, as a forced delete's
# looks but for the containers' ends (docs/fidelity.md); before that was read, the drain forced db-3 here.
# shellcheck source=tests/realk8s/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

play "$ROOT/examples/statefulset-quick-stop.yaml" agent
node=$(res '.nodes[] | select(.name == "spot-a")')
[ -n "$node" ] || fail "no spot-a in the result"
jq -e '.pods_killed == 0 and .pods_forced == 0' <<<"$node" >/dev/null || fail "pods forced or killed: $node"
jq -e '.drained_at != null and .drained_at <= .deadline_at' <<<"$node" >/dev/null || fail "not drained in time: $node"
jq -e '.pdb_breaches == 0' "$CASE_TMP/result.json" >/dev/null || fail "PDB breaches: $(res .pdb_breaches)"
# Each StatefulSet pod's own stop, as its containers reported it: exit 0 within the grace, not killed.
n=$(grep -c '"alert":"pod-evicted".*"pod":"db-' "$CASE_TMP/run/agent-spot-a.log" || true)
[ "$n" -eq 4 ] || fail "$n StatefulSet pods evicted, not 4"
log "4 StatefulSet pods evicted one at a time, none forced; drained at $(jq -r .drained_at <<<"$node") s of $(jq -r .deadline_at <<<"$node")"
