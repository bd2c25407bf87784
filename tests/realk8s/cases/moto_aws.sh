#!/usr/bin/env bash
# spotdrain's AWS request layer judged by a signer it did not write: moto's server (tests/realk8s/moto) with
# its SigV4 check on plays SQS, EC2, STS and Auto Scaling; spotdrain's simulator plays only Kubernetes. The
# controller reaches moto through AWS_ENDPOINT_URL alone (no endpoint flag), as an SDK would.
# - a wrong secret is refused by moto, for the aws CLI and for spotdrain itself: the check is really on;
# - EventBridge spot warnings sent by the aws CLI in both SQS protocols (JSON 1.0, and query from Debian's
#   botocore 1.29 when it is installed) are received, parsed and drained; each handled message is deleted;
#   another account's warning and a warning for no node of this cluster are left in the queue;
# - provisioning launches the replacement with EC2 CreateFleet into moto (the aws CLI finds it by its
#   spotdrain.io/replaces tag);
# - Auto Scaling: DescribeAutoScalingGroups and DescribeLifecycleHooks answered by moto decide which
#   lifecycle action is this cluster's; CompleteLifecycleAction itself moto does not implement
#   (docs/fidelity.md), so its answer is reported, not judged;
# - STS: a controller with only a web identity (IRSA) assumes moto's role with AssumeRoleWithWebIdentity,
#   sent unsigned as AWS takes it, and reads the queue with the session's credentials.
# Exit 0 pass, 77 skip, 1 fail.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../integration/lib.sh"
# shellcheck source=tests/realk8s/moto/lib.sh
source "$ROOT/tests/realk8s/moto/lib.sh"

[ -x "$SPOTDRAIN" ] || skip "$SPOTDRAIN not built"
command -v jq >/dev/null 2>&1 || skip "jq not installed"
command -v curl >/dev/null 2>&1 || skip "curl not installed"
AWS=$(command -v aws 2>/dev/null) || skip "no aws CLI installed"
moto_installed || skip "moto is not installed: tests/realk8s/moto/install"
FIXTURES=${SPOTDRAIN_FIXTURES:-$ROOT/../shared/fixtures}
[ -d "$FIXTURES/eventbridge" ] || FIXTURES=/work/shared/fixtures
[ -f "$FIXTURES/eventbridge/spot-interruption-warning.json" ] || skip "no EventBridge fixtures"
# Debian's aws CLI (botocore 1.29) still speaks the SQS query protocol; the current one speaks JSON 1.0.
AWS_QUERY=
[ -x /usr/bin/aws ] && [ "$(readlink -f /usr/bin/aws)" != "$(readlink -f "$AWS")" ] && AWS_QUERY=/usr/bin/aws

MOTO_DIR=$TEST_TMP/moto
# moto is stopped by its PID before lib.sh's cleanup, which keeps the test's exit status.
# MOTO_AWS_KEEP=DIR keeps the logs (moto's, the controllers', the simulator's).
trap 'rc=$?; moto_stop "$MOTO_DIR" || true; [ -z "${MOTO_AWS_KEEP:-}" ] || cp -r "$TEST_TMP"/. "$MOTO_AWS_KEEP"/
(exit $rc); cleanup' EXIT
moto_start "$MOTO_DIR" || fail "moto did not start"
MOTO_URL=$(cat "$MOTO_DIR/moto.url")
# The key moto's IAM made, the region, AWS_ENDPOINT_URL.
set -a
# shellcheck disable=SC1091
. "$MOTO_DIR/credentials.env"
set +a
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_PAGER=
log "moto at $MOTO_URL, account $MOTO_ACCOUNT"

# cli [aws args...]: the current aws CLI against moto (--endpoint-url: older CLIs ignore AWS_ENDPOINT_URL).
cli() { "$AWS" --endpoint-url "$MOTO_URL" --output json "$@"; }
cli_query() { "$AWS_QUERY" --endpoint-url "$MOTO_URL" --output json "$@"; }

