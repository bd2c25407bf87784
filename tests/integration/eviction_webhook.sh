#!/usr/bin/env bash
# Issue #15: the controller's eviction webhook, as the chart renders it. The controller release is rendered
# (tests/tools/chartrender: Helm's genCA/genSignedCert for the serving certificate), and a real
# `spotdrain controller` runs with the rendered configuration and certificate against sim serve. Then
# AdmissionReview v1 requests, built as kube-apiserver builds them for the agent's pods/eviction CREATEs, go
# over TLS to the Service name the ValidatingWebhookConfiguration names, verified against its caBundle:
# - the agent on spot-a evicting a pod of spot-a: allowed;
# - the same agent evicting a pod of od-1: denied (403, says which node);
# - a pod the cluster does not have: denied; a token without the node-name claim: denied;
# - anyone else (the webhook configuration would not send it; if it comes anyway): allowed, unjudged;
# - not an AdmissionReview v1: 400.
# The denials are counted by reason on /metrics and raised as eviction-denied.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ -x "$SPOTDRAIN" ] || skip "$SPOTDRAIN not built"
command -v jq >/dev/null 2>&1 || skip "jq not installed"
command -v curl >/dev/null 2>&1 || skip "curl not installed"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || skip "python3 not installed"
"$PY" -c 'import yaml' 2>/dev/null || skip "python3 yaml not installed"
RENDER=$(build_chartrender) || skip "no Go with Debian's sprig and yaml sources to render the chart"

cat >"$TEST_TMP/values.yaml" <<'EOF'
mode: controller
controller:
  queueURL: https://sqs.us-east-1.amazonaws.com/123456789012/spotdrain-events
  evictionWebhook:
    enabled: true
    agentServiceAccounts: [{namespace: kube-system, name: spotdrain-agent}]
EOF
log "the controller release, rendered with the eviction webhook"
"$RENDER" "$ROOT/helm/spotdrain" spotdrain kube-system "$TEST_TMP/values.yaml" >"$TEST_TMP/release.yaml" ||
	fail "the chart does not render"
PORT=$(free_port)
METRICS_PORT=$(free_port)
"$PY" - "$TEST_TMP" "$PORT" <<'PY'
import base64, json, sys, yaml
tmp, port = sys.argv[1], sys.argv[2]
docs = [d for d in yaml.safe_load_all(open(f"{tmp}/release.yaml")) if d]
(vwc,) = [d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"]
(wh,) = vwc["webhooks"]
svc_ref = wh["clientConfig"]["service"]
(svc,) = [d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == svc_ref["name"]]
(dep,) = [d for d in docs if d["kind"] == "Deployment"]
(cm,) = [d for d in docs if d["kind"] == "ConfigMap"]
(c,) = dep["spec"]["template"]["spec"]["containers"]
# What the API server is told: TLS to the Service, this path, this CA; only the agents' evictions.
assert wh["admissionReviewVersions"] == ["v1"] and wh["sideEffects"] == "None", wh
assert wh["failurePolicy"] == "Fail", wh["failurePolicy"]
assert wh["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                        "resources": ["pods/eviction"], "scope": "Namespaced"}], wh["rules"]
assert svc_ref["namespace"] == svc["metadata"]["namespace"] and svc_ref["port"] == 443
(p,) = svc["spec"]["ports"]
port_names = {q["name"]: q["containerPort"] for q in c["ports"]}
assert p["port"] == 443 and p["targetPort"] in port_names, (p, port_names)
# The certificate the pod serves is the Secret's, mounted where the configuration says.
(vol,) = [v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "webhook-tls"]
(secret,) = [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == vol["secret"]["secretName"]]
(mount,) = [m for m in c["volumeMounts"] if m["name"] == "webhook-tls"]
cfg = yaml.safe_load(cm["data"]["spotdrain.yaml"])
ctl = cfg["controller"]
assert ctl["admission_cert_file"] == mount["mountPath"] + "/tls.crt", (ctl, mount)
assert ctl["admission_listen"].endswith(":%d" % port_names[p["targetPort"]]), ctl
for k in ("tls.crt", "tls.key"):
    open(f"{tmp}/{k}", "wb").write(base64.b64decode(secret["data"][k]))
open(f"{tmp}/ca.pem", "wb").write(base64.b64decode(wh["clientConfig"]["caBundle"]))
# Run it here: the same configuration, the files where this test keeps them, a free port on loopback.
ctl["admission_cert_file"], ctl["admission_key_file"] = f"{tmp}/tls.crt", f"{tmp}/tls.key"
ctl["admission_listen"] = "127.0.0.1:" + port
cfg["log"] = {"format": "text", "level": "info"}
yaml.safe_dump(cfg, open(f"{tmp}/spotdrain.yaml", "w"))
host = "%s.%s.svc" % (svc_ref["name"], svc_ref["namespace"])
json.dump({"host": host, "path": svc_ref["path"], "match": wh["matchConditions"],
           "users": ctl["admission_agent_users"]}, open(f"{tmp}/webhook.json", "w"))
print(f"webhook {host}{svc_ref['path']} for {ctl['admission_agent_users']}")
PY
HOST=$(jq -r .host "$TEST_TMP/webhook.json")
WPATH=$(jq -r .path "$TEST_TMP/webhook.json")
AGENT=$(jq -r '.users[0]' "$TEST_TMP/webhook.json")

cat >"$TEST_TMP/scenario.yaml" <<'EOF'
name: evictions
mode: controller
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot, allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, allocatable: {cpu: "8", memory: 32Gi, pods: 58}}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 4, placement: {spot-a: 2, od-1: 2},
     requests: {cpu: 100m, memory: 128Mi}, pdb: {max_unavailable: 1}}
