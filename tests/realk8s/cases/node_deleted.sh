#!/usr/bin/env bash
# The Node object deleted while its pods are still stopping (100 s of their 110 s grace): the pod garbage
# collector of the real kube-controller-manager removes them within a minute, marking them
# DisruptionTarget/DeletionByPodGC, and both the result computed from the real objects and spotdrain itself
# count them killed, not drained.
# shellcheck source=tests/realk8s/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

play "$RK_HERE/scenarios/node-deleted.yaml" agent --fault node-delete@12:spot-a
[ "$PLAY_RC" -eq 3 ] || fail "run exited $PLAY_RC, not 3 (pods killed): $(res -c .nodes)"
a=$(res -c '.nodes[0]')
jq -e '.pods_killed == 3 and .pods_graceful == 0' <<<"$a" >/dev/null || fail "spot-a: $a"
n=$(grep -c '"alert":"pod-killed"' "$CASE_TMP/run/agent-spot-a.log" || true)
[ "$n" -eq 3 ] || fail "spotdrain raised $n pod-killed alerts, not 3: $(grep -m3 '"alert"' "$CASE_TMP/run/agent-spot-a.log")"
grep -q '"alert":"drain-completed".*drained spot-a' "$CASE_TMP/run/agent-spot-a.log" &&
	fail "spotdrain called the drain drained: $(grep '"alert":"drain-completed"' "$CASE_TMP/run/agent-spot-a.log")"
log "3 pods killed with their node, as spotdrain says too"
echo ok