log "the check is on: a wrong secret is refused"
out=$(AWS_SECRET_ACCESS_KEY=wrong-secret cli sqs list-queues 2>&1) && fail "moto accepted a wrong secret: $out"
grep -q SignatureDoesNotMatch <<<"$out" || fail "a wrong secret: $out"
out=$(AWS_ACCESS_KEY_ID=AKIAUNKNOWN0000000000 cli ec2 describe-instances 2>&1) && fail "moto accepted an unknown key: $out"
grep -q AuthFailure <<<"$out" || fail "an unknown key on EC2: $out"

# ---- the AWS side: queue, launch template and subnets for provisioning, Auto Scaling groups ----
QUEUE_URL=$(cli sqs create-queue --queue-name spotdrain-interruptions | jq -r .QueueUrl)
[ "$QUEUE_URL" = "$MOTO_URL/$MOTO_ACCOUNT/spotdrain-interruptions" ] || fail "queue URL $QUEUE_URL"
cli ec2 create-launch-template --launch-template-name spotdrain-nodes \
	--launch-template-data '{"ImageId":"ami-12c6146b"}' >/dev/null
subnet() { cli ec2 describe-subnets --filters "Name=availability-zone,Values=$1" --query 'Subnets[0].SubnetId' --output text; }
SUBNET_B=$(subnet us-east-1b)
SUBNET_C=$(subnet us-east-1c)
[[ $SUBNET_B == subnet-* && $SUBNET_C == subnet-* ]] || fail "moto's default subnets: $SUBNET_B $SUBNET_C"
# Two groups: one this cluster's (the kubernetes.io/cluster tag), one not; each with a terminate hook.
for g in spot-ng other-ng; do
	cli autoscaling create-auto-scaling-group --auto-scaling-group-name "$g" \
		--launch-template LaunchTemplateName=spotdrain-nodes --min-size 0 --max-size 2 --desired-capacity 0 \
		--availability-zones us-east-1a >/dev/null
	cli autoscaling put-lifecycle-hook --auto-scaling-group-name "$g" --lifecycle-hook-name spotdrain-terminate \
		--lifecycle-transition autoscaling:EC2_INSTANCE_TERMINATING --heartbeat-timeout 300 >/dev/null
done
cli autoscaling create-or-update-tags --tags \
	ResourceId=spot-ng,ResourceType=auto-scaling-group,Key=kubernetes.io/cluster/moto-test,Value=owned,PropagateAtLaunch=false

# ---- the Kubernetes side: the simulator, with no notices of its own ----
cat >"$TEST_TMP/scenario.yaml" <<'EOF'
name: moto-aws
mode: controller
budget_seconds: 120
nodes:
  - {name: spot-a, instance_id: i-0a00000000000000a, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: spot-b, instance_id: i-0b00000000000000b, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: spot-c, instance_id: i-0c00000000000000c, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: spot-d, instance_id: i-0d00000000000000d, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: spot-e, instance_id: i-0e00000000000000e, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, instance_id: i-0f00000000000000f, zone: us-east-1b, capacity_type: on-demand, instance_type: m5.4xlarge,
     allocatable: {cpu: "16", memory: 64Gi, pods: 110}}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 10,
     placement: {spot-a: 2, spot-b: 2, spot-c: 2, spot-d: 2, spot-e: 2},
     requests: {cpu: 250m, memory: 256Mi}, termination_grace_seconds: 30, shutdown_seconds: 1, startup_seconds: 1,
     pdb: {max_unavailable: 2}}
EOF
start_sim k8s "$TEST_TMP/scenario.yaml"

