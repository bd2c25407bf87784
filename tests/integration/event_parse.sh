#!/usr/bin/env bash
# spotdrain event parse over every fixture form: exit codes, JSON fields, reasons for refused input.
# Runs build/spotdrain and, when built, build/asan/spotdrain (override with SPOTDRAIN="bin1 bin2").
set -u
fixtures=${SPOTDRAIN_FIXTURES:-../shared/fixtures}
bins=${SPOTDRAIN:-}
if [ -z "$bins" ]; then
	for b in build/spotdrain build/asan/spotdrain; do
		[ -x "$b" ] && bins="$bins $b"
	done
fi
if [ -z "$bins" ]; then
	echo "no spotdrain binary built"
	exit 77
fi
if [ ! -d "$fixtures/eventbridge" ]; then
	echo "fixtures not found at $fixtures"
	exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failures=0
IID=i-0abcd1234ef567890
NOW=2024-05-14T10:21:55Z

fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

# run BIN WANT_EXIT ARGS... : runs `BIN event parse ARGS`, output in $tmp/out and $tmp/err
run() {
	local bin=$1 want=$2
	shift 2
	"$bin" event parse "$@" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	if [ "$rc" -ne "$want" ]; then
		fail "$bin event parse $*: exit $rc, want $want; stderr: $(cat "$tmp/err")"
		return 1
	fi
	return 0
}

# check_json LINE_COUNT 'python expression over v (list of notices)'
check_json() {
	local count=$1 expr=$2
	/usr/bin/python3 -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
v = [json.loads(l) for l in lines]
assert len(v) == int(sys.argv[2]), "%d notices, want %s" % (len(v), sys.argv[2])
for n in v:
    assert n["kind"] in ("spot-interruption", "rebalance-recommendation", "scheduled-change", "state-change",
                         "asg-lifecycle-terminate", "asg-test-notification", "asg-lifecycle-launch"), n["kind"]
    assert "deadline" in n and "notice_time" in n and "source" in n
    for k in ("notice_time", "deadline", "start_time", "end_time"):
        if n.get(k) is not None:
            assert n[k].endswith("Z") and len(n[k]) == 20, (k, n[k])
ok = eval(sys.argv[3])
assert ok, "check failed: " + sys.argv[3] + " on " + repr(v)
' "$tmp/out" "$count" "$expr" || fail "JSON check '$expr' on $(cat "$tmp/out")"
}

# check_err SUBSTRING: the reason on stderr
check_err() {
	grep -qF -- "$1" "$tmp/err" || fail "stderr '$(cat "$tmp/err")' lacks '$1'"
}

