#!/usr/bin/env bash
# Controller benchmark (issue 5 item 8): the public mass-interruption scenario (20 of 40 spot nodes reclaimed
# within 10 s, notices delivered as EventBridge messages through the simulator's SQS queue) against one
# `spotdrain controller` process, at the default client QPS (kube.qps 20) and at QPS 100.
#
# Reports per run: notice → cordon per node (median, worst), the drain outcome per node (drained before the
# deadline, pods killed/forced), drain-infeasible alerts (Kubernetes Events DrainInfeasible), API requests the
# simulator served, and the controller's peak RSS — beside aws-node-termination-handler's published FIS result
# (50 interruptions: 78 % tainted and p99 cordon 154 s at default QPS; p99 52 s at QPS 100).
#
# Everything runs at time scale 1 (the controller and the simulator are separate processes, so they must share
# the real clock): each run lasts the scenario's 10 s of notices plus the 120 s budget.
#
# usage: bench/controller/run.sh [--quick] [SCENARIO]   SPOTDRAIN=path/to/spotdrain (default build/spotdrain)
#   --quick: the default-QPS run only.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SPOTDRAIN=${SPOTDRAIN:-$ROOT/build/spotdrain}
case "$SPOTDRAIN" in /*) ;; *) SPOTDRAIN=$ROOT/$SPOTDRAIN ;; esac
QPS_RUNS=(20 100)
if [ "${1:-}" = --quick ]; then
	QPS_RUNS=(20)
	shift
fi
SCENARIO=${1:-$ROOT/../shared/scenarios/mass-interruption.yaml}
[ -f "$SCENARIO" ] || SCENARIO=$ROOT/examples/mass-interruption.yaml
TMP=$(mktemp -d "${TMPDIR:-/tmp}/spotdrain-bench-controller.XXXXXX")
PIDS=()

cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$TMP"
}
trap cleanup EXIT

die() {
	echo "bench/controller: $*" >&2
	exit 1
}

[ -x "$SPOTDRAIN" ] || die "$SPOTDRAIN not built (make)"
for t in jq curl awk python3; do command -v $t >/dev/null 2>&1 || die "$t not installed"; done

wait_for() { # SECONDS COMMAND...
	local end=$(($(date +%s) + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt "$end" ] || return 1
		sleep 0.5
	done
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }

# run QPS: one simulator, one controller; leaves $TMP/QPS/{result.json,events.json,hwm,metrics}
run() {
	local qps=$1 dir=$TMP/$1 port k8s queue ctl
	mkdir -p "$dir"
	"$SPOTDRAIN" sim serve "$SCENARIO" --listen 127.0.0.1:0 --endpoints-out "$dir/endpoints.json" \
		--kubeconfig-out "$dir/kubeconfig" >"$dir/sim.log" 2>&1 &
	local sim=$!
	PIDS+=("$sim")
	wait_for 15 test -s "$dir/endpoints.json" || die "simulator did not start: $(cat "$dir/sim.log")"
	k8s=$(jq -r .kubernetes "$dir/endpoints.json")
	queue=$(jq -r '.queue_url // empty' "$dir/endpoints.json")
	[ -n "$queue" ] || die "sim serve offers no SQS queue"
	port=$(free_port)
	printf 'kube:\n  qps: %s\n  burst: %s\n' "$qps" "$((qps * 2))" >"$dir/config.yaml"
	AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY \
		AWS_REGION=us-east-1 POD_NAMESPACE=default POD_NAME=bench-controller \
		"$SPOTDRAIN" controller --queue-url "$queue" --kubeconfig "$dir/kubeconfig" --config "$dir/config.yaml" \
		--metrics-listen "127.0.0.1:$port" --log-level warning >"$dir/controller.log" 2>&1 &
	ctl=$!
	PIDS+=("$ctl")
	# The run ends when every interrupted node is drained, or at the latest once every deadline has passed.
	wait_for 30 sh -c "curl -sf $k8s/sim/v1/result | jq -e '[.nodes[] | select(.notice_at != null)] | length == 20'" ||
		die "notices did not arrive: $(tail -5 "$dir/controller.log")"
	wait_for 160 sh -c "curl -sf $k8s/sim/v1/result | jq -e '[.nodes[] | select(.notice_at != null) | .drained_at] | all(. != null)'" ||
		echo "bench/controller: not every node drained" >&2
	sleep 2
	hwm_kib "$ctl" >"$dir/hwm"
	curl -sf "127.0.0.1:$port/metrics" >"$dir/metrics" || true
	curl -sf "$k8s/sim/v1/result" >"$dir/result.json"
	curl -sf "$k8s/api/v1/events" >"$dir/events.json" || echo '{"items": []}' >"$dir/events.json"
	kill -TERM "$ctl"
	wait "$ctl" || die "controller exited $? after SIGTERM: $(tail -5 "$dir/controller.log")"
	kill -TERM "$sim"
	wait "$sim" || true
}

report() {
	local qps=$1 dir=$TMP/$1
	python3 - "$dir" "$qps" <<'EOF'
import json, statistics, sys
d, qps = sys.argv[1], sys.argv[2]
r = json.load(open(d + "/result.json"))
ev = json.load(open(d + "/events.json")).get("items", [])
hwm = int(open(d + "/hwm").read().strip() or 0)
nodes = [n for n in r["nodes"] if n.get("notice_at") is not None]
lat = sorted(n["cordoned_at"] - n["notice_at"] for n in nodes if n.get("cordoned_at") is not None)
drained = [n for n in nodes if n.get("drained_at") is not None and n["drained_at"] <= n["deadline_at"]]
killed = sum(n.get("pods_killed", 0) or 0 for n in nodes)
forced = sum(n.get("pods_forced", 0) or 0 for n in nodes)
infeasible = sorted({e["involvedObject"]["name"] for e in ev if e.get("reason") == "DrainInfeasible"})
print(f"== kube.qps {qps}: {len(nodes)} interrupted nodes")
if lat:
    print(f"  notice -> cordon   median {statistics.median(lat):.3f} s   worst {lat[-1]:.3f} s   "
          f"cordoned {len(lat)}/{len(nodes)}   <= 2 s: {sum(1 for x in lat if x <= 2)}/{len(nodes)}")
print(f"  drained before the deadline: {len(drained)}/{len(nodes)}   pods killed {killed}   pods forced {forced}   "
      f"PDB breaches {r.get('pdb_breaches')}")
print(f"  drain-infeasible raised for {len(infeasible)} nodes   API requests {r.get('api_requests')}   "
      f"controller peak RSS {hwm / 1024:.1f} MiB")
print("  per node: name notice cordon(+s) drained(+s) deadline killed forced")
for n in sorted(nodes, key=lambda n: n["notice_at"]):
    c = n.get("cordoned_at"); dr = n.get("drained_at")
    print(f"    {n['name']:8s} {n['notice_at']:6.1f} {('%.3f' % (c - n['notice_at'])) if c is not None else '-':>8s} "
          f"{('%.1f' % (dr - n['notice_at'])) if dr is not None else '-':>7s} {n['deadline_at']:7.1f} "
          f"{n.get('pods_killed', 0)!s:>6s} {n.get('pods_forced', 0)!s:>6s}")
EOF
}

for q in "${QPS_RUNS[@]}"; do
	echo "bench/controller: run at kube.qps $q ($(basename "$SCENARIO"), ~2.5 min)" >&2
	run "$q"
done
echo
echo "spotdrain controller, scenario $(basename "$SCENARIO") (20 of 40 spot nodes reclaimed within 10 s)"
for q in "${QPS_RUNS[@]}"; do report "$q"; done
echo
echo "aws-node-termination-handler (queue mode), published AWS FIS result, 50 interruptions:"
echo "  default QPS: 78 % of nodes tainted before termination, p99 notice -> cordon 154 s"
echo "  QPS 100:     p99 notice -> cordon 52 s"
