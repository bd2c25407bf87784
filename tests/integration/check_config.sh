#!/usr/bin/env bash
# spotdrain check-config: the shipped example loads; an unknown key and a bad value are refused with file and
# line; environment and --set apply in order; a secret never appears in the output.
source "$(dirname "$0")/lib.sh"

out=$("$SPOTDRAIN" check-config --config "$ROOT/systemd/spotdrain.yaml") || fail "the example config is refused"
grep -q '^drain:' <<<"$out" || fail "no drain section in the dump"

printf 'log:\n  level: debug\ndrain:\n  bogus: 1\n' >"$TEST_TMP/unknown.yaml"
if err=$("$SPOTDRAIN" check-config --config "$TEST_TMP/unknown.yaml" 2>&1); then
	fail "an unknown key was accepted"
fi
grep -q "unknown.yaml:4: unknown key 'drain.bogus'" <<<"$err" || fail "unknown key error lacks file:line: $err"

printf 'drain:\n  safety_margin_seconds: soon\n' >"$TEST_TMP/badvalue.yaml"
if err=$("$SPOTDRAIN" check-config --config "$TEST_TMP/badvalue.yaml" 2>&1); then
	fail "a bad duration was accepted"
fi
grep -q "badvalue.yaml:2: drain.safety_margin_seconds" <<<"$err" || fail "bad value error lacks file:line: $err"

# Every error of a file, not only the first, each on its own line with file:line.
printf 'drain:\n  safety_margin_seconds: soon\n  bogus: 1\nkube:\n  burst: many\n' >"$TEST_TMP/errors.yaml"
if err=$("$SPOTDRAIN" check-config --config "$TEST_TMP/errors.yaml" 2>&1); then
	fail "a file with three errors was accepted"
fi
[ "$(grep -c '^spotdrain check-config: .*errors.yaml:[0-9]*: ' <<<"$err")" -eq 3 ] ||
	fail "check-config does not tell all three errors, one a line: $err"
grep -q "errors.yaml:3: unknown key 'drain.bogus'" <<<"$err" || fail "the second error is missing: $err"
grep -q "errors.yaml:5: kube.burst" <<<"$err" || fail "the third error is missing: $err"

printf 'drain:\n  safety_margin_seconds: 7\n' >"$TEST_TMP/margin.yaml"
out=$(SPOTDRAIN_DRAIN_SAFETY_MARGIN_SECONDS=9 "$SPOTDRAIN" check-config --config "$TEST_TMP/margin.yaml")
grep -q 'safety_margin_seconds: 9' <<<"$out" || fail "the environment does not override the file"
out=$(SPOTDRAIN_DRAIN_SAFETY_MARGIN_SECONDS=9 "$SPOTDRAIN" check-config --config "$TEST_TMP/margin.yaml" \
	--set drain.safety_margin_seconds=11)
grep -q 'safety_margin_seconds: 11' <<<"$out" || fail "--set does not override the environment"

secret=https://hooks.example.com/services/T0000/B0000/very-secret-token
out=$(SPOTDRAIN_ALERTS_WEBHOOK_URL=$secret "$SPOTDRAIN" check-config 2>&1) || fail "webhook config refused"
grep -q 'webhook_url: "<hidden>"' <<<"$out" || fail "the webhook URL is not shown as hidden"
! grep -q very-secret-token <<<"$out" || fail "the webhook secret appears in check-config output"

# alerts.event_annotations: its form is checked here as at start, naming the bad item.
out=$("$SPOTDRAIN" check-config --set 'alerts.event_annotations=team=sre,example.com/runbook=spot') ||
	fail "good event annotations refused"
grep -q 'event_annotations: "team=sre,example.com/runbook=spot"' <<<"$out" || fail "annotations not shown: $out"
if out=$("$SPOTDRAIN" check-config --set 'alerts.event_annotations=team=sre,bad key=1' 2>&1); then
	fail "a bad annotation key was accepted"
fi
grep -q '"bad key=1" is not KEY=VALUE' <<<"$out" || fail "no clear error for a bad annotation: $out"
echo ok