EOF
start_sim evictions "$TEST_TMP/scenario.yaml"
QUEUE_URL=$(sim_endpoint queue_url)
pod_on() {
	curl -sSf "$SIM_URL/api/v1/namespaces/shop/pods?fieldSelector=spec.nodeName%3D$1" | jq -r '.items[0].metadata.name'
}
POD_A=$(pod_on spot-a)
POD_OD=$(pod_on od-1)
case "$POD_A $POD_OD" in *null* | " "* | *" ") fail "no pods placed on spot-a and od-1" ;; esac

log "controller with the rendered configuration and certificate"
AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=secret AWS_REGION=us-east-1 \
	"$SPOTDRAIN" controller --config "$TEST_TMP/spotdrain.yaml" --queue-url "$QUEUE_URL" \
	--kubeconfig "$SIM_KUBECONFIG" --no-leader-election --metrics-listen "127.0.0.1:$METRICS_PORT" \
	>"$TEST_TMP/controller.log" 2>&1 &
CTL_PID=$!
SIM_PIDS+=("$CTL_PID")

# review USER NODE|- POD [UID]: the AdmissionReview kube-apiserver sends for POST
# /api/v1/namespaces/shop/pods/POD/eviction by USER, whose token names NODE ("-": no claim).
review() {
	jq -cn --arg user "$1" --arg node "$2" --arg pod "$3" --arg uid "${4:-9d1c3a7e-0000-4000-8000-000000000001}" '
	{apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: ({uid: $uid,
	  kind: {group: "policy", version: "v1", kind: "Eviction"},
	  resource: {group: "", version: "v1", resource: "pods"}, subResource: "eviction",
	  requestKind: {group: "policy", version: "v1", kind: "Eviction"},
	  requestResource: {group: "", version: "v1", resource: "pods"}, requestSubResource: "eviction",
	  name: $pod, namespace: "shop", operation: "CREATE",
	  userInfo: ({username: $user, uid: "u-1", groups: ["system:serviceaccounts", "system:authenticated"]} +
	    (if $node == "-" then {} else {extra: {"authentication.kubernetes.io/node-name": [$node],
	      "authentication.kubernetes.io/pod-name": ["spotdrain-agent-x7k2p"]}} end)),
	  object: {apiVersion: "policy/v1", kind: "Eviction", metadata: {name: $pod, namespace: "shop"}},
	  oldObject: null, dryRun: false,
	  options: {apiVersion: "meta.k8s.io/v1", kind: "CreateOptions"}})}'
}
# post BODY: the answer's HTTP status and body, over TLS to the Service's name, checked against the caBundle.
post() {
	curl -sS --max-time 5 --cacert "$TEST_TMP/ca.pem" --resolve "$HOST:$PORT:127.0.0.1" \
		-H 'Content-Type: application/json' --data-binary "$1" -w '\n%{http_code}' "https://$HOST:$PORT$WPATH"
}
# verdict USER NODE POD: "allowed" or "denied CODE MESSAGE"; fails unless the uid comes back.
verdict() {
	local out uid=9d1c3a7e-0000-4000-8000-$RANDOM$RANDOM
	out=$(post "$(review "$1" "$2" "$3" "$uid")") || return 1
	[ "$(tail -n1 <<<"$out")" = 200 ] || return 1
	head -n -1 <<<"$out" | jq -er --arg uid "$uid" '
		select(.apiVersion == "admission.k8s.io/v1" and .kind == "AdmissionReview" and .response.uid == $uid) |
		if .response.allowed then "allowed" else "denied \(.response.status.code) \(.response.status.message)" end'
}
own_allowed() { [ "$(verdict "$AGENT" spot-a "$POD_A")" = allowed ]; }
metric() { curl -sSf "127.0.0.1:$METRICS_PORT/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

log "the agent on spot-a evicts its own pod $POD_A: allowed (once the controller has listed the pods)"
wait_for 20 own_allowed || { cat "$TEST_TMP/controller.log" >&2; fail "the own pod's eviction was not allowed"; }

log "the agent on spot-a evicts $POD_OD of od-1: denied"
v=$(verdict "$AGENT" spot-a "$POD_OD") || fail "no answer"
[[ $v == "denied 403 "*"may not evict pod shop/$POD_OD, which is bound to node od-1"* ]] || fail "got: $v"
log "the agent on od-1 evicts the same pod: allowed"
[ "$(verdict "$AGENT" od-1 "$POD_OD")" = allowed ] || fail "od-1's agent was refused its own pod"

log "a pod the cluster does not have, and a token without the node claim: denied"
v=$(verdict "$AGENT" spot-a ghost) || fail "no answer"
[[ $v == "denied 403 "*"knows no pod shop/ghost"* ]] || fail "got: $v"
v=$(verdict "$AGENT" - "$POD_A") || fail "no answer"
[[ $v == "denied 403 "*"does not name one node"* ]] || fail "got: $v"

log "anyone else: not judged"
[ "$(verdict system:serviceaccount:kube-system:spotdrain spot-a "$POD_OD")" = allowed ] ||
	fail "the controller's own eviction was judged"
[ "$(verdict system:serviceaccount:other:spotdrain-agent spot-a "$POD_OD")" = allowed ] ||
	fail "an agent of another release was judged"

log "not an AdmissionReview v1: 400"
out=$(post '{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}}')
[ "$(tail -n1 <<<"$out")" = 400 ] || fail "a v1beta1 review got: $out"

log "what is not a review: another path 404, GET 405, over 1 MiB 413"
code() { curl -sS --max-time 5 --cacert "$TEST_TMP/ca.pem" --resolve "$HOST:$PORT:127.0.0.1" -o /dev/null -w '%{http_code}' "$@"; }
[ "$(code --data-binary '{}' "https://$HOST:$PORT/mutate")" = 404 ] || fail "another path was not 404"
[ "$(code "https://$HOST:$PORT$WPATH")" = 405 ] || fail "a GET was not 405"
head -c $((1024 * 1024 + 1)) /dev/zero | tr '\0' ' ' >"$TEST_TMP/big.json"
[ "$(code -H 'Content-Type: application/json' --data-binary "@$TEST_TMP/big.json" "https://$HOST:$PORT$WPATH")" = 413 ] ||
	fail "a body over 1 MiB was not 413"
log "a client that does not trust the caBundle's CA gets no answer"
! curl -sS --max-time 5 --resolve "$HOST:$PORT:127.0.0.1" --data-binary '{}' "https://$HOST:$PORT$WPATH" 2>/dev/null ||
	fail "the serving certificate verified without the caBundle"

log "the denials on /metrics and as alerts"
[ "$(metric 'spotdrain_admission_reviews_total{verdict="denied",reason="other-node"}')" = 1 ] ||
	fail "other-node denials: $(metric 'spotdrain_admission_reviews_total{verdict="denied",reason="other-node"}')"
[ "$(metric 'spotdrain_admission_reviews_total{verdict="denied",reason="unknown-pod"}')" = 1 ] || fail "unknown-pod"
[ "$(metric 'spotdrain_admission_reviews_total{verdict="denied",reason="no-node-claim"}')" = 1 ] || fail "no claim"
[ "$(metric 'spotdrain_admission_reviews_total{verdict="not-matched",reason=""}')" = 2 ] || fail "not matched"
grep -q 'alert=eviction-denied' "$TEST_TMP/controller.log" || fail "no eviction-denied alert"

kill -TERM "$CTL_PID"
wait "$CTL_PID" || fail "controller exited $? after SIGTERM"
log "ok"
