#!/usr/bin/env bash
# The aws CLI (Debian's /usr/bin/aws, botocore: the ELBv2 query protocol) against the simulator's ELBv2
# surface: the TargetGroupBinding served on the Kubernetes surface names the target group; describe-target-
# group-attributes gives its deregistration delay; describe-target-health shows every node's instance
# healthy; the exclude-from-external-load-balancers label on a node (as spotdrain sets it) moves its instance
# to draining (Target.DeregistrationInProgress) and, after the delay, out of the listing (unused,
# Target.NotRegistered, when asked by id); deregister-targets does the same for another instance, a second
# deregister of a target that is gone is InvalidTarget, an unknown ARN TargetGroupNotFound, a wrong secret
# SignatureDoesNotMatch.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

require_tools
requires debian-aws

cat >"$TEST_TMP/scenario.yaml" <<'YAML'
name: cli-elbv2
mode: agent
budget_seconds: 120
nodes:
  - {name: spot-a, instance_id: i-0a00000000000000a, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge}
  - {name: spot-b, instance_id: i-0b00000000000000b, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge}
  - {name: spot-c, instance_id: i-0c00000000000000c, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge}
workloads:
  - name: web
    namespace: shop
    replicas: 2
    target_group: {type: instance, deregistration_delay_seconds: 20}
events:
  - {at: 600, type: spot-interruption, node: spot-a}
YAML

start_sim cli-elbv2 "$TEST_TMP/scenario.yaml"
ELB_URL=$(sim_endpoint elbv2)
KC=(kubectl --kubeconfig "$SIM_KUBECONFIG")

cli() { aws_sim "$ELB_URL" elbv2 "$@" --no-cli-pager; }

log "the TargetGroupBinding names the target group"
"${KC[@]}" get --raw /apis/elbv2.k8s.aws/v1beta1/namespaces/shop/targetgroupbindings >"$TEST_TMP/tgb.json"
ARN=$(jq -r '.items[0].spec.targetGroupARN' "$TEST_TMP/tgb.json")
[[ "$ARN" =~ ^arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/k8s-shop-web/[0-9a-f]{16}$ ]] ||
	fail "targetGroupARN: $ARN"
[ "$(jq -r '.items[0].spec.targetType' "$TEST_TMP/tgb.json")" = instance ] || fail "targetType"
[ "$(jq -r '.items[0].spec.serviceRef.name' "$TEST_TMP/tgb.json")" = web ] || fail "serviceRef"
"${KC[@]}" get --raw /apis/elbv2.k8s.aws/v1beta1 | jq -e '.resources[] | select(.name == "targetgroupbindings")' \
	>/dev/null || fail "discovery lacks targetgroupbindings"

log "describe-target-group-attributes"
cli describe-target-group-attributes --target-group-arn "$ARN" >"$TEST_TMP/attr.json"
[ "$(jq -r '.Attributes[] | select(.Key == "deregistration_delay.timeout_seconds") | .Value' \
	"$TEST_TMP/attr.json")" = 20 ] || fail "delay: $(cat "$TEST_TMP/attr.json")"

state() { # ID: the target's state asked by id
	cli describe-target-health --target-group-arn "$ARN" --targets "Id=$1" |
		jq -r '.TargetHealthDescriptions[0].TargetHealth.State'
}
is_state() { [ "$(state "$1")" = "$2" ]; }
listed() { # the ids listed without targets
	cli describe-target-health --target-group-arn "$ARN" | jq -r '[.TargetHealthDescriptions[].Target.Id] | sort | join(",")'
}

log "every node's instance is healthy"
[ "$(listed)" = "i-0a00000000000000a,i-0b00000000000000b,i-0c00000000000000c" ] || fail "listed: $(listed)"
[ "$(state i-0a00000000000000a)" = healthy ] || fail "spot-a not healthy"

log "the exclude label moves spot-a's instance to draining, then out"
"${KC[@]}" label node spot-a node.kubernetes.io/exclude-from-external-load-balancers=true >/dev/null
cli describe-target-health --target-group-arn "$ARN" --targets Id=i-0a00000000000000a >"$TEST_TMP/h.json"
jq -e '.TargetHealthDescriptions[0].TargetHealth | .State == "draining" and .Reason == "Target.DeregistrationInProgress"' \
	"$TEST_TMP/h.json" >/dev/null || fail "not draining: $(cat "$TEST_TMP/h.json")"
wait_for 60 is_state i-0a00000000000000a unused || fail "spot-a never left draining"
cli describe-target-health --target-group-arn "$ARN" --targets Id=i-0a00000000000000a >"$TEST_TMP/h.json"
[ "$(jq -r '.TargetHealthDescriptions[0].TargetHealth.Reason' "$TEST_TMP/h.json")" = Target.NotRegistered ] ||
	fail "reason: $(cat "$TEST_TMP/h.json")"
[ "$(listed)" = "i-0b00000000000000b,i-0c00000000000000c" ] || fail "listed after: $(listed)"

log "deregister-targets moves spot-b's the same way"
cli deregister-targets --target-group-arn "$ARN" --targets Id=i-0b00000000000000b >/dev/null ||
	fail "deregister-targets failed"
[ "$(state i-0b00000000000000b)" = draining ] || fail "spot-b not draining"
wait_for 60 is_state i-0b00000000000000b unused || fail "spot-b never left draining"
[ "$(state i-0c00000000000000c)" = healthy ] || fail "spot-c moved"

log "errors"
cli deregister-targets --target-group-arn "$ARN" --targets Id=i-0a00000000000000a 2>"$TEST_TMP/err" &&
	fail "deregistering a target that is gone succeeded"
grep -q InvalidTarget "$TEST_TMP/err" || fail "want InvalidTarget: $(cat "$TEST_TMP/err")"
cli describe-target-health --target-group-arn "${ARN%/*}/0000000000000000" 2>"$TEST_TMP/err" &&
	fail "an unknown target group answered"
grep -q TargetGroupNotFound "$TEST_TMP/err" || fail "want TargetGroupNotFound: $(cat "$TEST_TMP/err")"
SIM_AWS_SECRET=wrong cli describe-target-health --target-group-arn "$ARN" 2>"$TEST_TMP/err" &&
	fail "a wrong secret answered"
grep -q SignatureDoesNotMatch "$TEST_TMP/err" || fail "want SignatureDoesNotMatch: $(cat "$TEST_TMP/err")"
log "ok"
