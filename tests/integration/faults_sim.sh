#!/usr/bin/env bash
# Fault injection (issue 8, item 4): under each fault kind of a scenario's `faults:` section (docs/faults.md),
# a feasible drain still finishes before its deadline, with no pod killed, no PDB breached and no notice lost
# (every interrupted node has notice_at and cordoned_at). Each case is `spotdrain sim serve` plus the real
# process that would run in the cluster: the agent reading its node's IMDS (Kubernetes API and IMDS faults) or
# the controller long-polling the SQS queue (SQS and STS faults). Each case also checks that its fault fired,
# from the simulator's /sim/v1/faults counters or the process's metrics, so a pass means something.
# The cases run in parallel; each is bounded (CASE_LIMIT, 130 s: the scenario's deadline, the notice at 6 or 7 s +
# its 120 s, not a drain speed). FAULTS_CASES="api_error imds_timeout" runs a
# subset. Each case has a fixed seed (the fault draws are a function of it), so CI is repeatable;
# FAULTS_SEED=N runs every case with seed N instead, FAULTS_SEED=random with a random seed each (printed), to
# explore. With a seed of one's own a case may see its fault never fire: that is reported, not failed.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq curl python3
CHECK=$ROOT/tests/integration/faults_check.py
CASE_LIMIT=${CASE_LIMIT:-130}

# scenario MODE SEED FAULTS_YAML: a small cluster whose spot nodes are interrupted 6 s in (the process is up by
# then); each drain is feasible
# (4 pods a node, one at a time, each replacement Ready 1 s after it starts) and takes a few seconds.
scenario() {
	local mode=$1 seed=$2 faults=$3 events
	if [ "$mode" = agent ]; then
		events='  - {at: 6, type: spot-interruption, node: spot-a}'
	else
		events='  - {at: 6, type: spot-interruption, node: spot-a}
  - {at: 7, type: spot-interruption, node: spot-b}'
	fi
	cat <<EOF
name: faults-$mode
mode: $mode
budget_seconds: 120
seed: $seed
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: spot-b, zone: us-east-1b, capacity_type: spot, instance_type: m5.xlarge,
     allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, instance_type: m5.2xlarge,
     allocatable: {cpu: "8", memory: 32Gi, pods: 58}}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 8, placement: {spot-a: 4, spot-b: 4},
     requests: {cpu: 250m, memory: 256Mi}, termination_grace_seconds: 10, shutdown_seconds: 1,
     startup_seconds: 1, pdb: {max_unavailable: 1}}
events:
$events
faults:
$faults
EOF
}

# A JWT for AssumeRoleWithWebIdentity (the simulator checks the claims, not the signature).
web_identity_token() {
	python3 - <<'EOF'
import base64, json, time
def b64(d): return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
print(b64({"alg": "RS256", "kid": "sim"}) + "." + b64({"iss": "https://oidc.sim", "sub": "system:serviceaccount:kube-system:spotdrain",
      "aud": "sts.amazonaws.com", "exp": int(time.time()) + 3600}) + ".c2ln")
EOF
}

# metric DIR NAME: the sum of every series of NAME in the saved metrics of a case (0 when absent).
metric() {
	awk -v n="$2" '$1 == n || index($1, n "{") == 1 { s += $NF } END { print s + 0 }' "$1/metrics"
}

