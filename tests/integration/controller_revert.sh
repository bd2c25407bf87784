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
METRICS_PORT=$(free_port)
soft_taints() {
	curl -sSf "$SIM_URL/api/v1/nodes/spot-a" |
		jq '[.spec.taints[]? | select(.key == "spotdrain.io/rebalance" and .effect == "PreferNoSchedule")] | length'
}
untainted() { [ "$(soft_taints)" = 0 ]; }
# A watch of the node, started before the controller, sees every change, where polling the node could miss a
# taint that lives only a moment.
was_tainted() {
	jq -R 'fromjson? | [.object.spec.taints[]? | select(.key == "spotdrain.io/rebalance" and
		.effect == "PreferNoSchedule")] | length' "$TEST_TMP/node-watch" | grep -q '^1$'
}
cordoned() { sim_result "$SIM_URL" | jq -e '.nodes[] | select(.name == "spot-a") | .cordoned_at != null' >/dev/null; }

# 6 s: well before the interruption (12 s), and long enough that a controller started on a loaded machine still
# sees the recommendation within it. One seen after it (its time has whole seconds) is reverted without the
# taint (test_dispatch: tainting and removing at once left the taint for good); that path is told apart by
# the log, and the node must end untainted either way.
log "controller: the rebalance soft taint, removed 6 s after the recommendation with nothing after it"
printf 'agent:\n  rebalance_revert_seconds: 6\n' >"$TEST_TMP/revert.yaml"
curl -sSN "$SIM_URL/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dspot-a" >"$TEST_TMP/node-watch" &
WATCH_PID=$!
wait_for 10 test -s "$TEST_TMP/node-watch" || fail "the node watch did not start"
start_controller "$QUEUE_URL" "$METRICS_PORT" --config "$TEST_TMP/revert.yaml"
reverted() { grep -q 'no interruption followed the rebalance recommendation of spot-a' "$TEST_TMP/controller.log"; }
wait_for 15 reverted || { cat "$TEST_TMP/controller.log" >&2; fail "the revert is not logged"; }
if grep -q 'rebalance recommendation for spot-a: tainting it' "$TEST_TMP/controller.log"; then
	wait_for 10 was_tainted || { cat "$TEST_TMP/controller.log" >&2; fail "no soft taint"; }
else
	log "the controller saw the recommendation after its revert time: no taint added"
	! was_tainted || fail "tainted although the recommendation came after its revert time"
fi
wait_for 10 untainted || { cat "$TEST_TMP/controller.log" >&2; fail "soft taint not reverted"; }
kill "$WATCH_PID" 2>/dev/null || true
wait "$WATCH_PID" 2>/dev/null || true
log "the interruption after it starts the drain (the scenario's time runs 5 times faster than the drain's)"
wait_for 30 cordoned || { cat "$TEST_TMP/controller.log" >&2; sim_result "$SIM_URL" >&2; fail "not cordoned"; }

stop_controller
stop_sim "$SIM_PID"
echo "ok"
