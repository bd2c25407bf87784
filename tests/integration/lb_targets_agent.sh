#!/usr/bin/env bash
# The agent binary with target groups (issue 35): `spotdrain-agent` on spot-a of examples/lb-deregistration.yaml
# served by `sim serve`, ELBv2 reached through AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2 and signed with the
# instance role's credentials from the node's IMDS. The worker pods go at the notice; the web pods, behind the
# instance target group whose controller deregisters the instance 10 s after the exclude label, only once
# DescribeTargetHealth says the instance is out of healthy, and the drain completes.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tools
[ -x "$SPOTDRAIN_AGENT" ] || skip "$SPOTDRAIN_AGENT not built"

start_sim lb-agent "$ROOT/examples/lb-deregistration.yaml"
IMDS=$(jq -r '.imds_by_node["spot-a"]' "$SIM_ENDPOINTS")
ELB=$(sim_endpoint elbv2)
env -u AWS_ENDPOINT_URL -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN -u AWS_PROFILE \
	AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2="$ELB" POD_NAMESPACE=kube-system POD_NAME=spotdrain-agent-test \
	NODE_NAME= "$SPOTDRAIN_AGENT" agent --kubeconfig "$SIM_KUBECONFIG" --imds-endpoint "$IMDS" --log-format json \
	>"$TEST_TMP/agent.log" 2>&1 &
AGENT=$!
SIM_PIDS+=("$AGENT")
drained() { grep -q '"alert":"drain-completed"' "$TEST_TMP/agent.log"; }
wait_for 60 drained || { tail -20 "$TEST_TMP/agent.log" >&2; fail "the drain did not complete"; }
kill "$AGENT" 2>/dev/null || true

# Times of the log's lines (seconds of the day) and their order.
at() { { grep "$1" "$TEST_TMP/agent.log" || true; } | head -1 | jq -r '.time[11:23] | split(":") | (.[0] | tonumber) * 3600 + (.[1] | tonumber) * 60 + (.[2] | tonumber)'; }
notice=$(at '"alert":"notice-received"')
out=$(at 'in target group arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/k8s-shop-web/.*the pods behind it may go')
web=$(at '"msg":"pod shop/web-[^"]* evicted from node spot-a')
worker=$(at '"msg":"pod batch/worker-[^"]* evicted from node spot-a')
[ -n "$notice" ] && [ -n "$out" ] && [ -n "$web" ] && [ -n "$worker" ] ||
	fail "missing lines: notice=$notice out=$out web=$web worker=$worker: $(grep -i 'target\|evicted' "$TEST_TMP/agent.log" | tail -5)"
awk -v n="$notice" -v o="$out" -v w="$web" -v k="$worker" 'BEGIN { exit !(k - n < 5 && o - n >= 10 && w >= o) }' ||
	fail "order: notice $notice, worker evicted $worker, target out $out, web evicted $web"
grep -q '"alert":"lb-deregistration-too-slow"' "$TEST_TMP/agent.log" && fail "a 30 s delay judged too slow"
log "worker evicted $(awk -v a="$worker" -v b="$notice" 'BEGIN{printf "%.1f", a-b}') s after the notice, the target out after $(awk -v a="$out" -v b="$notice" 'BEGIN{printf "%.1f", a-b}') s, web after $(awk -v a="$web" -v b="$notice" 'BEGIN{printf "%.1f", a-b}') s"
