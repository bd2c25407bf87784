#!/usr/bin/env bash
# Debian's aws CLI (2.9, botocore 1.29) against the simulated STS: assume-role-with-web-identity gets
# credentials back (and the STS surface accepts SigV4 made with them: checked in the unit tests), a garbage
# token is refused with InvalidIdentityToken and an expired one with ExpiredTokenException.
# The STS runs standalone (tests/tools/sts_sim.c, compiled here against the library next to $SPOTDRAIN).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=${SPOTDRAIN:-$ROOT/build/spotdrain}
bin=${bin%% *}
case "$bin" in /*) ;; *) bin=$ROOT/$bin ;; esac
lib=${SPOTDRAIN_LIB:-$(dirname "$bin")/libspotdrain.a}
fixtures=${SPOTDRAIN_FIXTURES:-$ROOT/../shared/fixtures}
AWS=/usr/bin/aws
[ -f "$lib" ] || { echo "skipped: no library at $lib (make first)"; exit 77; }
[ -x "$AWS" ] || { echo "skipped: $AWS (Debian awscli) missing"; exit 77; }

tmp=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
pkgs=(libcurl libcjson yaml-0.1 openssl libsystemd expat libmicrohttpd)
read -ra cflags <<<"$(pkg-config --cflags "${pkgs[@]}")"
read -ra libs <<<"$(pkg-config --libs "${pkgs[@]}")"
${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I"$ROOT/include" -I"$ROOT/src" "${cflags[@]}" \
	"$ROOT/tests/tools/sts_sim.c" "$lib" "${libs[@]}" -lm -lpthread -o "$tmp/sts_sim"
"$tmp/sts_sim" >"$tmp/url" &
pid=$!
for _ in $(seq 100); do [ -s "$tmp/url" ] && break; sleep 0.1; done
url=$(cat "$tmp/url")
[ -n "$url" ] || { echo "FAIL: sts_sim did not start"; exit 1; }
echo "--- STS at $url"

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
	--web-identity-token "$(jwt 3600)" --duration-seconds 900 --output json >"$tmp/ok.json"
/usr/bin/python3 - "$tmp/ok.json" <<'PY'
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
	if awscli sts assume-role-with-web-identity --endpoint-url "$url" --role-arn "$role" "$@" >"$tmp/out" 2>&1; then
		echo "FAIL: expected $code"; cat "$tmp/out"; exit 1
	fi
	grep -q "($code)" "$tmp/out" || { echo "FAIL: expected $code, got:"; cat "$tmp/out"; exit 1; }
	echo "refused as expected: $(tr -d '\n' <"$tmp/out")"
}
expect_error InvalidIdentityToken --role-session-name s1 --web-identity-token garbage-token
expect_error ExpiredTokenException --role-session-name s1 --web-identity-token "$(cat "$fixtures/sts/irsa-web-identity-token.jwt")"
expect_error ValidationError --role-session-name 'bad name!' --web-identity-token "$(jwt 3600)"
echo "aws cli sts: ok"
