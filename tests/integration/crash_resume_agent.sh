#!/usr/bin/env bash
# Crash-resume of the agent (issue 8, item 5): `spotdrain sim serve` (time scale 1) and `spotdrain agent` on the
# interrupted node; the agent is SIGKILLed at a point of the drain chosen by the trial's seed, restarted, and
# the restarted agent must finish the drain with the outcome of an undisturbed one: the node cordoned and
# drained before its deadline, no pod killed, no PDB breached (faults_check.py --drained).
#
# Seeds: a fixed list, so CI is repeatable. CRASH_TRIALS=N runs the first N (default 10, ~30 s with the
# trials in parallel; CRASH_TRIALS=3 for a quicker run), CRASH_SEEDS="s1 s2 ..." runs those seeds,
# CRASH_SEEDS=random runs CRASH_TRIALS random seeds (printed, to be replayed with CRASH_SEEDS).
# A seed sets the scenario's seed and the kill point: (seed * 7919) % 9000 ms after the agent took the notice,
# which spans the whole drain (around the cordon, between evictions, after the last one).
# The trials run in parallel, each bounded (TRIAL_LIMIT, 130 s: the scenario's deadline, the notice at 4 s +
# its 120 s, and a few seconds for the start; not a drain speed, which a loaded machine can miss).
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq curl python3
CHECK=$ROOT/tests/integration/faults_check.py
TRIAL_LIMIT=${TRIAL_LIMIT:-130}
FIXED_SEEDS=(11 23 37 41 53 67 79 83 97 101 113 127)

# 6 pods on spot-a whose PDB lets one go at a time, each replacement Ready 1.5 s after it starts: the drain
# takes ~8 s after a notice 4 s in.
scenario() {
	cat <<EOF
name: crash-agent
mode: agent
budget_seconds: 120
seed: $1
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 6, placement: {spot-a: 6},
     requests: {cpu: 250m, memory: 256Mi}, termination_grace_seconds: 10, shutdown_seconds: 1,
     startup_seconds: 1.5, pdb: {max_unavailable: 1}}
events:
  - {at: 4, type: spot-interruption, node: spot-a}
EOF
}

# trial SEED: one trial in a subshell of its own; writes DIR/verdict.
trial() {
	local seed=$1 dir=$TEST_TMP/trial-$1 pids=() k8s imds port kill_ms left cordoned deadline rc=0
	mkdir -p "$dir"
	(
		# shellcheck disable=SC2317 # runs from the EXIT trap
		stop_all() {
			signal_ours TERM "${pids[@]}"
			wait 2>/dev/null || true
		}
		trap stop_all EXIT
		cd "$dir"
		scenario "$seed" >scenario.yaml
		trial_sim scenario.yaml
		k8s=$SERVE_URL
		imds=$(jq -r '.imds_by_node["spot-a"]' endpoints.json)
		port=$(free_port)
		start_agent() {
			NODE_NAME='' POD_NAMESPACE=kube-system POD_NAME="spotdrain-agent-$seed" \
				"$SPOTDRAIN_AGENT" agent --kubeconfig kubeconfig --imds-endpoint "$imds" \
				--metrics-listen "127.0.0.1:$port" >>agent.log 2>&1 &
			pids+=($!)
		}
		start_agent
		wait_for 30 grep -q 'draining node spot-a' agent.log || {
			echo "FAIL: the agent did not take the notice" >verdict
			exit 1
		}
		# The kill point is the trial's variable: a deliberate delay after the agent took the notice, not a
		# wait for a state.
		kill_ms=$(((seed * 7919) % 9000))
		sleep "$((kill_ms / 1000)).$(printf '%03d' $((kill_ms % 1000)))"
		kill -KILL "${pids[1]}"
		wait "${pids[1]}" 2>/dev/null || true
		left=$(curl -sSf "$k8s/api/v1/pods?fieldSelector=spec.nodeName%3Dspot-a" |
			jq '[.items[] | select(.metadata.deletionTimestamp == null)] | length')
		cordoned=$(curl -sSf "$k8s/api/v1/nodes/spot-a" | jq '.spec.unschedulable == true')
		echo "--- restart" >>agent.log
		start_agent
		deadline=$(($(date +%s) + TRIAL_LIMIT))
		until curl -sSf "$k8s/sim/v1/result" >result.json 2>/dev/null && python3 "$CHECK" result.json spot-a; do
			if [ "$(date +%s)" -ge "$deadline" ]; then
				rc=1
				break
			fi
			sleep 0.2
		done
		if python3 "$CHECK" result.json spot-a --drained >check.txt 2>&1; then
			echo "ok: killed ${kill_ms} ms after the agent took the notice (cordoned $cordoned, $left pods left);$(grep -v FAIL check.txt | tr -s ' ')" >verdict
		else
			echo "FAIL: killed ${kill_ms} ms after the agent took the notice (cordoned $cordoned, $left pods left);$([ "$rc" -ne 0 ] && echo " not drained within ${TRIAL_LIMIT}s;") $(grep FAIL check.txt | tr '\n' ' ')" >verdict
		fi
	)
}

crash_trials "agent crash-resume" agent.log || fail "a restarted agent did not finish the drain as an undisturbed one would"
echo "ok"