eb=$fixtures/eventbridge
imds=$fixtures/imds
own=$(dirname "${BASH_SOURCE[0]}")/../unit/data/eventbridge
for bin in $bins; do
	echo "== $bin"

	run "$bin" 0 "$eb/spot-interruption-warning.json" --json &&
		check_json 1 'v[0] == {"kind": "spot-interruption", "instance_id": "i-0abcd1234ef567890", "source": "sqs",
		  "notice_time": "2024-05-14T10:21:53Z", "deadline": "2024-05-14T10:23:53Z", "action": "terminate",
		  "region": "us-east-1", "account": "123456789012", "event_id": "1e5527d7-bb36-4607-3370-4164db56a40e"}'
	cp "$tmp/out" "$tmp/bare"
	run "$bin" 0 "$eb/sns-wrapped-spot.json" --json && { cmp -s "$tmp/out" "$tmp/bare" || fail "SNS-wrapped differs from bare"; }
	# stdin, and the human line
	run "$bin" 0 - <"$eb/spot-interruption-warning.json" &&
		{ grep -q "^spot-interruption $IID (terminate): deadline 2024-05-14T10:23:53Z" "$tmp/out" || fail "human line: $(cat "$tmp/out")"; }

	run "$bin" 0 "$eb/rebalance-recommendation.json" --json &&
		check_json 1 'v[0]["kind"] == "rebalance-recommendation" and v[0]["deadline"] is None and "action" not in v[0]'
	run "$bin" 0 "$eb/instance-state-change-stopping.json" --json &&
		check_json 1 'v[0]["action"] == "stopping" and v[0]["deadline"] == v[0]["notice_time"] and v[0]["instance_id"] == "i-0fedcba9876543210"'
	run "$bin" 0 "$eb/instance-state-change-terminated.json" --json &&
		check_json 1 'v[0]["kind"] == "state-change" and v[0]["action"] == "terminated"'
	run "$bin" 0 "$eb/aws-health-scheduled-change.json" --json &&
		check_json 1 'v[0]["kind"] == "scheduled-change" and v[0]["deadline"] == "2024-05-28T06:00:00Z" and v[0]["end_time"] == "2024-05-28T07:00:00Z" and v[0]["state"] == "upcoming"'
	run "$bin" 0 "$eb/asg-lifecycle-terminate.json" --json &&
		check_json 1 'v[0]["kind"] == "asg-lifecycle-terminate" and v[0]["deadline"] == "2024-05-14T11:22:05Z" and v[0]["lifecycle_action_token"] == "0befcbdb-6ecd-498a-9ff7-ae9b54447cd6" and v[0]["asg_name"] == "eks-spot-ng-1"'
	run "$bin" 0 "$eb/asg-lifecycle-direct-sqs.json" --json --asg-deadline 600 --region us-west-2 &&
		check_json 1 'v[0]["event_id"] == "3775fac9-93c3-7ead-8713-159816566000" and v[0]["deadline"] == "2024-05-14T10:32:05Z" and v[0]["region"] == "us-west-2" and v[0]["lifecycle_hook_name"] == "spotguard-terminate"'
	# A launch lifecycle action (the repository's own fixtures): its kind, no deadline, one token both ways.
	run "$bin" 0 "$own/asg-lifecycle-launch.json" --json &&
		check_json 1 'v[0]["kind"] == "asg-lifecycle-launch" and v[0]["deadline"] is None and v[0]["lifecycle_hook_name"] == "spotdrain-launch" and v[0]["lifecycle_action_token"] == "c3a1e2f4-7b6d-4e5a-9c8b-0f1e2d3c4b5a"'
	run "$bin" 0 "$own/asg-lifecycle-launch-direct-sqs.json" --json &&
		check_json 1 'v[0]["kind"] == "asg-lifecycle-launch" and v[0]["event_id"] == "9e4f1a2b-3c5d-6e7f-8a9b-0c1d2e3f4a5b" and v[0]["lifecycle_action_token"] == "c3a1e2f4-7b6d-4e5a-9c8b-0f1e2d3c4b5a"'
	run "$bin" 0 "$eb/asg-test-notification.json" --json &&
		check_json 1 'v[0]["kind"] == "asg-test-notification" and "instance_id" not in v[0] and v[0]["event_id"] == "f20fbb34-77f8-11e5-9842-63a2c2b9270f"'
	run "$bin" 65 "$eb/event-patterns.json" --json && check_err "unrecognized JSON object"

	# IMDS documents: detected, or named with --imds; they name no instance
	for a in terminate stop hibernate; do
		run "$bin" 0 "$imds/spot-instance-action-$a.json" --json --instance-id $IID --now $NOW &&
			check_json 1 "v[0]['action'] == '$a' and v[0]['source'] == 'imds' and v[0]['notice_time'] == '$NOW' and v[0]['instance_id'] == '$IID'"
	done
	run "$bin" 0 "$imds/spot-instance-action-terminate.json" --json --imds spot/instance-action --instance-id $IID &&
		check_json 1 'v[0]["deadline"] == "2024-05-14T10:23:53Z"'
	# Without --instance-id the instance is absent, as any field a form lacks.
	run "$bin" 0 "$imds/spot-instance-action-terminate.json" --json &&
		check_json 1 '"instance_id" not in v[0] and v[0]["kind"] == "spot-interruption" and v[0]["deadline"] == "2024-05-14T10:23:53Z"'
	run "$bin" 0 "$imds/rebalance-recommendation.json" --json --imds events/recommendations/rebalance &&
		check_json 1 '"instance_id" not in v[0] and v[0]["kind"] == "rebalance-recommendation"'
	run "$bin" 0 "$imds/spot-termination-time.txt" --json --instance-id $IID &&
		check_json 1 'v[0]["kind"] == "spot-interruption" and v[0]["deadline"] == "2024-05-14T10:23:53Z"'
	run "$bin" 0 "$imds/rebalance-recommendation.json" --json --instance-id $IID --imds events/recommendations/rebalance &&
		check_json 1 'v[0]["notice_time"] == "2024-05-14T10:15:00Z" and v[0]["deadline"] is None'
	run "$bin" 0 "$imds/scheduled-events.json" --json --instance-id $IID &&
		check_json 1 'v[0]["event_id"] == "instance-event-0d59937288b749b32" and v[0]["action"] == "system-reboot" and v[0]["state"] == "active" and v[0]["deadline"] == "2024-05-28T06:00:00Z"'
	run "$bin" 0 "$imds/scheduled-events-with-deadline.json" --json --instance-id $IID &&
		check_json 1 'v[0]["action"] == "instance-stop"'
	run "$bin" 0 "$imds/scheduled-events-history.json" --json --instance-id $IID --imds events/maintenance/history &&
		check_json 2 '[n["state"] for n in v] == ["canceled", "completed"] and v[0]["start_time"] == "2019-01-21T09:00:43Z"'
	run "$bin" 0 "$imds/autoscaling-target-lifecycle-state.txt" --json --instance-id $IID --now $NOW &&
		check_json 1 'v[0]["kind"] == "asg-lifecycle-terminate" and v[0]["deadline"] == "2024-05-14T11:21:55Z"'
	printf 'InService' >"$tmp/inservice"
	run "$bin" 0 "$tmp/inservice" --json --imds autoscaling/target-lifecycle-state && check_json 0 'True' && check_err "no notice"
	run "$bin" 65 "$imds/error-404-not-found.html" && check_err "not JSON at byte 0"
	run "$bin" 65 "$imds/iam-security-credentials-role.json" && check_err "unrecognized JSON object"

	# malformed and oversized input
	printf '{"detail-type": oops}' >"$tmp/bad"
	run "$bin" 65 "$tmp/bad" && check_err "not JSON at byte 16"
	printf '{"id":"x","detail-type":"EC2 Rebalance","source":"aws.ec2","time":"2024-05-14T10:15:00Z","detail":{}}' >"$tmp/unknown"
	run "$bin" 65 "$tmp/unknown" && check_err "unknown detail-type 'EC2 Rebalance' from source 'aws.ec2'"
	printf '{"id":"x","detail-type":"EC2 Instance Rebalance Recommendation","source":"aws.ec2","time":"2024-05-14T10:15:00Z","detail":{}}' >"$tmp/noid"
	run "$bin" 65 "$tmp/noid" && check_err "EventBridge event without detail.instance-id"
	/usr/bin/python3 -c 'import sys; sys.stdout.write("{\"a\":\"" + "x" * 300000 + "\"}")' >"$tmp/huge"
	run "$bin" 65 "$tmp/huge" && check_err "larger than the 262144-byte limit"
	run "$bin" 65 - <"$tmp/huge" && check_err "larger than the 262144-byte limit"
	/usr/bin/python3 -c 'import sys; sys.stdout.write("[" * 100000 + "]" * 100000)' >"$tmp/deep"
	run "$bin" 65 "$tmp/deep" && check_err "nested deeper than 32 levels"
	run "$bin" 1 "$tmp/does-not-exist" && check_err "No such file"
	run "$bin" 2 "$eb/spot-interruption-warning.json" --bogus
	run "$bin" 2 "$eb/spot-interruption-warning.json" --instance-id i-xyz
	run "$bin" 2 a b
	"$bin" event --help >/dev/null || fail "event --help"
done

if [ "$failures" -ne 0 ]; then
	echo "$failures failure(s)"
	exit 1
fi
echo "event parse: all checks passed"
