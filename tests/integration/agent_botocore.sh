#!/usr/bin/env bash
# botocore (Debian's python3-botocore) fetches instance-role credentials from the simulator's IMDS surface
# through the IMDSv2 token flow, and reads its region; an IMDSv1 request (no token) is refused with 401.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq curl
/usr/bin/python3 -c 'import botocore' 2>/dev/null || skip "python3-botocore not installed"

cat >"$TEST_TMP/scenario.yaml" <<'EOF'
name: botocore-imds
nodes:
  - {name: spot-a, zone: eu-central-1b, capacity_type: spot, instance_type: m5.large}
EOF

start_sim botocore "$TEST_TMP/scenario.yaml"
IMDS=$(jq -r '.imds_by_node["spot-a"]' "$TEST_TMP/botocore/endpoints.json")
[ -n "$IMDS" ] && [ "$IMDS" != null ] || fail "sim serve wrote no IMDS endpoint for spot-a"
log "IMDS of spot-a at $IMDS"

log "IMDSv1 is refused (401): IMDSv2 is required"
code=$(curl -s -o /dev/null -w '%{http_code}' "$IMDS/latest/meta-data/instance-id")
[ "$code" = 401 ] || fail "GET without a token answered $code, want 401"

log "a token PUT without a TTL is a 400"
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT "$IMDS/latest/api/token")
[ "$code" = 400 ] || fail "PUT without TTL answered $code, want 400"

log "botocore's InstanceMetadataFetcher / InstanceMetadataProvider / region fetcher"
# Nothing but the instance role may satisfy the credential chain.
env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN -u AWS_PROFILE \
	-u AWS_CONTAINER_CREDENTIALS_RELATIVE_URI -u AWS_CONTAINER_CREDENTIALS_FULL_URI -u AWS_WEB_IDENTITY_TOKEN_FILE \
	AWS_SHARED_CREDENTIALS_FILE=/nonexistent AWS_CONFIG_FILE=/nonexistent \
	AWS_EC2_METADATA_SERVICE_ENDPOINT=$IMDS AWS_EC2_METADATA_DISABLED=false \
	/usr/bin/python3 "$ROOT/tests/integration/botocore_imds.py" spotdrain-sim-node-role eu-central-1 ||
	fail "botocore could not read the simulator's IMDS"

log "the same with curl, step by step"
token=$(curl -sSf -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 60' "$IMDS/latest/api/token")
[ -n "$token" ] || fail "no token"
role=$(curl -sSf -H "X-aws-ec2-metadata-token: $token" "$IMDS/latest/meta-data/iam/security-credentials/")
[ "$role" = spotdrain-sim-node-role ] || fail "role listing: '$role'"
curl -sSf -H "X-aws-ec2-metadata-token: $token" "$IMDS/latest/meta-data/iam/security-credentials/$role" |
	jq -e '.Code == "Success" and .Type == "AWS-HMAC" and (.Expiration | length) == 20' >/dev/null ||
	fail "credentials document"
echo "ok"
