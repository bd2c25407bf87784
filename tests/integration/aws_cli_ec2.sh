#!/usr/bin/env bash
# The aws CLI (Debian's /usr/bin/aws 2.9, botocore 1.29: the EC2 and Auto Scaling query protocols) against the
# simulator's EC2 surface: `aws ec2 create-fleet --type instant` launches an instance into the scenario (and the
# same ClientToken launches nothing more), `aws ec2 describe-instances` lists it, pending and then running as
# its node joins, by id and by the spotdrain.io/replaces tag; a type the scenario does not offer comes back in
# the errorSet; describe-instance-types, terminate-instances, Auto Scaling describe/set-desired-capacity; a
# wrong secret gets AuthFailure.
#
# The surface comes from `spotdrain sim serve --endpoints-out` ("ec2", "autoscaling").
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

requires spotdrain jq
requires debian-aws

INSTANCE=i-0a00000000000000a

cat >"$TEST_TMP/scenario.yaml" <<'EOF'
name: cli-ec2
mode: controller
budget_seconds: 120
nodes:
  - {name: spot-a, instance_id: i-0a00000000000000a, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge}
  - {name: spot-b, instance_id: i-0b00000000000000b, zone: us-east-1b, capacity_type: spot, instance_type: m5.xlarge}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 2, requests: {cpu: 100m, memory: 128Mi}}
events:
  - {at: 0, type: rebalance-recommendation, node: spot-a}
  - {at: 300, type: spot-interruption, node: spot-a}
provisioning:
  node_launch_seconds: 1
  instance_types:
    - {name: m5.large, cpu: "2", memory: 8Gi}
    - {name: m5.xlarge, cpu: "4", memory: 16Gi}
EOF

start_sim cli-ec2 "$TEST_TMP/scenario.yaml" --mode controller
{ read -r EC2_URL && read -r ASG_URL; } < <(sim_endpoint ec2 autoscaling)
log "EC2 $EC2_URL, Auto Scaling $ASG_URL"

# cli SERVICE ARGS...: the CLI against the simulator's EC2 or Auto Scaling surface (lib.sh aws_sim).
cli() {
	local service=$1 url=$EC2_URL
	shift
	[ "$service" = autoscaling ] && url=$ASG_URL
	aws_sim "$url" "$service" "$@" --no-cli-pager
}

fleet() {
	cli ec2 create-fleet --type instant --client-token "$1" \
		--launch-template-configs "[{\"LaunchTemplateSpecification\":{\"LaunchTemplateName\":\"spotdrain-nodes\",\"Version\":\"\$Latest\"},\"Overrides\":$2}]" \
		--target-capacity-specification TotalTargetCapacity=1,DefaultTargetCapacityType=spot \
		--spot-options AllocationStrategy=price-capacity-optimized \
		--tag-specifications "ResourceType=instance,Tags=[{Key=spotdrain.io/replaces,Value=$INSTANCE}]"
}

log "create-fleet instant"
OVERRIDES='[{"InstanceType":"m5.large","SubnetId":"subnet-sim-us-east-1b"},{"InstanceType":"m5.xlarge","SubnetId":"subnet-sim-us-east-1c"}]'
fleet tok-1 "$OVERRIDES" >"$TEST_TMP/fleet1.json"
ID=$(jq -r '.Instances[0].InstanceIds[0]' "$TEST_TMP/fleet1.json")
[[ "$ID" =~ ^i-0[0-9a-f]{16}$ ]] || fail "no instance launched: $(cat "$TEST_TMP/fleet1.json")"
[ "$(jq -r '.Instances[0].InstanceType' "$TEST_TMP/fleet1.json")" = m5.large ] || fail "want m5.large first"
[ "$(jq -r '.Instances[0].Lifecycle' "$TEST_TMP/fleet1.json")" = spot ] || fail "lifecycle"
[ "$(jq -r '.Instances[0].LaunchTemplateAndOverrides.Overrides.SubnetId' "$TEST_TMP/fleet1.json")" = \
	subnet-sim-us-east-1b ] || fail "subnet"
[ "$(jq '.Errors // [] | length' "$TEST_TMP/fleet1.json")" -eq 0 ] || fail "unexpected errors"
jq -e '.FleetId | startswith("fleet-")' "$TEST_TMP/fleet1.json" >/dev/null || fail "FleetId"

log "the same ClientToken launches nothing more"
fleet tok-1 "$OVERRIDES" >"$TEST_TMP/fleet2.json"
[ "$(jq -r '.Instances[0].InstanceIds[0]' "$TEST_TMP/fleet2.json")" = "$ID" ] || fail "replay gave another instance"

log "describe-instances by id, then by tag"
cli ec2 describe-instances --instance-ids "$ID" >"$TEST_TMP/desc.json"
[ "$(jq -r '.Reservations[0].Instances[0].InstanceId' "$TEST_TMP/desc.json")" = "$ID" ] || fail "describe by id"
jq -e '.Reservations[0].Instances[0].State.Name | IN("pending", "running")' "$TEST_TMP/desc.json" >/dev/null ||
	fail "state: $(jq -c '.Reservations[0].Instances[0].State' "$TEST_TMP/desc.json")"