node() { curl -sSf "$SIM_URL/api/v1/nodes/$1"; }
cordoned() { node "$1" | jq -e '.spec.unschedulable == true' >/dev/null; }
# Drained: cordoned, and no pod of the workload left on it.
drained() {
	cordoned "$1" &&
		curl -sSf "$SIM_URL/api/v1/namespaces/shop/pods?fieldSelector=spec.nodeName%3D$1" |
		jq -e '[.items[] | select(.metadata.deletionTimestamp == null)] | length == 0' >/dev/null
}
metric() { curl -sSf "127.0.0.1:$METRICS_PORT/metrics" | sed -n "s/^$1 //p"; }
metric_is() { [ "$(metric "$1")" = "$2" ]; }
ready() { curl -sf "127.0.0.1:$1/readyz" >/dev/null; }
in_queue() {
	cli sqs get-queue-attributes --queue-url "$QUEUE_URL" \
		--attribute-names ApproximateNumberOfMessages ApproximateNumberOfMessagesNotVisible |
		jq -r '.Attributes | (.ApproximateNumberOfMessages | tonumber) + (.ApproximateNumberOfMessagesNotVisible | tonumber)'
}

# controller PORT [env arguments...]: spotdrain's controller against the simulator's Kubernetes and moto's AWS,
# reached through AWS_ENDPOINT_URL (from credentials.env) only; its log in TEST_TMP/controller.log. Sets CTL_PID.
controller() {
	local port=$1
	shift
	env "$@" POD_NAMESPACE=default POD_NAME=spotdrain-controller-moto SPOTDRAIN_CATALOG="$ROOT/data/instance-types.json" \
		SPOTDRAIN_CONTROLLER_CLUSTER_NAME=moto-test \
		SPOTDRAIN_PROVISION_ENABLED=true SPOTDRAIN_PROVISION_LAUNCH_TEMPLATE=spotdrain-nodes \
		SPOTDRAIN_PROVISION_SUBNETS="$SUBNET_B=us-east-1b,$SUBNET_C=us-east-1c" SPOTDRAIN_PROVISION_FAMILIES=m5 \
		SPOTDRAIN_PROVISION_TRIGGERS=spot-interruption \
		"$SPOTDRAIN" controller --queue-url "$QUEUE_URL" --kubeconfig "$SIM_KUBECONFIG" \
		--metrics-listen "127.0.0.1:$port" >"$TEST_TMP/controller.log" 2>&1 &
	CTL_PID=$!
	SIM_PIDS+=("$CTL_PID")
}
# stop_as NAME: stop_controller (lib.sh), its log kept as TEST_TMP/NAME.log.
stop_as() {
	stop_controller
	mv "$TEST_TMP/controller.log" "$TEST_TMP/$1.log"
}

log "spotdrain signing with a wrong secret is refused by moto, and says so"
PORT_BAD=$(free_port)
controller "$PORT_BAD" AWS_SECRET_ACCESS_KEY=wrong-secret
wait_for 30 grep -q SignatureDoesNotMatch "$TEST_TMP/controller.log" || {
	tail -n 20 "$TEST_TMP/controller.log" >&2
	fail "no SignatureDoesNotMatch in the controller's log"
}
ready "$PORT_BAD" && fail "a controller whose every request moto refuses says it is ready"
stop_as bad

log "the controller signs as moto's IAM user: it reads the queue"
METRICS_PORT=$(free_port)
controller "$METRICS_PORT"
wait_for 30 ready "$METRICS_PORT" || { cat "$TEST_TMP/controller.log" >&2; fail "controller not ready"; }

# event FIXTURE ACCOUNT INSTANCE: the fixture with its id made unique, its time now, its account and instance.
event() {
	jq -c --arg acct "$2" --arg inst "$3" --arg id "$(cat /proc/sys/kernel/random/uuid)" \
		--arg now "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
		'.id = $id | .time = $now | .account = $acct |
		 if .detail["instance-id"] then .detail["instance-id"] = $inst else . end |
		 if .detail.EC2InstanceId then .detail.EC2InstanceId = $inst else . end' "$FIXTURES/eventbridge/$1"
}
# lifecycle GROUP INSTANCE: the ASG terminate lifecycle action for INSTANCE in GROUP, hook spotdrain-terminate.
lifecycle() {
	event asg-lifecycle-terminate.json "$MOTO_ACCOUNT" "$2" |
		jq -c --arg g "$1" --arg tok "$(cat /proc/sys/kernel/random/uuid)" \
			'.detail.AutoScalingGroupName = $g | .detail.LifecycleHookName = "spotdrain-terminate" |
			 .detail.LifecycleActionToken = $tok |
			 .resources = ["arn:aws:autoscaling:us-east-1:\(.account):autoScalingGroup:x:autoScalingGroupName/\($g)"]'
}

