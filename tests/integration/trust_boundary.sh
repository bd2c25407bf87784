#!/usr/bin/env bash
# Issue #15: only real notices for this cluster make the controller act. `spotdrain controller` long-polls
# the simulator's SQS queue while the AWS CLI, a sender spotdrain does not control, puts bodies in it:
# - a spot warning from another account drains nothing and is not deleted (notice-rejected, counted);
# - a spot warning back-dated by six minutes drains its node gracefully with the minimum budget (no pod
#   forced, no PDB breach: the PDB lets the four pods go within drain.min_budget_seconds), and says so;
# - a spot warning for an instance that is no node of this cluster is still in the queue after the wait for
#   its node (a queue shared by several clusters holds theirs too).
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq curl
requires aws

SPOT_A=i-0a00000000000000a
STRANGER=i-0fff0000000000fff

cat >"$TEST_TMP/scenario.yaml" <<EOF
name: trust
mode: controller
budget_seconds: 120
nodes:
  - {name: spot-a, instance_id: $SPOT_A, zone: us-east-1a, capacity_type: spot,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, allocatable: {cpu: "8", memory: 32Gi, pods: 58}}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 4, placement: {spot-a: 4},
     requests: {cpu: 100m, memory: 128Mi}, termination_grace_seconds: 10, shutdown_seconds: 1, startup_seconds: 2,
     pdb: {max_unavailable: 1}}
EOF

start_sim trust "$TEST_TMP/scenario.yaml"
{ read -r QUEUE_URL && read -r SQS_URL; } < <(sim_endpoint queue_url sqs)
METRICS_PORT=$(free_port)

cli() { aws_sim "$SQS_URL" "$@"; }
send() { cli sqs send-message --queue-url "$QUEUE_URL" --message-body "$1" >/dev/null; }
metric() { curl -sSf "127.0.0.1:$METRICS_PORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
metric_at_least() { [ "$(metric "$1")" ] && awk -v v="$(metric "$1")" -v n="$2" 'BEGIN { exit !(v >= n) }'; }
ready() { curl -sf "127.0.0.1:$METRICS_PORT/readyz" >/dev/null; }
cordoned() { curl -sSf "$SIM_URL/api/v1/nodes/spot-a" | jq -e '.spec.unschedulable == true' >/dev/null; }
pods_on_a() {
	curl -sSf "$SIM_URL/api/v1/pods?fieldSelector=spec.nodeName%3Dspot-a" |
		jq '[.items[] | select(.metadata.deletionTimestamp == null)] | length'
}
a_empty() { [ "$(pods_on_a)" -eq 0 ]; }
now() { date -u -d "@$(($(date +%s) - ${1:-0}))" +%Y-%m-%dT%H:%M:%SZ; }

log "controller on the queue"
AWS_ACCESS_KEY_ID=$SIM_AWS_KEY_ID AWS_SECRET_ACCESS_KEY=$SIM_AWS_SECRET AWS_REGION=us-east-1 \
	"$SPOTDRAIN" controller --queue-url "$QUEUE_URL" --kubeconfig "$SIM_KUBECONFIG" --no-leader-election \
	--metrics-listen "127.0.0.1:$METRICS_PORT" >"$TEST_TMP/controller.log" 2>&1 &
CTL_PID=$!
SIM_PIDS+=("$CTL_PID")
wait_for 10 ready || { cat "$TEST_TMP/controller.log" >&2; fail "controller not ready"; }

log "a warning from another account: not acted on, left in the queue"
send "$(spot_warning forged-1 "$SPOT_A" 999999999999 "$(now)")"
wait_for 20 metric_at_least 'spotdrain_sqs_messages_rejected_total{reason="foreign-account"}' 1 ||
	{ cat "$TEST_TMP/controller.log" >&2; fail "the foreign warning was not rejected"; }
! cordoned || fail "spot-a cordoned by another account's warning"
[ "$(pods_on_a)" -eq 4 ] || fail "pods left spot-a on another account's warning"
grep -q 'alert=notice-rejected' "$TEST_TMP/controller.log" || fail "no notice-rejected alert"

log "a warning for an instance that is no node here: waited for, then left for its own cluster"
send "$(spot_warning stranger-1 "$STRANGER" 123456789012 "$(now)")"

log "a warning back-dated by six minutes: drained gracefully with the minimum budget"
send "$(spot_warning late-1 "$SPOT_A" 123456789012 "$(now 360)")"
wait_for 10 cordoned || { cat "$TEST_TMP/controller.log" >&2; fail "the late warning did not cordon spot-a"; }
wait_for 45 a_empty || { cat "$TEST_TMP/controller.log" >&2; fail "spot-a not drained within the minimum budget"; }
grep -q 'arrived [0-9]* s after its deadline: drained with the minimum budget of 30 s' "$TEST_TMP/controller.log" ||
	fail "the late arrival is not said"
grep 'alert=notice-received' "$TEST_TMP/controller.log" | grep -q 'arrived [0-9]* s after its deadline' ||
	fail "the notice-received alert does not say the notice came late"
result=$(sim_result "$SIM_URL")
[ "$(jq .pdb_breaches <<<"$result")" -eq 0 ] || fail "PDB breached: $result"
! grep -q 'alert=pods-forced' "$TEST_TMP/controller.log" || fail "pods forced for a late notice"

log "the stranger's warning is still in the queue after the wait for its node"
wait_for 90 metric_at_least 'spotdrain_sqs_messages_rejected_total{reason="no-node"}' 1 ||
	{ cat "$TEST_TMP/controller.log" >&2; fail "the stranger's warning was not left"; }
attrs=$(cli sqs get-queue-attributes --queue-url "$QUEUE_URL" --attribute-names All)
left=$(jq '(.Attributes.ApproximateNumberOfMessages | tonumber) + (.Attributes.ApproximateNumberOfMessagesNotVisible | tonumber)' <<<"$attrs")
[ "$left" -eq 2 ] || fail "want the foreign and the stranger's messages in the queue, got $left: $attrs"
[ "$(metric spotdrain_sqs_messages_deleted_total)" = 1 ] || fail "want only the late warning deleted"

kill -TERM "$CTL_PID"
wait "$CTL_PID" || fail "controller exited $? after SIGTERM"
log "ok"
