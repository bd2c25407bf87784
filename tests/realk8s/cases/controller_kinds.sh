#!/usr/bin/env bash
# Controller mode on the real control plane, the notice kinds besides the spot warning, each an EventBridge
# event in moto's queue (scenarios/controller-kinds.yaml), judged from the API server's objects, the
# controller's log and moto's:
# - an AWS Health scheduled change for ng-a, inside the maintenance lead: ng-a cordoned and drained by the
#   window's start; then the same event closed before its window (AWS Health's cancellation): ng-a
#   schedulable again, its drain taint, record and load balancer label gone;
# - an EC2 state change to shutting-down for ng-b: drained as an emergency, within 30 s;
# - an Auto Scaling EC2 Instance-terminate Lifecycle Action for ng-c, of a group moto holds tagged as this
#   cluster's: drained, the hook's HeartbeatTimeout read from moto, the action's completion sent after the
#   drain. moto 5.2.6 does not implement CompleteLifecycleAction (a 500: docs/fidelity.md), so the
#   completion itself is proven on the simulator (tests/integration/asg_cluster_tag.sh,
#   lifecycle_heartbeat.sh);
# - every message handled is deleted from the queue (none left), nothing forced, killed or breached, no 403.
# shellcheck source=tests/realk8s/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
command -v aws >/dev/null || skip "no aws CLI"

play "$RK_HERE/scenarios/controller-kinds.yaml" controller
[ "$PLAY_RC" -eq 0 ] || fail "run exited $PLAY_RC: $(res -c .nodes)"
CLOG=$CASE_TMP/run/controller.log
node() { res -c ".nodes[] | select(.name == \"$1\")"; }
for n in ng-a ng-b ng-c; do
	jq -e '.pods_killed == 0 and .pods_forced == 0 and .pods_evictable >= 2 and .drained_at != null and
		.drained_at <= .deadline_at and .cordoned_at <= .first_eviction_at' <<<"$(node $n)" >/dev/null ||
		fail "$n: $(node $n)"
done
[ "$(res .pdb_breaches)" -eq 0 ] || fail "PDB breaches: $(res .pdb_breaches)"
grep -q ' 403\b\|HTTP 403\|forbidden' "$CLOG" && fail "403s in the controller's log: $(grep -m3 -i 'forbidden\|403' "$CLOG")"
# kube-apiserver takes a drain's taint, label and record in one patch on the node as its cordon answered.
grep -q 'in one patch were refused' "$CLOG" && fail "the marks' patch was refused: $(grep -m3 'in one patch' "$CLOG")"

# ng-a: drained for the scheduled change, its drain over before the cancellation came; then undone.
a=$(node ng-a)
jq -e '.drained_at < .canceled_at and .uncordoned_at != null and .uncordoned_at >= .canceled_at' <<<"$a" >/dev/null ||
	fail "ng-a not uncordoned after the cancellation: $a"
grep -q '"msg":"draining ng-a by scheduled-change (sqs)"' "$CLOG" || fail "ng-a not drained for its scheduled change"
grep -q 'scheduled change AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_ng-a-[0-9]* was canceled; making node ng-a schedulable' \
	"$CLOG" || fail "the cancellation was not acted on: $(grep -m3 'state closed\|canceled' "$CLOG")"
obj=$(k get node ng-a -o json)
jq -e '(.spec.unschedulable // false) == false and
	([.spec.taints[]? | select(.key == "spotdrain.io/interruption")] | length == 0) and
	(.metadata.annotations["spotdrain.io/drain"] == null) and
	(.metadata.labels["node.kubernetes.io/exclude-from-external-load-balancers"] == null)' <<<"$obj" >/dev/null ||
	fail "ng-a still marked: $(jq -c '{spec: .spec, labels: .metadata.labels, annotations: .metadata.annotations}' <<<"$obj")"

# ng-b: the state change, drained as an emergency (its deadline is the event's own time: the least budget).
grep -q '"msg":"draining ng-b by state-change (sqs)"' "$CLOG" || fail "ng-b not drained for its state change"
grep -q 'notice: state-change i-[0-9a-f]* (shutting-down)' "$CLOG" || fail "the state change was not read"

# ng-c: the lifecycle action, judged this cluster's and completed after its drain.
grep -q '"msg":"draining ng-c by asg-lifecycle-terminate (sqs)"' "$CLOG" || fail "ng-c not drained for its lifecycle action"
grep -q 'lifecycle hook spotdrain-terminate of group spotdrain-realk8s-controller-kinds: HeartbeatTimeout 300 s' "$CLOG" ||
	fail "the hook's HeartbeatTimeout was not read from moto"
done_line=$({ grep -n '"msg":"drain of ng-c ended' "$CLOG" || true; } | head -1 | cut -d: -f1)
complete_line=$({ grep -n 'completing lifecycle action of i-[0-9a-f]* (group spotdrain-realk8s-controller-kinds, hook spotdrain-terminate)' "$CLOG" || true; } | head -1 | cut -d: -f1)
[ -n "$done_line" ] && [ -n "$complete_line" ] && [ "$complete_line" -gt "$done_line" ] ||
	fail "the lifecycle action was not completed after the drain (drain end line $done_line, completion line $complete_line)"
if grep -q "complete_lifecycle_action action has not been implemented" "$CASE_TMP/run/moto/moto.log"; then
	log "moto: CompleteLifecycleAction not implemented (500), as docs/fidelity.md says"
fi

# The four messages (the scheduled change, its closing, the state change, the lifecycle action) deleted.
[ "$(res .queue_left)" -eq 0 ] || fail "$(res .queue_left) messages left in the queue"
for n in ng-a ng-b ng-c; do
	log "$n: cordoned $(jq -r '.cordoned_at - .notice_at | . * 10 | round / 10' <<<"$(node $n)") s after its notice, drained at $(jq -r .drained_at <<<"$(node $n)") s (deadline $(jq -r .deadline_at <<<"$(node $n)"))"
done
log "ng-a uncordoned $(jq -r '.uncordoned_at - .canceled_at | . * 10 | round / 10' <<<"$a") s after the cancellation was sent"
echo ok
