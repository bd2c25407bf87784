#!/usr/bin/env bash
# The drain's metrics move while the drain runs: evictions and API requests (the Kubernetes client's
# counters) during it, the drain's result and duration (the metrics alert sink) at its end.
# Skipped, saying which, while the agent serves none of them yet (they are wired by the front end and the
# Kubernetes client: metrics_alert_sink_add() on the agent's bus, METRIC_EVICTIONS / METRIC_API_REQUESTS in
# the client); once any of them is wired, all of them are required.
# shellcheck source=tests/integration/metrics_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/metrics_lib.sh"

wait_for 15 ready || { cat "$TEST_TMP/agent.log" >&2; fail "agent not ready"; }
wait_for 20 positive value spotdrain_notices_received_total 'kind="spot-interruption"' ||
	{ cat "$TEST_TMP/agent.log" >&2; fail "notice not counted"; }

log "evictions counted during the drain"
if ! wait_for 20 positive value spotdrain_evictions_total; then
	wait_for 60 drained || fail "the drain did not finish"
	wired=$(scrape | grep -c -E '^spotdrain_(drains_total|evictions_total|api_requests_total|drain_duration_seconds_count [1-9])' || true)
	[ "$wired" -eq 0 ] || fail "drain metrics partly wired: $(scrape | grep -E '^spotdrain_(drains|evictions|api_requests|drain_duration)')"
	skip "the agent does not count its drain yet (no evictions, API requests or drain results in /metrics)"
fi
first=$(value spotdrain_evictions_total)
[ "$(pods_on_a)" -gt 0 ] || fail "the drain finished before the second scrape; the test proves nothing"
more() { awk -v a="$(value spotdrain_evictions_total)" -v b="$first" 'BEGIN { exit !(a > b) }'; }
wait_for 30 more || fail "evictions did not move past $first"
positive value spotdrain_api_requests_total || fail "no API request counted"

log "the drain's result and duration at its end"
wait_for 60 drained || { cat "$TEST_TMP/agent.log" >&2; fail "the drain did not finish"; }
wait_for 10 positive value spotdrain_drains_total 'result="completed"' ||
	fail "drain not counted: $(scrape | grep drains_total)"
wait_for 10 positive value spotdrain_drain_duration_seconds_count || fail "drain duration not observed"
echo "ok"
