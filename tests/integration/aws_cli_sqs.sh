#!/usr/bin/env bash
# The aws CLI against the simulator's SQS surface: Debian's /usr/bin/aws 2.9 (botocore 1.29, SQS query
# protocol) and, when installed, a newer aws CLI on PATH (SQS JSON 1.0 protocol). Each receives the spot
# interruption warning of the scenario as EC2 sends it through EventBridge, deletes it with its receipt handle
# (after which the queue is empty and the stale handle is refused), reads the queue attributes, and a wrong
# secret gets SignatureDoesNotMatch.
#
# The surface comes from `spotdrain sim serve --endpoints-out` ("sqs", "queue_url").
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

# The simulator's long-term key pair (src/sim/sqs_surface.h SIM_SQS_ACCESS_KEY_ID / ..._SECRET_ACCESS_KEY).
KEY_ID=AKIDEXAMPLE
SECRET='wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY'
INSTANCE=i-0a00000000000000a

cat >"$TEST_TMP/scenario.yaml" <<'EOF'
name: cli-sqs
mode: controller
budget_seconds: 120
nodes:
  - {name: spot-a, instance_id: i-0a00000000000000a, zone: us-east-1a, capacity_type: spot}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 2, requests: {cpu: 100m, memory: 128Mi}}
events:
  - {at: 0, type: spot-interruption, node: spot-a}
EOF

# start_surface NAME: starts one simulator with an SQS surface; sets URL and QURL.
start_surface() {
	local name=$1 dir=$TEST_TMP/$1 endpoints
	mkdir -p "$dir"
	"$SPOTDRAIN" sim serve "$TEST_TMP/scenario.yaml" --mode controller --listen 127.0.0.1:0 \
		--endpoints-out "$dir/endpoints.json" >"$dir/serve.log" 2>&1 &
	SIM_PIDS+=("$!")
	wait_for 10 test -s "$dir/endpoints.json" || { cat "$dir/serve.log" >&2; fail "$name: sim serve did not start"; }
	jq -e '.sqs and .queue_url' "$dir/endpoints.json" >/dev/null || fail "$name: sim serve lists no SQS surface"
	endpoints=$dir/endpoints.json
	URL=$(jq -r .sqs "$endpoints")
	QURL=$(jq -r .queue_url "$endpoints")
	log "$name: endpoint $URL, queue $QURL"
}

# cli AWS ARGS...: the CLI with the simulator's credentials and nothing from the user's configuration.
cli() {
	local aws=$1
	shift
	env -u AWS_PROFILE -u AWS_SESSION_TOKEN -u AWS_ENDPOINT_URL -u AWS_ENDPOINT_URL_SQS \
		AWS_ACCESS_KEY_ID="$KEY_ID" AWS_SECRET_ACCESS_KEY="${CLI_SECRET:-$SECRET}" \
		AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_PAGER= \
		"$aws" "$@" --endpoint-url "$URL" --region us-east-1 --output json
}