[ "$(jq -r '.Reservations[0].Instances[0].Placement.AvailabilityZone' "$TEST_TMP/desc.json")" = us-east-1b ] ||
	fail "zone"
[ "$(jq -r '.Reservations[0].Instances[0].Tags[] | select(.Key == "spotdrain.io/replaces") | .Value' \
	"$TEST_TMP/desc.json")" = "$INSTANCE" ] || fail "replaces tag"
running() {
	[ "$(cli ec2 describe-instances --instance-ids "$ID" | jq -r '.Reservations[0].Instances[0].State.Name')" = running ]
}
wait_for 20 running || fail "the instance never turned running"
cli ec2 describe-instances --instance-ids "$ID" |
	jq -e '.Reservations[0].Instances[0].PrivateDnsName | startswith("ip-10-0-")' >/dev/null ||
	fail "no private DNS name once running"
cli ec2 describe-instances --filters "Name=tag:spotdrain.io/replaces,Values=$INSTANCE" \
	"Name=instance-state-name,Values=pending,running" >"$TEST_TMP/bytag.json"
[ "$(jq '[.Reservations[].Instances[]] | length' "$TEST_TMP/bytag.json")" -eq 1 ] || fail "describe by tag"
[ "$(cli ec2 describe-instances | jq '[.Reservations[].Instances[]] | length')" -eq 3 ] || fail "all instances"
out=$(cli ec2 describe-instances --instance-ids i-0ffffffffffffffff 2>&1) && fail "unknown id accepted"
grep -q InvalidInstanceID.NotFound <<<"$out" || fail "unknown id: $out"

log "a type the scenario does not offer: errorSet, HTTP 200"
fleet tok-2 '[{"InstanceType":"c5.large","SubnetId":"subnet-sim-us-east-1c"}]' >"$TEST_TMP/fleet3.json"
[ "$(jq '.Instances // [] | length' "$TEST_TMP/fleet3.json")" -eq 0 ] || fail "launched an unoffered type"
[ "$(jq -r '.Errors[0].ErrorCode' "$TEST_TMP/fleet3.json")" = Unsupported ] || fail "errorSet"

log "describe-instance-types"
cli ec2 describe-instance-types --instance-types m5.2xlarge >"$TEST_TMP/types.json"
[ "$(jq '.InstanceTypes[0].VCpuInfo.DefaultVCpus' "$TEST_TMP/types.json")" -eq 8 ] || fail "vCPUs"
[ "$(jq '.InstanceTypes[0].MemoryInfo.SizeInMiB' "$TEST_TMP/types.json")" -eq 32768 ] || fail "memory"

log "spotdrain catalog refresh from DescribeInstanceTypes"
AWS_ACCESS_KEY_ID=$SIM_AWS_KEY_ID AWS_SECRET_ACCESS_KEY=$SIM_AWS_SECRET AWS_REGION=us-east-1 \
	"$SPOTDRAIN" catalog refresh --endpoint-url "$EC2_URL" --families m5,c6i --output "$TEST_TMP/catalog.json" ||
	fail "catalog refresh"
[ "$(jq '.instance_types | length' "$TEST_TMP/catalog.json")" -eq 17 ] || fail "refreshed catalog size"
"$SPOTDRAIN" catalog show --catalog "$TEST_TMP/catalog.json" | grep -Eq '^m5\.2xlarge +8 +32768 +58 +x86_64$' ||
	fail "catalog show"

log "Auto Scaling"
GROUP=spotdrain-cli-ec2
[ "$(cli autoscaling describe-auto-scaling-groups --auto-scaling-group-names "$GROUP" |
	jq '.AutoScalingGroups[0].DesiredCapacity')" -eq 2 ] || fail "desired capacity"
cli autoscaling set-desired-capacity --auto-scaling-group-name "$GROUP" --desired-capacity 3
cli autoscaling describe-auto-scaling-groups --auto-scaling-group-names "$GROUP" >"$TEST_TMP/asg.json"
[ "$(jq '.AutoScalingGroups[0].DesiredCapacity' "$TEST_TMP/asg.json")" -eq 3 ] || fail "desired not raised"
[ "$(jq '.AutoScalingGroups[0].Instances | length' "$TEST_TMP/asg.json")" -eq 3 ] || fail "no new instance"
out=$(cli autoscaling set-desired-capacity --auto-scaling-group-name "$GROUP" --desired-capacity 99 2>&1) &&
	fail "above max accepted"
grep -q ValidationError <<<"$out" || fail "above max: $out"

log "terminate-instances"
cli ec2 terminate-instances --instance-ids "$ID" >"$TEST_TMP/term.json"
[ "$(jq -r '.TerminatingInstances[0].CurrentState.Name' "$TEST_TMP/term.json")" = shutting-down ] ||
	fail "terminate"

log "a wrong secret"
out=$(SIM_AWS_SECRET=not-the-secret cli ec2 describe-instances 2>&1) && fail "wrong secret accepted"
grep -q AuthFailure <<<"$out" || fail "wrong secret: $out"

echo "ok: aws CLI against the EC2 surface"
