#!/usr/bin/env bash
# Surge before evict on the real control plane: a one-replica Deployment under minAvailable 1 on spot-a. The
# agent raises the Deployment to 2, the real Deployment controller and scheduler make the extra pod on od-1,
# the PDB (as the real disruption controller publishes it) then allows the eviction: no PDB was ever below
# its desired healthy count, nothing forced or killed, and the replica count is 1 again afterwards.
# shellcheck source=tests/realk8s/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

play "$ROOT/examples/surge-single-replica.yaml" agent
[ "$PLAY_RC" -eq 0 ] || fail "run exited $PLAY_RC: $(res -c .nodes)"
a=$(res -c '.nodes[0]')
jq -e '.pods_killed == 0 and .pods_forced == 0 and .pods_graceful == 1 and .drained_at <= .deadline_at' \
	<<<"$a" >/dev/null || fail "spot-a: $a"
[ "$(res .pdb_breaches)" -eq 0 ] || fail "PDB breaches: $(res .pdb_breaches)"
below=$(res '.pdb_below_desired_seconds["shop/checkout"]')
[ "$below" = 0 ] || fail "shop/checkout was below its desired healthy count for $below s"
grep -q '"surge\|surg' "$CASE_TMP/run/agent-spot-a.log" || fail "no surge in the agent's log"
replicas=$(k get deployment -n shop checkout -o jsonpath='{.spec.replicas}')
[ "$replicas" = 1 ] || fail "the Deployment has $replicas replicas after the drain, not 1"
log "drained at $(jq -r .drained_at <<<"$a") s with no downtime; replicas back to $replicas"
echo ok
