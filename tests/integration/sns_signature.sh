#!/usr/bin/env bash
# Issue #15, controller.verify_sns_signature: an SNS-wrapped spot warning whose signature verifies with the
# certificate of the SNS endpoint drains its node; one changed after SNS signed it drains nothing and is left
# in the queue (rejected{reason="bad-signature"}). The signing certificate is served over loopback HTTP at
# $AWS_ENDPOINT_URL_SNS (the SDK convention that also points spotdrain at the real endpoint's stand-in); the
# signatures are made here with openssl, as SNS makes them (SignatureVersion 2: SHA256withRSA over the
# canonical string).
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain
for t in jq curl openssl; do command -v $t >/dev/null 2>&1 || skip "$t not installed"; done
requires aws

KEY_ID=AKIDEXAMPLE
SECRET='wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY'

cat >"$TEST_TMP/scenario.yaml" <<'EOF'
name: sns
mode: controller
budget_seconds: 120
nodes:
  - {name: spot-a, instance_id: i-0a00000000000000a, zone: us-east-1a, capacity_type: spot}
  - {name: spot-b, instance_id: i-0b00000000000000b, zone: us-east-1b, capacity_type: spot}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, allocatable: {cpu: "8", memory: 32Gi, pods: 58}}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 2, placement: {spot-a: 1, spot-b: 1},
     requests: {cpu: 100m, memory: 128Mi}, termination_grace_seconds: 5, shutdown_seconds: 1, startup_seconds: 1}
EOF

log "the SNS signing certificate, served where \$AWS_ENDPOINT_URL_SNS points"
mkdir -p "$TEST_TMP/certs"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TEST_TMP/sns.key" -out "$TEST_TMP/certs/SimpleNotificationService-test.pem" \
	-days 1 -subj /CN=sns.us-east-1.amazonaws.com 2>/dev/null || fail "openssl could not make a certificate"
SNS_PORT=$(free_port)
# A static file server that exits 0 on SIGTERM, as lib.sh's cleanup wants of what it stops.
/usr/bin/python3 -c '
import functools, http.server, signal, sys
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[2])
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), handler).serve_forever()
' "$SNS_PORT" "$TEST_TMP/certs" >"$TEST_TMP/http.log" 2>&1 &
SIM_PIDS+=("$!")
wait_for 10 curl -sf "http://127.0.0.1:$SNS_PORT/SimpleNotificationService-test.pem" -o /dev/null ||
	fail "the certificate server did not start"
CERT_URL=http://127.0.0.1:$SNS_PORT/SimpleNotificationService-test.pem

start_sim sns "$TEST_TMP/scenario.yaml"
ENDPOINTS=$TEST_TMP/sns/endpoints.json
QUEUE_URL=$(jq -r .queue_url "$ENDPOINTS")
SQS_URL=$(jq -r .sqs "$ENDPOINTS")
METRICS_PORT=$(free_port)

# envelope INSTANCE EVENT_ID TAMPER: an SNS notification around a spot warning, signed; TAMPER=1 changes the
# message after signing.
envelope() {
	/usr/bin/python3 - "$1" "$2" "$3" "$TEST_TMP/sns.key" "$CERT_URL" <<'PY'
import base64, datetime, json, subprocess, sys
instance, event_id, tamper, key, cert_url = sys.argv[1:]
now = datetime.datetime.now(datetime.timezone.utc)
event = {"version": "0", "id": event_id, "detail-type": "EC2 Spot Instance Interruption Warning",
         "source": "aws.ec2", "account": "123456789012", "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
         "region": "us-east-1", "resources": ["arn:aws:ec2:us-east-1a:instance/" + instance],
         "detail": {"instance-id": instance, "instance-action": "terminate"}}
env = {"Type": "Notification", "MessageId": "sns-" + event_id,
       "TopicArn": "arn:aws:sns:us-east-1:123456789012:spot-events", "Message": json.dumps(event),
       "Timestamp": now.strftime("%Y-%m-%dT%H:%M:%S.000Z"), "SignatureVersion": "2",
       "SigningCertURL": cert_url}
canonical = "".join("%s\n%s\n" % (k, env[k]) for k in ("Message", "MessageId", "Timestamp", "TopicArn", "Type"))
sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=canonical.encode(), capture_output=True,
                     check=True).stdout
env["Signature"] = base64.b64encode(sig).decode()
if tamper == "1":
    event["detail"]["instance-action"] = "stop"
    env["Message"] = json.dumps(event)
print(json.dumps(env))
PY
}
cli() {
	env -u AWS_PROFILE -u AWS_SESSION_TOKEN -u AWS_ENDPOINT_URL -u AWS_ENDPOINT_URL_SQS \
		AWS_ACCESS_KEY_ID="$KEY_ID" AWS_SECRET_ACCESS_KEY="$SECRET" \
		AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_PAGER= \
		"$AWS" "$@" --endpoint-url "$SQS_URL" --region us-east-1 --output json
}
send() { cli sqs send-message --queue-url "$QUEUE_URL" --message-body "$1" >/dev/null; }
metric() { curl -sSf "127.0.0.1:$METRICS_PORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
rejected_bad() { [ "$(metric 'spotdrain_sqs_messages_rejected_total{reason="bad-signature"}')" ]; }
ready() { curl -sf "127.0.0.1:$METRICS_PORT/readyz" >/dev/null; }
cordoned() { curl -sSf "$SIM_URL/api/v1/nodes/$1" | jq -e '.spec.unschedulable == true' >/dev/null; }

printf 'controller:\n  verify_sns_signature: true\n' >"$TEST_TMP/config.yaml"
AWS_ACCESS_KEY_ID=$KEY_ID AWS_SECRET_ACCESS_KEY=$SECRET AWS_REGION=us-east-1 \
	AWS_ENDPOINT_URL_SNS="http://127.0.0.1:$SNS_PORT" \
	"$SPOTDRAIN" controller --queue-url "$QUEUE_URL" --kubeconfig "$SIM_KUBECONFIG" --no-leader-election \
	--config "$TEST_TMP/config.yaml" --metrics-listen "127.0.0.1:$METRICS_PORT" >"$TEST_TMP/controller.log" 2>&1 &
CTL_PID=$!
SIM_PIDS+=("$CTL_PID")
wait_for 10 ready || { cat "$TEST_TMP/controller.log" >&2; fail "controller not ready"; }

log "a notification changed after SNS signed it: not acted on"
send "$(envelope i-0b00000000000000b ev-tampered 1)"
wait_for 20 rejected_bad || { cat "$TEST_TMP/controller.log" >&2; fail "the tampered notification was not rejected"; }
! cordoned spot-b || fail "spot-b cordoned on a tampered notification"
grep -q 'the SNS signature does not match the message' "$TEST_TMP/controller.log" || fail "no reason given"

log "a notification as SNS signed it: spot-a drained"
send "$(envelope i-0a00000000000000a ev-signed 0)"
wait_for 20 cordoned spot-a || { cat "$TEST_TMP/controller.log" >&2; fail "the signed notification did not drain spot-a"; }
! cordoned spot-b || fail "spot-b cordoned"
# The certificate was fetched once and kept.
[ "$(grep -c 'GET /SimpleNotificationService-test.pem' "$TEST_TMP/http.log")" -eq 2 ] ||
	fail "want the certificate fetched once by the controller (and once by this test): $(cat "$TEST_TMP/http.log")"

kill -TERM "$CTL_PID"
wait "$CTL_PID" || fail "controller exited $? after SIGTERM"
log "ok"
