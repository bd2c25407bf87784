#!/usr/bin/env bash
# seed-504 in agent mode on the real control plane: the agent (the chart's identity, a token bound to its
# DaemonSet pod on spot-a) hears the notice from spot-a's metadata mock, says drain-infeasible at once naming
# the PDB and the value that would fit, cordons before its first eviction, and every pod is gone before the
# deadline with none killed: the three it cannot evict in time are deleted at their last safe moment with a
# grace period that still fits; its taint, label and record go in one patch the chart's policy lets through.
# shellcheck source=tests/realk8s/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

play "$ROOT/examples/seed-504.yaml" agent
node=$(res '.nodes[] | select(.name == "spot-a")')
[ -n "$node" ] || fail "no spot-a in the result"
jq -e '.pods_killed == 0' <<<"$node" >/dev/null || fail "pods killed: $node"
jq -e '.drained_at != null and .drained_at <= .deadline_at' <<<"$node" >/dev/null || fail "not drained in time: $node"
jq -e '.verdict == "infeasible"' <<<"$node" >/dev/null || fail "verdict: $node"
alert=$(res '[.alerts[] | select(.kind == "drain-infeasible" and .node == "spot-a")][0]')
[ "$alert" != null ] || fail "no drain-infeasible alert"
notice=$(jq -r .notice_at <<<"$node")
jq -e --argjson n "$notice" '.at - $n < 5' <<<"$alert" >/dev/null || fail "drain-infeasible late: $alert (notice $notice)"
msg=$(jq -r .message <<<"$alert")
grep -q 'shop/api' <<<"$msg" || fail "the alert does not name the PDB shop/api: $msg"
grep -Eq 'maxUnavailable[ :=]+[0-9]+|max_unavailable[ :=]+[0-9]+' <<<"$msg" || fail "the alert names no value that fits: $msg"
# The cordon came before the first eviction (the API server's audit log).
first_evict=$(jq -r '.first_eviction_at // empty' <<<"$node")
cordon=$(jq -r .cordoned_at <<<"$node")
[ "$cordon" != null ] || fail "never cordoned"
if [ -n "$first_evict" ]; then
	awk -v c="$cordon" -v e="$first_evict" 'BEGIN { exit !(c <= e) }' || fail "evicted at $first_evict before the cordon at $cordon"
fi
jq -e '.pdb_breaches <= .nodes[0].pods_forced' "$CASE_TMP/result.json" >/dev/null || fail "PDB breaches beyond the forced pods"
# The chart's admission policy lets the agent's one patch of its node's taint, label and record through.
ALOG=$CASE_TMP/run/agent-spot-a.log
[ -s "$ALOG" ] || fail "no agent log at $ALOG"
grep -q 'in one patch were refused' "$ALOG" && fail "the marks' patch was refused: $(grep -m3 'in one patch' "$ALOG")"
log "notice -> cordon $(jq -r '.cordoned_at - .notice_at' <<<"$node") s; drained at $(jq -r .drained_at <<<"$node") (deadline $(jq -r .deadline_at <<<"$node")); forced $(jq -r .pods_forced <<<"$node")"
echo ok
