#!/usr/bin/env bash
# Load balancer targets through `spotdrain simulate --json` on examples/lb-deregistration.yaml (issue 35): a
# web Service behind an instance target group whose controller deregisters the node's instance 10 s after
# the exclude label. With a 30 s deregistration delay the web pods are evicted only once the instance is out
# of healthy (10 s after the label; the worker pods, behind no load balancer, go at once), no
# lb-deregistration-too-slow, and the drain finishes in time. With 300 s (ELBv2's default) the alert comes
# before the first eviction of a pod behind that target group, naming it and the delay that fits (what the
# node has left at the notice). With drain.deregister_targets spotdrain deregisters the instance itself: the
# web pods go without waiting for the controller. The three simulations run side by side. Then `audit` on
# the scenario served: the 300 s target group of the spot node is a finding with the delay that fits, the
# 30 s one is not; `plan` shows the wait of each pod behind it.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq

EX=$ROOT/examples/lb-deregistration.yaml
sed 's/deregistration_delay_seconds: 30,/deregistration_delay_seconds: 300,/' "$EX" >"$TEST_TMP/slow.yaml"
grep -q 'deregistration_delay_seconds: 300,' "$TEST_TMP/slow.yaml" || fail "the example changed: no 30 s delay"
printf 'drain:\n  deregister_targets: true\n' >"$TEST_TMP/dereg.conf"

pids=()
run() { # NAME SCENARIO [flags...]
	local name=$1 scenario=$2
	shift 2
	"$SPOTDRAIN" simulate --json --delivery direct --time-scale "${TIME_SCALE:-5}" "$@" "$scenario" \
		>"$TEST_TMP/$name.json" 2>"$TEST_TMP/$name.err" &
	pids+=("$name:$!")
}
run fits "$EX"
run slow "$TEST_TMP/slow.yaml"
run dereg "$EX" --config "$TEST_TMP/dereg.conf" --log-level info
for p in "${pids[@]}"; do
	rc=0
	wait "${p#*:}" || rc=$?
	[ "$rc" -eq 0 ] || { cat "$TEST_TMP/${p%%:*}.err"; fail "${p%%:*}: exit $rc, expected 0"; }
done
EVICTED='def evicted($re): [.alerts[] | select(.kind == "pod-evicted" and (.message | test($re))) | .at];'
CORDON='.nodes[0].cordoned_at as $t |'

log "30 s: the web pods wait for their target to be out of healthy, the drain finishes in time"
jq -e "$EVICTED $CORDON"' (evicted("^pod shop/web-") | length == 2 and min >= $t + 10) and
	(evicted("^pod batch/worker-") | length == 2 and max < $t + 5) and
	([.alerts[] | select(.kind == "lb-deregistration-too-slow")] | length == 0) and
	(.nodes[0] | .pods_killed == 0 and .pods_forced == 0 and .drained_at <= .deadline_at)' \
	"$TEST_TMP/fits.json" >/dev/null || fail "unexpected: $(jq -c '.nodes, [.alerts[] | [.kind, .at, .message[0:60]]]' "$TEST_TMP/fits.json")"

log "300 s: lb-deregistration-too-slow at the notice, naming the target group and a delay that fits"
jq -e "$EVICTED"' (evicted("^pod shop/web-") | min) as $act |
	[.alerts[] | select(.kind == "lb-deregistration-too-slow" and .node == "spot-a" and .at <= $act and
	  (.message | test("target group arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/k8s-shop-web/[0-9a-f]{16} \\(TargetGroupBinding shop/web\\) drains its targets for 300 s, longer than the 11[0-5] s spot-a has left.*deregistration_delay.timeout_seconds of 11[0-5] or less would fit")))]
	| length == 1' "$TEST_TMP/slow.json" >/dev/null ||
	fail "alerts: $(jq -c '[.alerts[] | [.kind, .at, .message]]' "$TEST_TMP/slow.json")"

log "drain.deregister_targets: the instance deregistered at the notice, the web pods go without the controller"
jq -e "$EVICTED $CORDON"' (evicted("^pod shop/web-") | length == 2 and max < $t + 5) and
	(.nodes[0] | .pods_killed == 0 and .drained_at <= .deadline_at)' "$TEST_TMP/dereg.json" >/dev/null ||
	fail "unexpected: $(jq -c '.nodes, [.alerts[] | [.kind, .at, .message[0:60]]]' "$TEST_TMP/dereg.json")"
grep -q "deregistered i-0a00000000000000a from target group arn:aws:elasticloadbalancing" "$TEST_TMP/dereg.err" ||
	fail "no deregistration logged: $(tail -5 "$TEST_TMP/dereg.err")"

# audit_tg SCENARIO: `spotdrain audit --json` against the scenario served, ELBv2 reached as the SDKs would
# (the endpoint and the key from the environment); its exit status in AUDIT_RC.
audit_tg() {
	start_sim "audit-$(basename "$1" .yaml)" "$1"
	local url
	AUDIT_RC=0
	url=$(sim_endpoint elbv2)
	env -u AWS_PROFILE -u AWS_SESSION_TOKEN -u AWS_ENDPOINT_URL AWS_CONFIG_FILE=/dev/null \
		AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_ACCESS_KEY_ID="$SIM_AWS_KEY_ID" \
		AWS_SECRET_ACCESS_KEY="$SIM_AWS_SECRET" AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2="$url" \
		"$SPOTDRAIN" audit --kubeconfig "$SIM_KUBECONFIG" --json >"$TEST_TMP/audit.json" || AUDIT_RC=$?
}

log "audit: the 300 s target group of the spot node is listed with the delay that fits; exit 4"
audit_tg "$TEST_TMP/slow.yaml"
[ "$AUDIT_RC" -eq 4 ] || fail "audit exit $AUDIT_RC, expected 4: $(cat "$TEST_TMP/audit.json")"
jq -e '.findings == 1 and (.target_groups | length == 1) and (.target_groups[0] |
	(.target_group | test("^arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/k8s-shop-web/")) and
	.namespace == "shop" and .binding == "web" and .node == "spot-a" and .delay_seconds == 300 and .too_slow and
	.fit_delay_seconds == 115)' "$TEST_TMP/audit.json" >/dev/null || fail "audit: $(cat "$TEST_TMP/audit.json")"

log "audit: with 30 s it is listed and fits; exit 0"
audit_tg "$EX"
[ "$AUDIT_RC" -eq 0 ] || fail "audit exit $AUDIT_RC, expected 0: $(cat "$TEST_TMP/audit.json")"
jq -e '.findings == 0 and (.target_groups | length == 1) and .target_groups[0].delay_seconds == 30 and
	(.target_groups[0].too_slow | not)' "$TEST_TMP/audit.json" >/dev/null || fail "audit: $(cat "$TEST_TMP/audit.json")"

log "plan: the web pods (behind the instance target group) wait for it, the worker pods do not"
"$SPOTDRAIN" plan spot-a --kubeconfig "$SIM_KUBECONFIG" --json >"$TEST_TMP/plan.json" || fail "plan failed"
jq -e '[.pods[] | select(.name | startswith("web-")) | .lb_wait_until] as $w |
	[.pods[] | select(.name | startswith("worker-")) | .lb_wait_until] as $n |
	($w | length == 2 and all(. != null and . > 0)) and ($n | length == 2 and all(. == null)) and
	([.pods[] | select(.name | startswith("web-")) | .evict >= .lb_wait_until] | all)' "$TEST_TMP/plan.json" \
	>/dev/null || fail "plan: $(jq -c '[.pods[] | [.name, .evict, .lb_wait_until]]' "$TEST_TMP/plan.json")"
log "ok"