# run_case NAME MODE SEED FAULTS_YAML EVIDENCE: one case, in a subshell of its own; writes DIR/verdict.
# EVIDENCE is a shell condition run in DIR after the drain that proves the fault fired.
run_case() {
	local name=$1 mode=$2 seed=$3 faults=$4 evidence=$5
	local dir=$TEST_TMP/$name pids=() port nodes k8s deadline rc=0
	mkdir -p "$dir"
	(
		# shellcheck disable=SC2317 # runs from the EXIT trap
		stop_all() {
			signal_ours TERM "${pids[@]}"
			wait 2>/dev/null || true
		}
		trap stop_all EXIT
		cd "$dir"
		scenario "$mode" "$seed" "$faults" >scenario.yaml
		trial_sim scenario.yaml
		k8s=$SERVE_URL
		port=$(free_port)
		if [ "$mode" = agent ]; then
			nodes=(spot-a)
			NODE_NAME='' POD_NAMESPACE=kube-system POD_NAME="spotdrain-agent-$name" \
				"$SPOTDRAIN_AGENT" agent --kubeconfig kubeconfig --imds-endpoint "$(jq -r '.imds_by_node["spot-a"]' endpoints.json)" \
				--metrics-listen "127.0.0.1:$port" >process.log 2>&1 &
		else
			nodes=(spot-a spot-b)
			local -a creds=(AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY)
			if [ "$name" = sts_error ]; then
				web_identity_token >token
				creds=(AWS_ROLE_ARN=arn:aws:iam::123456789012:role/spotdrain AWS_WEB_IDENTITY_TOKEN_FILE="$dir/token"
					AWS_ROLE_SESSION_NAME=spotdrain AWS_ENDPOINT_URL_STS="$(jq -r .sts endpoints.json)")
			fi
			# The throttle and error cases read the controller's debug log for the answers it met.
			local -a level=()
			[ "$name" != sqs_throttle ] && [ "$name" != sqs_error ] || level=(--log-level debug)
			env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN -u AWS_PROFILE \
				"${creds[@]}" AWS_REGION=us-east-1 POD_NAMESPACE=default POD_NAME="spotdrain-controller-$name" \
				"$SPOTDRAIN" controller --queue-url "$(jq -r .queue_url endpoints.json)" --kubeconfig kubeconfig \
				--metrics-listen "127.0.0.1:$port" "${level[@]}" >process.log 2>&1 &
		fi
		pids+=($!)
		deadline=$(($(date +%s) + CASE_LIMIT))
		until curl -sSf "$k8s/sim/v1/result" >result.json 2>/dev/null && python3 "$CHECK" result.json "${nodes[@]}"; do
			if [ "$(date +%s)" -ge "$deadline" ]; then
				rc=1
				break
			fi
			sleep 0.2
		done
		curl -sSf "$k8s/sim/v1/faults" >faults.json 2>/dev/null || echo '{}' >faults.json
		curl -sSf "127.0.0.1:$port/metrics" >metrics 2>/dev/null || : >metrics
		if ! python3 "$CHECK" result.json "${nodes[@]}" --drained >check.txt 2>&1; then
			echo "FAIL: $([ "$rc" -ne 0 ] && echo "not drained within ${CASE_LIMIT}s; ")$(grep FAIL check.txt | tr '\n' ' ')" >verdict
		elif ! (eval "$evidence") && [ -n "${FAULTS_SEED:-}" ]; then
			echo "ok (but the fault never fired with seed $seed): $(grep -v FAIL check.txt | tr -s ' ' | tr '\n' ';')" >verdict
		elif ! (eval "$evidence"); then
			echo "FAIL: the fault never fired ($evidence); faults $(jq -c . faults.json)" >verdict
		else
			echo "ok (seed $seed): $(grep -v FAIL check.txt | tr -s ' ' | tr '\n' ';') faults $(jq -c . faults.json)" >verdict
		fi
	)
}

