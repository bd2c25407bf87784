#!/usr/bin/env bash
# The Helm chart: yamllint on values.yaml, the hand-rendered example manifests and the YAML blocks of the
# README (the templates are Go templates, not YAML); values.schema.json is valid JSON and, where a Python with
# jsonschema exists, accepts the chart's values and examples and rejects bad ones; every .Values path a
# template uses exists in values.yaml; the rendered examples hold what the chart promises (RBAC verbs exactly,
# no wildcards, non-root, read-only root, no capabilities, the agent's and the controller's scheduling); and,
# with the pinned Helm that scripts/install-deps builds (find_helm), `helm lint --strict` passes and
# `helm template` of the examples' values equals the hand-rendered examples.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires yamllint
CHART=$ROOT/helm/spotdrain
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || skip "python3 not installed"
"$PY" -c 'import yaml' 2>/dev/null || skip "python3 yaml not installed"

log "yamllint: values and examples"
yamllint -s -c "$CHART/.yamllint" "$CHART/values.yaml" "$CHART"/examples/*.yaml

log "yamllint: the README's yaml blocks"
"$PY" - "$CHART/README.md" "$TEST_TMP" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"^```yaml\n(.*?)^```", text, re.S | re.M)
assert blocks, "no yaml blocks in the README"
for i, b in enumerate(blocks):
    open(f"{sys.argv[2]}/readme-{i}.yaml", "w").write(b)
print(f"{len(blocks)} blocks")
EOF
yamllint -s -c "$CHART/.yamllint" "$TEST_TMP"/readme-*.yaml

log "values.schema.json is JSON"
"$PY" -m json.tool "$CHART/values.schema.json" >/dev/null

log "every .Values path in the templates exists in values.yaml"
"$PY" - "$CHART" <<'EOF'
import glob, re, sys, yaml
chart = sys.argv[1]
values = yaml.safe_load(open(f"{chart}/values.yaml"))
bad = []
for t in sorted(glob.glob(f"{chart}/templates/*")):
    for path in sorted(set(re.findall(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)", open(t).read()))):
        node = values
        for part in path.strip(".").split("."):
            if not isinstance(node, dict) or part not in node:
                bad.append(f"{t}: .Values{path}")
                break
            node = node[part]
assert not bad, "unknown values:\n" + "\n".join(bad)
EOF

log "the schema accepts the values and the examples' values, and rejects bad ones"
SCHEMA_PY=
for p in /usr/bin/python3 python3; do
	if "$p" -c 'import jsonschema, yaml' 2>/dev/null; then
		SCHEMA_PY=$p
		break
	fi
done
if [ -n "$SCHEMA_PY" ]; then
	"$SPOTDRAIN" check-config >"$TEST_TMP/defaults.yaml"
	"$SCHEMA_PY" - "$CHART" "$TEST_TMP/defaults.yaml" "$SPOTDRAIN" <<'EOF'
import copy, glob, json, sys, jsonschema, yaml
chart = sys.argv[1]
schema = json.load(open(f"{chart}/values.schema.json"))
jsonschema.Draft7Validator.check_schema(schema)
base = yaml.safe_load(open(f"{chart}/values.yaml"))

def merge(a, b):
    out = copy.deepcopy(a)
    for k, v in (b or {}).items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out

def ok(v):
    return not list(jsonschema.Draft7Validator(schema).iter_errors(v))

assert ok(base), list(jsonschema.Draft7Validator(schema).iter_errors(base))
for f in sorted(glob.glob(f"{chart}/examples/*-values.yaml")):
    v = merge(base, yaml.safe_load(open(f)))
    assert ok(v), (f, [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(v)])
bad = [
    {"mode": "sidecar"},
    {"mode": "controller"},                      # no queue URL
    {"typo": 1},
    {"metrics": {"port": 0}},
    {"config": {"metrics_listen": "0.0.0.0:1"}},  # the chart's own key
    {"agent": {"spotNodeAffinity": {"terms": [{"key": "x", "values": []}]}}},
    {"controller": {"queueURL": "sqs://nope"}},
    {"config": {"typo": 1}},                     # unknown keys under config: spotdrain would refuse to start
    {"config": {"drain": {"polcy": "respect"}}},
    {"config": {"alerts": {"webhook_url": "https://x", "webhok_format": "json"}}},
]
for b in bad:
    assert not ok(merge(base, b)), f"schema accepted {b}"
# Every key spotdrain knows (check-config's defaults) is one the schema's config allows, and no other.
def keys(d, pre=""):
    for k, v in d.items():
        yield pre + k
        if isinstance(v, dict) and v:
            yield from keys(v, pre + k + ".")
def schema_keys(sc, pre=""):
    for k, v in sc.get("properties", {}).items():
        yield pre + k
        yield from schema_keys(v, pre + k + ".")
known = set(keys(yaml.safe_load(open(sys.argv[2]))))
allowed = set(schema_keys(schema["properties"]["config"]))
# notices.KIND.action is also written nested (notices: {spot_interruption: {action: ...}}).
assert known <= allowed, f"keys spotdrain knows that the schema rejects: {sorted(known - allowed)}"
# A key that moved to its module's section keeps its old name in the schema while spotdrain still reads it
# (with a warning): check-config --set OLD=VALUE must be accepted, taking the new key's default as a value.
def renamed(k):
    import subprocess
    new = [n for n in known if n.rsplit(".", 1)[-1] == k.rsplit(".", 1)[-1] and n != k]
    d = yaml.safe_load(open(sys.argv[2]))
    for n in new:
        v = d
        for part in n.split("."):
            v = v[part]
        r = subprocess.run([sys.argv[3], "check-config", "--set", f"{k}={v}"], capture_output=True, text=True)
        if r.returncode == 0 and f"{k} is now {n}" in r.stderr:
            return True
    return False
stale = sorted(k for k in allowed - known if not k.startswith("notices.") and not renamed(k))
assert not stale, f"keys in the schema that spotdrain does not know: {stale}"
print("schema: ok")
EOF
else
	echo "no python3 with jsonschema: schema validation skipped"
fi

log "the rendered examples"
"$PY" - "$CHART" <<'EOF'
import sys, yaml
chart = sys.argv[1]

def load(name):
    docs = [d for d in yaml.safe_load_all(open(f"{chart}/examples/{name}")) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}, docs

def one(docs, kind):
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"{kind}: {len(found)}"
    return found[0]

expected_rules = {
    ("", "nodes"): {"get", "list", "watch", "patch"},
    ("", "pods"): {"get", "list", "watch", "delete"},
    ("", "pods/eviction"): {"create"},
    ("", "pods/log"): {"get"},
    ("policy", "poddisruptionbudgets"): {"get", "list", "watch"},
    ("apps", "replicasets"): {"get", "list"},
    ("apps", "statefulsets"): {"get", "list"},
    ("apps", "daemonsets"): {"get", "list"},
    ("apps", "deployments"): {"get", "list", "patch"},
    ("autoscaling", "horizontalpodautoscalers"): {"list"},
    # drain.target_groups (default true): which pods are behind which target group, read only
    ("", "services"): {"list"},
    ("elbv2.k8s.aws", "targetgroupbindings"): {"get", "list", "watch"},
}
# The controller completes ASG lifecycle actions, once the node's VolumeAttachments are gone.
controller_rules = dict(expected_rules)
controller_rules[("storage.k8s.io", "volumeattachments")] = {"list"}

def rules_of(role):
    got = {}
    for r in role["rules"]:
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in r[field], f"wildcard in {role['metadata']['name']}: {r}"
        for g in r["apiGroups"]:
            for res in r["resources"]:
                got.setdefault((g, res), set()).update(r["verbs"])
    return got

def check_pod(spec, mode):
    # The image is Linux's: every pod of the chart stays off Windows nodes.
    assert spec["nodeSelector"]["kubernetes.io/os"] == "linux", spec.get("nodeSelector")
    psc = spec["securityContext"]
    assert psc["runAsNonRoot"] is True and psc["runAsUser"] == 65532, psc
    assert psc["seccompProfile"]["type"] == "RuntimeDefault", psc
    (c,) = spec["containers"]
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False, sc
    assert sc["capabilities"]["drop"] == ["ALL"] and "add" not in sc["capabilities"], sc
    assert c["args"][0] == mode, c["args"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["ports"][0]["containerPort"] == 9464
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    return c, env

def roles_by_name(docs):
    return {d["metadata"]["name"]: rules_of(d) for d in docs if d["kind"] == "Role"}

# Events only in "default" (where the API server keeps Events about a Node), by a Role of their own, bound
# to the release's service account.
events_rules = {("", "events"): {"create", "patch"}}

def check_events_role(by, docs):
    role = by[("Role", "spotdrain-events")]
    assert role["metadata"]["namespace"] == "default", role["metadata"]
    assert by[("RoleBinding", "spotdrain-events")]["metadata"]["namespace"] == "default"
    assert rules_of(role) == events_rules, rules_of(role)
    rb = by[("RoleBinding", "spotdrain-events")]
    assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "spotdrain-events"}
    subjects = [{"kind": "ServiceAccount", "name": "spotdrain", "namespace": "kube-system"}]
    if ("Deployment", "spotdrain-admission") in by:
        subjects.append({"kind": "ServiceAccount", "name": "spotdrain-admission", "namespace": "kube-system"})
    assert rb["subjects"] == subjects, rb["subjects"]

# Events about pods, in the pods' namespaces: create and patch of Events alone, by a ClusterRole of its own.
def check_pod_events(by):
    role = by[("ClusterRole", "spotdrain-pod-events")]
    assert rules_of(role) == events_rules, rules_of(role)
    crb = by[("ClusterRoleBinding", "spotdrain-pod-events")]
    assert crb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "spotdrain-pod-events"}
    assert crb["subjects"] == [{"kind": "ServiceAccount", "name": "spotdrain", "namespace": "kube-system"}]

for name, mode in (("agent.yaml", "agent"), ("controller.yaml", "controller")):
    by, docs = load(name)
    want = expected_rules if mode == "agent" else controller_rules
    assert rules_of(by[("ClusterRole", "spotdrain")]) == want, rules_of(by[("ClusterRole", "spotdrain")])
    check_pod_events(by)
    cfg = yaml.safe_load(by[("ConfigMap", "spotdrain")]["data"]["spotdrain.yaml"])
    # The host-network agent never listens on every address: its flag names the node's, else loopback.
    assert cfg["metrics_listen"] == ("127.0.0.1:9464" if mode == "agent" else "0.0.0.0:9464"), cfg
    check_events_role(by, docs)
    assert not [d for d in docs if d["kind"] == "ClusterRole" and ("", "events") in rules_of(d)
                and d["metadata"]["name"] != "spotdrain-pod-events"]
    svc = by[("Service", "spotdrain")]
    if mode == "agent":
        ds = one(docs, "DaemonSet")
        spec = ds["spec"]["template"]["spec"]
        c, env = check_pod(spec, mode)
        assert spec["hostNetwork"] is True and spec["dnsPolicy"] == "ClusterFirstWithHostNet"
        assert spec["priorityClassName"] == "system-node-critical"
        assert spec["tolerations"] == [{"operator": "Exists"}]
        assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
        assert c["command"] == ["/usr/local/bin/spotdrain-agent"], c.get("command")
        assert c["args"][-2:] == ["--metrics-listen", "[$(HOST_IP)]:9464"], c["args"]
        assert env["HOST_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP", env["HOST_IP"]
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        keys = {(t["matchExpressions"][0]["key"], tuple(t["matchExpressions"][0]["values"])) for t in terms}
        assert keys == {("karpenter.sh/capacity-type", ("spot",)), ("eks.amazonaws.com/capacityType", ("SPOT",))}
        # The eviction webhook of an agent-only install: `spotdrain admission`, off the spot nodes, with
        # a token that may only read pods (its answers: eviction_webhook.sh).
        adm = by[("Deployment", "spotdrain-admission")]
        aspec = adm["spec"]["template"]["spec"]
        ac, _ = check_pod(aspec, "admission")
        assert adm["spec"]["replicas"] == 2 and aspec["serviceAccountName"] == "spotdrain-admission"
        assert not aspec.get("hostNetwork") and "tolerations" not in aspec
        (aterm,) = aspec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        notin = {(e["key"], e["operator"], tuple(e["values"])) for e in aterm["matchExpressions"]}
        assert notin == {(k, "NotIn", v) for k, v in keys}, notin
        assert rules_of(by[("ClusterRole", "spotdrain-admission")]) == {("", "pods"): {"get", "list", "watch"}}
        acrb = by[("ClusterRoleBinding", "spotdrain-admission")]
        assert acrb["roleRef"]["name"] == "spotdrain-admission" and acrb["subjects"] == [
            {"kind": "ServiceAccount", "name": "spotdrain-admission", "namespace": "kube-system"}], acrb
        asel = adm["spec"]["selector"]["matchLabels"]
        assert asel["app.kubernetes.io/component"] == "admission" and asel != ds["spec"]["selector"]["matchLabels"]
        apdb = by[("PodDisruptionBudget", "spotdrain-admission")]
        assert apdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": asel}}, apdb["spec"]
        acfg = yaml.safe_load(by[("ConfigMap", "spotdrain-admission")]["data"]["spotdrain.yaml"])
        assert acfg["controller"]["admission_agent_users"] == ["system:serviceaccount:kube-system:spotdrain"]
        assert set(acfg["controller"]) == {"admission_listen", "admission_cert_file", "admission_key_file",
                                           "admission_agent_users"}, acfg
        (wh,) = by[("ValidatingWebhookConfiguration", "spotdrain-evictions")]["webhooks"]
        assert wh["failurePolicy"] == "Fail" and wh["rules"][0]["resources"] == ["pods/eviction"], wh
        assert by[("Service", "spotdrain-webhook")]["spec"]["selector"] == asel
        assert [v["secret"]["secretName"] for v in aspec["volumes"] if v["name"] == "webhook-tls"] == [
            "spotdrain-webhook-tls"]
        # Only the webhook's Deployment and its budget: the agent itself is the DaemonSet.
        assert {d["metadata"]["name"] for d in docs if d["kind"] in ("Deployment", "PodDisruptionBudget")} == {
            "spotdrain-admission"}
        assert set(roles_by_name(docs)) == {"spotdrain-events", "spotdrain-estimates"}, roles_by_name(docs)
        # The estimates the agents share: one ConfigMap made by the chart, read and updated by name only.
        est = by[("Role", "spotdrain-estimates")]
        assert est["rules"] == [{"apiGroups": [""], "resources": ["configmaps"],
                                 "resourceNames": ["spotdrain-estimates"], "verbs": ["get", "update"]}], est
        assert "data" not in by[("ConfigMap", "spotdrain-estimates")]
        erb = by[("RoleBinding", "spotdrain-estimates")]
        assert erb["subjects"] == [{"kind": "ServiceAccount", "name": "spotdrain", "namespace": "kube-system"}]
        # The admission policy that keeps the agent to its own node (its CEL: admission_policy.sh).
        vap = by[("ValidatingAdmissionPolicy", "spotdrain-own-node")]
        assert vap["apiVersion"] == "admissionregistration.k8s.io/v1" and vap["spec"]["failurePolicy"] == "Fail"
        vapb = by[("ValidatingAdmissionPolicyBinding", "spotdrain-own-node")]
        assert vapb["spec"] == {"policyName": "spotdrain-own-node", "validationActions": ["Deny"]}, vapb["spec"]
        sel = ds["spec"]["selector"]["matchLabels"]
    else:
        dep = one(docs, "Deployment")
        spec = dep["spec"]["template"]["spec"]
        c, env = check_pod(spec, mode)
        assert "command" not in c, c["command"]
        assert dep["spec"]["replicas"] == 2
        assert spec["priorityClassName"] == "system-cluster-critical"
        assert "NODE_NAME" not in env and not spec.get("hostNetwork")
        assert cfg["aws"]["queue_url"].startswith("https://sqs.")
        assert cfg["alerts"]["webhook_url"] == "file:/etc/spotdrain/webhook/url"
        got = roles_by_name(docs)
        assert set(got) == {"spotdrain-leader", "spotdrain-events"}, got
        assert got["spotdrain-leader"] == {("coordination.k8s.io", "leases"): {"get", "create", "update"},
                                           ("", "configmaps"): {"get", "create", "update"}}, got
        assert not [d for d in docs if d["kind"].startswith("ValidatingAdmissionPolicy")]
        # The agents' evictions held to their nodes by the controller (its answers: eviction_webhook.sh).
        (wh,) = by[("ValidatingWebhookConfiguration", "spotdrain-evictions")]["webhooks"]
        assert wh["failurePolicy"] == "Fail" and wh["rules"][0]["resources"] == ["pods/eviction"], wh
        assert wh["clientConfig"]["service"]["name"] == "spotdrain-webhook"
        assert by[("Service", "spotdrain-webhook")]["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
        assert cfg["controller"]["admission_agent_users"] == ["system:serviceaccount:kube-system:spotdrain-agent"]
        pdb = one(docs, "PodDisruptionBudget")
        sel = dep["spec"]["selector"]["matchLabels"]
        assert pdb["spec"]["selector"]["matchLabels"] == sel
        sa = one(docs, "ServiceAccount")
        assert "eks.amazonaws.com/role-arn" in sa["metadata"]["annotations"]
        sm = one(docs, "ServiceMonitor")
        assert sm["spec"]["selector"]["matchLabels"] == sel
        assert sm["spec"]["endpoints"][0]["port"] == "metrics"
    assert svc["spec"]["selector"] == sel
    labels = (one(docs, "DaemonSet") if mode == "agent" else one(docs, "Deployment"))["spec"]["template"]["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in sel.items()), (labels, sel)
    print(f"{name}: ok")
EOF
if HELM=$(find_helm); then
	log "helm lint --strict: the default values and each example's"
	for values in "" "$CHART/examples/agent-values.yaml" "$CHART/examples/controller-values.yaml"; do
		HELM_CACHE_HOME=$TEST_TMP/helm/cache HELM_CONFIG_HOME=$TEST_TMP/helm/config HELM_DATA_HOME=$TEST_TMP/helm/data \
			"$HELM" lint --strict --kube-version "$HELM_KUBE_VERSION" "$CHART" ${values:+--values "$values"} \
			>"$TEST_TMP/lint.out" 2>&1 || fail "helm lint ${values:-(defaults)}: $(cat "$TEST_TMP/lint.out")"
	done
	log "helm template renders the examples"
	for mode in agent controller; do
		helm_render "$CHART" spotdrain kube-system "$CHART/examples/$mode-values.yaml" >"$TEST_TMP/$mode.yaml" ||
			fail "rendering $mode failed"
		# An API server older than 1.30 (kubeVersion admits 1.23): no ValidatingAdmissionPolicy, no
		# webhook with matchConditions; the rest installs (NOTES.txt says what is missing).
		HELM_KUBE_VERSION=1.29.0 HELM_API_VERSIONS="" \
			helm_render "$CHART" spotdrain kube-system "$CHART/examples/$mode-values.yaml" >"$TEST_TMP/$mode-old.yaml" ||
			fail "rendering $mode for an old API server failed"
		! grep -Eq '^kind: (ValidatingAdmissionPolicy|ValidatingAdmissionPolicyBinding|ValidatingWebhookConfiguration)$' \
			"$TEST_TMP/$mode-old.yaml" || fail "$mode: admission objects rendered for an API server without them"
		grep -Eq '^kind: (DaemonSet|Deployment)$' "$TEST_TMP/$mode-old.yaml" || fail "$mode: nothing to run on an old API server"
		! grep -q 'admission_listen' "$TEST_TMP/$mode-old.yaml" || fail "$mode: a webhook listener configured without its webhook"
	done
	grep -Eq '^kind: ValidatingAdmissionPolicy$' "$TEST_TMP/agent.yaml" || fail "agent: no admission policy on a 1.30 API server"
	"$PY" - "$CHART" "$TEST_TMP" <<'PY'
import sys, yaml
chart, tmp = sys.argv[1], sys.argv[2]

def load(p):
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(open(p)) if d}
    # The chart's own CA and serving certificate are new at each rendering (genCA): the example leaves
    # them empty.
    for (kind, _), d in docs.items():
        if kind == "Secret" and d.get("type") == "kubernetes.io/tls" and "tls.key" in d.get("data", {}):
            d["data"] = {k: "" for k in d["data"]}
        if kind == "ValidatingWebhookConfiguration":
            for w in d["webhooks"]:
                if "caBundle" in w["clientConfig"]:
                    w["clientConfig"]["caBundle"] = ""
    return docs

def diff(x, y, path, out):
    if isinstance(x, dict) and isinstance(y, dict):
        for k in sorted(set(x) | set(y), key=str):
            if k not in x or k not in y:
                out.append(f"{path}/{k}: only in {'rendered' if k not in x else 'example'}")
            else:
                diff(x[k], y[k], f"{path}/{k}", out)
    elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        for i, (p, q) in enumerate(zip(x, y)):
            diff(p, q, f"{path}[{i}]", out)
    elif x != y:
        out.append(f"{path}: example {x!r}, rendered {y!r}")

for mode in ("agent", "controller"):
    want, got, out = load(f"{chart}/examples/{mode}.yaml"), load(f"{tmp}/{mode}.yaml"), []
    assert set(want) == set(got), (mode, set(want) ^ set(got))
    for k in want:
        diff(want[k], got[k], "/".join(k), out)
    assert not out, f"{mode}: examples/{mode}.yaml differs from the rendering:\n" + "\n".join(out)
    print(f"{mode}: the rendering equals the example")
PY
	log "other values render, and a controller without a queue URL does not"
	cat >"$TEST_TMP/v1.yaml" <<'YAML'
mode: agent
agent:
  spotNodeAffinity:
    enabled: false
  hostNetwork: false
rbac:
  create: false
serviceAccount:
  create: false
  name: existing
metrics:
  service:
    enabled: false
YAML
	helm_render "$CHART" other default "$TEST_TMP/v1.yaml" >"$TEST_TMP/v1.out" || fail "rendering v1 failed"
	"$PY" - "$TEST_TMP/v1.out" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
kinds = sorted(d["kind"] for d in docs)
# The eviction webhook's Deployment keeps a service account of its own; no RBAC without rbac.create. The
# estimates ConfigMap is made either way (RBAC made elsewhere needs it as well).
assert kinds == ["ConfigMap", "ConfigMap", "ConfigMap", "DaemonSet", "Deployment", "PodDisruptionBudget", "Secret",
                 "Service", "ServiceAccount", "ValidatingWebhookConfiguration"], kinds
(vwc,) = [d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"]
assert "system:serviceaccount:default:existing" in vwc["webhooks"][0]["matchConditions"][0]["expression"], vwc
ds = [d for d in docs if d["kind"] == "DaemonSet"][0]
spec = ds["spec"]["template"]["spec"]
assert "affinity" not in spec and spec["hostNetwork"] is False and spec["serviceAccountName"] == "existing", spec
# Without host networking the pod's own address is the one to serve on.
env = {e["name"]: e for e in spec["containers"][0]["env"]}
assert env["HOST_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP", env["HOST_IP"]
assert ds["metadata"]["name"] == "other-spotdrain"
print("v1: ok")
PY
	log "drain.policy respect: no pod may be deleted, so the ClusterRole has no delete on pods"
	printf 'config:\n  drain:\n    policy: respect\n' >"$TEST_TMP/v3.yaml"
	helm_render "$CHART" spotdrain kube-system "$TEST_TMP/v3.yaml" >"$TEST_TMP/v3.out" || fail "rendering v3 failed"
	"$PY" - "$TEST_TMP/v3.out" <<'PY'
import sys, yaml
(role,) = [d for d in yaml.safe_load_all(open(sys.argv[1]))
           if d and d["kind"] == "ClusterRole" and d["metadata"]["name"] == "spotdrain"]
verbs = {v for r in role["rules"] if "pods" in r["resources"] for v in r["verbs"]}
assert verbs == {"get", "list", "watch"}, verbs
print("v3: ok")
PY
	log "rbac.podEventNamespaces binds the pods' Events in those namespaces alone; podEvents false not at all; dryRun"
	printf 'rbac:\n  podEventNamespaces: [shop, jobs]\ndryRun: true\n' >"$TEST_TMP/v4.yaml"
	printf 'rbac:\n  podEvents: false\nconfig:\n  alerts:\n    log_tail_lines: 0\n' >"$TEST_TMP/v5.yaml"
	for v in v4 v5; do
		helm_render "$CHART" spotdrain kube-system "$TEST_TMP/$v.yaml" >"$TEST_TMP/$v.out" || fail "rendering $v failed"
	done
	"$PY" - "$TEST_TMP/v4.out" "$TEST_TMP/v5.out" <<'PY'
import sys, yaml
v4 = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
rbs = {d["metadata"]["namespace"] for d in v4 if d["kind"] == "RoleBinding" and d["metadata"]["name"] == "spotdrain-pod-events"}
assert rbs == {"shop", "jobs"}, rbs
assert all(d["roleRef"]["kind"] == "ClusterRole" for d in v4 if d["metadata"]["name"] == "spotdrain-pod-events" and d["kind"] == "RoleBinding")
assert not [d for d in v4 if d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"] == "spotdrain-pod-events"]
(ds,) = [d for d in v4 if d["kind"] == "DaemonSet"]
assert "--dry-run" in ds["spec"]["template"]["spec"]["containers"][0]["args"], "dryRun: no --dry-run"
v5 = [d for d in yaml.safe_load_all(open(sys.argv[2])) if d]
assert not [d for d in v5 if d["metadata"]["name"] == "spotdrain-pod-events"], "podEvents false still grants them"
(role,) = [d for d in v5 if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "spotdrain"]
assert not [r for r in role["rules"] if "pods/log" in r["resources"]], "log_tail_lines 0 still reads logs"
print("v4, v5: ok")
PY
	log "agent.evictionWebhook.enabled false: no webhook, no admission Deployment"
	printf 'agent:\n  evictionWebhook:\n    enabled: false\n' >"$TEST_TMP/v6.yaml"
	helm_render "$CHART" spotdrain kube-system "$TEST_TMP/v6.yaml" >"$TEST_TMP/v6.out" || fail "rendering v6 failed"
	"$PY" - "$TEST_TMP/v6.out" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
assert not [d for d in docs if d["kind"] in ("Deployment", "Secret", "ValidatingWebhookConfiguration")], docs
assert not [d for d in docs if d["metadata"]["name"] == "spotdrain-admission"]
(rb,) = [d for d in docs if d["kind"] == "RoleBinding" and d["metadata"]["name"] == "spotdrain-events"]
assert [s["name"] for s in rb["subjects"]] == ["spotdrain"], rb["subjects"]
print("v6: ok")
PY
	# Refused twice over: by values.schema.json, and by the template's own required where the schema is skipped.
	printf 'mode: controller\n' >"$TEST_TMP/v2.yaml"
	if helm_render "$CHART" spotdrain kube-system "$TEST_TMP/v2.yaml" >"$TEST_TMP/v2.out" 2>&1; then
		fail "a controller without a queue URL rendered"
	fi
	grep -q "/controller/queueURL" "$TEST_TMP/v2.out" || fail "the schema does not name the key: $(cat "$TEST_TMP/v2.out")"
	if helm_render "$CHART" spotdrain kube-system "$TEST_TMP/v2.yaml" --skip-schema-validation >"$TEST_TMP/v2.out" 2>&1; then
		fail "a controller without a queue URL rendered without the schema"
	fi
	grep -q "controller.queueURL is required" "$TEST_TMP/v2.out" || fail "no message: $(cat "$TEST_TMP/v2.out")"
else
	echo "no pinned Helm (scripts/install-deps builds it: tests/realk8s/setup helm): helm lint and rendering skipped"
fi
echo "ok"
