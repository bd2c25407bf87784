#!/usr/bin/env bash
# The webhook alert sink is flushed before a front end exits (alerts.webhook_flush_seconds): an alert raised
# in the last moment still reaches the receiver. A local receiver answers the first POST of the drain's final
# alert (drain-completed, or deadline-missed should the drain not make it) with 503 and Retry-After: 2 (a
# webhook hiccup just as the drain ends), every other POST with 200; the alert counts as received once a POST
# of it was answered 200.
#   drain:      `spotdrain drain` empties a node and exits; the final alert must have been received by then.
#   controller: `spotdrain controller` drains a node interrupted through SQS and is sent SIGTERM as soon as
#               the first (refused) POST of the final alert arrives; it must deliver it before exiting 0.
#   agent:      the same with `spotdrain agent` reading the node's IMDS.
# And with a receiver that never answers, `drain` and `agent` give up after alerts.webhook_flush_seconds.
# Without the flush each of them exits with the retry still waiting, and the receiver never gets the alert.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tools
requires python3

# receiver DIR: starts the receiver; it writes its port to DIR/port and one JSON line per POST to DIR/posts
# ({"kind": ..., "final": true|false, "status": ...}). While DIR/hold exists it refuses every POST of the final
# alert, not only the first: the front ends' test holds it until its SIGTERM went out, so that the alert is
# still waiting at exit however late a loaded machine lets the test send it (the retry 2 s after the first
# refusal was delivered before a SIGTERM sent later, and the process rightly had nothing to wait for).
# The final alert of a drain is also the last: nothing stands between it and a front end's exit.
receiver() {
	python3 - "$1" <<'EOF' &
import http.server, json, os, signal, sys
# Stopped by lib.sh's cleanup with SIGTERM, which wants exit status 0.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
d = sys.argv[1]
refused = []
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        kind = json.loads(body).get("kind", "")
        final = kind in ("drain-completed", "deadline-missed")
        status = 200
        if final and (not refused or os.path.exists(os.path.join(d, "hold"))):
            refused.append(kind)
            status = 503
        with open(os.path.join(d, "posts"), "a") as f:
            f.write(json.dumps({"kind": kind, "final": final, "status": status}) + "\n")
        self.send_response(status)
        if status == 503:
            self.send_header("Retry-After", "2")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(os.path.join(d, "port.tmp"), "w") as f:
    f.write(str(s.server_address[1]))
os.rename(os.path.join(d, "port.tmp"), os.path.join(d, "port"))
s.serve_forever()
EOF
	SIM_PIDS+=("$!")
	wait_for 10 test -s "$1/port" || fail "the webhook receiver did not start"
}

# finals DIR STATUS: how many POSTs of the final alert were answered STATUS.
finals() {
	[ -f "$1/posts" ] || {
		echo 0
		return
	}
	jq -s --argjson s "$2" '[.[] | select(.final and .status == $s)] | length' "$1/posts"
}

# refused DIR: the first POST of the final alert came (and was refused).
refused() {
	[ "$(finals "$1" 503)" -ge 1 ]
}

# A node of 4 pods that drains in a few seconds; interrupted at 4 s (agent and controller modes).
scenario() {
	cat <<EOF
name: webhook-flush
mode: $1
budget_seconds: 120
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, instance_type: m5.2xlarge,
     allocatable: {cpu: "8", memory: 32Gi, pods: 58}}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 4, placement: {spot-a: 4},
     requests: {cpu: 250m, memory: 256Mi}, termination_grace_seconds: 10, shutdown_seconds: 1,
     startup_seconds: 1, pdb: {max_unavailable: 1}}
events:
$2
EOF
}

export SPOTDRAIN_ALERTS_WEBHOOK_FORMAT=json SPOTDRAIN_ALERTS_WEBHOOK_FLUSH_SECONDS=10

log "drain: the final alert is delivered before the command exits"
dir=$TEST_TMP/drain
mkdir -p "$dir"
receiver "$dir"
scenario agent '  []' >"$dir/scenario.yaml"
start_sim drain-sim "$dir/scenario.yaml"
rc=0
SPOTDRAIN_ALERTS_WEBHOOK_URL="http://127.0.0.1:$(cat "$dir/port")/hook" \
	"$SPOTDRAIN" drain spot-a --kubeconfig "$SIM_KUBECONFIG" --budget 60 --json >"$dir/drain.json" || rc=$?
