# shellcheck shell=bash
# Helpers of metrics_agent.sh (sourced, not run): the simulator serving one spot node whose drain takes
# ~30 s, an agent pointed at it with its operations endpoint on a free port, and scrape helpers.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	echo "metrics_lib.sh holds helpers for the metrics tests"
	exit 77
fi
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ -x "$SPOTDRAIN" ] || skip "$SPOTDRAIN not built"
requires jq curl

# 8 pods behind a PDB that lets one go at a time, 3 s to start a replacement: a drain of ~30 s, long enough
# to watch its metrics move.
cat >"$TEST_TMP/scenario.yaml" <<'EOF'
name: metrics-agent
mode: agent
budget_seconds: 120
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 8, placement: {spot-a: 8},
     requests: {cpu: 250m, memory: 256Mi}, termination_grace_seconds: 30, shutdown_seconds: 1, startup_seconds: 3,
     pdb: {max_unavailable: 1}}
events:
  - {at: 4, type: spot-interruption, node: spot-a}
EOF

"$SPOTDRAIN" sim serve "$TEST_TMP/scenario.yaml" --endpoints-out "$TEST_TMP/endpoints.json" \
	--kubeconfig-out "$TEST_TMP/kubeconfig" >"$TEST_TMP/sim.log" 2>&1 &
SIM_PIDS+=("$!")
wait_for 10 test -s "$TEST_TMP/endpoints.json" || {
	cat "$TEST_TMP/sim.log" >&2
	fail "the simulator did not come up"
}
K8S=$(jq -r .kubernetes "$TEST_TMP/endpoints.json")
IMDS=$(jq -r '.imds_by_node["spot-a"]' "$TEST_TMP/endpoints.json")
PORT=$(free_port)
URL="http://127.0.0.1:$PORT"

NODE_NAME=spot-a POD_NAMESPACE=kube-system POD_NAME=spotdrain-agent-metrics \
	"$SPOTDRAIN_AGENT" agent --kubeconfig "$TEST_TMP/kubeconfig" --imds-endpoint "$IMDS" \
	--metrics-listen "127.0.0.1:$PORT" >"$TEST_TMP/agent.log" 2>&1 &
AGENT_PID=$!
SIM_PIDS+=("$AGENT_PID")

scrape() { curl -sSf "$URL/metrics"; }
# value NAME [LABEL-MATCHER]: the sum of the samples of NAME whose labels contain the matcher (0 if none).
value() {
	scrape | awk -v n="$1" -v m="${2:-}" '
		$1 == n || index($1, n "{") == 1 { if (m == "" || index($1, m)) s += $NF }
		END { printf "%g\n", s + 0 }'
}
ready() { curl -sf "$URL/readyz" >/dev/null; }
pods_on_a() { curl -sSf "$K8S/api/v1/pods?fieldSelector=spec.nodeName%3Dspot-a" | jq '[.items[] | select(.metadata.deletionTimestamp == null)] | length'; }
drained() { [ "$(pods_on_a)" -eq 0 ]; }
positive() { awk -v v="$("$@")" 'BEGIN { exit !(v > 0) }'; }