log "spot warnings sent in SQS JSON 1.0 (spot-a) and query (spot-b) protocols are drained and deleted"
sent=$(cli --debug sqs send-message --queue-url "$QUEUE_URL" \
	--message-body "$(event spot-interruption-warning.json "$MOTO_ACCOUNT" i-0a00000000000000a)" 2>&1 >/dev/null)
grep -q "AmazonSQS.SendMessage" <<<"$sent" || fail "$AWS did not send in the JSON protocol"
handled=1
if [ -n "$AWS_QUERY" ]; then
	sent=$("$AWS_QUERY" --endpoint-url "$MOTO_URL" --debug sqs send-message --queue-url "$QUEUE_URL" \
		--message-body "$(event spot-interruption-warning.json "$MOTO_ACCOUNT" i-0b00000000000000b)" 2>&1 >/dev/null)
	grep -q "'Action': 'SendMessage'" <<<"$sent" || fail "$AWS_QUERY did not send in the query protocol"
	handled=2
else
	log "no Debian aws CLI: the query protocol is not sent"
	cli sqs send-message --queue-url "$QUEUE_URL" \
		--message-body "$(event spot-interruption-warning.json "$MOTO_ACCOUNT" i-0b00000000000000b)" >/dev/null
fi
log "another account's warning (spot-c) and a warning for no node are left in the queue"
FOREIGN_ID=$(cli sqs send-message --queue-url "$QUEUE_URL" \
	--message-body "$(event spot-interruption-warning.json 210987654321 i-0c00000000000000c)" | jq -r .MessageId)
NO_NODE_ID=$(cli sqs send-message --queue-url "$QUEUE_URL" \
	--message-body "$(event spot-interruption-warning.json "$MOTO_ACCOUNT" i-00000000000000999)" | jq -r .MessageId)

wait_for 60 drained spot-a || { tail -n 40 "$TEST_TMP/controller.log" >&2; fail "spot-a not drained"; }
wait_for 60 drained spot-b || { tail -n 40 "$TEST_TMP/controller.log" >&2; fail "spot-b not drained"; }
wait_for 20 metric_is spotdrain_sqs_messages_deleted_total 2 || {
	curl -sS "127.0.0.1:$METRICS_PORT/metrics" | grep '^spotdrain_sqs' >&2
	fail "the two handled messages were not deleted"
}
# Both left: received (so the controller saw them) and hidden again, never deleted.
wait_for 20 grep -q "message $FOREIGN_ID is not acted on, left in the queue: .*account 210987654321" \
	"$TEST_TMP/controller.log" || fail "the foreign warning was not judged"
# A notice for an instance that is no node waits a minute for its node to join (src/dispatch) before it is
# given up and left in the queue.
wait_for 90 grep -q "message $NO_NODE_ID is left in the queue: it names an instance that is no node" \
	"$TEST_TMP/controller.log" || fail "the warning for no node was not judged"
[ "$(in_queue)" = 2 ] || fail "$(in_queue) message(s) in the queue, not the 2 left there"
cordoned spot-c && fail "spot-c was cordoned for another account's warning"
node spot-a | jq -e '[.spec.taints[]? | select(.key == "spotdrain.io/interruption")] | length == 1' >/dev/null ||
	fail "spot-a has no interruption taint"

log "the replacement of spot-a was launched into moto with CreateFleet"
replaces() {
	cli ec2 describe-instances --filters Name=tag:spotdrain.io/replaces,Values=i-0a00000000000000a |
		jq -e '[.Reservations[].Instances[]] | length == 1' >/dev/null
}
wait_for 30 replaces || {
	grep -i 'provision\|replacement\|ec2' "$TEST_TMP/controller.log" | tail -n 20 >&2
	fail "no instance tagged spotdrain.io/replaces=i-0a00000000000000a in moto"
}
cli ec2 describe-instances --filters Name=tag:spotdrain.io/replaces,Values=i-0a00000000000000a |
	jq -c '.Reservations[].Instances[] | {InstanceId, InstanceType, Placement: .Placement.AvailabilityZone, SubnetId}'

