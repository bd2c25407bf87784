#!/usr/bin/env bash
# A controller SIGKILLed after surging a Deployment (#20, acceptance): `spotdrain sim serve` (time scale 1,
# Kubernetes API + SQS) and `spotdrain controller`. A one-replica Deployment under minAvailable: 1 is on an
# interrupted spot node; once the controller has raised it to 2 replicas it is killed and a new one started,
# which must finish the drain and put the replica count back to 1 with its spotdrain.io/surge record removed,
# with no PDB breach and nothing forced or killed. Then the start-up sweep on its own: records left for a node
# that is gone, and for a node that is not draining, planted by hand; a new controller restores the first and
# removes the second's record but leaves the replicas that someone else changed since.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq curl python3

scenario() {
	cat <<EOF
name: surge-crash
mode: controller
budget_seconds: 120
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 110}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 110}}
workloads:
  - {name: checkout, namespace: shop, kind: Deployment, replicas: 1, placement: {spot-a: 1},
     requests: {cpu: 500m, memory: 512Mi}, termination_grace_seconds: 30, shutdown_seconds: 1,
     startup_seconds: 6, strategy: {max_surge: 1, max_unavailable: 0}, pdb: {min_available: 1}}
  - {name: cart, namespace: shop, kind: Deployment, replicas: 1, placement: {od-1: 1},
     requests: {cpu: 100m, memory: 128Mi}, startup_seconds: 1, strategy: {max_surge: 1}}
  - {name: search, namespace: shop, kind: Deployment, replicas: 1, placement: {od-1: 1},
     requests: {cpu: 100m, memory: 128Mi}, startup_seconds: 1, strategy: {max_surge: 1}}
events:
  - {at: 3, type: spot-interruption, node: spot-a}
EOF
}

scenario >"$TEST_TMP/scenario.yaml"
start_sim crash "$TEST_TMP/scenario.yaml"
dir=$TEST_TMP/crash
queue=$(jq -r .queue_url "$dir/endpoints.json")
port=$(free_port)
CONTROLLER_PID=
start_controller() {
	echo "--- start" >>"$dir/controller.log"
	env -u AWS_SESSION_TOKEN -u AWS_PROFILE -u AWS_ROLE_ARN -u AWS_WEB_IDENTITY_TOKEN_FILE \
		AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY \
		AWS_REGION=us-east-1 POD_NAMESPACE=default POD_NAME=spotdrain-controller-0 \
		"$SPOTDRAIN" controller --queue-url "$queue" --kubeconfig "$dir/kubeconfig" \
		--metrics-listen "127.0.0.1:$port" --log-level info >>"$dir/controller.log" 2>&1 &
	CONTROLLER_PID=$!
}
stop_controller() {
	[ -z "$CONTROLLER_PID" ] || { signal_ours TERM "$CONTROLLER_PID"; wait "$CONTROLLER_PID" 2>/dev/null || true; }
	CONTROLLER_PID=
}
# shellcheck disable=SC2317 # runs from the EXIT trap
on_exit() {
	local rc=$?
	stop_controller
	(exit "$rc")
	cleanup
}
trap on_exit EXIT

dep() { # NAME: the Deployment as the API has it
	curl -sSf "$SIM_URL/apis/apps/v1/namespaces/shop/deployments/$1"
}
replicas_are() { # NAME N
	[ "$(dep "$1" | jq .spec.replicas)" = "$2" ]
}
restored() { # NAME N: replicas N and no record
	dep "$1" | jq -e --argjson n "$2" \
		'.spec.replicas == $n and ((.metadata.annotations // {})["spotdrain.io/surge"] == null)' >/dev/null
}
drained() {
	curl -sSf "$SIM_URL/sim/v1/result" | jq -e '.nodes[0].drained_at != null' >/dev/null
}

log "a controller killed once the Deployment is raised: the next one finishes the drain and restores it"
start_controller
wait_for 40 replicas_are checkout 2 || { tail -n 30 "$dir/controller.log" >&2; fail "checkout was never raised"; }
dep checkout | jq -e '.metadata.annotations["spotdrain.io/surge"] | fromjson | .node == "spot-a" and
	.replicas == 1 and .to == 2' >/dev/null || fail "no surge record on checkout: $(dep checkout)"
kill -KILL "$CONTROLLER_PID"
wait "$CONTROLLER_PID" 2>/dev/null || true
CONTROLLER_PID=
start_controller
wait_for 60 restored checkout 1 || { tail -n 40 "$dir/controller.log" >&2; fail "checkout not restored: $(dep checkout)"; }
wait_for 30 drained || { tail -n 60 "$dir/controller.log" >&2; false; } || fail "spot-a not drained: $(curl -sS "$SIM_URL/sim/v1/result")"
result=$(curl -sSf "$SIM_URL/sim/v1/result")
echo "$result" | jq -c '{nodes, pdb_breaches, replicas_changed}'
echo "$result" | jq -e '.pdb_breaches == 0 and (has("replicas_changed") | not) and .nodes[0].pods_forced == 0 and
	.nodes[0].pods_killed == 0 and .nodes[0].drained_at < .nodes[0].deadline_at' >/dev/null ||
	fail "the restarted drain was not clean: $result"
stop_controller

log "the start-up sweep: records left for a node that is gone and for one that is not draining"
# cart left raised for a node long gone; search raised for od-1 (not draining), then scaled by someone else.
patch() { # NAME BODY
	curl -sSf -X PATCH -H 'Content-Type: application/merge-patch+json' --data "$2" \
		"$SIM_URL/apis/apps/v1/namespaces/shop/deployments/$1" >/dev/null
}
record() { # NODE TO
	jq -cn --arg node "$1" --argjson to "$2" \
		'{node: $node, replicas: 1, to: $to, mode: "scale", started: "2026-12-01T00:00:00Z"} | tojson'
}
patch cart "{\"spec\": {\"replicas\": 2}, \"metadata\": {\"annotations\": {\"spotdrain.io/surge\": $(record spot-gone 2)}}}"
patch search "{\"spec\": {\"replicas\": 3}, \"metadata\": {\"annotations\": {\"spotdrain.io/surge\": $(record od-1 2)}}}"
start_controller
wait_for 30 restored cart 1 || { tail -n 30 "$dir/controller.log" >&2; fail "cart not restored: $(dep cart)"; }
wait_for 30 restored search 3 || { tail -n 30 "$dir/controller.log" >&2; fail "search's record not removed: $(dep search)"; }
grep -q 'deployment shop/cart was left surged for node spot-gone, which is gone: restoring it' "$dir/controller.log" ||
	fail "the sweep did not say why it restored cart"
grep -q 'deployment shop/search was left surged for node od-1, which is not draining' "$dir/controller.log" ||
	fail "the sweep did not say why it restored search"
stop_controller
log "ok"
