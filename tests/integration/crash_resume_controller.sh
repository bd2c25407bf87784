#!/usr/bin/env bash
# Crash-resume of the controller (issue 8, item 5): `spotdrain sim serve` (time scale 1, Kubernetes API + SQS)
# and `spotdrain controller`; two spot nodes are interrupted through the queue, the controller is SIGKILLed at
# a point of the drains chosen by the trial's seed and restarted with the same identity (as its pod restarts),
# and it must finish both drains with the outcome of an undisturbed run: each node cordoned and drained
# before its deadline, no pod killed, no PDB breached (faults_check.py --drained). What it resumes from: the
# drains recorded on the nodes (the spotdrain.io/drain annotation) and the messages it had not deleted, which
# the queue hands out again once the visibility timeout the controller receives with (60 s) runs out.
#
# Seeds: a fixed list, so CI is repeatable. CRASH_TRIALS=N runs the first N (default 10, ~30 s with the
# trials in parallel; CRASH_TRIALS=3 for a quicker run), CRASH_SEEDS="s1 s2 ..." runs those seeds,
# CRASH_SEEDS=random runs CRASH_TRIALS random seeds (printed, to be replayed with CRASH_SEEDS).
# A seed sets the scenario's seed and the kill point: (seed * 7919) % 11000 ms after the controller took the
# first notice, which spans both drains (around the cordons, between evictions, after the last one).
# The trials run in parallel, each bounded (TRIAL_LIMIT, 130 s: the scenario's deadlines, 4 and 6 s + 120 s, and
# a few seconds for the start; a message received but not deleted comes back after its 60 s visibility timeout).
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq curl python3
CHECK=$ROOT/tests/integration/faults_check.py
TRIAL_LIMIT=${TRIAL_LIMIT:-130}
FIXED_SEEDS=(11 23 37 41 53 67 79 83 97 101 113 127)

# 8 pods on two spot nodes whose PDB lets one go at a time, each replacement Ready 1.5 s after it starts: the
# drains take ~10 s after notices 4 s and 6 s in.
scenario() {
	cat <<EOF
name: crash-controller
mode: controller
budget_seconds: 120
seed: $1
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: spot-b, zone: us-east-1b, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, instance_type: m5.2xlarge,
     allocatable: {cpu: "8", memory: 32Gi, pods: 58}}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 8, placement: {spot-a: 4, spot-b: 4},
     requests: {cpu: 250m, memory: 256Mi}, termination_grace_seconds: 10, shutdown_seconds: 1,
     startup_seconds: 1.5, pdb: {max_unavailable: 1}}
events:
  - {at: 4, type: spot-interruption, node: spot-a}
  - {at: 6, type: spot-interruption, node: spot-b}
EOF
}

# trial SEED: one trial in a subshell of its own; writes DIR/verdict.
trial() {
	local seed=$1 dir=$TEST_TMP/trial-$1 pids=() k8s queue port kill_ms left deadline rc=0
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
		queue=$(jq -r .queue_url endpoints.json)
		port=$(free_port)
		start_controller() {
			env -u AWS_SESSION_TOKEN -u AWS_PROFILE -u AWS_ROLE_ARN -u AWS_WEB_IDENTITY_TOKEN_FILE \
				AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY \
				AWS_REGION=us-east-1 POD_NAMESPACE=default POD_NAME="spotdrain-controller-$seed" \
				"$SPOTDRAIN" controller --queue-url "$queue" --kubeconfig kubeconfig \
				--metrics-listen "127.0.0.1:$port" >>controller.log 2>&1 &
			pids+=($!)
		}
		start_controller
		wait_for 30 grep -q 'draining spot-a' controller.log || {
			echo "FAIL: the controller did not take the first notice" >verdict
			exit 1
		}
		# The kill point is the trial's variable: a deliberate delay after the controller took the first
		# notice, not a wait for a state.
		kill_ms=$(((seed * 7919) % 11000))
		sleep "$((kill_ms / 1000)).$(printf '%03d' $((kill_ms % 1000)))"
		kill -KILL "${pids[1]}"
		wait "${pids[1]}" 2>/dev/null || true
		left=$(curl -sSf "$k8s/api/v1/pods" | jq '[.items[] | select(.metadata.deletionTimestamp == null and
			(.spec.nodeName == "spot-a" or .spec.nodeName == "spot-b"))] | length')
		echo "--- restart" >>controller.log
		start_controller
		deadline=$(($(date +%s) + TRIAL_LIMIT))
		until curl -sSf "$k8s/sim/v1/result" >result.json 2>/dev/null &&
			python3 "$CHECK" result.json spot-a spot-b; do
			if [ "$(date +%s)" -ge "$deadline" ]; then
				rc=1
				break
			fi
			sleep 0.2
		done
		if python3 "$CHECK" result.json spot-a spot-b --drained >check.txt 2>&1; then
			echo "ok: killed ${kill_ms} ms after the controller took the first notice ($left pods left on the spot nodes);$(grep -v FAIL check.txt | tr -s ' ' | tr '\n' ';')" >verdict
		else
			echo "FAIL: killed ${kill_ms} ms after the controller took the first notice ($left pods left on the spot nodes);$([ "$rc" -ne 0 ] && echo " not drained within ${TRIAL_LIMIT}s;") $(grep FAIL check.txt | tr '\n' ' ')" >verdict
		fi
	)
}

crash_trials "controller crash-resume" controller.log || fail "a restarted controller did not finish the drains as an undisturbed run would"
echo "ok"