# name, mode, seed, the faults: section, and the evidence that the fault fired.
CASES=(
	"api_error|agent|100|  api_error_rate: 0.2|[ \$(jq .api_errors faults.json) -gt 0 ]"
	"api_latency|agent|101|  api_latency_ms: 150|[ \$(metric . spotdrain_api_requests_total) -gt 0 ]"
	"watch_drop|agent|103|  watch_drop_rate: 0.5|[ \$(jq .watches_dropped faults.json) -gt 0 ]"
	"watch_gone|agent|105|  watch_gone_rate: 0.5|[ \$(jq '.watches_gone + .lists_gone' faults.json) -gt 0 ]"
	"api_throttle|agent|102|  api_throttle_rate: 0.2|[ \$(jq .api_throttled faults.json) -gt 0 ]"
	"imds_error|agent|106|  imds_error_rate: 0.3|[ \$(metric . spotdrain_imds_request_errors_total) -gt 0 ]"
	"imds_timeout|agent|107|  imds_timeout_rate: 0.2|[ \$(metric . spotdrain_imds_request_errors_total) -gt 0 ]"
	# The 500s land on whichever SQS calls come next (with ten long polls waiting, often a delete or a
	# visibility batch, not a receive): any call the controller saw fail with it is the evidence.
	"sqs_error|controller|108|  sqs_error_rate: 0.3|grep -q 'server-error\\|InternalError' process.log"
	"sqs_duplicate|controller|109|  sqs_duplicate_rate: 1|[ \$(metric . spotdrain_notices_duplicate_total) -gt 0 ]"
	# Both throttle forms met and retried (RequestThrottled 403, ThrottlingException 400), never unreadable.
	"sqs_throttle|controller|112|  sqs_throttle_rate: 0.5|grep -q 'failed: throttled RequestThrottled' process.log \
&& grep -q 'failed: throttled ThrottlingException' process.log && [ \$(metric . spotdrain_queue_unreadable_total) -eq 0 ]"
	"sts_error|controller|111|  sts_error_rate: 0.5|grep -q InternalFailure process.log"
	# These seeds make the first two cordon PATCHes of the node fail: the cordon must be retried.
	"api_error_cordon|agent|2|  api_error_rate: 0.2|[ \$(jq .api_errors faults.json) -gt 0 ]|"
	"api_throttle_cordon|agent|4|  api_throttle_rate: 0.2|[ \$(jq .api_throttled faults.json) -gt 0 ]|"
)

ran=()
KNOWN=()
for c in "${CASES[@]}"; do
	IFS='|' read -r name mode seed faults evidence known <<<"$c"
	case "${FAULTS_SEED:-}" in
	"") ;;
	random) seed=$((RANDOM * 32768 + RANDOM)) ;;
	*) seed=$FAULTS_SEED ;;
	esac
	if [ -n "${FAULTS_CASES:-}" ] && ! [[ " $FAULTS_CASES " == *" $name "* ]]; then
		continue
	fi
	log "case $name ($mode mode, seed $seed): faults {$(echo "$faults" | tr -s ' ')}"
	run_case "$name" "$mode" "$seed" "$faults" "$evidence" &
	ran+=("$name")
	[ -z "$known" ] || KNOWN+=("$name")
done
wait

failed=0
for name in "${ran[@]}"; do
	verdict=$(cat "$TEST_TMP/$name/verdict" 2>/dev/null || echo "FAIL: no verdict")
	echo "$name: $verdict"
	if [[ " ${KNOWN[*]} " == *" $name "* ]] && [ -z "${FAULTS_STRICT:-}" ]; then
		if [[ "$verdict" == ok* ]]; then
			echo "$name: the known bug is fixed: drop its mark in this test"
		else
			echo "$name: KNOWN BUG, not counted (FAULTS_STRICT=1 counts it)"
		fi
		continue
	fi
	if [[ "$verdict" != ok* ]]; then
		failed=1
		echo "--- $name: process log (tail)" >&2
		tail -n 30 "$TEST_TMP/$name/process.log" >&2 || true
	fi
done
# FAULTS_KEEP=DIR keeps every case's scenario, logs, metrics and result for a look afterwards.
[ -z "${FAULTS_KEEP:-}" ] || { mkdir -p "$FAULTS_KEEP" && cp -r "$TEST_TMP"/. "$FAULTS_KEEP"/; }
[ "$failed" -eq 0 ] || fail "a drain under faults did not keep its promises"
echo "ok"
