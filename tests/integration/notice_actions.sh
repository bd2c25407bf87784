#!/usr/bin/env bash
# notices.KIND.action (issue #17): the per-kind switches through the simulator. With IMDS and the agent
# (`simulate`), an interruption ignored leaves the node alone (heard: notice-received) and one cordoned makes it
# unschedulable without evicting a pod; with the real controller against `sim serve`'s SQS queue, a rebalance
# recommendation ignored gets no soft taint and its message is deleted as handled and counted, the interruption
# after it, cordoned, cordons without the drain's taint and its message is deleted too.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq curl

config() {
	printf 'imds:\n  poll_interval_seconds: 500ms\n' >"$TEST_TMP/$1.yaml"
	[ "$1" = default ] || printf 'notices:\n  spot_interruption:\n    action: %s\n' "$1" >>"$TEST_TMP/$1.yaml"
}
simulate() {
	local rc=0
	config "$1"
	"$SPOTDRAIN" simulate "$ROOT/examples/bench-8.yaml" --time-scale 20 --json --config "$TEST_TMP/$1.yaml" \
		>"$TEST_TMP/$1.json" 2>"$TEST_TMP/$1.err" || rc=$?
	[ "$rc" -eq "$2" ] || { cat "$TEST_TMP/$1.json" "$TEST_TMP/$1.err" >&2; fail "$1: exit $rc, expected $2"; }
	jq -c '.nodes[0] | {cordoned_at, drained_at, pods_graceful, pods_killed}' "$TEST_TMP/$1.json"
}

log "agent (IMDS): the default drains in time"
simulate default 0
jq -e '.nodes[0] | .cordoned_at != null and .drained_at != null and .pods_killed == 0' "$TEST_TMP/default.json" \
	>/dev/null || fail "not drained by default: $(cat "$TEST_TMP/default.json")"

log "agent (IMDS): ignore: heard, the node left alone (its pods die with it)"
simulate ignore 3
jq -e '.nodes[0] | .cordoned_at == null and .drained_at == null and .pods_graceful == 0 and .pods_killed >= 8' \
	"$TEST_TMP/ignore.json" >/dev/null || fail "ignored notice acted on: $(cat "$TEST_TMP/ignore.json")"
jq -e '[.alerts[] | select(.kind == "notice-received" and .node == "spot-a")] | length == 1' "$TEST_TMP/ignore.json" \
	>/dev/null || fail "ignored notice not heard: $(jq -c .alerts "$TEST_TMP/ignore.json")"

# How soon is bench/agent's to measure; here, that the cordon came and nothing was evicted.
log "agent (IMDS): cordon: unschedulable before the deadline, no pod evicted"
simulate cordon 3
jq -e '.nodes[0] | .cordoned_at != null and .cordoned_at < .deadline_at and .drained_at == null and
	.pods_graceful == 0' "$TEST_TMP/cordon.json" >/dev/null || fail "cordon: $(cat "$TEST_TMP/cordon.json")"

printf 'notices:\n  rebalance_recommendation: {action: ignore}\n  spot_interruption: {action: cordon}\n' \
	>"$TEST_TMP/controller.yaml"
# A rebalance recommendation of spot-a at 0 s, its interruption at 60 s (6 s here).
start_sim controller "$ROOT/examples/rebalance-early-noprov.yaml" --time-scale 10
QUEUE_URL=$(jq -r '.queue_url // empty' "$TEST_TMP/controller/endpoints.json")
[ -n "$QUEUE_URL" ] || skip "sim serve offers no SQS queue"
METRICS_PORT=$(free_port)
metrics() { curl -sSf "127.0.0.1:$METRICS_PORT/metrics"; }
both_deleted() { metrics | grep -q '^spotdrain_sqs_messages_deleted_total 2'; }
node() { curl -sSf "$SIM_URL/api/v1/nodes/$1"; }

log "controller (SQS): a rebalance ignored, an interruption cordoned; both messages handled"
start_controller "$QUEUE_URL" "$METRICS_PORT" --config "$TEST_TMP/controller.yaml"
wait_for 30 both_deleted || { cat "$TEST_TMP/controller.log" >&2; metrics >&2; fail "messages not deleted"; }
M=$(metrics)
grep -q '^spotdrain_notices_ignored_total 1$' <<<"$M" || fail "ignored notice not counted: $(grep ignored <<<"$M")"
grep -q '^spotdrain_notices_received_total{kind="rebalance-recommendation".*} 1$' <<<"$M" ||
	fail "ignored notice not among those received: $(grep notices_received <<<"$M")"
only_cordoned() {
	node spot-a | jq -e '.spec.unschedulable == true and [.spec.taints[]? | select(.key | startswith("spotdrain.io/"))] == []' \
		>/dev/null
}
wait_for 10 only_cordoned || fail "spot-a not only cordoned: $(node spot-a | jq -c .spec)"
node spot-b | jq -e '(.spec.unschedulable // false) == false' >/dev/null || fail "spot-b cordoned"
sim_result "$SIM_URL" | jq -e '[.nodes[] | .pods_graceful + .pods_forced] | add // 0 | . == 0' >/dev/null ||
	fail "pods left spot-a: $(sim_result "$SIM_URL" | jq -c .nodes)"
grep -q '^spotdrain_drains_started_total 0$' <<<"$M" || fail "a drain ran: $(grep drains_started <<<"$M")"

stop_controller
stop_sim "$SIM_PID"
echo "ok"
