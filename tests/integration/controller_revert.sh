#!/usr/bin/env bash
# Issue #17, item 4 (first half): in controller mode too, a rebalance recommendation's soft taint is removed
# when no interruption followed within agent.rebalance_revert_seconds (the one dispatcher reverts in both
# modes), and the interruption that comes after still starts the node's drain.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq curl

# A rebalance recommendation of spot-a at 0 s, its interruption at 60 s (12 s here).
start_sim controller "$ROOT/examples/rebalance-early-noprov.yaml" --time-scale 5
QUEUE_URL=$(jq -r '.queue_url // empty' "$TEST_TMP/controller/endpoints.json")
[ -n "$QUEUE_URL" ] || skip "sim serve offers no SQS queue"
METRICS_PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
soft_taints() {
	curl -sSf "$SIM_URL/api/v1/nodes/spot-a" |
		jq '[.spec.taints[]? | select(.key == "spotdrain.io/rebalance" and .effect == "PreferNoSchedule")] | length'
}
untainted() { [ "$(soft_taints)" = 0 ]; }
# The taint may live only a moment (under load the controller can see the recommendation when its 2 s are
# already over): a watch of the node, started before the controller, sees every change, where polling the
# node could miss it.
was_tainted() {
	jq -R 'fromjson? | [.object.spec.taints[]? | select(.key == "spotdrain.io/rebalance" and
		.effect == "PreferNoSchedule")] | length' "$TEST_TMP/node-watch" | grep -q '^1$'
}
cordoned() { sim_result "$SIM_URL" | jq -e '.nodes[] | select(.name == "spot-a") | .cordoned_at != null' >/dev/null; }

log "controller: the rebalance soft taint, removed 2 s after the recommendation with nothing after it"
printf 'agent:\n  rebalance_revert_seconds: 2\n' >"$TEST_TMP/revert.yaml"
curl -sSN "$SIM_URL/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dspot-a" >"$TEST_TMP/node-watch" &
WATCH_PID=$!
wait_for 10 test -s "$TEST_TMP/node-watch" || fail "the node watch did not start"
start_controller "$QUEUE_URL" "$METRICS_PORT" --config "$TEST_TMP/revert.yaml"
wait_for 15 was_tainted || { cat "$TEST_TMP/controller.log" >&2; fail "no soft taint"; }
wait_for 10 untainted || { cat "$TEST_TMP/controller.log" >&2; fail "soft taint not reverted"; }
kill "$WATCH_PID" 2>/dev/null || true
wait "$WATCH_PID" 2>/dev/null || true
grep -q 'no interruption followed the rebalance recommendation of spot-a' "$TEST_TMP/controller.log" ||
	fail "the revert is not logged"
log "the interruption after it starts the drain (the scenario's time runs 5 times faster than the drain's)"
wait_for 30 cordoned || { cat "$TEST_TMP/controller.log" >&2; sim_result "$SIM_URL" >&2; fail "not cordoned"; }

stop_controller
stop_sim "$SIM_PID"
echo "ok"
