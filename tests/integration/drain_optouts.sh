#!/usr/bin/env bash
# What an SRE expects of a drain besides the evictions, with the real agent against `sim serve` (#16 items 1
# and 2): the node leaves the load balancers (the exclude label) before its first eviction; a do-not-disrupt
# Job pod keeps running past the evictions and is stopped at its last safe moment, gracefully, before the
# deadline; pods in a skipped namespace or matching drain.skip_pod_selector are left alone; the taint takes
# drain.taint_effect; drain.cordon_only cordons, taints and labels but writes no eviction or delete.
# The order of writes is read from the simulator's change log (a watch from the resourceVersion before the
# notice), not from timing.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ -x "$SPOTDRAIN" ] || skip "$SPOTDRAIN not built"
command -v jq >/dev/null 2>&1 || skip "jq not installed"
command -v curl >/dev/null 2>&1 || skip "curl not installed"
[ -x "$SPOTDRAIN_AGENT" ] || fail "$SPOTDRAIN_AGENT not built"

LB=node.kubernetes.io/exclude-from-external-load-balancers

# spot-a: four web pods under maxUnavailable 1, a do-not-disrupt Job pod (grace 12 s, stops in 2 s), a pod in
# the namespace kept, and a pod the selector keeps. The notice comes at 3 s; the deadline is 40 s later, so
# the Job pod's last safe moment is about 40 - 5 (margin) - 12 = 23 s after the notice, long after the web
# pods went (3 s startups).
scenario() {
	cat <<EOF
name: $1
mode: agent
budget_seconds: $2
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 4, placement: {spot-a: 4},
     requests: {cpu: 100m, memory: 64Mi}, termination_grace_seconds: 10, shutdown_seconds: 1, startup_seconds: 3,
     pdb: {max_unavailable: 1}}
  - {name: batch, namespace: ci, kind: Job, replicas: 1, placement: {spot-a: 1},
     requests: {cpu: 100m, memory: 64Mi}, termination_grace_seconds: 12, shutdown_seconds: 2,
     annotations: {karpenter.sh/do-not-disrupt: "true"}}
  - {name: infra, namespace: kept, kind: Deployment, replicas: 1, placement: {spot-a: 1},
     requests: {cpu: 100m, memory: 64Mi}, termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1}
  - {name: pinned, namespace: shop, kind: Deployment, replicas: 1, placement: {spot-a: 1},
     requests: {cpu: 100m, memory: 64Mi}, termination_grace_seconds: 5,
     shutdown_seconds: 1, startup_seconds: 1}
events:
  - {at: 3, type: spot-interruption, node: spot-a}
EOF
}

# start_agent NAME [VAR=VALUE...]: the agent for spot-a of the sim just started, configured by the
# environment.
start_agent() {
	local name=$1 imds
	shift
	imds=$(jq -r '.imds_by_node["spot-a"]' "$TEST_TMP/$name/endpoints.json")
	env NODE_NAME=spot-a POD_NAMESPACE=kube-system POD_NAME=spotdrain-agent-test "$@" \
		"$SPOTDRAIN_AGENT" agent --kubeconfig "$SIM_KUBECONFIG" --imds-endpoint "$imds" \
		--metrics-listen 127.0.0.1:0 >"$TEST_TMP/$name.agent.log" 2>&1 &
	SIM_PIDS+=("$!")
}

