#!/usr/bin/env bash
# Reboot uncordon (issue 17, item 4) with the real agent against the simulator's IMDS and Kubernetes surfaces:
# a scheduled `system-reboot` is drained for like any maintenance; at its time the node goes down (every Node
# condition Unknown), comes back Ready, the event moves to IMDS events/maintenance/history as `completed`, and
# only then does the agent make the node schedulable again, because its own drain record names the event. A
# node cordoned by an operator before its reboot stays cordoned after it.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tools
[ -x "$SPOTDRAIN_AGENT" ] || fail "$SPOTDRAIN_AGENT not built"

cat >"$TEST_TMP/scenario.yaml" <<'EOF'
name: reboot-uncordon
mode: agent
budget_seconds: 12
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: spot-b, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 4, placement: {spot-a: 2, spot-b: 2},
     requests: {cpu: 100m, memory: 128Mi}, termination_grace_seconds: 5, shutdown_seconds: 1,
     pdb: {max_unavailable: 1}}
events:
  - {at: 2, type: scheduled-change, node: spot-a, code: system-reboot, reboot_seconds: 4}
  - {at: 2, type: scheduled-change, node: spot-b, code: system-reboot, reboot_seconds: 4}
EOF

start_sim reboot "$TEST_TMP/scenario.yaml"
K8S=$SIM_URL
KUBECTL=$(command -v kubectl)

# An operator cordons spot-b before its reboot is announced: that cordon is not spotdrain's to undo.
"$KUBECTL" --kubeconfig "$SIM_KUBECONFIG" cordon spot-b >/dev/null || fail "kubectl cordon spot-b"

start_agent() {
	local node=$1 imds
	imds=$(jq -r --arg n "$node" '.imds_by_node[$n]' "$SIM_ENDPOINTS")
	[ -n "$imds" ] && [ "$imds" != null ] || fail "sim serve wrote no IMDS endpoint for $node"
	NODE_NAME= POD_NAMESPACE=kube-system POD_NAME="spotdrain-agent-$node" \
		"$SPOTDRAIN_AGENT" agent --kubeconfig "$SIM_KUBECONFIG" --imds-endpoint "$imds" \
		--metrics-listen "127.0.0.1:$(free_port)" >>"$TEST_TMP/agent-$node.log" 2>&1 &
	SIM_PIDS+=("$!")
}
start_agent spot-a
start_agent spot-b

node_json() { curl -sSf "$K8S/api/v1/nodes/$1"; }
cordoned() { node_json "$1" | jq -e '.spec.unschedulable == true' >/dev/null; }
down() { node_json "$1" | jq -e '.status.conditions[] | select(.type == "Ready") | .status == "Unknown"' >/dev/null; }
ready() { node_json "$1" | jq -e '.status.conditions[] | select(.type == "Ready") | .status == "True"' >/dev/null; }
imds_history() {
	local imds
	imds=$(jq -r '.imds_by_node["spot-a"]' "$SIM_ENDPOINTS")
	local token
	token=$(curl -sSf -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "$imds/latest/api/token") || return 1
	curl -sSf -H "X-aws-ec2-metadata-token: $token" "$imds/latest/meta-data/events/maintenance/$1"
}
result_of() { sim_result "$K8S" | jq -c --arg n "$1" '.nodes[] | select(.name == $n)'; }
uncordoned() { result_of spot-a | jq -e '.uncordoned_at != null' >/dev/null; }

log "the maintenance is announced: spot-a is cordoned by the agent"
wait_for 10 cordoned spot-a || { cat "$TEST_TMP/agent-spot-a.log" >&2; fail "spot-a not cordoned"; }
imds_history scheduled | jq -e '.[0].Code == "system-reboot" and .[0].State == "active"' >/dev/null ||
	fail "IMDS scheduled does not show the active system-reboot: $(imds_history scheduled)"

log "at its time the node reboots: down, still cordoned"
wait_for 20 down spot-a || fail "spot-a never went down: $(node_json spot-a | jq -c .status.conditions)"
cordoned spot-a || fail "spot-a was made schedulable while down"

log "back Ready: the event is in IMDS history as completed, and the agent uncordons spot-a"
wait_for 20 ready spot-a || fail "spot-a did not come back Ready"
imds_history history | jq -e '.[0].Code == "system-reboot" and .[0].State == "completed"' >/dev/null ||
	fail "IMDS history does not show the completed reboot: $(imds_history history)"
[ "$(imds_history scheduled)" = "[]" ] || fail "the completed reboot is still scheduled: $(imds_history scheduled)"
wait_for 20 uncordoned || { cat "$TEST_TMP/agent-spot-a.log" >&2; fail "spot-a not uncordoned after its reboot"; }
a=$(result_of spot-a)
log "spot-a: $a"
jq -e '.maintenance_code == "system-reboot" and .rebooted_at >= .deadline_at and
	.ready_again_at >= .rebooted_at and .uncordoned_at >= .ready_again_at' <<<"$a" >/dev/null ||
	fail "spot-a was not made schedulable after it was back: $a"
jq -e '.drained_at != null and .drained_at <= .deadline_at and .pods_killed == 0' <<<"$a" >/dev/null ||
	fail "spot-a was not drained before its reboot: $a"
grep -q 'is Ready after its reboot.*making it schedulable' "$TEST_TMP/agent-spot-a.log" ||
	fail "the agent's log does not say why it uncordoned"

log "spot-b, cordoned by an operator first, stays cordoned after its reboot"
wait_for 20 ready spot-b || fail "spot-b did not come back Ready"
wait_for 20 grep -q 'spot-b is Ready after its reboot' "$TEST_TMP/agent-spot-b.log" ||
	{ cat "$TEST_TMP/agent-spot-b.log" >&2; fail "the agent of spot-b never looked at its return"; }
cordoned spot-b || fail "spot-b, cordoned by an operator, was made schedulable"
result_of spot-b | jq -e '.uncordoned_at == null' >/dev/null || fail "spot-b uncordoned: $(result_of spot-b)"
echo "ok"