log "Auto Scaling: the lifecycle action of a group not this cluster's is left alone"
cli sqs send-message --queue-url "$QUEUE_URL" --message-body "$(lifecycle other-ng i-0e00000000000000e)" >/dev/null
wait_for 30 grep -q "group other-ng does not carry the tag" "$TEST_TMP/controller.log" || {
	tail -n 30 "$TEST_TMP/controller.log" >&2
	fail "the untagged group's lifecycle action was not judged from DescribeAutoScalingGroups"
}
log "Auto Scaling: the tagged group's lifecycle action is completed after the drain"
cli sqs send-message --queue-url "$QUEUE_URL" --message-body "$(lifecycle spot-ng i-0d00000000000000d)" >/dev/null
wait_for 60 drained spot-d || { tail -n 40 "$TEST_TMP/controller.log" >&2; fail "spot-d not drained"; }
wait_for 30 grep -q "completing lifecycle action of i-0d00000000000000d (group spot-ng" "$TEST_TMP/controller.log" || {
	tail -n 30 "$TEST_TMP/controller.log" >&2
	fail "the tagged group's lifecycle action was not completed"
}
grep -q "lifecycle hook spotdrain-terminate of group spot-ng: HeartbeatTimeout 300 s" "$TEST_TMP/controller.log" ||
	fail "the hook's HeartbeatTimeout was not read from DescribeLifecycleHooks"
grep -q "completing lifecycle action of i-0e00000000000000e" "$TEST_TMP/controller.log" &&
	fail "the untagged group's lifecycle action was completed"
# moto 5.2.6 has no CompleteLifecycleAction (docs/fidelity.md): reported, not judged.
if grep -q "complete_lifecycle_action action has not been implemented" "$MOTO_DIR/moto.log"; then
	log "moto: CompleteLifecycleAction not implemented (500), as docs/fidelity.md says"
fi
grep -E 'SignatureDoesNotMatch|InvalidClientTokenId|AuthFailure|IncompleteSignature' "$TEST_TMP/controller.log" &&
	fail "moto refused a request of spotdrain's"
stop_as main

log "STS: a web identity alone; AssumeRoleWithWebIdentity goes unsigned, the session reads the queue"
# AWS takes AssumeRoleWithWebIdentity unsigned; moto with its check on answers any unsigned request with a
# 500, so the next request alone is let through unchecked (reset-auth 1): the controller's first, since it
# has no credentials before that answer. Everything after it is checked again.
printf '%s' "$(cat "$FIXTURES/sts/irsa-web-identity-token.jwt")" >"$TEST_TMP/token"
curl -sSf -o /dev/null -X POST -H 'Content-Type: text/plain' --data-binary 1 "$MOTO_URL/moto-api/reset-auth"
PORT_WI=$(free_port)
controller "$PORT_WI" -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY \
	AWS_ROLE_ARN="$MOTO_ROLE_ARN" AWS_WEB_IDENTITY_TOKEN_FILE="$TEST_TMP/token" AWS_ROLE_SESSION_NAME=spotdrain-moto
wait_for 30 ready "$PORT_WI" || { tail -n 30 "$TEST_TMP/controller.log" >&2; fail "web-identity controller not ready"; }
grep -E 'SignatureDoesNotMatch|InvalidClientTokenId|AuthFailure' "$TEST_TMP/controller.log" &&
	fail "moto refused a request of the web-identity controller"
stop_as web-identity
out=$(AWS_SECRET_ACCESS_KEY=wrong-secret cli sqs list-queues 2>&1) && fail "the check is off after the STS case: $out"

stop_sim "$SIM_PID"
echo "ok"