# changes URL KIND RV: every change of KIND (pods, nodes) after resourceVersion RV, one JSON line each.
changes() {
	curl -sSf "$1/api/v1/$2?watch=1&resourceVersion=$3&timeoutSeconds=1"
}
clock() { curl -sSf "$1/sim/v1/clock" | jq -r .now; }
past() { awk -v a="$(clock "$1")" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
list_rv() { curl -sSf "$1/api/v1/pods" | jq -r .metadata.resourceVersion; }
pod_json() { curl -sSf "$1/api/v1/namespaces/$2/pods?labelSelector=app%3D$3" | jq -c '.items[0]'; }
notice_at() { sim_result "$1" | jq -r '.nodes[] | select(.name == "spot-a") | .notice_at // empty'; }
noticed() { [ -n "$(notice_at "$1")" ]; }

scenario optouts 40 >"$TEST_TMP/optouts.yaml"
scenario cordon-only 15 >"$TEST_TMP/cordon-only.yaml"

start_sim optouts "$TEST_TMP/optouts.yaml"
A_URL=$SIM_URL
A_RV=$(list_rv "$A_URL")
start_agent optouts SPOTDRAIN_DRAIN_SKIP_NAMESPACES=kept SPOTDRAIN_DRAIN_SKIP_POD_SELECTOR="app in (pinned),!absent" \
	SPOTDRAIN_DRAIN_TAINT_EFFECT=NoExecute

start_sim cordon-only "$TEST_TMP/cordon-only.yaml"
B_URL=$SIM_URL
B_RV=$(list_rv "$B_URL")
start_agent cordon-only SPOTDRAIN_DRAIN_CORDON_ONLY=true

log "the Job pod is still running well after the notice, the web pods gone"
web_gone() {
	[ "$(curl -sSf "$A_URL/api/v1/namespaces/shop/pods?fieldSelector=spec.nodeName%3Dspot-a&labelSelector=app%3Dweb" |
		jq '.items | length')" -eq 0 ]
}
wait_for 20 noticed "$A_URL" || fail "no notice in the simulator"
t0=$(notice_at "$A_URL")
wait_for 30 web_gone || { cat "$TEST_TMP/optouts.agent.log" >&2; fail "the web pods did not leave spot-a"; }
wait_for 30 past "$A_URL" "$(awk -v t="$t0" 'BEGIN { print t + 15 }')" || fail "the simulator's clock stands still"
job=$(pod_json "$A_URL" ci batch)
jq -e '.spec.nodeName == "spot-a" and .metadata.deletionTimestamp == null and .status.phase == "Running"' \
	<<<"$job" >/dev/null || fail "the do-not-disrupt Job pod did not keep running 15 s after the notice: $job"

log "... and it is stopped before the deadline, gracefully; the skipped pods stay"
job_stopping() { pod_json "$A_URL" ci batch | jq -e '.metadata.deletionTimestamp != null' >/dev/null; }
wait_for 30 job_stopping || { cat "$TEST_TMP/optouts.agent.log" >&2; fail "the Job pod was never stopped"; }
log "the Job pod was stopped at scenario time $(clock "$A_URL") s (notice at $t0 s, deadline 40 s after it)"
job=$(pod_json "$A_URL" ci batch)
grace=$(jq -r .metadata.deletionGracePeriodSeconds <<<"$job")
[ "$grace" -ge 2 ] || fail "the Job pod was given a grace of $grace s, shorter than its 2 s stop"
drained() { grep -q 'drain ended: drained' "$TEST_TMP/optouts.agent.log"; }
wait_for 40 drained || { cat "$TEST_TMP/optouts.agent.log" >&2; fail "the agent did not finish the drain"; }
for p in "kept infra" "shop pinned"; do
	# shellcheck disable=SC2086
	o=$(pod_json "$A_URL" $p)
	jq -e '.metadata.deletionTimestamp == null and .spec.nodeName == "spot-a"' <<<"$o" >/dev/null ||
		fail "skipped pod $p was touched: $o"
done
a_gone() { ! curl -sf "$A_URL/api/v1/nodes/spot-a" >/dev/null; }
wait_for 40 a_gone || fail "spot-a was never terminated"
# Of the 7 pods, the 4 web pods and the Job pod left gracefully; the 2 skipped ones went with the instance.
result=$(sim_result "$A_URL")
jq -e '.nodes[] | select(.name == "spot-a") | .pods_graceful == 5 and .pods_forced == 0 and .pods_killed == 2' \
	<<<"$result" >/dev/null || fail "not 5 graceful, 0 forced, 2 killed (the skipped pods): $result"

log "the exclude label went out, and was answered, before the first eviction"
changes "$A_URL" nodes "$A_RV" >"$TEST_TMP/a.nodes"
changes "$A_URL" pods "$A_RV" >"$TEST_TMP/a.pods"
label_rv=$(jq -rs --arg lb "$LB" '[.[] | select(.object.metadata.name == "spot-a" and
	.object.metadata.labels[$lb] == "spotdrain") | .object.metadata.resourceVersion | tonumber] | min // empty' \
	"$TEST_TMP/a.nodes")
evict_rv=$(jq -rs '[.[] | select(.object.spec.nodeName == "spot-a" and .object.metadata.deletionTimestamp != null) |
	.object.metadata.resourceVersion | tonumber] | min // empty' "$TEST_TMP/a.pods")
[ -n "$label_rv" ] || fail "spot-a was never labelled $LB=spotdrain"
[ -n "$evict_rv" ] || fail "no pod of spot-a was evicted"
log "label at resourceVersion $label_rv, first eviction at $evict_rv"
[ "$label_rv" -lt "$evict_rv" ] || fail "an eviction ($evict_rv) went out before the label ($label_rv)"
jq -se '[.[] | select(.object.metadata.name == "spot-a") | .object.spec.taints[]? |
	select(.key == "spotdrain.io/interruption")] | length > 0 and all(.effect == "NoExecute")' \
	"$TEST_TMP/a.nodes" >/dev/null || fail "the interruption taint's effect is not NoExecute"

log "cordon-only: cordoned, tainted, labelled; no eviction or delete written"
b_gone() { sim_result "$B_URL" | jq -e '.nodes[] | select(.name == "spot-a") | .pods_killed > 0' >/dev/null; }
wait_for 40 b_gone || { cat "$TEST_TMP/cordon-only.agent.log" >&2; fail "the cordon-only node never went"; }
changes "$B_URL" nodes "$B_RV" >"$TEST_TMP/b.nodes"
changes "$B_URL" pods "$B_RV" >"$TEST_TMP/b.pods"
jq -se --arg lb "$LB" '[.[] | select(.object.metadata.name == "spot-a") | .object |
	select(.spec.unschedulable == true and .metadata.labels[$lb] == "spotdrain" and
	([.spec.taints[]? | select(.key == "spotdrain.io/interruption" and .effect == "NoSchedule")] | length == 1))] |
	length > 0' "$TEST_TMP/b.nodes" >/dev/null || fail "cordon-only did not cordon, taint and label spot-a"
deleted=$(jq -s '[.[] | select(.object.metadata.deletionTimestamp != null)] | length' "$TEST_TMP/b.pods")
[ "$deleted" -eq 0 ] || fail "cordon-only wrote $deleted pod deletes or evictions"
jq -e '.nodes[] | select(.name == "spot-a") | .pods_graceful == 0' <<<"$(sim_result "$B_URL")" >/dev/null ||
	fail "cordon-only: pods left gracefully, so something evicted them"
echo "ok"
