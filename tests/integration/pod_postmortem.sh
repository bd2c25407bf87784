#!/usr/bin/env bash
# Issue 16, items 5 and 6, with the real agent and a real kubectl against sim serve: every pod the drain
# evicts or deletes gets an Event of its own in its namespace (reason Evicted or DeletedAtLastSafeMoment,
# naming the node, the notice and the deadline, with alerts.event_annotations); the Job's pod and the pod
# deleted at its last safe moment carry a post-mortem whose lines include what `kubectl logs` showed for
# them before the notice, in their Event, the agent's log and a file of alerts.postmortem_dir.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tools
[ -x "$SPOTDRAIN_AGENT" ] || fail "$SPOTDRAIN_AGENT not built"

# db: one pod of two on spot-a under a PDB that allows no disruption, so (drain.surge off) it is deleted at
# its last safe moment; batch: a Job's pod; web: a Deployment's pod, evicted as planned (an Event, no post-mortem).
cat >"$TEST_TMP/scenario.yaml" <<'YAML'
name: pod-postmortem
mode: agent
budget_seconds: 30
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 1, placement: {spot-a: 1},
     termination_grace_seconds: 10, shutdown_seconds: 1, startup_seconds: 2}
  - {name: db, namespace: shop, kind: Deployment, replicas: 2, placement: {spot-a: 1},
     termination_grace_seconds: 10, shutdown_seconds: 1, startup_seconds: 2, pdb: {min_available: "100%"}}
  - {name: batch, namespace: jobs, kind: Job, replicas: 1, placement: {spot-a: 1},
     termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1}
events:
  - {at: 3, type: spot-interruption, node: spot-a}
YAML

start_sim pm "$TEST_TMP/scenario.yaml"
export KUBECONFIG=$SIM_KUBECONFIG
IMDS=$(jq -r '.imds_by_node["spot-a"]' "$TEST_TMP/pm/endpoints.json")
mkdir -p "$TEST_TMP/postmortem"

pod_of() { kubectl get pods -n "$1" -o json | jq -r --arg p "$2" '[.items[] | select(.metadata.name | startswith($p))][0].metadata.name'; }
BATCH=$(pod_of jobs batch-)
DB=$(kubectl get pods -n shop -o json | jq -r '[.items[] | select(.spec.nodeName == "spot-a" and (.metadata.name | startswith("db-")))][0].metadata.name')
WEB=$(pod_of shop web-)
for p in "$BATCH" "$DB" "$WEB"; do
	case "$p" in "" | null) fail "scenario pods not found" ;; esac
done

log "what kubectl logs shows of $BATCH and $DB before the notice"
kubectl logs -n jobs "$BATCH" -c app --tail=3 >"$TEST_TMP/batch.kubectl"
kubectl logs -n shop "$DB" -c app --tail=3 >"$TEST_TMP/db.kubectl"
[ "$(wc -l <"$TEST_TMP/batch.kubectl")" -eq 3 ] || fail "kubectl logs showed: $(cat "$TEST_TMP/batch.kubectl")"

NODE_NAME=spot-a POD_NAMESPACE=kube-system POD_NAME=spotdrain-agent-test SPOTDRAIN_DRAIN_SURGE=off \
	SPOTDRAIN_ALERTS_POSTMORTEM_DIR="$TEST_TMP/postmortem" SPOTDRAIN_ALERTS_LOG_TAIL_LINES=20 \
	SPOTDRAIN_ALERTS_EVENT_ANNOTATIONS="team=sre,example.com/runbook=spot" \
	"$SPOTDRAIN_AGENT" agent --kubeconfig "$SIM_KUBECONFIG" --imds-endpoint "$IMDS" --log-format json \
	--metrics-listen 127.0.0.1:0 >"$TEST_TMP/agent.log" 2>&1 &
SIM_PIDS+=("$!")

drained() { grep -q '"alert":"drain-completed"' "$TEST_TMP/agent.log"; }
wait_for 60 drained || { cat "$TEST_TMP/agent.log" >&2; fail "the drain did not complete"; }

