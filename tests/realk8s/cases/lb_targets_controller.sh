#!/usr/bin/env bash
# Load balancer targets on the real control plane (issue 35), moto's ELBv2 playing AWS: the TargetGroupBinding
# CRD created by the run from the tier's own manifest (tests/realk8s/crds), a binding of the web Service to a
# target group moto holds with spot-a's instance registered, the controller reading it with the chart's token.
# - 30 s delay: no lb-deregistration-too-slow; spotdrain deregisters spot-a's instance (drain.deregister_targets:
#   no AWS Load Balancer Controller runs here) and evicts the web pods only after DescribeTargetHealth said the
#   instance was out of healthy; the drain finishes in time, nothing killed or forced, no 403.
# - 300 s delay (ELBv2's default): lb-deregistration-too-slow at the notice, before the web pods go, naming
#   moto's target group and a delay that fits.
# What moto does (5.x, elbv2/models.py): DeregisterTargets removes the target at once; asked about by id it is
# `unused` (Target.NotRegistered) from then on, never `draining`; the deregistration delay is stored and
# answered by DescribeTargetGroupAttributes, and nothing waits for it. So the real tier checks the order
# (evictions after the answer that the instance is out) and the delay's judgement, not the draining period,
# which the simulator's ELBv2 plays (tests/integration/aws_cli_elbv2.sh, lb_targets_sim.sh).
# shellcheck source=tests/realk8s/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
command -v aws >/dev/null || skip "no aws CLI"

log "30 s deregistration delay"
play "$RK_HERE/scenarios/lb-targets.yaml" controller
[ "$PLAY_RC" -eq 0 ] || fail "run exited $PLAY_RC: $(res -c .nodes)"
CLOG=$CASE_TMP/run/controller.log
# What the controller said about target groups, for a failure's message.
tg_log() { grep -i 'target\|elasticloadbalancing\|deregist' "$CLOG" | tail -n 8 || true; }
a=$(res -c '.nodes[] | select(.name == "spot-a")')
jq -e '.pods_killed == 0 and .pods_forced == 0 and .drained_at != null and .drained_at <= .deadline_at' \
	<<<"$a" >/dev/null || fail "spot-a: $a"
[ -z "$(res '.alerts[] | select(.kind == "lb-deregistration-too-slow") | .kind')" ] ||
	fail "lb-deregistration-too-slow with a 30 s delay: $(res -c '.alerts')"
grep -q 'deregistered i-[0-9a-f]* from target group arn:aws:elasticloadbalancing:us-east-1:[0-9]*:targetgroup/k8s-shop-web/' \
	"$CLOG" || fail "no deregistration in the controller's log: $(tg_log)"
out_line=$({ grep -n 'is unused in target group arn:aws:elasticloadbalancing:.*the pods behind it may go' "$CLOG" ||
	true; } | head -1 | cut -d: -f1)
[ -n "$out_line" ] || fail "the controller never saw the instance out of healthy: $(tg_log)"
web_line=$({ grep -n '"msg":"pod shop/web-[^"]* evicted' "$CLOG" || true; } | head -1 | cut -d: -f1)
batch_line=$({ grep -n '"msg":"pod jobs/batch-[^"]* evicted' "$CLOG" || true; } | head -1 | cut -d: -f1)
[ -n "$web_line" ] && [ -n "$batch_line" ] || fail "evictions missing from the controller's log"
[ "$web_line" -gt "$out_line" ] || fail "a web pod was evicted (line $web_line) before its target was out (line $out_line)"
[ "$(res '[.alerts[] | select(.kind == "pod-evicted" and (.message | test("pod shop/web-")))] | length')" -eq 2 ] ||
	fail "want 2 web evictions: $(res -c '[.alerts[] | select(.kind == "pod-evicted") | .message]')"
grep -q ' 403\b\|HTTP 403\|forbidden' "$CLOG" && fail "403s in the controller's log: $(grep -m3 -i 'forbidden\|403' "$CLOG")"
log "spot-a drained at $(jq -r .drained_at <<<"$a") s (deadline $(jq -r .deadline_at <<<"$a")); web evicted after line $out_line"

log "300 s deregistration delay"
sed 's/deregistration_delay_seconds: 30}/deregistration_delay_seconds: 300}/' "$RK_HERE/scenarios/lb-targets.yaml" \
	>"$CASE_TMP/lb-300.yaml"
grep -q 'deregistration_delay_seconds: 300}' "$CASE_TMP/lb-300.yaml" || fail "the scenario changed: no 30 s delay"
# The first play's logs apart: the second one's result reads the controller's log of its own run only.
mv "$CASE_TMP/run" "$CASE_TMP/run-30"
play "$CASE_TMP/lb-300.yaml" controller
[ "$PLAY_RC" -eq 0 ] || [ "$PLAY_RC" -eq 3 ] || fail "run exited $PLAY_RC"
res -e '([.alerts[] | select(.kind == "pod-evicted" and (.message | test("pod shop/web-"))) | .at] | min) as $act |
	[.alerts[] | select(.kind == "lb-deregistration-too-slow" and .node == "spot-a" and .at <= $act and
	  (.message | test("target group arn:aws:elasticloadbalancing:us-east-1:[0-9]+:targetgroup/k8s-shop-web/[0-9a-f]+ \\(TargetGroupBinding shop/web\\) drains its targets for 300 s.*timeout_seconds of 1[01][0-9] or less would fit")))]
	| length == 1' >/dev/null || fail "alerts: $(res -c '[.alerts[] | [.kind, .at, .message]]')"
echo ok
