#!/usr/bin/env bash
# The simulator's SQS throttles (scenario faults.sqs_throttle_rate, docs/faults.md) are what the AWS SDKs take
# for throttling: every aws CLI installed retries them until its attempts run out. Debian's /usr/bin/aws 2.9
# (botocore 1.29: query protocol, "standard" retry mode) and, when installed, a newer aws CLI on PATH (JSON
# 1.0 protocol; aws CLI v1 uses botocore's "legacy" mode, whose SQS policy names RequestThrottled with 403).
# With every request throttled, the CLI must report "reached max retries: N" with N > 0 and one of the two
# throttle codes the surface alternates (RequestThrottled 403, ThrottlingException 400).
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

requires spotdrain jq
CLIS=()
[ -x /usr/bin/aws ] && CLIS+=(/usr/bin/aws)
other=$(command -v aws 2>/dev/null || true)
if [ -n "$other" ] && [ "$(readlink -f "$other")" != /usr/bin/aws ]; then
	CLIS+=("$other")
fi
[ "${#CLIS[@]}" -gt 0 ] || skip "no aws CLI installed"

cat >"$TEST_TMP/scenario.yaml" <<'EOF'
name: cli-throttle
mode: controller
budget_seconds: 120
seed: 3
nodes:
  - {name: spot-a, instance_id: i-0a00000000000000a, zone: us-east-1a, capacity_type: spot}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 2, requests: {cpu: 100m, memory: 128Mi}}
events:
  - {at: 0, type: spot-interruption, node: spot-a}
faults:
  sqs_throttle_rate: 1
EOF

start_sim throttle "$TEST_TMP/scenario.yaml" --mode controller
{ read -r URL && read -r QURL; } < <(sim_endpoint sqs queue_url)

for aws in "${CLIS[@]}"; do
	version=$("$aws" --version 2>&1)
	log "$version: receive-message against a queue that throttles every request"
	rc=0
	# The SDKs' own retry settings, not the user's (AWS_RETRY_MODE, AWS_MAX_ATTEMPTS unset), and at most 120 s.
	printf '#!/bin/sh\nexec timeout 120 %q "$@"\n' "$aws" >"$TEST_TMP/aws" && chmod +x "$TEST_TMP/aws"
	(unset AWS_RETRY_MODE AWS_MAX_ATTEMPTS && AWS=$TEST_TMP/aws aws_sim "$URL" sqs receive-message \
		--queue-url "$QURL" --wait-time-seconds 0) >"$TEST_TMP/out" 2>&1 || rc=$?
	cat "$TEST_TMP/out"
	[ "$rc" -ne 0 ] || fail "$aws: receive-message succeeded against a queue that throttles every request"
	grep -Eq '\((RequestThrottled|ThrottlingException)\) when calling the ReceiveMessage operation \(reached max retries: [1-9]' \
		"$TEST_TMP/out" || fail "$aws: the throttle was not retried as a throttle"
done
echo "ok"