events() { kubectl get events -n "$1" -o json; }
event_of() { events "$1" | jq -c --arg p "$2" --arg r "$3" '[.items[] | select(.involvedObject.kind == "Pod" and .involvedObject.name == $p and .reason == $r)]'; }

log "an Event on each pod, in its namespace, naming node, notice and deadline, with the extra annotations"
for spec in "jobs $BATCH Evicted Normal" "shop $WEB Evicted Normal" "shop $DB DeletedAtLastSafeMoment Warning"; do
	read -r ns pod reason type <<<"$spec"
	ev=$(event_of "$ns" "$pod" "$reason")
	jq -e --arg t "$type" 'length == 1 and (.[0] | .type == $t and
		(.message | test("on node spot-a|from node spot-a")) and (.message | test("spot-interruption notice at ")) and
		(.message | test("deadline 20")) and .metadata.annotations.team == "sre" and
		.metadata.annotations["example.com/runbook"] == "spot" and (.message | length) <= 1024)' <<<"$ev" >/dev/null ||
		{ cat "$TEST_TMP/agent.log" >&2; fail "Event of $ns/$pod: $ev"; }
done
# The node keeps its own Events in default.
events default | jq -e '[.items[] | select(.involvedObject.kind == "Node" and .reason == "PodsForced")] | length == 1' \
	>/dev/null || fail "no PodsForced Event on the node"

log "the post-mortems carry the lines kubectl logs showed: Event, log, file"
check_lines() { # FILE-OF-LINES TEXT
	while IFS= read -r line; do
		grep -qF -- "$line" <<<"$2" || return 1
	done <"$1"
}
for spec in "jobs $BATCH Evicted batch pod-evicted" "shop $DB DeletedAtLastSafeMoment db pod-deleted"; do
	read -r ns pod reason name kind <<<"$spec"
	msg=$(event_of "$ns" "$pod" "$reason" | jq -r '.[0].message')
	check_lines "$TEST_TMP/$name.kubectl" "$msg" || fail "Event of $pod lacks what kubectl logs showed: $msg"
	logged=$(jq -r --arg k "$kind" --arg p "$pod" 'select(.alert == $k and .pod == $p) | .msg' "$TEST_TMP/agent.log")
	check_lines "$TEST_TMP/$name.kubectl" "$logged" || fail "logged alert of $pod lacks the lines: $logged"
	file=$(jq -r --arg k "$kind" --arg p "$pod" 'select(.alert == $k and .pod == $p) | .postmortem_file' "$TEST_TMP/agent.log")
	[ -f "$file" ] || fail "no post-mortem file for $pod ($file)"
	jq -e --arg p "$pod" '.name == $p and .node == "spot-a" and .containers[0].name == "app" and
		(.containers[0].status | test("running")) and (.containers[0].last_lines | length) >= 3' "$file" >/dev/null ||
		fail "post-mortem file of $pod: $(cat "$file")"
	check_lines "$TEST_TMP/$name.kubectl" "$(jq -r '.containers[0].last_lines[]' "$file")" ||
		fail "post-mortem file of $pod lacks the lines"
done
[ "$(find "$TEST_TMP/postmortem" -name '*.json' | wc -l)" -eq 2 ] || fail "post-mortems: $(ls "$TEST_TMP/postmortem")"
! jq -e --arg p "$WEB" 'select(.pod == $p and .postmortem != null)' "$TEST_TMP/agent.log" >/dev/null ||
	fail "the Deployment's pod evicted as planned got a post-mortem"
# The simulator's record of client writes (what dry_run.sh finds empty) holds this agent's.
curl -sSf "$SIM_URL/sim/v1/writes" | jq -e --arg p "/api/v1/namespaces/jobs/pods/$BATCH/eviction" \
	'[.writes[] | select(.surface == "kubernetes" and .what == "POST " + $p)] | length == 1' >/dev/null ||
	fail "the eviction of $BATCH is not in /sim/v1/writes"
log "ok"
