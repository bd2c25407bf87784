#!/usr/bin/env bash
# `spotdrain agent` as a process with provisioning turned on through the configuration (SPOTDRAIN_PROVISION_*
# variables, credentials and region from the ordinary AWS variables), against `sim serve`'s Kubernetes, IMDS and
# EC2 surfaces, in the rebalance-early scenario: the rebalance recommendation starts a right-sized replacement
# (CreateFleet on the simulator's EC2), it is Ready before the interruption notice, and the drain completes with
# no pod forced or killed.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq curl

export SPOTDRAIN_CATALOG=$ROOT/data/instance-types.json
# The agent process runs in real time against the scaled simulator: at scale 5 its 50 ms IMDS poll is 0.25
# scenario seconds. The events move 20 s later so that the agent is up and polling before the recommendation.
SCALE=5
sed -e 's/{at: 0, type: rebalance-recommendation/{at: 20, type: rebalance-recommendation/' \
	-e 's/{at: 60, type: spot-interruption/{at: 80, type: spot-interruption/' \
	"$ROOT/examples/rebalance-early.yaml" >"$TEST_TMP/scenario.yaml"
grep -q 'at: 80, type: spot-interruption' "$TEST_TMP/scenario.yaml" || fail "cannot shift the scenario's events"

start_sim agent "$TEST_TMP/scenario.yaml" --mode agent --time-scale "$SCALE"
K8S=$SIM_URL
IMDS=$(jq -r '.imds_by_node["spot-a"]' "$TEST_TMP/agent/endpoints.json")
EC2=$(jq -r '.ec2' "$TEST_TMP/agent/endpoints.json")
[ -n "$IMDS" ] && [ "$IMDS" != null ] || fail "sim serve wrote no IMDS endpoint for spot-a"
[ -n "$EC2" ] && [ "$EC2" != null ] || fail "sim serve wrote no EC2 endpoint: $(cat "$TEST_TMP/agent/endpoints.json")"
METRICS_PORT=$(free_port)

# The simulator's fixed key (sim/ec2_surface.h); only its EC2 surface knows it.
env -i PATH="$PATH" HOME="$TEST_TMP" NODE_NAME=spot-a \
	AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=AKIDEXAMPLE \
	AWS_SECRET_ACCESS_KEY='wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY' \
	SPOTDRAIN_CATALOG="$SPOTDRAIN_CATALOG" \
	SPOTDRAIN_PROVISION_ENABLED=true \
	SPOTDRAIN_PROVISION_ENDPOINT="$EC2" \
	SPOTDRAIN_PROVISION_LAUNCH_TEMPLATE=spotdrain-nodes \
	SPOTDRAIN_PROVISION_SUBNETS=subnet-sim-us-east-1a=us-east-1a,subnet-sim-us-east-1b=us-east-1b \
	SPOTDRAIN_PROVISION_FAMILIES=m5 \
	SPOTDRAIN_PROVISION_MAX_MEMORY=72Gi \
	"$SPOTDRAIN_AGENT" agent --kubeconfig "$SIM_KUBECONFIG" --imds-endpoint "$IMDS" \
	--metrics-listen "127.0.0.1:$METRICS_PORT" --poll-interval 0.05 --log-level debug >"$TEST_TMP/agent.log" 2>&1 &
AGENT_PID=$!
SIM_PIDS+=("$AGENT_PID")

result() { curl -sSf "$K8S/sim/v1/result"; }
launched() { result | jq -e '.replacements | length == 1' >/dev/null; }
drained() { result | jq -e '.nodes[] | select(.name == "spot-a") | (.drained_at | type) == "number"' >/dev/null; }

# Scenario seconds / SCALE in real time, plus slack: the recommendation at 20, the notice at 80, the drain.
wait_for 20 launched || {
	cat "$TEST_TMP/agent.log" >&2
	fail "no replacement launched after the rebalance recommendation"
}
wait_for 40 drained || {
	cat "$TEST_TMP/agent.log" >&2
	fail "spot-a was not drained: $(result)"
}
r=$(result)
echo "agent: $(jq -c '{replacements, node: (.nodes[0] | {notice_at, drained_at, pods_forced, pods_killed}), pdb_breaches}' <<<"$r")"
# Asked at the recommendation: after it, and soon enough that the node is Ready before the interruption (80 s,
# below); "within 1 s of it" was a figure a loaded machine stretched in scenario time.
jq -e '.replacements[0].requested_at >= 20' <<<"$r" >/dev/null || fail "requested before the recommendation: $r"
jq -e '.replacements[0].instance_type != "m5.32xlarge"' <<<"$r" >/dev/null || fail "the 32xlarge was launched: $r"
jq -e '.replacements[0].zone == "us-east-1b"' <<<"$r" >/dev/null || fail "not spread away from the interrupted zone: $r"
jq -e '.replacements[0].ready_at < 80' <<<"$r" >/dev/null || fail "not Ready before the notice: $r"
jq -e '.nodes[0].pods_killed == 0 and .nodes[0].pods_forced == 0 and .pdb_breaches == 0' <<<"$r" >/dev/null ||
	fail "the drain was not clean: $r"
# Exactly one launch: the interruption after the recommendation asks for nothing more.
grep -q 'spot-interruption notice for spot-a: a replacement is under way already' "$TEST_TMP/agent.log" ||
	fail "the interruption did not find the replacement under way: $(grep provision "$TEST_TMP/agent.log")"

kill -TERM "$AGENT_PID"
rc=0
wait "$AGENT_PID" || rc=$?
[ "$rc" -eq 0 ] || fail "the agent exited $rc after SIGTERM"
echo "ok"
