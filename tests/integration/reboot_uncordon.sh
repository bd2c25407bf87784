#!/usr/bin/env bash
# Reboot uncordon (issue 17, item 4) in both modes against the simulator: a scheduled `system-reboot` is drained
# for like any maintenance; at its time the node goes down (every Node condition Unknown) and comes back Ready.
# Agent: the event moves to IMDS events/maintenance/history as `completed`; controller: its AWS Health event
# sends a `closed` message through SQS. Only then is the node made schedulable again, because spotdrain's own
# drain record names the event. A node cordoned by an operator before its reboot stays cordoned after it.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tools
[ -x "$SPOTDRAIN_AGENT" ] || fail "$SPOTDRAIN_AGENT not built"

cat >"$TEST_TMP/scenario.yaml" <<'EOF'
name: reboot-uncordon
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

KUBECTL=$(command -v kubectl)

node_json() { curl -sSf "$K8S/api/v1/nodes/$1"; }
cordoned() { node_json "$1" | jq -e '.spec.unschedulable == true' >/dev/null; }
down() { node_json "$1" | jq -e '.status.conditions[] | select(.type == "Ready") | .status == "Unknown"' >/dev/null; }
ready() { node_json "$1" | jq -e '.status.conditions[] | select(.type == "Ready") | .status == "True"' >/dev/null; }
imds() {
	local url token
	url=$(jq -r '.imds_by_node["spot-a"]' "$SIM_ENDPOINTS")
	token=$(curl -sSf -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "$url/latest/api/token") || return 1
	curl -sSf -H "X-aws-ec2-metadata-token: $token" "$url/latest/meta-data/events/maintenance/$1"
}
result_of() { sim_result "$K8S" | jq -c --arg n "$1" '.nodes[] | select(.name == $n)'; }
uncordoned() { result_of "$1" | jq -e '.uncordoned_at != null' >/dev/null; }

start_agent() {
	local node=$1 url
	url=$(jq -r --arg n "$node" '.imds_by_node[$n]' "$SIM_ENDPOINTS")
	[ -n "$url" ] && [ "$url" != null ] || fail "sim serve wrote no IMDS endpoint for $node"
	NODE_NAME= POD_NAMESPACE=kube-system POD_NAME="spotdrain-agent-$node" \
		"$SPOTDRAIN_AGENT" agent --kubeconfig "$SIM_KUBECONFIG" --imds-endpoint "$url" \
		--metrics-listen "127.0.0.1:$(free_port)" >>"$TEST_TMP/$MODE-$node.log" 2>&1 &
	SIM_PIDS+=("$!")
}

# check_mode MODE: the scenario in that mode, spotdrain as the mode runs it.
check_mode() {
	MODE=$1
	log "== $MODE"
	start_sim "$MODE" "$TEST_TMP/scenario.yaml" --mode "$MODE"
	K8S=$SIM_URL
	# An operator cordons spot-b before its reboot is announced: that cordon is not spotdrain's to undo.
	"$KUBECTL" --kubeconfig "$SIM_KUBECONFIG" cordon spot-b >/dev/null || fail "kubectl cordon spot-b"
	local logs
	if [ "$MODE" = agent ]; then
		start_agent spot-a
		start_agent spot-b
		logs=("$TEST_TMP/agent-spot-a.log" "$TEST_TMP/agent-spot-b.log")
	else
		local queue
		queue=$(jq -r '.queue_url // empty' "$SIM_ENDPOINTS")
		[ -n "$queue" ] || fail "sim serve offers no SQS queue"
		start_controller "$queue" "$(free_port)"
		logs=("$TEST_TMP/controller.log" "$TEST_TMP/controller.log")
	fi

	log "the maintenance is announced: spot-a is cordoned"
	wait_for 10 cordoned spot-a || { cat "${logs[0]}" >&2; fail "spot-a not cordoned"; }
	if [ "$MODE" = agent ]; then
		imds scheduled | jq -e '.[0].Code == "system-reboot" and .[0].State == "active"' >/dev/null ||
			fail "IMDS scheduled does not show the active system-reboot: $(imds scheduled)"
	fi

	log "at its time the node reboots: down, still cordoned"
	wait_for 20 down spot-a || fail "spot-a never went down: $(node_json spot-a | jq -c .status.conditions)"
	cordoned spot-a || fail "spot-a was made schedulable while down"

	log "back Ready: the maintenance is over, and spot-a is made schedulable"
	wait_for 20 ready spot-a || fail "spot-a did not come back Ready"
	if [ "$MODE" = agent ]; then
		imds history | jq -e '.[0].Code == "system-reboot" and .[0].State == "completed"' >/dev/null ||
			fail "IMDS history does not show the completed reboot: $(imds history)"
		[ "$(imds scheduled)" = "[]" ] || fail "the completed reboot is still scheduled: $(imds scheduled)"
	fi
	wait_for 20 uncordoned spot-a || { cat "${logs[0]}" >&2; fail "spot-a not uncordoned after its reboot"; }
	local a
	a=$(result_of spot-a)
	log "spot-a: $a"
	jq -e '.maintenance_code == "system-reboot" and .rebooted_at >= .deadline_at and
		.ready_again_at >= .rebooted_at and .uncordoned_at >= .ready_again_at' <<<"$a" >/dev/null ||
		fail "spot-a was not made schedulable after it was back: $a"
	jq -e '.drained_at != null and .drained_at <= .deadline_at and .pods_killed == 0' <<<"$a" >/dev/null ||
		fail "spot-a was not drained before its reboot: $a"
	grep -q 'spot-a is Ready after its reboot.*making it schedulable' "${logs[0]}" ||
		fail "the log does not say why spot-a was uncordoned"

	log "spot-b, cordoned by an operator first, stays cordoned after its reboot"
	wait_for 20 ready spot-b || fail "spot-b did not come back Ready"
	wait_for 20 grep -q 'spot-b is Ready after its reboot' "${logs[1]}" ||
		{ cat "${logs[1]}" >&2; fail "spot-b's return was never looked at"; }
	cordoned spot-b || fail "spot-b, cordoned by an operator, was made schedulable"
	result_of spot-b | jq -e '.uncordoned_at == null' >/dev/null || fail "spot-b uncordoned: $(result_of spot-b)"
	kill_all
}

# Stops what check_mode started (the sim, the agents or the controller).
kill_all() {
	local p
	signal_ours TERM "${SIM_PIDS[@]}"
	for p in "${SIM_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	SIM_PIDS=()
}

check_mode agent
check_mode controller
echo "ok"
