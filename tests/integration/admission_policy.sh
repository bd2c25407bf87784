#!/usr/bin/env bash
# The chart's admission policy, evaluated by a real CEL implementation (@bufbuild/cel, installed from
# tests/tools/cel/package-lock.json into build/tools/cel) the way kube-apiserver evaluates a
# ValidatingAdmissionPolicy (tests/tools/cel/vap.mjs says how), against admission requests built from the
# rendered agent release (helm/spotdrain/examples/agent.yaml, which helm_lint.sh proves equal to the
# templates' rendering): the agent's identity, on node spot-a, may write its own Node and delete the pods
# bound to it, and no other node's; a token without the node claim may write nothing; other identities are
# not matched at all. Then the same requests against a policy with its node check taken out, which must
# let the other node's write through: the test can tell a policy that guards from one that does not.
# Last, the controller release's eviction webhook (examples/controller.yaml): its matchConditions send it
# the named agent's pods/eviction CREATEs and no one else's request, and a copy without them is caught; the
# same for the agent release's own webhook (agent.evictionWebhook, in examples/agent.yaml).
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires node # the CEL evaluator is an npm package
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || skip "python3 not installed"
"$PY" -c 'import yaml' 2>/dev/null || skip "python3 yaml not installed"
CEL_DIR=$ROOT/build/tools/cel
out=$("$ROOT/tests/tools/cel/install" "$CEL_DIR" 2>&1) || skip "cannot install @bufbuild/cel: $out"
cp "$ROOT/tests/tools/cel/vap.mjs" "$CEL_DIR/vap.mjs"

log "admission requests from the rendered agent release"
"$PY" - "$ROOT/helm/spotdrain/examples/agent.yaml" "$TEST_TMP" "$ROOT/helm/spotdrain/examples/controller.yaml" <<'PY'
import copy, json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
tmp = sys.argv[2]
(ds,) = [d for d in docs if d["kind"] == "DaemonSet"]
ns = ds["metadata"]["namespace"]
sa = ds["spec"]["template"]["spec"]["serviceAccountName"]
assert [d for d in docs if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == sa]
CLAIM = "authentication.kubernetes.io/node-name"

def user(name, node=None, extra=None):
    """The user info the API server derives from a token: a bound service account token also names its
    pod and node (Kubernetes 1.30+)."""
    u = {"username": name, "uid": "u-" + name.rsplit(":", 1)[-1],
         "groups": ["system:authenticated"]}
    if name.startswith("system:serviceaccount:"):
        u["groups"] = ["system:serviceaccounts", "system:serviceaccounts:" + name.split(":")[2]] + u["groups"]
    e = dict(extra or {})
    if node:
        e.update({"authentication.kubernetes.io/credential-id": ["JTI=3f1e"], CLAIM: [node],
                  "authentication.kubernetes.io/node-uid": ["uid-" + node],
                  "authentication.kubernetes.io/pod-name": [ds["metadata"]["name"] + "-x7k2p"],
                  "authentication.kubernetes.io/pod-uid": ["uid-pod"]})
    if e:
        u["extra"] = e
    return u

AGENT = "system:serviceaccount:%s:%s" % (ns, sa)

def node(name):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": "uid-" + name},
            "spec": {"providerID": "aws:///us-east-1a/i-0" + name[-1] * 16}}

def cordoned(n):
    n = copy.deepcopy(n)
    n["spec"]["unschedulable"] = True
    n["spec"]["taints"] = [{"key": "spotdrain.io/interruption", "effect": "NoSchedule"}]
    return n

def pod(name, on):
    p = {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": name, "namespace": "shop", "uid": "uid-" + name}, "spec": {"containers": [{"name": "c"}]}}
    if on:
        p["spec"]["nodeName"] = on
    return p

NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}

def request(u, op, resource, name, namespace=None, sub=None, kind=None, options=None):
    """An AdmissionRequest as the API server marshals it: empty fields are left out."""
    group, version, res = resource
    r = {"uid": "req-1", "kind": kind or {"group": group, "version": version, "kind": res[:-1].title()},
         "resource": {"group": group, "version": version, "resource": res},
         "requestKind": kind or {"group": group, "version": version, "kind": res[:-1].title()},
         "requestResource": {"group": group, "version": version, "resource": res},
         "name": name, "operation": op, "userInfo": u, "dryRun": False}
    if namespace:
        r["namespace"] = namespace
    if sub:
        r["subResource"] = sub
        r["requestSubResource"] = sub
    if options:
        r["options"] = options
    return r

def node_update(u, name):
    # kubectl cordon and the agent's taint are PATCHes, admitted as UPDATEs of the whole object.
    old = node(name)
    return {"request": request(u, "UPDATE", ("", "v1", "nodes"), name,
                               options={"apiVersion": "meta.k8s.io/v1", "kind": "PatchOptions"}),
            "object": cordoned(old), "oldObject": old, "namespaceObject": None}

