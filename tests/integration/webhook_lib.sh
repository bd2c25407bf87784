# shellcheck shell=bash
# Helpers of the eviction webhook's tests (eviction_webhook.sh: the controller's; admission_webhook.sh:
# agent mode's `spotdrain admission`), sourced after lib.sh; they need $PY with yaml, jq and curl.

# webhook_requirements: skips the test without what it needs; sets PY and HELM (the pinned Helm, find_helm).
webhook_requirements() {
	[ -x "$SPOTDRAIN" ] || skip "$SPOTDRAIN not built"
	requires jq curl
	PY=/usr/bin/python3
	[ -x "$PY" ] || PY=$(command -v python3) || skip "python3 not installed"
	"$PY" -c 'import yaml' 2>/dev/null || skip "python3 yaml not installed"
	# shellcheck disable=SC2034 # for the test that sources this
	HELM=$(find_helm) || skip "no pinned Helm to render the chart (scripts/install-deps builds it)"
}

# webhook_config RELEASE PORT: from a rendered release, what the API server is told (checked: TLS to the
# Service, the path, the caBundle, only pods/eviction CREATEs) and what the serving pods run with; writes
# $TEST_TMP/spotdrain.yaml (their configuration, the webhook on 127.0.0.1:PORT with the certificate's
# files here), tls.crt, tls.key, ca.pem and webhook.json {host, path, match, users}; sets HOST, WPATH and
# AGENT (the first agent user).
webhook_config() {
	"$PY" - "$1" "$TEST_TMP" "$2" <<'PY' || fail "the rendered webhook is not what the API server needs"
import base64, json, sys, yaml
release, tmp, port = sys.argv[1], sys.argv[2], sys.argv[3]
docs = [d for d in yaml.safe_load_all(open(release)) if d]
(vwc,) = [d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"]
(wh,) = vwc["webhooks"]
svc_ref = wh["clientConfig"]["service"]
(svc,) = [d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == svc_ref["name"]]
# The pods that serve it: the controller's, or agent mode's admission Deployment; their configuration.
(dep,) = [d for d in docs if d["kind"] == "Deployment" and
          any(v["name"] == "webhook-tls" for v in d["spec"]["template"]["spec"]["volumes"])]
(cmref,) = [v["configMap"]["name"] for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "config"]
(cm,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == cmref]
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
pod_labels = dep["spec"]["template"]["metadata"]["labels"]
assert all(pod_labels.get(k) == v for k, v in svc["spec"]["selector"].items()), (svc["spec"]["selector"], pod_labels)
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
	# shellcheck disable=SC2034 # for the test that sources this
	AGENT=$(jq -r '.users[0]' "$TEST_TMP/webhook.json")
}

# webhook_sim: sim serve with two nodes, spot-a and od-1, each running pods of shop/web; sets POD_A and
# POD_OD (one pod of each node) besides what start_sim sets.
webhook_sim() {
	cat >"$TEST_TMP/scenario.yaml" <<'YAML'
name: evictions
mode: controller
nodes:
  - {name: spot-a, zone: us-east-1a, capacity_type: spot, allocatable: {cpu: "4", memory: 16Gi, pods: 29}}
  - {name: od-1, zone: us-east-1b, capacity_type: on-demand, allocatable: {cpu: "8", memory: 32Gi, pods: 58}}
workloads:
  - {name: web, namespace: shop, kind: Deployment, replicas: 4, placement: {spot-a: 2, od-1: 2},
     requests: {cpu: 100m, memory: 128Mi}, pdb: {max_unavailable: 1}}
YAML
	start_sim evictions "$TEST_TMP/scenario.yaml"
	POD_A=$(webhook_pod_on spot-a)
	POD_OD=$(webhook_pod_on od-1)
	case "$POD_A $POD_OD" in *null* | " "* | *" ") fail "no pods placed on spot-a and od-1" ;; esac
}
webhook_pod_on() {
	curl -sSf "$SIM_URL/api/v1/namespaces/shop/pods?fieldSelector=spec.nodeName%3D$1" | jq -r '.items[0].metadata.name'
}

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
