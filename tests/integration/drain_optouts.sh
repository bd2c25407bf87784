#!/usr/bin/env bash
# What an SRE expects of a drain besides the evictions, with the real agent against `sim serve` (#16 items 1
# and 2): the node leaves the load balancers (the exclude label) before its first eviction; a do-not-disrupt
# Job pod keeps running past the evictions and is stopped at its last safe moment, gracefully, before the
# deadline; pods in a skipped namespace or matching drain.skip_pod_selector are left alone; the taint takes
# drain.taint_effect; drain.cordon_only cordons, taints and labels but writes no eviction or delete.
# And the acceptance of #16 in a run that skips nothing ("honest"): the label before the first eviction, the
# do-not-disrupt Job pod running well after the notice and stopped gracefully before the deadline, its own
# Event, its post-mortem carrying the lines `kubectl logs` showed for it (and, the simulator keeping the
# stopped pod readable for pod_removal_seconds, a second one with its exit), and no pod killed.
# The order of writes is read from the simulator's change log (a watch from the resourceVersion before the
# notice), not from timing.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq curl
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
${3:-}
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
list_rv() { curl -sSf "$1/api/v1/pods" | jq -r .metadata.resourceVersion; }
pod_json() { curl -sSf "$1/api/v1/namespaces/$2/pods?labelSelector=app%3D$3" | jq -c '.items[0]'; }
notice_at() { sim_result "$1" | jq -r '.nodes[] | select(.name == "spot-a") | .notice_at // empty'; }
noticed() { [ -n "$(notice_at "$1")" ]; }

scenario optouts 40 >"$TEST_TMP/optouts.yaml"
scenario cordon-only 15 >"$TEST_TMP/cordon-only.yaml"
scenario honest 40 "pod_removal_seconds: 2" >"$TEST_TMP/honest.yaml"

start_sim optouts "$TEST_TMP/optouts.yaml"
A_URL=$SIM_URL
A_RV=$(list_rv "$A_URL")
A_JOB=$(pod_json "$A_URL" ci batch | jq -r .metadata.name)
start_agent optouts SPOTDRAIN_DRAIN_SKIP_NAMESPACES=kept SPOTDRAIN_DRAIN_SKIP_POD_SELECTOR="app in (pinned),!absent" \
	SPOTDRAIN_DRAIN_TAINT_EFFECT=NoExecute

start_sim cordon-only "$TEST_TMP/cordon-only.yaml"
B_URL=$SIM_URL
B_RV=$(list_rv "$B_URL")
start_agent cordon-only SPOTDRAIN_DRAIN_CORDON_ONLY=true

start_sim honest "$TEST_TMP/honest.yaml"
C_URL=$SIM_URL
C_KUBECONFIG=$SIM_KUBECONFIG
C_RV=$(list_rv "$C_URL")
C_JOB=$(pod_json "$C_URL" ci batch | jq -r .metadata.name)
mkdir -p "$TEST_TMP/pm"
# What `kubectl logs` shows of the Job pod before the notice (kubectl where installed, else the same API).
if KUBECTL=$(kubectl_for 1.33); then
	"$KUBECTL" --kubeconfig "$C_KUBECONFIG" logs -n ci "$C_JOB" -c app --tail=3 >"$TEST_TMP/honest.kubectl"
else
	log "kubectl not installed: the log API read with curl instead"
	curl -sSf "$C_URL/api/v1/namespaces/ci/pods/$C_JOB/log?container=app&tailLines=3" >"$TEST_TMP/honest.kubectl"
fi
[ "$(wc -l <"$TEST_TMP/honest.kubectl")" -eq 3 ] || fail "kubectl logs of $C_JOB showed: $(cat "$TEST_TMP/honest.kubectl")"
start_agent honest SPOTDRAIN_ALERTS_POSTMORTEM_DIR="$TEST_TMP/pm" SPOTDRAIN_ALERTS_LOG_TAIL_LINES=20