def pod_delete(u, p):
    return {"request": request(u, "DELETE", ("", "v1", "pods"), p["metadata"]["name"], "shop",
                               options={"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions",
                                        "gracePeriodSeconds": 20}),
            "object": None, "oldObject": p, "namespaceObject": NAMESPACE}

def eviction(u, p):
    # What the API server admits for POST .../pods/NAME/eviction: the Eviction, which names the pod and
    # nothing of its node; there is no oldObject for a CREATE.
    ev = {"apiVersion": "policy/v1", "kind": "Eviction",
          "metadata": {"name": p["metadata"]["name"], "namespace": "shop"}}
    return {"request": request(u, "CREATE", ("", "v1", "pods"), p["metadata"]["name"], "shop", sub="eviction",
                               kind={"group": "policy", "version": "v1", "kind": "Eviction"},
                               options={"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}),
            "object": ev, "oldObject": None, "namespaceObject": NAMESPACE}

def case(name, expect, c, message=None):
    c = dict(c, name=name, expect=expect)
    if message:
        c["message"] = message
    return c

agent_a, agent_b = user(AGENT, "spot-a"), user(AGENT, "spot-b")
legacy = user(AGENT)  # a token Secret, or a token bound to no pod: no node claim
two = user(AGENT, extra={CLAIM: ["spot-a", "spot-b"]})
web_a, web_b, pending = pod("web-a", "spot-a"), pod("web-b", "spot-b"), pod("web-p", None)
cases = [
    case("agent patches its own node", "allowed", node_update(agent_a, "spot-a")),
    case("agent patches another node", "denied", node_update(agent_a, "spot-b"),
         "the agent on node spot-a may not write node spot-b"),
    case("the other node's agent patches that node", "allowed", node_update(agent_b, "spot-b")),
    case("agent deletes a pod bound to its node", "allowed", pod_delete(agent_a, web_a)),
    case("agent deletes a pod bound to another node", "denied", pod_delete(agent_a, web_b),
         "may not delete pod shop/web-b, which is not bound to it"),
    case("agent deletes a pod bound to no node", "denied", pod_delete(agent_a, pending)),
    case("agent evicts a pod bound to its node", "allowed", eviction(agent_a, web_a)),
    # The Eviction does not say where its pod runs and a policy cannot look the pod up: this one passes
    # the policy (docs/security.md, "What the admission policy cannot see"). Asserted so that the limit
    # stays written down where it is tested.
    case("agent evicts a pod bound to another node (the policy cannot see the node)", "allowed",
         eviction(agent_a, web_b)),
    case("a token without the node claim patches a node", "denied", node_update(legacy, "spot-a"),
         "does not name one node"),
    case("a token without the node claim evicts", "denied", eviction(legacy, web_a), "does not name one node"),
    case("a token without the node claim deletes", "denied", pod_delete(legacy, web_a), "does not name one node"),
    case("a token naming two nodes patches one", "denied", node_update(two, "spot-a"), "does not name one node"),
    case("the controller patches any node", "not-matched",
         node_update(user("system:serviceaccount:%s:%s-controller" % (ns, sa)), "spot-b")),
    case("an agent of another release (same name, other namespace)", "not-matched",
         node_update(user("system:serviceaccount:other:%s" % sa, "spot-a"), "spot-b")),
    case("the kubelet of spot-b updates its node", "not-matched", node_update(user("system:node:spot-b"), "spot-b")),
    case("a cluster admin deletes any pod", "not-matched", pod_delete(user("admin"), web_b)),
    case("agent writes an Event (not a request the policy takes)", "not-matched",
         {"request": request(agent_a, "CREATE", ("", "v1", "events"), "spot-a.1", "default"), "object": {},
          "oldObject": None, "namespaceObject": {"metadata": {"name": "default"}}}),
]
json.dump({"objects": docs, "cases": cases}, open(f"{tmp}/cases.json", "w"))

# The control: the same policy with its node check taken out.
weak = copy.deepcopy(docs)
(vap,) = [d for d in weak if d["kind"] == "ValidatingAdmissionPolicy"]
before = len(vap["spec"]["validations"])
vap["spec"]["validations"] = [v for v in vap["spec"]["validations"] if "'nodes'" not in v["expression"]]
assert len(vap["spec"]["validations"]) == before - 1, "no node check to take out"
json.dump({"objects": weak, "cases": [c for c in cases if c["name"] == "agent patches another node"]},
          open(f"{tmp}/control.json", "w"))
print(f"{len(cases)} requests by {AGENT} and others")

# The controller release's eviction webhook (helm/spotdrain/examples/controller.yaml): its match conditions
# must send it the named agent's evictions and nobody else's requests.
ctl_docs = [d for d in yaml.safe_load_all(open(sys.argv[3])) if d]
agent2 = "system:serviceaccount:kube-system:spotdrain-agent"
agent2_a = user(agent2, "spot-a")
node_patch = node_update(agent2_a, "spot-b")
hooks = [
    case("the agent evicts (any pod: the webhook judges the node)", "sent", eviction(agent2_a, web_b)),
    case("the agent without the node claim evicts", "sent", eviction(user(agent2), web_a)),
    case("the agent patches a node (the policy's, not the webhook's)", "not-sent", node_patch),
    case("the agent deletes a pod (the policy's)", "not-sent", pod_delete(agent2_a, web_b)),
    case("the controller evicts", "not-sent",
         eviction(user("system:serviceaccount:kube-system:spotdrain"), web_b)),
    case("an agent of another namespace evicts", "not-sent",
         eviction(user("system:serviceaccount:other:spotdrain-agent", "spot-a"), web_b)),
    case("the kubelet of spot-b evicts (NodeRestriction's)", "not-sent", eviction(user("system:node:spot-b"), web_b)),
    case("a cluster admin evicts", "not-sent", eviction(user("admin"), web_b)),
]

def webhook_cases(objects, cases, name):
    """NAME.json: the cases; NAME-control.json, the control: without its match conditions the webhook
    would be sent everyone's evictions, a cluster admin's among them."""
    json.dump({"objects": objects, "webhookCases": cases}, open(f"{tmp}/{name}.json", "w"))
    weak = copy.deepcopy(objects)
    for d in weak:
        for w in d.get("webhooks") or []:
            assert w.pop("matchConditions"), "no match conditions to take out"
    json.dump({"objects": weak, "webhookCases": [h for h in cases if h["name"] == "a cluster admin evicts"]},
              open(f"{tmp}/{name}-control.json", "w"))

webhook_cases(ctl_docs, hooks, "webhook")
print(f"{len(hooks)} requests for the eviction webhook")

# The agent release's own eviction webhook (agent.evictionWebhook, served by `spotdrain admission`): the
# same match conditions, naming this release's agent.
agent_a = user(AGENT, "spot-a")
own_hooks = [
    case("the agent evicts (any pod: the webhook judges the node)", "sent", eviction(agent_a, web_b)),
    case("the agent without the node claim evicts", "sent", eviction(user(AGENT), web_a)),
    case("the agent patches a node (the policy's, not the webhook's)", "not-sent", node_update(agent_a, "spot-b")),
    case("the agent deletes a pod (the policy's)", "not-sent", pod_delete(agent_a, web_b)),
    case("the admission Deployment's own identity evicts", "not-sent",
         eviction(user("system:serviceaccount:%s:%s-admission" % (ns, sa)), web_b)),
    case("a controller evicts", "not-sent",
         eviction(user("system:serviceaccount:%s:%s-controller" % (ns, sa)), web_b)),
    case("an agent of another release evicts", "not-sent",
         eviction(user("system:serviceaccount:other:%s" % sa, "spot-a"), web_b)),
    case("the kubelet of spot-b evicts (NodeRestriction's)", "not-sent", eviction(user("system:node:spot-b"), web_b)),
    case("a cluster admin evicts", "not-sent", eviction(user("admin"), web_b)),
]
assert [d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"], "the agent release has no webhook"
webhook_cases(docs, own_hooks, "agent-webhook")
print(f"{len(own_hooks)} requests for the agent release's eviction webhook")
PY

log "the policy decides each request"
node "$CEL_DIR/vap.mjs" "$TEST_TMP/cases.json" || fail "the admission policy decided otherwise than expected"

log "the control: without its node check the policy lets another node's write through"
rc=0
node "$CEL_DIR/vap.mjs" "$TEST_TMP/control.json" || rc=$?
[ "$rc" -eq 1 ] || fail "the weakened policy was not caught (exit $rc)"
log "the eviction webhook's match conditions: the agent's evictions and nobody else's"
node "$CEL_DIR/vap.mjs" "$TEST_TMP/webhook.json" || fail "the webhook would be sent other requests than the agents' evictions"
rc=0
node "$CEL_DIR/vap.mjs" "$TEST_TMP/webhook-control.json" || rc=$?
[ "$rc" -eq 1 ] || fail "the webhook without match conditions was not caught (exit $rc)"
log "the agent release's own eviction webhook: its agent's evictions and nobody else's"
node "$CEL_DIR/vap.mjs" "$TEST_TMP/agent-webhook.json" ||
	fail "the agent release's webhook would be sent other requests than its agent's evictions"
rc=0
node "$CEL_DIR/vap.mjs" "$TEST_TMP/agent-webhook-control.json" || rc=$?
[ "$rc" -eq 1 ] || fail "the agent release's webhook without match conditions was not caught (exit $rc)"
echo "ok"
