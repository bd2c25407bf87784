#!/usr/bin/env bash
# Debian's aws CLI (2.9, botocore 1.29) against the simulated STS: assume-role-with-web-identity gets
# credentials back (and the STS surface accepts SigV4 made with them: checked in the unit tests), a garbage
# token is refused with InvalidIdentityToken, an expired one with ExpiredTokenException and a bad session name
# with ValidationError.
#
# The STS comes from `spotdrain sim serve --endpoints-out` ("sts").
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

requires spotdrain jq
AWS=/usr/bin/aws
[ -x "$AWS" ] || skip "$AWS (Debian awscli) missing"
fixtures=${SPOTDRAIN_FIXTURES:-$ROOT/../shared/fixtures}

cat >"$TEST_TMP/scenario.yaml" <<'YAML'
name: cli-sts
mode: controller
budget_seconds: 120
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot}
workloads: []
events: []
YAML
start_sim cli-sts "$TEST_TMP/scenario.yaml"
url=$(sim_endpoint sts)
log "STS at $url"

# A JWT shaped like a projected ServiceAccount token, valid for an hour (the signature is not checked).
jwt() {
	/usr/bin/python3 -c '
import base64, json, sys, time
b = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
print(b({"alg": "RS256", "kid": "sim"}) + "." + b({"aud": ["sts.amazonaws.com"], "exp": int(time.time()) + int(sys.argv[1]),
    "iss": "https://oidc.eks.us-east-1.amazonaws.com/id/SIM", "sub": "system:serviceaccount:kube-system:spotdrain"}) + ".c2ln")' "$1"
}

awscli() {
	env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN -u AWS_PROFILE \
		AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_REGION=us-east-1 AWS_PAGER= \
		"$AWS" --no-cli-pager "$@"
}

role=arn:aws:iam::123456789012:role/spotguard-irsa
awscli sts assume-role-with-web-identity --endpoint-url "$url" --role-arn "$role" --role-session-name it-session \
	--web-identity-token "$(jwt 3600)" --duration-seconds 900 --output json >"$TEST_TMP/ok.json"
/usr/bin/python3 - "$TEST_TMP/ok.json" <<'PY'
import json, sys, datetime
d = json.load(open(sys.argv[1]))
c = d["Credentials"]
assert c["AccessKeyId"].startswith("ASIA") and len(c["AccessKeyId"]) == 20, c["AccessKeyId"]
assert len(c["SecretAccessKey"]) == 40 and c["SessionToken"]
exp = datetime.datetime.fromisoformat(c["Expiration"].replace("Z", "+00:00"))
left = (exp - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
assert 800 < left <= 900, left
assert d["AssumedRoleUser"]["Arn"] == "arn:aws:sts::123456789012:assumed-role/spotguard-irsa/it-session", d
assert d["SubjectFromWebIdentityToken"] == "system:serviceaccount:kube-system:spotdrain"
assert d["Audience"] == "sts.amazonaws.com"
print("credentials ok:", c["AccessKeyId"])
PY

expect_error() {
	local code=$1
	shift
	if awscli sts assume-role-with-web-identity --endpoint-url "$url" --role-arn "$role" "$@" >"$TEST_TMP/out" 2>&1; then
		cat "$TEST_TMP/out"
		fail "expected $code"
	fi
	grep -q "($code)" "$TEST_TMP/out" || { cat "$TEST_TMP/out"; fail "expected $code"; }
	echo "refused as expected: $(tr -d '\n' <"$TEST_TMP/out")"
}
expect_error InvalidIdentityToken --role-session-name s1 --web-identity-token garbage-token
expect_error ExpiredTokenException --role-session-name s1 --web-identity-token "$(cat "$fixtures/sts/irsa-web-identity-token.jwt")"
expect_error ValidationError --role-session-name 'bad name!' --web-identity-token "$(jwt 3600)"
echo "aws cli sts: ok"