# Drained (0) or the deadline missed (3): either way the drain ended with its final alert.
[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || fail "spotdrain drain failed (exit $rc)"
cat "$dir/posts"
[ "$(finals "$dir" 503)" -eq 1 ] || fail "the receiver did not refuse the first POST of the final alert"
[ "$(finals "$dir" 200)" -eq 1 ] || fail "the final alert was lost when spotdrain drain exited"

# run_frontend MODE: the agent or the controller, SIGTERM at the first (refused) POST of the final alert.
run_frontend() {
	local mode=$1 dir=$TEST_TMP/$1 pid rc=0 endpoints hook
	mkdir -p "$dir"
	touch "$dir/hold"
	receiver "$dir"
	scenario "$mode" '  - {at: 4, type: spot-interruption, node: spot-a}' >"$dir/scenario.yaml"
	start_sim "$mode-sim" "$dir/scenario.yaml"
	endpoints=$TEST_TMP/$mode-sim/endpoints.json
	hook="http://127.0.0.1:$(cat "$dir/port")/hook"
	# Room for the retries the hold refused (each 2 s apart) and a loaded machine; the process waits only until
	# the alert is delivered.
	export SPOTDRAIN_ALERTS_WEBHOOK_FLUSH_SECONDS=30
	if [ "$mode" = agent ]; then
		SPOTDRAIN_ALERTS_WEBHOOK_URL=$hook NODE_NAME='' POD_NAMESPACE=kube-system POD_NAME=spotdrain-agent-webhook \
			"$SPOTDRAIN_AGENT" agent --kubeconfig "$SIM_KUBECONFIG" \
			--imds-endpoint "$(jq -r '.imds_by_node["spot-a"]' "$endpoints")" --metrics-listen off \
			>"$dir/process.log" 2>&1 &
	else
		env -u AWS_SESSION_TOKEN -u AWS_PROFILE SPOTDRAIN_ALERTS_WEBHOOK_URL="$hook" AWS_ACCESS_KEY_ID=AKIDEXAMPLE \
			AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY AWS_REGION=us-east-1 \
			POD_NAMESPACE=default POD_NAME=spotdrain-controller-webhook \
			"$SPOTDRAIN" controller --queue-url "$(jq -r .queue_url "$endpoints")" \
			--kubeconfig "$SIM_KUBECONFIG" --metrics-listen off >"$dir/process.log" 2>&1 &
	fi
	pid=$!
	SIM_PIDS+=("$pid")
	# Within the node's 120 s, whatever the drain's outcome.
	if ! wait_for 150 refused "$dir"; then
		tail -n 30 "$dir/process.log" >&2
		fail "$mode: the drain's final alert was never POSTed"
	fi
	kill -TERM "$pid"
	rm "$dir/hold"
	wait "$pid" || rc=$?
	cat "$dir/posts"
	[ "$rc" -eq 0 ] || fail "$mode exited $rc after SIGTERM"
	[ "$(finals "$dir" 200)" -eq 1 ] || fail "$mode: the final alert was lost at exit"
	grep -q "alerts to reach the webhook" "$dir/process.log" || fail "$mode: did not say it waits for the webhook"
}

for mode in controller agent; do
	log "$mode: the final alert is delivered after SIGTERM, before the process exits"
	run_frontend "$mode"
done
export SPOTDRAIN_ALERTS_WEBHOOK_FLUSH_SECONDS=10

# A receiver that accepts connections and never answers: the wait is bounded by alerts.webhook_flush_seconds,
# says what was not delivered, and the exit frees what is still in flight cleanly (an ASan build checks it).
hang_receiver() {
	python3 - "$1" <<'EOF' &
import os, signal, socket, sys
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
d = sys.argv[1]
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
with open(os.path.join(d, "port.tmp"), "w") as f:
    f.write(str(s.getsockname()[1]))
os.rename(os.path.join(d, "port.tmp"), os.path.join(d, "port"))
held = []
while True:
    c, _ = s.accept()
    held.append(c)
    open(os.path.join(d, "connected"), "a").close()
EOF
	SIM_PIDS+=("$!")
	wait_for 10 test -s "$1/port" || fail "the silent receiver did not start"
}

log "drain: a receiver that never answers costs at most alerts.webhook_flush_seconds"
dir=$TEST_TMP/hang-drain
mkdir -p "$dir"
hang_receiver "$dir"
start_sim hang-drain-sim "$TEST_TMP/drain/scenario.yaml"
rc=0
SPOTDRAIN_ALERTS_WEBHOOK_URL="http://127.0.0.1:$(cat "$dir/port")/hook" SPOTDRAIN_ALERTS_WEBHOOK_FLUSH_SECONDS=1 \
	"$SPOTDRAIN" drain spot-a --kubeconfig "$SIM_KUBECONFIG" --budget 60 >"$dir/drain.log" 2>&1 || rc=$?
cat "$dir/drain.log"
[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || fail "spotdrain drain failed (exit $rc) with a silent webhook"
grep -q "alerts not delivered to the webhook before exit" "$dir/drain.log" || fail "no word of the lost alerts"

log "agent: the same after SIGTERM"
dir=$TEST_TMP/hang-agent
mkdir -p "$dir"
hang_receiver "$dir"
scenario agent '  - {at: 2, type: spot-interruption, node: spot-a}' >"$dir/scenario.yaml"
start_sim hang-agent-sim "$dir/scenario.yaml"
SPOTDRAIN_ALERTS_WEBHOOK_URL="http://127.0.0.1:$(cat "$dir/port")/hook" SPOTDRAIN_ALERTS_WEBHOOK_FLUSH_SECONDS=1 \
	NODE_NAME='' POD_NAMESPACE=kube-system POD_NAME=spotdrain-agent-hang \
	"$SPOTDRAIN_AGENT" agent --kubeconfig "$SIM_KUBECONFIG" \
	--imds-endpoint "$(jq -r '.imds_by_node["spot-a"]' "$TEST_TMP/hang-agent-sim/endpoints.json")" \
	--metrics-listen off >"$dir/process.log" 2>&1 &
pid=$!
SIM_PIDS+=("$pid")
wait_for 30 test -e "$dir/connected" || fail "agent: no alert POSTed"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" -eq 0 ] || {
	tail -n 20 "$dir/process.log" >&2
	fail "agent exited $rc after SIGTERM with a silent webhook"
}
grep -q "alerts not delivered to the webhook before exit" "$dir/process.log" || fail "agent: no word of the lost alerts"
echo "ok"
