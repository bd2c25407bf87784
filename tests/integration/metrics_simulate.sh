#!/usr/bin/env bash
# `spotdrain simulate --metrics-listen` serves /metrics while the scenario runs, and the drain's metrics move:
# evictions counted, API requests growing between two scrapes, the budget gauge of the node being drained.
# (simulate ends as soon as nothing more can change, so the end-of-drain counters are left to
# metrics_agent.sh, where the agent keeps serving.)
source "$(dirname "$0")/lib.sh"

PORT=$(free_port)
URL="http://127.0.0.1:$PORT/metrics"
"$SPOTDRAIN" simulate "$ROOT/examples/pdb-tuned.yaml" --time-scale 4 --metrics-listen "127.0.0.1:$PORT" \
	--log-level warning >"$TEST_TMP/simulate.log" 2>&1 &
SIM=$!
SIM_PIDS+=("$SIM")

value() { # NAME [LABELS]: the sum of a metric's samples (0 when absent)
	curl -sf "$URL" | awk -v n="$1" -v l="${2:-}" '$1 ~ "^"n"({|$)" && index($1, l) { s += $2 } END { print s + 0 }'
}
positive() { awk -v v="$("$@")" 'BEGIN { exit !(v > 0) }'; }

wait_for 20 positive value spotdrain_evictions_total || { cat "$TEST_TMP/simulate.log" >&2; fail "no eviction counted"; }
first=$(value spotdrain_api_requests_total)
more() { awk -v a="$(value spotdrain_api_requests_total)" -v b="$first" 'BEGIN { exit !(a > b) }'; }
wait_for 20 more || fail "API requests did not move past $first during the drain"
positive value spotdrain_drain_budget_seconds || fail "no budget gauge for the node being drained"
wait "$SIM" || fail "simulate exited $?"
echo ok
