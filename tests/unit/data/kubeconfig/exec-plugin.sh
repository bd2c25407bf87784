#!/bin/sh
# Test exec credential plugin. Prints an ExecCredential of apiVersion $1 and counts its runs, so that tests can
# tell a cached credential from a fresh one.
#   PLUGIN_STATE_DIR       (required) gets "runs" (the run count) and "exec-info.json" (KUBERNETES_EXEC_INFO)
#   PLUGIN_EXPIRY          expirationTimestamp to report; none when unset
#   PLUGIN_EXIT            fail with this exit status
#   PLUGIN_ANSWER_VERSION  apiVersion to answer with instead of $1
#   PLUGIN_CERT            when set, answer with a client certificate and key instead of a token
#   PLUGIN_WAIT_FOR        answer only once the file $PLUGIN_STATE_DIR/$PLUGIN_WAIT_FOR exists
#   PLUGIN_HANG            ignore SIGTERM, write the shell's pid to $PLUGIN_STATE_DIR/pid and never answer
#   PLUGIN_FLOOD           write this many bytes to stdout before the answer
# GREETING comes from the kubeconfig's exec env; the token is "$GREETING-<run>".
set -eu
dir=${PLUGIN_STATE_DIR:?}
n=$(cat "$dir/runs" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" >"$dir/runs"
printf '%s' "${KUBERNETES_EXEC_INFO:-}" >"$dir/exec-info.json"
if [ -n "${PLUGIN_EXIT:-}" ]; then
	echo "exec-plugin.sh: failing on purpose" >&2
	exit "$PLUGIN_EXIT"
fi
if [ -n "${PLUGIN_HANG:-}" ]; then
	trap '' TERM
	echo $$ >"$dir/pid"
	while :; do sleep 1 || :; done
fi
if [ -n "${PLUGIN_WAIT_FOR:-}" ]; then
	while [ ! -e "$dir/$PLUGIN_WAIT_FOR" ]; do sleep 0.01; done
fi
if [ -n "${PLUGIN_FLOOD:-}" ]; then
	head -c "$PLUGIN_FLOOD" /dev/zero | tr '\0' x
fi
exp=""
if [ -n "${PLUGIN_EXPIRY:-}" ]; then
	exp=", \"expirationTimestamp\": \"$PLUGIN_EXPIRY\""
fi
if [ -n "${PLUGIN_CERT:-}" ]; then
	status='"clientCertificateData": "-----BEGIN CERTIFICATE-----\nZXhlYw==\n-----END CERTIFICATE-----\n", "clientKeyData": "-----BEGIN PRIVATE KEY-----\nZXhlYw==\n-----END PRIVATE KEY-----\n"'
else
	status="\"token\": \"${GREETING:-}-$n\""
fi
printf '{"apiVersion": "%s", "kind": "ExecCredential", "status": {%s%s}}\n' \
	"${PLUGIN_ANSWER_VERSION:-$1}" "$status" "$exp"
