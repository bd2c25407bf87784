#!/usr/bin/env bash
# /metrics, /healthz and /readyz of `spotdrain agent` against the simulator: the exposition is well formed
# (HELP and TYPE for every family, label syntax, cumulative histogram buckets), every family of the
# operations contract is there, and the spot interruption is counted; then the drain's metrics move while
# the drain runs: evictions and API requests (the Kubernetes client's counters) during it, the drain's result
# and duration (the metrics alert sink) at its end; and SIGTERM stops the agent with exit 0. (The drain's
# part was metrics_drain.sh, which started the same simulator and agent of metrics_lib.sh a second time.)
# shellcheck source=tests/integration/metrics_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/metrics_lib.sh"

log "ready, healthy, and the exposition is well formed"
wait_for 15 ready || { cat "$TEST_TMP/agent.log" >&2; fail "agent not ready"; }
curl -sSf "$URL/healthz" | grep -qx ok || fail "healthz"
type=$(curl -sSf -o /dev/null -w '%{content_type}' "$URL/metrics")
[ "$type" = "text/plain; version=0.0.4; charset=utf-8" ] || fail "content type $type"
scrape >"$TEST_TMP/first.txt"
/usr/bin/python3 - "$TEST_TMP/first.txt" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
assert text.endswith("\n")
helped, typed, buckets = set(), {}, {}
sample = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*"(,[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*")*)?\})? (\S+)$')
for line in text.splitlines():
    if line.startswith("# HELP "):
        helped.add(line.split()[2])
    elif line.startswith("# TYPE "):
        _, _, name, t = line.split()
        assert t in ("counter", "gauge", "histogram"), line
        assert name not in typed, f"two TYPE lines for {name}"
        typed[name] = t
    else:
        m = sample.match(line)
        assert m, f"malformed sample: {line!r}"
        name, value = m.group(1), float(m.group(7))
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in typed or base in typed, f"sample before its TYPE: {line}"
        if name.endswith("_bucket"):
            key = (base, re.sub(r',?le="[^"]*"', "", m.group(3) or ""))
            prev = buckets.get(key, -1)
            assert value >= prev, f"buckets not cumulative: {line}"
            buckets[key] = value
assert helped == set(typed), helped ^ set(typed)
for name in ["spotdrain_notices_received_total", "spotdrain_drains_total", "spotdrain_drain_duration_seconds",
             "spotdrain_drain_predicted_seconds", "spotdrain_drain_budget_seconds", "spotdrain_evictions_total",
             "spotdrain_pods_forced_total", "spotdrain_deadlines_missed_total",
             "spotdrain_queue_receive_errors_total", "spotdrain_messages_total", "spotdrain_api_requests_total",
             "spotdrain_replacements_total", "spotdrain_leader", "spotdrain_build_info"]:
    assert name in typed, f"missing family {name}"
assert typed["spotdrain_drain_duration_seconds"] == "histogram"
assert re.search(r'^spotdrain_build_info\{version="[^"]+"\} 1$', text, re.M), "build_info"
print(f"{len(typed)} families")
EOF

log "the interruption is counted"
wait_for 20 positive value spotdrain_notices_received_total 'kind="spot-interruption"' ||
	{ cat "$TEST_TMP/agent.log" >&2; fail "notice not counted: $(scrape | grep notices_received)"; }

log "evictions counted during the drain"
wait_for 20 positive value spotdrain_evictions_total ||
	{ cat "$TEST_TMP/agent.log" >&2; fail "no eviction counted: $(scrape | grep evictions_total)"; }
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

log "SIGTERM → exit 0"
rc=0
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" || rc=$?
[ "$rc" -eq 0 ] || fail "agent exited $rc after SIGTERM"
echo "ok"