n=0
for aws in "${CLIS[@]}"; do
	n=$((n + 1))
	version=$("$aws" --version 2>&1)
	start_surface "cli$n"
	log "$version"
	pager=()
	case $version in aws-cli/2.*) pager=(--no-cli-pager) ;; esac

	log "receive-message gets the spot interruption warning"
	cli "$aws" sqs receive-message --queue-url "$QURL" --wait-time-seconds 1 --attribute-names All \
		--max-number-of-messages 10 "${pager[@]}" | tee "$TEST_TMP/recv$n.json"
	[ "$(jq '.Messages | length' "$TEST_TMP/recv$n.json")" -eq 1 ] || fail "$aws: want one message"
	jq -r '.Messages[0].Body' "$TEST_TMP/recv$n.json" >"$TEST_TMP/body$n.json"
	[ "$(jq -r '."detail-type"' "$TEST_TMP/body$n.json")" = "EC2 Spot Instance Interruption Warning" ] ||
		fail "$aws: not a spot interruption warning"
	[ "$(jq -r '.detail."instance-id"' "$TEST_TMP/body$n.json")" = "$INSTANCE" ] || fail "$aws: instance id"
	[ "$(jq -r '.detail."instance-action"' "$TEST_TMP/body$n.json")" = terminate ] || fail "$aws: action"
	[ "$(jq -r '.resources[0]' "$TEST_TMP/body$n.json")" = "arn:aws:ec2:us-east-1a:instance/$INSTANCE" ] ||
		fail "$aws: resources ARN"
	[ "$(jq -r '.Messages[0].Attributes.ApproximateReceiveCount' "$TEST_TMP/recv$n.json")" = 1 ] ||
		fail "$aws: ApproximateReceiveCount"
	[ "$(jq -r '.Messages[0].MD5OfBody' "$TEST_TMP/recv$n.json")" = \
		"$(printf '%s' "$(cat "$TEST_TMP/body$n.json")" | md5sum | cut -d' ' -f1)" ] || fail "$aws: MD5OfBody"
	# The body is what spotdrain's own parser turns into the notice.
	"$SPOTDRAIN" event parse --json "$TEST_TMP/body$n.json" | tee "$TEST_TMP/notice$n.json"
	[ "$(jq -r .kind "$TEST_TMP/notice$n.json")" = spot-interruption ] || fail "$aws: event parse kind"
	handle=$(jq -r '.Messages[0].ReceiptHandle' "$TEST_TMP/recv$n.json")

	log "delete-message with its receipt handle"
	cli "$aws" sqs delete-message --queue-url "$QURL" --receipt-handle "$handle" "${pager[@]}"

	log "the message is gone"
	out=$(cli "$aws" sqs receive-message --queue-url "$QURL" --wait-time-seconds 1 --attribute-names All \
		"${pager[@]}")
	[ -z "$out" ] || [ "$(jq '.Messages // [] | length' <<<"$out")" -eq 0 ] || fail "$aws: still a message: $out"
	cli "$aws" sqs get-queue-attributes --queue-url "$QURL" --attribute-names All "${pager[@]}" |
		tee "$TEST_TMP/attrs$n.json"
	[ "$(jq -r .Attributes.ApproximateNumberOfMessages "$TEST_TMP/attrs$n.json")" = 0 ] ||
		fail "$aws: ApproximateNumberOfMessages"
	[ "$(jq -r .Attributes.ApproximateNumberOfMessagesNotVisible "$TEST_TMP/attrs$n.json")" = 0 ] ||
		fail "$aws: ApproximateNumberOfMessagesNotVisible"

	log "the deleted message's handle is refused"
	rc=0
	cli "$aws" sqs delete-message --queue-url "$QURL" --receipt-handle "$handle" "${pager[@]}" \
		2>"$TEST_TMP/stale$n.err" || rc=$?
	cat "$TEST_TMP/stale$n.err"
	if [ "$rc" -eq 0 ] || ! grep -q ReceiptHandleIsInvalid "$TEST_TMP/stale$n.err"; then
		fail "$aws: stale handle accepted"
	fi

	log "get-queue-url"
	[ "$(cli "$aws" sqs get-queue-url --queue-name spotdrain-cli-sqs "${pager[@]}" | jq -r .QueueUrl)" = "$QURL" ] ||
		fail "$aws: get-queue-url"

	log "a wrong secret gets a signature error"
	rc=0
	CLI_SECRET=not-the-secret cli "$aws" sqs receive-message --queue-url "$QURL" --wait-time-seconds 0 \
		"${pager[@]}" 2>"$TEST_TMP/sig$n.err" || rc=$?
	cat "$TEST_TMP/sig$n.err"
	if [ "$rc" -eq 0 ] || ! grep -q SignatureDoesNotMatch "$TEST_TMP/sig$n.err"; then
		fail "$aws: wrong secret accepted"
	fi
done
log "ok"
