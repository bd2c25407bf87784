#!/usr/bin/env bash
# A backlog of bad messages ahead of a real spot warning (issue 36), `spotdrain controller` against
# `spotdrain sim serve`: 100 bad messages (half not JSON, half S3 events that are no notice) sent with
# SendMessageBatch by the aws CLI, then the warning. The warning's node is cordoned and drained; every bad
# message is left in the queue (never deleted) and counted by reason; the log says one line per reason and
# sender, and one summary each of the rest when the controller stops. The timing is bench/backlog's.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ -x "$SPOTDRAIN" ] || skip "$SPOTDRAIN not built"
require_tools jq curl
# Debian's aws CLI speaks SQS's query protocol, a newer one JSON 1.0: either will do.
if [ -x /usr/bin/aws ]; then requires debian-aws; else requires aws; fi

cat >"$TEST_TMP/scenario.yaml" <<'YAML'
name: queue-backlog
mode: controller
budget_seconds: 120
nodes:
  - {name: spot-a, instance_id: i-0a00000000000000a, zone: us-east-1a, capacity_type: spot}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 2, placement: {spot-a: 2},
     requests: {cpu: 100m, memory: 128Mi}, shutdown_seconds: 1, startup_seconds: 1}
events: []
YAML

start_sim backlog "$TEST_TMP/scenario.yaml"
read -r SQS QUEUE_URL < <(sim_endpoint sqs queue_url | paste -sd' ')
METRICS_PORT=$(free_port)
metrics() { curl -sSf "127.0.0.1:$METRICS_PORT/metrics"; }
ready() { curl -sf "127.0.0.1:$METRICS_PORT/readyz" >/dev/null; }
cordoned() { curl -sSf "$SIM_URL/api/v1/nodes/spot-a" | jq -e '.spec.unschedulable == true' >/dev/null; }
count() { metrics | awk -v m="spotdrain_sqs_messages_malformed_total{reason=\"$1\"}" '$1 == m { print $2 }'; }
# Each at least once (one received again after its first visibility, on a loaded machine, counts again).
counted() { [ "$(count malformed)" -ge 50 ] 2>/dev/null && [ "$(count unrecognized)" -ge 50 ] 2>/dev/null; }
in_queue() {
	aws_sim "$SQS" sqs get-queue-attributes --queue-url "$QUEUE_URL" --attribute-names All |
		jq -r '(.Attributes.ApproximateNumberOfMessages | tonumber) + (.Attributes.ApproximateNumberOfMessagesNotVisible | tonumber)'
}
only_backlog_left() { [ "$(in_queue)" = 100 ]; }

start_controller "$QUEUE_URL" "$METRICS_PORT"
wait_for 15 ready || { cat "$TEST_TMP/controller.log" >&2; fail "controller not ready"; }

log "100 bad messages, ten a SendMessageBatch, then the warning"
for b in $(seq 0 9); do
	entries=$(jq -cn --argjson b "$b" '[range(0; 10) | . as $i | {Id: "e\($i)", MessageBody: (if $i % 2 == 1
		then "this is not json \($b)-\($i)" else ({version: "0", id: "s3-\($b)-\($i)", "detail-type": "Object Created",
		source: "aws.s3", account: "123456789012", time: "2026-12-06T09:00:00Z", region: "us-east-1",
		detail: {}} | tostring) end)}]')
	aws_sim "$SQS" sqs send-message-batch --queue-url "$QUEUE_URL" --entries "$entries" |
		jq -e '(.Successful | length) == 10 and ((.Failed // []) | length) == 0' >/dev/null ||
		fail "SendMessageBatch $b did not queue ten messages"
done
aws_sim "$SQS" sqs send-message --queue-url "$QUEUE_URL" \
	--message-body "$(spot_warning e-backlog i-0a00000000000000a)" >/dev/null || fail "the warning was not sent"

wait_for 30 cordoned || { cat "$TEST_TMP/controller.log" >&2; fail "spot-a not cordoned behind the backlog"; }
wait_for 30 counted || { metrics | grep malformed >&2; fail "the bad messages are not counted by reason"; }
log "the bad messages stay in the queue (the warning's own is deleted once its drain is done)"
wait_for 60 only_backlog_left || fail "$(in_queue) message(s) in the queue, not the 100 bad ones"
# One line each for the first message of each reason from this sender (the sim's SenderId); the rest are
# counted, and told in summaries: one when their minute ends (a slow run may see one), the last at the stop.
for what in "is malformed, left in the queue" "is not a notice spotdrain knows, left in the queue"; do
	[ "$(grep -c "$what" "$TEST_TMP/controller.log")" = 1 ] || {
		grep 'left in the queue' "$TEST_TMP/controller.log" >&2
		fail "not one line per reason and sender"
	}
done
declare -A seen=([malformed]=$(count malformed) [unrecognized]=$(count unrecognized))
stop_controller
for reason in malformed unrecognized; do
	held=$(grep "left in the queue ($reason) in the last minute" "$TEST_TMP/controller.log" |
		sed -n 's/.* count=\([0-9]*\)$/\1/p' | awk '{ n += $1 } END { print n + 0 }')
	[ "$held" = $((seen[$reason] - 1)) ] || {
		cat "$TEST_TMP/controller.log" >&2
		fail "the summaries count $held $reason messages, not the $((seen[$reason] - 1)) not logged"
	}
done
[ "$(grep -c 'left in the queue' "$TEST_TMP/controller.log")" -le 6 ] || fail "more than 6 lines about them"
stop_sim "$SIM_PID"
echo "ok"
