#!/usr/bin/env bash
# Shadow mode (issue 16, item 4): `agent --dry-run` and `controller --dry-run` hear, plan, alert and count a
# whole scenario (a rebalance recommendation, an interruption, a pod to force at its last safe moment) and
# write nothing: the simulator's record of client writes (GET /sim/v1/writes: every non-GET request to the
# Kubernetes API, every SQS, EC2 and Auto Scaling action but reads) stays empty until the instance is gone,
# while the log says what would have been done and spotdrain_dry_run_actions_total counts it.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq curl

scenario() { # MODE
	cat <<YAML
name: dry-run-$1
mode: $1
budget_seconds: 30
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 2, placement: {spot-a: 2},
     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1, pdb: {max_unavailable: 1}}
  - {name: db, namespace: shop, kind: Deployment, replicas: 2, placement: {spot-a: 1},
     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1, pdb: {min_available: "100%"}}
  - {name: batch, namespace: jobs, kind: Job, replicas: 1, placement: {spot-a: 1},
     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1}
events:
  - {at: 10, type: rebalance-recommendation, node: spot-a}
  - {at: 12, type: spot-interruption, node: spot-a}
YAML
}

# Both modes run at once, each against its own simulator (both take the scenario's real time): URL[MODE],
# PORT[MODE] (metrics) and the log TEST_TMP/MODE.log. A simulator's clock starts with it, so each front end
# starts right after its own simulator, and the notices come 10 s in: with them at 1 and 3 s, an agent started
# on a loaded machine (stress -c 2, load 18) after both simulators heard of its interruption only once the
# instance was gone.
declare -A URL PORT
# The instance is gone: the scenario's deadline for spot-a has passed.
past_deadline() { # URL
	sim_result "$1" | jq -e --argjson now "$(curl -sSf "$1/sim/v1/clock" | jq .now)" \
		'.nodes[0].deadline_at != null and $now > .nodes[0].deadline_at + 1' >/dev/null
}
dry_count() { # PORT ACTION
	curl -sSf "127.0.0.1:$1/metrics" | sed -n "s/^spotdrain_dry_run_actions_total{action=\"$2\"} //p"
}

check() { # MODE LOG PORT
	local writes
	writes=$(curl -sSf "${URL[$1]}/sim/v1/writes")
	jq -e '.writes == []' <<<"$writes" >/dev/null || { cat "$2" >&2; fail "$1 --dry-run wrote: $writes"; }
	for line in "would cordon node spot-a" "would evict pod shop/web-" "would evict pod jobs/batch-" \
		"would create events in shop" "would patch nodes spot-a"; do
		grep -qF "$line" "$2" || { cat "$2" >&2; fail "$1: no \"$line\" in the log"; }
	done
	# Alerts go out as ever, marked: the planning and the post-mortem happened.
	grep -q '\[dry-run\] drain of spot-a cannot finish in time' "$2" || fail "$1: no marked verdict alert"
	grep -q '\[dry-run\] pod jobs/batch-.* evicted from node spot-a.*(post-mortem: [0-9]* more lines' "$2" ||
		fail "$1: no marked post-mortem"
	# One eviction of the Deployment's two (its PDB's slot never comes back) and the Job's.
	curl -sSf "127.0.0.1:$3/metrics" | grep '^spotdrain_dry_run_actions_total' >"$TEST_TMP/$1.counts" || true
	[ "$(dry_count "$3" "evict pod")" -ge 2 ] || fail "$1: would-be evictions: $(cat "$TEST_TMP/$1.counts")"
	[ "$(dry_count "$3" "cordon node")" -ge 1 ] || fail "$1: would-be cordon: $(cat "$TEST_TMP/$1.counts")"
}

# unchanged MODE LOG WHAT: once WHAT is in the log, before the instance goes, the node is as the scenario
# made it: not cordoned, no taint of spotdrain's.
unchanged() {
	wait_for 40 grep -qF "$3" "$2" || { cat "$2" >&2; fail "$1: no \"$3\""; }
	! past_deadline "${URL[$1]}" || fail "$1: \"$3\" came only after the instance was gone"
	curl -sSf "${URL[$1]}/api/v1/nodes/spot-a" | jq -e '(.spec.unschedulable // false) == false and
		((.spec.taints // []) | map(select(.key | startswith("spotdrain.io/"))) | length == 0)' >/dev/null ||
		fail "$1: the node was changed"
}

# shadow MODE COMMAND...: starts COMMAND (the front end, with --dry-run) against MODE's simulator in the
# background. settled MODE: checks everything once the instance is gone.
shadow() {
	local mode=$1
	shift
	"$@" --kubeconfig "$TEST_TMP/$mode/kubeconfig" --metrics-listen "127.0.0.1:${PORT[$mode]}" \
		>"$TEST_TMP/$mode.log" 2>&1 &
	SIM_PIDS+=("$!")
}
settled() {
	local mode=$1
	wait_for 60 past_deadline "${URL[$mode]}" ||
		{ cat "$TEST_TMP/$mode.log" >&2; fail "the scenario did not reach its deadline"; }
	check "$mode" "$TEST_TMP/$mode.log" "${PORT[$mode]}"
	grep -q "shadow mode (--dry-run)" "$TEST_TMP/$mode.log" || fail "$mode: shadow mode not announced"
}

sim_for() { # MODE
	scenario "$1" >"$TEST_TMP/$1.yaml"
	PORT[$1]=$(free_port)
	start_sim "$1" "$TEST_TMP/$1.yaml"
	URL[$1]=$SIM_URL
}

log "agent --dry-run"
sim_for agent
IMDS=$(jq -r '.imds_by_node["spot-a"]' "$TEST_TMP/agent/endpoints.json")
# The agent's IMDS deadline is the scenario's: the forced delete at db's last safe moment comes before it.
NODE_NAME=spot-a POD_NAMESPACE=kube-system POD_NAME=spotdrain-agent-test shadow agent \
	"$SPOTDRAIN_AGENT" agent --dry-run --imds-endpoint "$IMDS"

log "controller --dry-run"
sim_for controller
QUEUE_URL=$(jq -r '.queue_url' "$TEST_TMP/controller/endpoints.json")
# EventBridge's deadline is two minutes: the scenario's instance goes before any last safe moment.
AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY AWS_REGION=us-east-1 \
	POD_NAMESPACE=default POD_NAME=spotdrain-controller-test shadow controller \
	"$SPOTDRAIN" controller --dry-run --queue-url "$QUEUE_URL"

# The controller's would-be eviction comes at the notice, the agent's would-be delete at db's last safe
# moment, later, both before their instances go.
unchanged controller "$TEST_TMP/controller.log" "would evict pod jobs/batch-"
unchanged agent "$TEST_TMP/agent.log" "would delete pod shop/db-"
settled controller
settled agent
PORT=${PORT[controller]}
# The queue's messages stay for the drainer that acts (NTH beside it); the Lease is not taken.
grep -q "would call sqs DeleteMessage" "$TEST_TMP/controller.log" || fail "controller: no would-be DeleteMessage"
[ "$(dry_count "$PORT" "sqs:DeleteMessageBatch")" -ge 1 ] || fail "controller: would-be DeleteMessageBatch not counted"
[ "$(dry_count "$PORT" "create leases")" -ge 1 ] || fail "controller: would-be Lease not counted"
! grep -q "cannot delete message" "$TEST_TMP/controller.log" || fail "controller: a would-be delete reported as failed"
log "ok"
