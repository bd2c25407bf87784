#!/usr/bin/env bash
# Agent benchmark (issues 4, 13): notice → cordon latency over 20 simulated interruptions (median, worst), the
# agent's peak RSS and Private_Dirty idle and while draining a node of 110 pods, and CPU seconds per idle hour, printed beside
# aws-node-termination-handler's published figures.
#
# Everything runs at time scale 1 against the simulator's Kubernetes and IMDS surfaces (`spotdrain sim serve`),
# each agent a separate `spotdrain-agent agent` process (the DaemonSet's binary) speaking HTTPS to the API
# server through bench/agent/tls_front.py (a CA and certificate made for the run), as in a cluster.
#
# usage: bench/agent/run.sh [--quick]     SPOTDRAIN=path/to/spotdrain (default build/spotdrain)
#   --quick: 60 s idle window instead of 300 s.
#   POLL=SECONDS: the agents' poll interval (default 0.5, the agent's default).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SPOTDRAIN=${SPOTDRAIN:-$ROOT/build/spotdrain}
case "$SPOTDRAIN" in /*) ;; *) SPOTDRAIN=$ROOT/$SPOTDRAIN ;; esac
# The agents run the DaemonSet's binary (spotdrain-agent, beside spotdrain); the simulator runs spotdrain.
SPOTDRAIN_AGENT=${SPOTDRAIN_AGENT:-$(dirname "$SPOTDRAIN")/spotdrain-agent}
IDLE_SECONDS=300
[ "${1:-}" = --quick ] && IDLE_SECONDS=60
N=20
POLL=${POLL:-0.5}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/spotdrain-bench-agent.XXXXXX")
PIDS=()

cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$TMP"
}
trap cleanup EXIT

die() {
	echo "bench/agent: $*" >&2
	exit 1
}

[ -x "$SPOTDRAIN" ] || die "$SPOTDRAIN not built (make)"
for t in jq curl awk; do command -v $t >/dev/null 2>&1 || die "$t not installed"; done

wait_for() { # SECONDS COMMAND...
	local end=$(($(date +%s) + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt "$end" ] || return 1
		sleep 0.2
	done
}

# start_sim NAME SCENARIO: sets K8S, EP (endpoints file), KC (kubeconfig)
start_sim() {
	local dir=$TMP/$1
	mkdir -p "$dir"
	"$SPOTDRAIN" sim serve "$2" --listen 127.0.0.1:0 --endpoints-out "$dir/endpoints.json" \
		--kubeconfig-out "$dir/kubeconfig" >"$dir/sim.log" 2>&1 &
	PIDS+=("$!")
	wait_for 15 test -s "$dir/endpoints.json" || die "simulator $1 did not start: $(cat "$dir/sim.log")"
	EP=$dir/endpoints.json
	K8S=$(jq -r .kubernetes "$EP")
	# The agents speak HTTPS to the API server, as in a cluster (tls_front.py relays to the simulator).
	/usr/bin/python3 "$ROOT/bench/agent/tls_front.py" "$dir/kubeconfig" "$dir/kubeconfig-tls" "$dir" \
		>"$dir/tls.log" 2>&1 &
	PIDS+=("$!")
	wait_for 15 test -s "$dir/kubeconfig-tls" || die "TLS front $1 did not start: $(cat "$dir/tls.log")"
	KC=$dir/kubeconfig-tls
}

# start_agent NODE LOG: sets AGENT_PID
start_agent() {
	NODE_NAME= "$SPOTDRAIN_AGENT" agent --kubeconfig "$KC" --imds-endpoint "$(jq -r --arg n "$1" '.imds_by_node[$n]' "$EP")" \
		--metrics-listen off --log-level warning --poll-interval "$POLL" >"$2" 2>&1 &
	AGENT_PID=$!
	PIDS+=("$AGENT_PID")
}

hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }
anon_kib() { awk '/^RssAnon:/ { print $2 }' "/proc/$1/status"; }
pss_kib() { awk '/^Pss:/ { print $2 }' "/proc/$1/smaps_rollup"; }
# Private_Dirty: the pages only this process has written (heap, stacks, relocated data of its libraries).
pd_kib() { awk '/^Private_Dirty:/ { print $2 }' "/proc/$1/smaps_rollup"; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

echo "spotdrain agent benchmark ($(date -u +%Y-%m-%dT%H:%M:%SZ), $("$SPOTDRAIN" version 2>/dev/null || echo unknown))"
echo

# ---- 1. notice → cordon latency over 20 interruptions ----
# 20 empty spot nodes, one agent each; the interruptions are staggered by 1.37 s so that they fall at every
# phase of the agents' poll. The wait for the next poll is uniform in [0, POLL): the worst case is one poll
# interval plus an IMDS round trip and the cordon PATCH.
{
	echo "name: bench-latency"
	echo "budget_seconds: 120"
	echo "nodes:"
	for i in $(seq 1 $N); do echo "  - {name: spot-$i, zone: us-east-1a, capacity_type: spot}"; done
	echo "events:"
	for i in $(seq 1 $N); do
		awk -v i="$i" 'BEGIN { printf "  - {at: %.2f, type: spot-interruption, node: spot-%d}\n", 5 + (i - 1) * 1.37, i }'
	done
} >"$TMP/latency.yaml"
start_sim latency "$TMP/latency.yaml"
for i in $(seq 1 $N); do start_agent "spot-$i" "$TMP/latency/agent-$i.log"; done
last=$(awk -v n=$N 'BEGIN { printf "%d", 5 + (n - 1) * 1.37 + 5 }')
all_cordoned() { # the result lists a node once it was interrupted
	curl -sSf "$K8S/sim/v1/result" | jq -e --argjson n "$N" '[.nodes[] | select(.cordoned_at != null)] | length == $n'
}
wait_for $((last + 30)) all_cordoned || echo "warning: not every node was cordoned" >&2
curl -sSf "$K8S/sim/v1/result" >"$TMP/latency-result.json"
jq -r '.nodes[] | select(.cordoned_at != null) | .cordoned_at - .notice_at' "$TMP/latency-result.json" |
	sort -g >"$TMP/latencies.txt"
count=$(wc -l <"$TMP/latencies.txt")
median=$(awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }' "$TMP/latencies.txt")
worst=$(tail -n1 "$TMP/latencies.txt")
for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
PIDS=()

# ---- 2. idle: peak RSS and CPU ----
cat >"$TMP/idle.yaml" <<'EOF'
name: bench-idle
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot}
EOF
start_sim idle "$TMP/idle.yaml"
start_agent spot-a "$TMP/idle/agent.log"
idle_pid=$AGENT_PID
sleep 3 # identity and first polls: not part of the idle window
cpu0=$(cpu_ticks "$idle_pid")
sleep "$IDLE_SECONDS"
cpu1=$(cpu_ticks "$idle_pid")
idle_hwm=$(hwm_kib "$idle_pid")
idle_rss=$(rss_kib "$idle_pid")
idle_anon=$(anon_kib "$idle_pid")
idle_pss=$(pss_kib "$idle_pid")
idle_pd=$(pd_kib "$idle_pid")
# What the binary costs before it does anything: the shared libraries every spotdrain process maps.
baseline=0
[ -x /usr/bin/time ] && baseline=$(/usr/bin/time -f %M "$SPOTDRAIN_AGENT" version 2>&1 >/dev/null | tail -n1)
hz=$(getconf CLK_TCK)
cpu_per_hour=$(awk -v d=$((cpu1 - cpu0)) -v hz="$hz" -v w="$IDLE_SECONDS" 'BEGIN { printf "%.2f", d / hz * 3600 / w }')
for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
PIDS=()

# ---- 3. draining a node of 110 pods ----
# 110 pods of 10 Deployments on spot-a (PDB maxUnavailable 1 each), room for them on two on-demand nodes.
{
	cat <<'EOF'
name: bench-drain-110
budget_seconds: 120
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot, instance_type: m5.8xlarge,
     allocatable: {cpu: "32", memory: 128Gi, pods: 120}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, instance_type: m5.8xlarge,
     allocatable: {cpu: "32", memory: 128Gi, pods: 120}}
  - {name: od-2, zone: us-east-1c, capacity_type: on-demand, instance_type: m5.8xlarge,
     allocatable: {cpu: "32", memory: 128Gi, pods: 120}}
workloads:
EOF
	for w in $(seq 1 10); do
		echo "  - {name: app-$w, namespace: bench, kind: Deployment, replicas: 11, placement: {spot-a: 11},"
		echo "     requests: {cpu: 100m, memory: 128Mi}, termination_grace_seconds: 30, shutdown_seconds: 2,"
		echo "     startup_seconds: 4, pdb: {max_unavailable: 1}}"
	done
	echo "events:"
	echo "  - {at: 5, type: spot-interruption, node: spot-a}"
} >"$TMP/drain.yaml"
start_sim drain "$TMP/drain.yaml"
start_agent spot-a "$TMP/drain/agent.log"
drain_pid=$AGENT_PID
pods_left() {
	curl -sSf "$K8S/api/v1/pods?fieldSelector=spec.nodeName%3Dspot-a" | jq '[.items[] | select(.metadata.deletionTimestamp == null)] | length'
}
drained() { # the simulator's drained_at: every pod of the node has exited
	curl -sSf "$K8S/sim/v1/result" | jq -e '.nodes[] | select(.name == "spot-a") | .drained_at != null'
}
drain_status=completed
wait_for 130 drained || drain_status="not finished ($(pods_left) pods left)"
drain_hwm=$(hwm_kib "$drain_pid")
drain_anon=$(anon_kib "$drain_pid")
drain_pd=$(pd_kib "$drain_pid")
drain_result=$(curl -sSf "$K8S/sim/v1/result" | jq -c '.nodes[] | select(.name == "spot-a")')
for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
PIDS=()

# ---- report ----
mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }
echo "notice → cordon latency ($count of $N interruptions, $POLL s poll, time scale 1)"
printf '  %-34s %-22s %s\n' "" "spotdrain agent" "aws-node-termination-handler (published)"
printf '  %-34s %-22s %s\n' "median" "$(printf %.3f "$median") s" "-"
printf '  %-34s %-22s %s\n' "worst" "$(printf %.3f "$worst") s" "up to ~3 s (2 s poll + 1 s dispatch)"
printf '  %-34s %-22s %s\n' "peak RSS, idle" "$(mib "$idle_hwm") (now $(mib "$idle_rss"))" "~24 MiB"
printf '  %-34s %-22s %s\n' "Private_Dirty, idle" "$(mib "$idle_pd") ($idle_pd KiB)" "-"
printf '  %-34s %-22s %s\n' "peak RSS, draining 110 pods" "$(mib "$drain_hwm")" "-"
printf '  %-34s %-22s %s\n' "CPU per idle hour" "${cpu_per_hour} s" "-"
echo
echo "  idle memory: RSS $(mib "$idle_rss") = private $(mib "$idle_anon") + shared library pages; PSS $(mib "$idle_pss");"
echo "    \`spotdrain-agent version\` alone peaks at $(mib "$baseline") (its shared libraries: libc, libcurl and what Debian links it with, libmicrohttpd, OpenSSL, libsystemd, cJSON, libyaml, expat)."
echo "  draining: private (anonymous) memory at the end $(mib "$drain_anon"), Private_Dirty $(mib "$drain_pd")."
echo "  goals (issue 13): idle <= 12 MiB RSS and <= 1.5 MiB Private_Dirty (limits 14 and 2), draining <= 18 MiB."
echo "  drain of 110 pods: $drain_status; simulator: $drain_result"
echo "  CPU per idle hour is measured over ${IDLE_SECONDS} s of idle polling and extrapolated to one hour."
echo "  Latencies are the simulator's cordoned_at - notice_at (scenario seconds = real seconds at scale 1)."
echo "  All latencies (s): $(awk '{ printf "%.3f ", $1 }' "$TMP/latencies.txt")"
