#!/usr/bin/env bash
# Stop estimates survive a SIGKILL of the controller (issue 18): `spotdrain sim serve` and `spotdrain
# controller`; a StatefulSet whose 60 s grace cannot fit one at a time (3 pods a node under maxUnavailable 1)
# but whose pods stop in 3 s. The first interruption (spot-a) is at risk: nothing was seen stopping yet. Its
# drain shows the stops, which the controller keeps in the ConfigMap spotdrain-estimates; the controller is
# SIGKILLed once they are there and started again, and the second interruption (spot-b, the same
# StatefulSet) is judged with them: neither at risk nor infeasible. The control trial restarts the controller
# with the estimates not kept (drain.estimates_configmap ""): there spot-b is at risk, as spot-a was.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq curl python3
CHECK=$ROOT/tests/integration/faults_check.py
# A trial's bound: the scenario's last deadline (spot-b's notice at 60 s + 120 s) and 10 s for the start.
LIMIT=${TRIAL_LIMIT:-190}

cat >"$TEST_TMP/scenario.yaml" <<'YAML'
name: estimates-restart
mode: controller
budget_seconds: 120
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: spot-b, zone: us-east-1b, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, instance_type: m5.2xlarge,
     allocatable: {cpu: "8", memory: 32Gi, pods: 58}}
workloads:
  - {name: db, namespace: shop, kind: StatefulSet, replicas: 6, placement: {spot-a: 3, spot-b: 3},
     requests: {cpu: 250m, memory: 256Mi}, termination_grace_seconds: 60, shutdown_seconds: 3,
     startup_seconds: 2, pdb: {max_unavailable: 1}}
events:
  - {at: 2, type: spot-interruption, node: spot-a}
  - {at: 60, type: spot-interruption, node: spot-b}
YAML

# trial NAME KEEP(yes|no): writes DIR/verdict and DIR/result.json.
trial() {
	local name=$1 keep=$2 dir=$TEST_TMP/$1 pids=() k8s queue port deadline
	mkdir -p "$dir"
	(
		# shellcheck disable=SC2317 # runs from the EXIT trap
		stop_all() {
			signal_ours TERM "${pids[@]}"
			wait 2>/dev/null || true
		}
		trap stop_all EXIT
		cd "$dir"
		trial_sim "$TEST_TMP/scenario.yaml"
		k8s=$SERVE_URL
		queue=$(jq -r .queue_url endpoints.json)
		port=$(free_port)
		: >config.yaml
		start_controller() {
			env -u AWS_SESSION_TOKEN -u AWS_PROFILE -u AWS_ROLE_ARN -u AWS_WEB_IDENTITY_TOKEN_FILE \
				AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY \
				AWS_REGION=us-east-1 POD_NAMESPACE=default POD_NAME="spotdrain-controller-$name" \
				"$SPOTDRAIN" controller --queue-url "$queue" --kubeconfig kubeconfig --config config.yaml \
				--metrics-listen "127.0.0.1:$port" >>controller.log 2>&1 &
			pids+=($!)
		}
		start_controller
		# The stops of spot-a's three pods, kept in the ConfigMap.
		kept() {
			curl -sSf "$k8s/api/v1/namespaces/default/configmaps/spotdrain-estimates" 2>/dev/null |
				jq -e '.data["estimates.json"] | fromjson | .owners["shop/StatefulSet/db"].stops_seen >= 3' \
					>/dev/null
		}
		wait_for 40 kept || {
			echo "FAIL: the stops of spot-a's pods were not kept in ConfigMap default/spotdrain-estimates" >verdict
			exit 1
		}
		# The restart must come before spot-b's notice, or spot-b is judged by the first process.
		if curl -sSf "$k8s/sim/v1/result" | jq -e '[.nodes[] | select(.name == "spot-b")] | length > 0' \
			>/dev/null; then
			echo "FAIL: spot-b's notice came before the stops were kept (the machine is too slow for the test)" \
				>verdict
			exit 1
		fi
		kill -KILL "${pids[1]}"
		wait "${pids[1]}" 2>/dev/null || true
		echo "--- restart" >>controller.log
		[ "$keep" = yes ] || printf 'drain:\n  estimates_configmap: ""\n' >config.yaml
		start_controller
		deadline=$(($(date +%s) + LIMIT))
		until curl -sSf "$k8s/sim/v1/result" >result.json 2>/dev/null &&
			python3 "$CHECK" result.json spot-a spot-b >/dev/null 2>&1; do
			if [ "$(date +%s)" -ge "$deadline" ]; then
				echo "FAIL: not drained within ${LIMIT} s" >verdict
				exit 1
			fi
			sleep 0.5
		done
		# The alerts, as the Events the controller wrote on the nodes (the result of sim serve has none).
		curl -sSf "$k8s/api/v1/events" >events.json || { echo "FAIL: no events" >verdict; exit 1; }
		python3 "$CHECK" result.json spot-a spot-b --drained >check.txt 2>&1 ||
			{ echo "FAIL: $(grep FAIL check.txt | tr '\n' ' ')" >verdict; exit 1; }
		echo ok >verdict
	)
}

log "two trials: the estimates kept across the SIGKILL, and (the control) not kept"
kept_and_control controller.log

graded() { # TRIAL NODE: the verdict alerts the node got (the reasons of its Events)
	jq -c --arg n "$2" '[.items[] | select(.involvedObject.name == $n and (.reason == "DrainAtRisk" or
		.reason == "DrainInfeasible")) | .reason]' "$TEST_TMP/$1/events.json"
}
log "spot-a, before any stop was seen: at risk in both trials"
for t in kept control; do
	[ "$(graded "$t" spot-a)" = '["DrainAtRisk"]' ] || fail "$t: spot-a graded $(graded "$t" spot-a)"
done
log "spot-b, after the restart: judged with the stops kept; at risk again without them"
[ "$(graded kept spot-b)" = '[]' ] ||
	fail "kept: spot-b graded $(graded kept spot-b): $(jq -c '[.items[] | select(.involvedObject.name == "spot-b") |
		.message]' "$TEST_TMP/kept/events.json")"
[ "$(graded control spot-b)" = '["DrainAtRisk"]' ] ||
	fail "control: spot-b graded $(graded control spot-b): $(jq -c '[.items[] | select(.involvedObject.name ==
		"spot-b") | .message]' "$TEST_TMP/control/events.json"); $(grep -E 'restart|spot-b' \
		"$TEST_TMP/control/controller.log" | grep -v ' debug ' | head -n 12)"
jq -e '.pdb_breaches == 0 and ([.nodes[] | .pods_killed] | add) == 0' "$TEST_TMP/kept/result.json" >/dev/null ||
	fail "kept: $(jq -c '.nodes, .pdb_breaches' "$TEST_TMP/kept/result.json")"
echo ok
