#!/usr/bin/env bash
# Issue #15: with controller.managed_tag the controller drains only instances carrying that EC2 tag. The
# AWS CLI tags spot-a's instance on the simulator's EC2 surface (and reads it back with a tag filter), then
# sends a spot warning for each of spot-a and spot-b:
# - spot-a (tagged) is cordoned and drained;
# - spot-b (untagged) is not touched, its message is left in the queue (notice-rejected, reason unmanaged);
# - each instance was looked up once (DescribeInstances, filtered on the tag).
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq curl
requires aws

SPOT_A=i-0a00000000000000a
SPOT_B=i-0b00000000000000b
TAG=spotdrain.io/managed

cat >"$TEST_TMP/scenario.yaml" <<EOF
name: managed
mode: controller
nodes:
  - {name: spot-a, instance_id: $SPOT_A, zone: us-east-1a, capacity_type: spot,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: spot-b, instance_id: $SPOT_B, zone: us-east-1a, capacity_type: spot,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, allocatable: {cpu: "8", memory: 32Gi, pods: 58}}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 4, placement: {spot-a: 2, spot-b: 2},
     requests: {cpu: 100m, memory: 128Mi}, termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1}
EOF
start_sim managed "$TEST_TMP/scenario.yaml"
{ read -r QUEUE_URL && read -r SQS_URL && read -r EC2_URL; } < <(sim_endpoint queue_url sqs ec2)
METRICS_PORT=$(free_port)

log "the AWS CLI tags $SPOT_A with $TAG and finds only it by the tag"
aws_sim "$EC2_URL" ec2 create-tags --resources "$SPOT_A" --tags "Key=$TAG,Value=true"
found=$(aws_sim "$EC2_URL" ec2 describe-instances --filters "Name=tag-key,Values=$TAG" |
	jq -c '[.Reservations[].Instances[].InstanceId]')
[ "$found" = "[\"$SPOT_A\"]" ] || fail "describe-instances by the tag found $found"

send() { aws_sim "$SQS_URL" sqs send-message --queue-url "$QUEUE_URL" --message-body "$1" >/dev/null; }
metric() { curl -sSf "127.0.0.1:$METRICS_PORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
ready() { curl -sf "127.0.0.1:$METRICS_PORT/readyz" >/dev/null; }
cordoned() { curl -sSf "$SIM_URL/api/v1/nodes/$1" | jq -e '.spec.unschedulable == true' >/dev/null; }
unmanaged_rejected() { [ "$(metric 'spotdrain_sqs_messages_rejected_total{reason="unmanaged"}')" = 1 ]; }

log "controller with controller.managed_tag=$TAG"
AWS_ACCESS_KEY_ID=$SIM_AWS_KEY_ID AWS_SECRET_ACCESS_KEY=$SIM_AWS_SECRET AWS_REGION=us-east-1 \
	AWS_ENDPOINT_URL_EC2=$EC2_URL SPOTDRAIN_CONTROLLER_MANAGED_TAG=$TAG \
	"$SPOTDRAIN" controller --queue-url "$QUEUE_URL" --kubeconfig "$SIM_KUBECONFIG" --no-leader-election \
	--metrics-listen "127.0.0.1:$METRICS_PORT" --log-level debug >"$TEST_TMP/controller.log" 2>&1 &
CTL_PID=$!
SIM_PIDS+=("$CTL_PID")
wait_for 10 ready || { cat "$TEST_TMP/controller.log" >&2; fail "controller not ready"; }

log "spot warnings for both: only the tagged instance's node drains"
send "$(spot_warning untagged-b "$SPOT_B")"
send "$(spot_warning tagged-a "$SPOT_A")"
wait_for 30 cordoned spot-a || { cat "$TEST_TMP/controller.log" >&2; fail "the tagged spot-a was not cordoned"; }
wait_for 30 unmanaged_rejected || { cat "$TEST_TMP/controller.log" >&2; fail "the untagged warning was not rejected"; }
! cordoned spot-b || fail "the untagged spot-b was cordoned"
grep -q "instance $SPOT_B does not carry the tag $TAG" "$TEST_TMP/controller.log" || fail "the refusal is not said"
grep 'alert=notice-rejected' "$TEST_TMP/controller.log" | grep -q 'reason=unmanaged' ||
	fail "no notice-rejected alert with reason unmanaged"
[ "$(grep -c 'DescribeInstances' "$TEST_TMP/controller.log")" -ge 2 ] || fail "the instances were not looked up"

log "once spot-a's drain ended and its message is deleted, the untagged one is still in the queue"
deleted_one() { [ "$(metric spotdrain_sqs_messages_deleted_total)" = 1 ]; }
wait_for 60 deleted_one || { cat "$TEST_TMP/controller.log" >&2; fail "spot-a's message was not deleted after its drain"; }
attrs=$(aws_sim "$SQS_URL" sqs get-queue-attributes --queue-url "$QUEUE_URL" --attribute-names All)
left=$(jq '(.Attributes.ApproximateNumberOfMessages | tonumber) + (.Attributes.ApproximateNumberOfMessagesNotVisible | tonumber)' <<<"$attrs")
[ "$left" -eq 1 ] || fail "want the untagged warning alone in the queue, got $left: $attrs"

kill -TERM "$CTL_PID"
wait "$CTL_PID" || fail "controller exited $? after SIGTERM"
log "ok"
