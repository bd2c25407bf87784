# shellcheck shell=bash
# Helpers shared by the integration tests (sourced, not run). Each test exits 0 on success, 77 when skipped.
set -euo pipefail

# `make integration` runs every tests/integration/*.sh; this one is not a test.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	echo "lib.sh holds helpers for the other tests"
	exit 77
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SPOTDRAIN=${SPOTDRAIN:-$ROOT/build/spotdrain}
case "$SPOTDRAIN" in /*) ;; *) SPOTDRAIN=$ROOT/$SPOTDRAIN ;; esac
# The DaemonSet's binary (the library without the simulator), built beside spotdrain: the agent tests run it.
SPOTDRAIN_AGENT=${SPOTDRAIN_AGENT:-$(dirname "$SPOTDRAIN")/spotdrain-agent}
TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/spotdrain-it.XXXXXX")
SIM_PIDS=()
# Set by start_sim for the test scripts.
export SIM_URL SIM_KUBECONFIG SIM_PID SIM_LOG SIM_ENDPOINTS
# Set by serve_here for the trial that called it.
export SERVE_PID SERVE_URL

skip() {
	echo "skipped: $*"
	exit 77
}

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

log() {
	echo "--- $*"
}

# ours PID: PID is still a process this shell started (a child of it, running or not yet reaped). A PID whose
# process exited and was reaped may already be another process's: on a machine busy enough PIDs wrap within
# minutes (pid_max 32768), and a SIGTERM meant for a stopped server once ended another test's simulate.
ours() {
	local stat ppid
	read -r stat <"/proc/$1/stat" 2>/dev/null || return 1
	read -r _ ppid _ <<<"${stat##*) }"
	[ "$ppid" = "$BASHPID" ]
}

# signal_ours SIGNAL PID...: SIGNAL to each PID that is ours.
signal_ours() {
	local sig=$1 pid
	shift
	for pid in "$@"; do
		if ours "$pid"; then kill "-$sig" "$pid" 2>/dev/null || true; fi
	done
}

# Stops the servers start_sim started and still running. Each must exit 0 on SIGTERM, as stop_sim wants: a
# sanitizer build that finds a leak at exit aborts instead, and a passing test fails.
cleanup() {
	local rc=$? pid live=() bad=
	for pid in "${SIM_PIDS[@]}"; do
		if ours "$pid" && kill -TERM "$pid" 2>/dev/null; then live+=("$pid"); fi
	done
	for pid in "${live[@]}"; do
		wait "$pid" 2>/dev/null || bad="$bad $pid"
	done
	rm -rf "$TEST_TMP"
	release_ports
	if [ -n "$bad" ] && [ "$rc" -eq 0 ]; then
		echo "FAIL: sim serve (pid$bad) did not exit 0 on SIGTERM" >&2
		exit 1
	fi
}
trap cleanup EXIT

# wait_for SECONDS COMMAND...: polls COMMAND every 0.1 s until it succeeds; fails after SECONDS times
# WAIT_SLACK (default 4). SECONDS is what the wait needs with room to spare on an idle machine; the slack is
# for a shared 2-core machine (other tests, `stress -c 2`), where a process can wait seconds for a core. A
# wait's bound is never an assertion of speed (those figures are bench/'s): it only ends a test that would
# otherwise hang, so a longer one costs time only when the test fails anyway.
WAIT_SLACK=${WAIT_SLACK:-4}
wait_for() {
	local limit=$1 deadline
	shift
	deadline=$(($(date +%s%N) + limit * WAIT_SLACK * 1000000000))
	until "$@" >/dev/null 2>&1; do
		if [ "$(date +%s%N)" -ge "$deadline" ]; then
			echo "timed out after $((limit * WAIT_SLACK))s waiting for: $*" >&2
			return 1
		fi
		sleep 0.1
	done
}

# kubectl_for VERSION: the kubectl binary of that minor version (kubectl.1.27 beside kubectl), else kubectl.
kubectl_for() {
	local dir
	command -v kubectl >/dev/null 2>&1 || return 1
	dir=$(dirname "$(readlink -f "$(command -v kubectl)")")
	if [ -x "$dir/kubectl.$1" ]; then
		echo "$dir/kubectl.$1"
	else
		command -v kubectl
	fi
}

# requires TOOL...: skips the test unless each is there: spotdrain and spotdrain-agent the binaries under test
# ($SPOTDRAIN, $SPOTDRAIN_AGENT); aws the AWS CLI on PATH, debian-aws Debian's (/usr/bin/aws, the query
# protocol for SQS), either exported as $AWS; anything else a command on PATH. The one place the integration
# scripts say what they skip on (scripts/install-deps installs every one of them).
requires() {
	local t
	for t; do
		case $t in
		spotdrain) [ -x "$SPOTDRAIN" ] || skip "$SPOTDRAIN not built" ;;
		spotdrain-agent) [ -x "$SPOTDRAIN_AGENT" ] || skip "$SPOTDRAIN_AGENT not built" ;;
		aws | debian-aws)
			if [ "$t" = debian-aws ]; then AWS=/usr/bin/aws; else AWS=$(command -v aws 2>/dev/null) || AWS=; fi
			[ -n "$AWS" ] && [ -x "$AWS" ] || skip "no $t CLI installed (scripts/install-deps)"
			export AWS
			;;
		*) command -v "$t" >/dev/null 2>&1 || skip "$t not installed (scripts/install-deps)" ;;
		esac
	done
}

# require_tools [TOOL...]: what most scripts need (the binary, kubectl, curl, jq) and the TOOLs named.
require_tools() {
	requires spotdrain kubectl curl jq "$@"
}

# start_sim NAME SCENARIO [sim serve flags...]: starts `spotdrain sim serve` on a free port and waits until it
# is up. Sets SIM_URL, SIM_KUBECONFIG, SIM_PID, SIM_LOG.
start_sim() {
	local name=$1 scenario=$2 dir
	shift 2
	dir=$TEST_TMP/$name
	mkdir -p "$dir"
	"$SPOTDRAIN" sim serve "$scenario" --listen 127.0.0.1:0 --kubeconfig-out "$dir/kubeconfig" \
		--endpoints-out "$dir/endpoints.json" "$@" >"$dir/log" 2>&1 &
	SIM_PID=$!
	SIM_PIDS+=("$SIM_PID")
	SIM_LOG=$dir/log
	if ! wait_for 10 test -s "$dir/endpoints.json"; then
		cat "$SIM_LOG" >&2
		fail "sim serve did not come up"
	fi
	SIM_URL=$(jq -r .kubernetes "$dir/endpoints.json")
	SIM_KUBECONFIG=$dir/kubeconfig
	SIM_ENDPOINTS=$dir/endpoints.json
	log "sim $name ($scenario) at $SIM_URL"
}

# serve_here SCENARIO [sim serve flags...]: `spotdrain sim serve` in the current directory (kubeconfig,
# endpoints.json, sim.log), for a trial in a subshell of its own, which stops it. Sets SERVE_PID, and
# SERVE_URL (its Kubernetes URL) once it is up; returns 1 if it does not come up.
serve_here() {
	local scenario=$1
	shift
	"$SPOTDRAIN" sim serve "$scenario" --listen 127.0.0.1:0 --kubeconfig-out kubeconfig \
		--endpoints-out endpoints.json "$@" >sim.log 2>&1 &
	SERVE_PID=$!
	wait_for 10 test -s endpoints.json || return 1
	SERVE_URL=$(jq -r .kubernetes endpoints.json)
}

# trial_sim SCENARIO [sim serve flags...]: serve_here for a trial (crash_resume_*, faults_sim,
# estimates_restart) in a subshell of its own, whose EXIT trap stops the processes in its array pids: the
# simulator joins them; one that does not come up writes "FAIL: ..." to ./verdict and ends the trial (exit 1).
trial_sim() {
	local rc=0
	serve_here "$@" || rc=$?
	pids+=("$SERVE_PID")
	[ "$rc" -eq 0 ] || {
		echo "FAIL: sim serve did not come up" >verdict
		exit 1
	}
}

# kept_and_control LOG: runs the test's trial function twice at once, `trial kept yes` and `trial control no`,
# each writing TEST_TMP/NAME/verdict; fails with the tail of TEST_TMP/NAME/LOG when a verdict is not ok.
kept_and_control() {
	local t v
	trial kept yes &
	trial control no &
	wait
	for t in kept control; do
		v=$(cat "$TEST_TMP/$t/verdict" 2>/dev/null || echo "FAIL: no verdict")
		echo "$t: $v"
		[ "$v" = ok ] || { grep -v ' debug ' "$TEST_TMP/$t/$1" | tail -n 30 >&2; fail "$t: $v"; }
	done
}

# start_controller QUEUE_URL METRICS_PORT [controller flags...]: `spotdrain controller` against the sim started by
# start_sim, with the simulator's SQS credentials, metrics on 127.0.0.1:METRICS_PORT, its log in
# TEST_TMP/controller.log. Sets CTL_PID (stopped at exit with the sims).
start_controller() {
	local queue=$1 port=$2
	shift 2
	AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY AWS_REGION=us-east-1 \
		POD_NAMESPACE=default POD_NAME=spotdrain-controller-test \
		"$SPOTDRAIN" controller --queue-url "$queue" --kubeconfig "$SIM_KUBECONFIG" \
		--metrics-listen "127.0.0.1:$port" "$@" >"$TEST_TMP/controller.log" 2>&1 &
	CTL_PID=$!
	SIM_PIDS+=("$CTL_PID")
}

# stop_controller: SIGTERM to start_controller's process, which must exit 0.
stop_controller() {
	local rc=0
	kill -TERM "$CTL_PID"
	wait "$CTL_PID" || rc=$?
	[ "$rc" -eq 0 ] || { cat "$TEST_TMP/controller.log" >&2; fail "controller exited $rc after SIGTERM"; }
}

# stop_sim PID: SIGTERM, and the server must exit 0.
stop_sim() {
	local rc=0
	kill -TERM "$1"
	wait "$1" || rc=$?
	[ "$rc" -eq 0 ] || fail "sim serve exited $rc after SIGTERM"
}

# sim_result URL: GET /sim/v1/result
sim_result() {
	curl -sSf "$1/sim/v1/result"
}

# crash_trials WHAT LOG: the crash-resume tests' trials. Runs the caller's `trial SEED` in the background for
# each seed (CRASH_SEEDS: a list, or "random" for CRASH_TRIALS random ones; else the first CRASH_TRIALS, 10,
# of the caller's FIXED_SEEDS), waits for them all, prints each TEST_TMP/trial-SEED/verdict and, for a
# failed one, the tail of its LOG. CRASH_KEEP=DIR keeps every trial's files. Returns 1 when one failed.
crash_trials() {
	local what=$1 logname=$2 seeds=() failed=0 seed verdict
	if [ "${CRASH_SEEDS:-}" = random ]; then
		for _ in $(seq "${CRASH_TRIALS:-10}"); do seeds+=($((RANDOM * 32768 + RANDOM))); done
	elif [ -n "${CRASH_SEEDS:-}" ]; then
		read -r -a seeds <<<"$CRASH_SEEDS"
	else
		seeds=("${FIXED_SEEDS[@]:0:${CRASH_TRIALS:-10}}")
	fi
	log "$what: ${#seeds[@]} trials, seeds ${seeds[*]}"
	for seed in "${seeds[@]}"; do
		trial "$seed" &
	done
	wait
	for seed in "${seeds[@]}"; do
		verdict=$(cat "$TEST_TMP/trial-$seed/verdict" 2>/dev/null || echo "FAIL: no verdict")
		echo "seed $seed: $verdict"
		if [[ "$verdict" != ok* ]]; then
			failed=1
			echo "--- seed $seed: $logname (tail)" >&2
			tail -n 30 "$TEST_TMP/trial-$seed/$logname" >&2 || true
		fi
	done
	[ -z "${CRASH_KEEP:-}" ] || { mkdir -p "$CRASH_KEEP" && cp -r "$TEST_TMP"/. "$CRASH_KEEP"/; }
	return "$failed"
}

# find_helm: prints the path of the pinned Helm (HELM_VERSION of tests/realk8s/versions) that
# scripts/install-deps builds into the real tier's cache outside the repository (tests/realk8s/setup helm;
# $REALK8S_CACHE, /var/cache/spotdrain/realk8s by default), or $HELM when set; fails where there is none.
find_helm() {
	local bin
	bin=${HELM:-$("$ROOT/tests/realk8s/setup" helm_path)} || return 1
	[ -x "$bin" ] || return 1
	echo "$bin"
}

# The kinds a Kubernetes 1.36 API server's discovery lists of those the chart asks about with
# .Capabilities.APIVersions (helm template lists only group/versions of its own); HELM_API_VERSIONS
# (comma-separated) replaces them, "" for an API server without them.
HELM_KUBE_VERSION=1.36.0
HELM_API_KINDS="admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration"
HELM_API_KINDS="$HELM_API_KINDS,admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"
HELM_API_KINDS="$HELM_API_KINDS,admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding"

# helm_render CHART RELEASE NAMESPACE [VALUES|--helm-flag...]: `helm template` of the chart as it installs on a Kubernetes
# $HELM_KUBE_VERSION API server (values checked against values.schema.json, the chart's kubeVersion against it),
# the manifests on stdout. Needs HELM (find_helm); Helm's own files go under $TEST_TMP, not the user's home.
helm_render() {
	local chart=$1 release=$2 ns=$3 f
	local -a args=(template "$release" "$chart" --namespace "$ns" --kube-version "$HELM_KUBE_VERSION")
	shift 3
	for f in "$@"; do
		case $f in -*) args+=("$f") ;; *) args+=(--values "$f") ;; esac
	done
	[ -z "${HELM_API_VERSIONS-$HELM_API_KINDS}" ] || args+=(--api-versions "${HELM_API_VERSIONS-$HELM_API_KINDS}")
	HELM_CACHE_HOME=$TEST_TMP/helm/cache HELM_CONFIG_HOME=$TEST_TMP/helm/config \
		HELM_DATA_HOME=$TEST_TMP/helm/data "$HELM" "${args[@]}"
}

# jq definitions for a `simulate --json` or /sim/v1/result document: first_act(NODE) is the time of NODE's first
# eviction or forced delete (null if none), which a verdict on its drain must come before (an order, which holds
# on a loaded machine; how soon after the notice is bench/drain's figure). Use: jq -e "$JQ_DEFS"'...'.
JQ_DEFS='def first_act($n): [.alerts[] | select(.node == $n and (.kind == "pod-evicted" or .kind == "pods-forced")) | .at] | min;'

# The simulator's AWS key (SIM_EC2_ACCESS_KEY_ID and its secret in src/sim): what its SQS, EC2, Auto
# Scaling and STS surfaces take.
SIM_AWS_KEY_ID=AKIDEXAMPLE
SIM_AWS_SECRET='wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY'

# aws_sim URL ARGS...: the AWS CLI against one of the simulator's surfaces, with its key, region us-east-1
# and nothing from the user's configuration; JSON out.
aws_sim() {
	local url=$1
	shift
	env -u AWS_PROFILE -u AWS_SESSION_TOKEN -u AWS_ENDPOINT_URL -u AWS_ENDPOINT_URL_SQS \
		AWS_ACCESS_KEY_ID="$SIM_AWS_KEY_ID" AWS_SECRET_ACCESS_KEY="$SIM_AWS_SECRET" \
		AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_PAGER= \
		"${AWS:-aws}" "$@" --endpoint-url "$url" --region us-east-1 --output json
}

# sim_endpoint KEY...: the last started simulator's endpoints (--endpoints-out: sqs, queue_url, ec2,
# autoscaling, ...), one a line; fails when one is missing.
sim_endpoint() {
	local k v
	for k in "$@"; do
		v=$(jq -r --arg k "$k" '.[$k] // empty' "$SIM_ENDPOINTS")
		[ -n "$v" ] || fail "sim serve offers no $k"
		echo "$v"
	done
}

# spot_warning ID INSTANCE [ACCOUNT [TIME]]: an EventBridge spot interruption warning, in the simulator's
# account and at the present time unless told.
spot_warning() {
	jq -cn --arg id "$1" --arg instance "$2" --arg account "${3:-123456789012}" \
		--arg time "${4:-$(date -u +%Y-%m-%dT%H:%M:%SZ)}" '{version: "0", id: $id,
		"detail-type": "EC2 Spot Instance Interruption Warning", source: "aws.ec2", account: $account,
		time: $time, region: "us-east-1", resources: ["arn:aws:ec2:us-east-1a:instance/" + $instance],
		detail: {"instance-id": $instance, "instance-action": "terminate"}}'
}

# free_port: a TCP port on 127.0.0.1 that nothing listens on now, for a server the test starts. It is taken
# below the ephemeral range (ip_local_port_range), where no client's outgoing connection and no server bound
# to port 0 (sim serve, the tests run beside this one) can take it before the test's server binds it. Tests
# run side by side, and two could pick one port before either binds it: each port handed out is reserved,
# by a file PORT_DIR/PORT (created exclusively, holding the test's PID) that no other test takes and that
# the test's exit removes; reservations older than a day (a test killed before its cleanup) are dropped.
PORT_DIR=${TMPDIR:-/tmp}/spotdrain-it-ports
free_port() {
	mkdir -p "$PORT_DIR"
	python3 - "$PORT_DIR" "$$" <<'PY'
import os, random, socket, sys, time
pdir, owner = sys.argv[1], sys.argv[2]
lo = 32768
try:
    lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    pass
for _ in range(500):
    port = random.randint(max(1024, lo - 12000), lo - 1)
    path = os.path.join(pdir, str(port))
    try:
        if time.time() - os.stat(path).st_mtime > 86400:
            os.unlink(path)
    except OSError:
        pass
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        continue  # another test's
    os.write(fd, owner.encode())
    os.close(fd)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        os.unlink(path)
        continue
    finally:
        s.close()
    print(port)
    break
else:
    raise SystemExit("free_port: no free port below %d" % lo)
PY
}

# Drops the reservations of free_port this test (its PID) holds.
release_ports() {
	local f
	[ -d "$PORT_DIR" ] || return 0
	for f in "$PORT_DIR"/*; do
		[ -f "$f" ] && [ "$(cat "$f" 2>/dev/null)" = "$$" ] && rm -f "$f"
	done
	return 0
}