# The Job pod's fate is read from the simulator's record of writes (GET /sim/v1/writes, each at its scenario
# time) and its change log, not from a look at the pod at some moment: the runs go side by side, and on a
# loaded machine the test looked only after the pod's last safe moment, when its Job had replaced it on od-1.
# acts_at URL NS/POD-PREFIX min|max: the scenario time of the first or last eviction or delete written for it.
acts_at() {
	curl -sSf "$1/sim/v1/writes" | jq -r --arg p "$2" "[.writes[] | select(.surface == \"kubernetes\" and
		(.what | test(\"^(POST|DELETE) /api/v1/namespaces/\" + \$p)))| .at] | $3 // empty"
}
# job_kept URL NAME RV JOB: the do-not-disrupt Job pod JOB is evicted after every web pod and no sooner than
# 15 s after the notice (a lower bound, which load can only lengthen; its last safe moment is about 23 s), and
# before the deadline with a grace that fits its 2 s stop; the drain ends.
job_kept() {
	local url=$1 name=$2 rv=$3 job=$4 t0 at web grace
	log "$name: the Job pod is evicted last, well after the notice, before the deadline, gracefully"
	job_evicted() { [ -n "$(acts_at "$url" "ci/pods/$job" min)" ]; }
	wait_for 60 job_evicted || { cat "$TEST_TMP/$name.agent.log" >&2; fail "the Job pod was never stopped"; }
	t0=$(notice_at "$url")
	at=$(acts_at "$url" "ci/pods/$job" min)
	web=$(acts_at "$url" "shop/pods/web-" max)
	log "the Job pod was evicted at scenario time $at s (notice at $t0 s, deadline 40 s after it; last web pod at ${web:-none} s)"
	[ -n "$web" ] || fail "no web pod was evicted"
	awk -v t0="$t0" -v at="$at" -v web="$web" 'BEGIN { exit !(at > web && at >= t0 + 15 && at < t0 + 40) }' ||
		fail "the do-not-disrupt Job pod was evicted at $at s: not after the web pods ($web s), 15 s after the notice ($t0 s) and before the deadline"
	grace=$(changes "$url" pods "$rv" | jq -rs --arg j "$job" '[.[] | select(.object.metadata.name == $j and
		.object.metadata.deletionTimestamp != null) | .object.metadata.deletionGracePeriodSeconds][0] // empty')
	[ -n "$grace" ] && [ "$grace" -ge 2 ] || fail "the Job pod was given a grace of ${grace:-none} s, shorter than its 2 s stop"
	drained() { grep -q 'drain ended: drained' "$TEST_TMP/$name.agent.log"; }
	wait_for 40 drained || { cat "$TEST_TMP/$name.agent.log" >&2; fail "the agent did not finish the drain"; }
}

# label_first URL RV: the exclude label went out, and was answered, before the first eviction (the change log
# from resourceVersion RV); the interruption taint's effect is printed.
label_first() {
	local label_rv evict_rv
	changes "$1" nodes "$2" >"$TEST_TMP/lf.nodes"
	changes "$1" pods "$2" >"$TEST_TMP/lf.pods"
	label_rv=$(jq -rs --arg lb "$LB" '[.[] | select(.object.metadata.name == "spot-a" and
		.object.metadata.labels[$lb] == "spotdrain") | .object.metadata.resourceVersion | tonumber] | min // empty' \
		"$TEST_TMP/lf.nodes")
	evict_rv=$(jq -rs '[.[] | select(.object.spec.nodeName == "spot-a" and .object.metadata.deletionTimestamp != null) |
		.object.metadata.resourceVersion | tonumber] | min // empty' "$TEST_TMP/lf.pods")
	[ -n "$label_rv" ] || fail "spot-a was never labelled $LB=spotdrain"
	[ -n "$evict_rv" ] || fail "no pod of spot-a was evicted"
	log "label at resourceVersion $label_rv, first eviction at $evict_rv"
	[ "$label_rv" -lt "$evict_rv" ] || fail "an eviction ($evict_rv) went out before the label ($label_rv)"
}

job_kept "$A_URL" optouts "$A_RV" "$A_JOB"
job_kept "$C_URL" honest "$C_RV" "$C_JOB"
log "the skipped pods stay"
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
label_first "$A_URL" "$A_RV"
jq -se '[.[] | select(.object.metadata.name == "spot-a") | .object.spec.taints[]? |
	select(.key == "spotdrain.io/interruption")] | length > 0 and all(.effect == "NoExecute")' \
	"$TEST_TMP/lf.nodes" >/dev/null || fail "the interruption taint's effect is not NoExecute"

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

log "honest: nothing skipped; the acceptance of #16"
label_first "$C_URL" "$C_RV"
ev=$(curl -sSf "$C_URL/api/v1/namespaces/ci/events" | jq -c --arg p "$C_JOB" \
	'[.items[] | select(.involvedObject.kind == "Pod" and .involvedObject.name == $p and .reason == "Evicted")]')
jq -e 'length == 1 and (.[0].message | test("from node spot-a"))' <<<"$ev" >/dev/null ||
	fail "the Job pod $C_JOB has no Event of its own: $ev"
first=$(find "$TEST_TMP/pm" -name "ci_${C_JOB}_*.json" ! -name '*.*.json' | head -1)
[ -f "$first" ] || fail "no post-mortem of $C_JOB in $TEST_TMP/pm: $(ls "$TEST_TMP/pm")"
while IFS= read -r line; do
	jq -e --arg l "$line" '.containers[0].last_lines | index($l) != null' "$first" >/dev/null ||
		fail "the post-mortem of $C_JOB lacks \"$line\" that kubectl logs showed: $(cat "$first")"
done <"$TEST_TMP/honest.kubectl"
after_stop() { [ -n "$(find "$TEST_TMP/pm" -name "ci_${C_JOB}_*.after-stop.json")" ]; }
wait_for 20 after_stop || fail "no capture of $C_JOB after its stop: $(ls "$TEST_TMP/pm")"
jq -e '.capture == "after-stop" and (.containers[0].status | test("terminated: exit 0")) and
	(.containers[0].last_lines | index("drained, exiting with status 0") != null)' \
	"$(find "$TEST_TMP/pm" -name "ci_${C_JOB}_*.after-stop.json")" >/dev/null || fail "the after-stop capture lacks the exit"
c_gone() { ! curl -sf "$C_URL/api/v1/nodes/spot-a" >/dev/null; }
wait_for 40 c_gone || fail "spot-a of the honest run was never terminated"
result=$(sim_result "$C_URL")
jq -e '.nodes[] | select(.name == "spot-a") | .pods_graceful == 7 and .pods_forced == 0 and .pods_killed == 0' \
	<<<"$result" >/dev/null || fail "honest: not 7 graceful, 0 forced, 0 killed: $result"
[ -z "$(find "$TEST_TMP/pm" -name '*.before-node-end.json')" ] || fail "honest: a pod was captured as killed"
echo "ok"
