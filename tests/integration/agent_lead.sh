#!/usr/bin/env bash
# `spotdrain simulate` in agent mode runs the agent's own wiring (issue #33): its agents drain a scheduled
# change on the same maintenance lead as `spotdrain agent` (agent.maintenance_lead_seconds, 300 s by default)
# and both set the rebalance soft taint. spot-a's maintenance starts 330 s (simulate) or 308 s (the process)
# after it is announced, so a 300 s lead cordons it 30 s or 8 s after the notice (a 600 s lead would at once);
# spot-b gets a rebalance recommendation. Bounds: the 0.5 s IMDS poll, and a loaded machine's late polls
# (at time scale 5 a real second is five scenario seconds).
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq curl
[ -x "$SPOTDRAIN_AGENT" ] || fail "$SPOTDRAIN_AGENT not built"

scenario() {
	cat <<EOF
name: agent-lead
mode: agent
budget_seconds: $1
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: spot-b, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 2, placement: {spot-a: 2},
     requests: {cpu: 100m, memory: 128Mi}, termination_grace_seconds: 5, shutdown_seconds: 1}
events:
  - {at: $2, type: scheduled-change, node: spot-a, code: system-maintenance}
  - {at: $2, type: rebalance-recommendation, node: spot-b}
EOF
}

log "simulate, agent mode: the lead and the soft taint"
scenario 330 1 >"$TEST_TMP/simulate.yaml"
printf 'imds:\n  poll_interval_seconds: 500ms\n' >"$TEST_TMP/config.yaml"
rc=0
"$SPOTDRAIN" simulate "$TEST_TMP/simulate.yaml" --mode agent --time-scale 5 --json --config "$TEST_TMP/config.yaml" \
	--log-level info >"$TEST_TMP/simulate.json" 2>"$TEST_TMP/simulate.err" || rc=$?
[ "$rc" -eq 0 ] || { cat "$TEST_TMP/simulate.err" >&2; fail "simulate exited $rc"; }
a=$(jq -c '.nodes[] | select(.name == "spot-a") | {notice_at, cordoned_at, drained_at, deadline_at}' "$TEST_TMP/simulate.json")
log "simulate spot-a: $a"
jq -e '.cordoned_at - .notice_at >= 28 and .cordoned_at - .notice_at <= 36 and .drained_at <= .deadline_at' \
	<<<"$a" >/dev/null || fail "simulate's agent did not drain the scheduled change 300 s ahead: $a"
grep -q 'node spot-b tainted spotdrain.io/rebalance:PreferNoSchedule' "$TEST_TMP/simulate.err" ||
	fail "simulate's agent did not set the rebalance soft taint on spot-b: $(grep -i taint "$TEST_TMP/simulate.err")"

log "spotdrain agent: the same lead and the soft taint"
scenario 308 2 >"$TEST_TMP/serve.yaml"
start_sim agent "$TEST_TMP/serve.yaml" --mode agent
K8S=$SIM_URL
for n in spot-a spot-b; do
	url=$(jq -r --arg n "$n" '.imds_by_node[$n]' "$SIM_ENDPOINTS")
	[ -n "$url" ] && [ "$url" != null ] || fail "sim serve wrote no IMDS endpoint for $n"
	NODE_NAME= POD_NAMESPACE=kube-system POD_NAME="spotdrain-agent-$n" \
		"$SPOTDRAIN_AGENT" agent --kubeconfig "$SIM_KUBECONFIG" --imds-endpoint "$url" --poll-interval 0.5 \
		--node-name "$n" --metrics-listen "127.0.0.1:$(free_port)" >"$TEST_TMP/agent-$n.log" 2>&1 &
	SIM_PIDS+=("$!")
done
node() { curl -sSf "$K8S/api/v1/nodes/$1"; }
soft_tainted() { node spot-b | jq -e '[.spec.taints[]? | select(.key == "spotdrain.io/rebalance" and .effect == "PreferNoSchedule")] | length == 1' >/dev/null; }
cordoned() { sim_result "$K8S" | jq -e '.nodes[] | select(.name == "spot-a") | .cordoned_at != null' >/dev/null; }
wait_for 20 soft_tainted || { cat "$TEST_TMP/agent-spot-b.log" >&2; fail "spotdrain agent did not soft-taint spot-b"; }
wait_for 30 cordoned || { cat "$TEST_TMP/agent-spot-a.log" >&2; fail "spotdrain agent never drained spot-a"; }
a=$(sim_result "$K8S" | jq -c '.nodes[] | select(.name == "spot-a") | {notice_at, cordoned_at}')
log "spotdrain agent spot-a: $a"
jq -e '.cordoned_at - .notice_at >= 6 and .cordoned_at - .notice_at <= 12' <<<"$a" >/dev/null ||
	fail "spotdrain agent did not drain the scheduled change 300 s ahead: $a"
echo "ok"
