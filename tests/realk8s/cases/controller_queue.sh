#!/usr/bin/env bash
# Controller mode on the real control plane: the chart installed by Helm in controller mode, the controller
# holding a token bound to the chart's pod and reading moto's queue (SigV4 check on). A spot warning for
# spot-a is drained in time under its PDB with nothing forced, killed or breached, the cordon before the first
# eviction; a rebalance recommendation for spot-b soft-taints it and drains nothing; both messages are deleted
# once handled, while another account's warning for spot-a and a warning for an instance of no node here stay
# in the queue, acted on by nobody; and the controller's token completes all of it with no 403 in its log
# (least privilege is also enough privilege).
# shellcheck source=tests/realk8s/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
command -v aws >/dev/null || skip "no aws CLI"

play "$RK_HERE/scenarios/controller.yaml" controller --strays
[ "$PLAY_RC" -eq 0 ] || fail "run exited $PLAY_RC: $(res -c .nodes)"
a=$(res -c '.nodes[] | select(.name == "spot-a")')
jq -e '.pods_killed == 0 and .pods_forced == 0 and .drained_at != null and .drained_at <= .deadline_at' \
	<<<"$a" >/dev/null || fail "spot-a: $a"
jq -e '.cordoned_at <= .first_eviction_at' <<<"$a" >/dev/null || fail "evicted before the cordon: $a"
[ "$(res .pdb_breaches)" -eq 0 ] || fail "PDB breaches: $(res .pdb_breaches)"
# spot-b: only a rebalance recommendation: not drained (not in .nodes), its soft taint set.
[ -z "$(res '.nodes[] | select(.name == "spot-b") | .name')" ] || fail "spot-b was drained on a rebalance"
grep -q '"alert":"notice-received".*rebalance-recommendation' "$CASE_TMP/run/controller.log" ||
	fail "the rebalance recommendation was not heard"
grep -q ' 403\b\|HTTP 403\|forbidden' "$CASE_TMP/run/controller.log" && fail "403s in the controller's log: $(grep -m3 -i 'forbidden\|403' "$CASE_TMP/run/controller.log")"
# The two notices handled and deleted; the two strays left (hidden while the controller rejects them).
[ "$(res .queue_left)" -eq 2 ] || fail "$(res .queue_left) messages left in the queue, not the 2 strays"
grep -q '"alert":"notice-rejected".*111122223333' "$CASE_TMP/run/controller.log" ||
	fail "another account's warning was not rejected: $(grep -m3 '111122223333' "$CASE_TMP/run/controller.log")"
# The warning for an instance of no node here is held for a minute in case its node is joining (it would be
# left for its cluster then): in the queue, and nothing but spot-a drained.
[ "$(res '[.nodes[].name] | join(" ")')" = "spot-a" ] || fail "drained: $(res -c '[.nodes[].name]')"
log "spot-a: cordoned $(jq -r '.cordoned_at - .notice_at' <<<"$a") s after the warning was sent, drained at $(jq -r .drained_at <<<"$a") s (deadline $(jq -r .deadline_at <<<"$a"))"
echo ok
