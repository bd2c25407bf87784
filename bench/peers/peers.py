#!/usr/bin/env python3
"""spotdrain against its real peers on the real control plane tier (issue 34). bench/peers/run starts the
cluster and calls this with its directory in RK_DIR.

    peers.py a   the PDB-bound drain (examples/bench-8.yaml) by spotdrain's agent, NTH in IMDS mode, kubectl drain
                 and Karpenter (sigs.k8s.io/karpenter/kwok)
    peers.py b   seed-504 (examples/seed-504.yaml) by the same four
    peers.py c   a mass reclaim through moto's SQS: spotdrain's controller and NTH in queue mode
    peers.py d   the idle footprint of spotdrain's agent beside NTH's, both polling one metadata mock

Every tool plays on the same cluster, the same objects (tests/realk8s/run sets them up afresh for each) and the
same notice. The scenario player is tests/realk8s/run's, with the drainer it starts swapped: NTH runs as its
DaemonSet pod would, reading the in-cluster configuration (KUBERNETES_SERVICE_HOST/PORT and a ServiceAccount
token at /var/run/secrets/kubernetes.io/serviceaccount, a tmpfs of a private mount namespace); `kubectl drain`
runs at the notice, as a script woken by it would. Karpenter's KWOK cloud provider launches the notified node
from a NodeClaim of its NodePool (the Node it creates made Ready by the tier's KWOK, the scenario's pods placed on
it as on any node) and, at the notice, the NodeClaim is deleted, as Karpenter's AWS provider does with a spot
interruption warning (pkg/controllers/interruption in aws/karpenter-provider-aws); its termination controller
drains the node. Results go to $PEERS_OUT (JSON), the table to stdout."""

import argparse
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import traceback

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RK = os.path.join(ROOT, "tests", "realk8s")
sys.path.insert(0, os.path.join(ROOT, "bench", "drain"))
import lowerbound  # noqa: E402


def load_player():
    loader = importlib.machinery.SourceFileLoader("realk8s_run", os.path.join(RK, "run"))
    spec = importlib.util.spec_from_loader("realk8s_run", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


rk = load_player()
CLK_TCK = os.sysconf("SC_CLK_TCK")
# The identities the peers act with: a ServiceAccount each, with the rules of NTH's own chart
# (config/helm/aws-node-termination-handler/templates/clusterrole.yaml), which are all `kubectl drain` needs too.
PEER_NS = "kube-system"
PEER_SA = {"nth": "aws-node-termination-handler", "nth-large": "aws-node-termination-handler",
           "kubectl": "kubectl-drain", "karpenter": "karpenter"}
# Karpenter launches nodes, so it acts with cluster-admin (its chart's ClusterRoles span nodes, NodeClaims,
# NodePools, pods, evictions, events, leases and CRDs; a test shortcut for a peer, not a recommendation).
# Its KWOK cloud provider's NodePool: spot nodes of the instance type the scenario's node has (cpu and memory),
# never consolidated or expired (a disruption budget of 0 nodes), limited to the nodes the player asks for so
# that the replacements' pending moments launch nothing; the NodeClaims carry the notice's length as their
# terminationGracePeriod (below).
KARPENTER_POOL = "spotdrain-bench"
# NTH's settings. Its defaults (workers 10; client-go's QPS 5 / burst 10 from rest.InClusterConfig, which
# v1.25.6 cannot change); and for large clusters the knobs its chart and changes name: more workers
# (`workers`, "parallel event processors to handle concurrent events"; #1281 speaks of 50 or more for correlated
# spot interruptions) and pod lists from the API server's cache (`use-apiserver-cache`, #1018) instead of
# a quorum read per drained node.
# use-apiserver-cache lists a node's pods only where it emits Kubernetes events (pkg/node/node.go,
# CordonAndDrain: the list is made inside `if recorder != nil`, and the recorder is nil with events off, its
# default): alone, it cordons and reports "successfully cordoned and drained" having evicted nothing. So the
# events are on with it, with the rules its chart adds for them.
NTH_LARGE = {"WORKERS": "50", "USE_APISERVER_CACHE": "true", "EMIT_KUBERNETES_EVENTS": "true"}
# The one default changed in IMDS mode: the metadata mock, serving a spot notice, answers 404 on
# /latest/meta-data/events/maintenance/scheduled where an instance's IMDS answers [] , and NTH's scheduled-event
# monitor, failing alike three times, panics the whole process (cmd/node-termination-handler.go,
# duplicateErrThreshold 3) within 8 s of its start. Its spot monitor is what these notices exercise.
NTH_IMDS = {"ENABLE_SCHEDULED_EVENT_DRAINING": "false"}


def snapshot(d):
    """A copy of a dict another thread may be adding to (dict() raises if a key comes in meanwhile)."""
    while True:
        try:
            return dict(d)
        except RuntimeError:
            time.sleep(0.01)


def version_of(name):
    versions = {}
    with open(os.path.join(RK, "versions")) as f:
        for line in f:
            if "=" in line and not line.startswith("#"):
                k, _, v = line.strip().partition("=")
                versions[k] = v
    return versions.get(name)


def proc_stats(pid):
    """(cpu seconds, peak RSS KiB, RSS KiB) of a live process, or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK
        hwm = rss = 0
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
                elif line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
        return cpu, hwm, rss
    except (OSError, IndexError, ValueError):
        return None


class PeerRun(rk.Run):
    """tests/realk8s/run's player with the drainer swapped for TOOL (spotdrain, nth, nth-large, kubectl)."""

    def __init__(self, args, env, tool):
        super().__init__(args, env)
        self.tool = tool
        self.usage = {}  # process name -> (cpu s, peak RSS KiB), the last seen while it ran
        if tool == "karpenter":
            self.world.on_node = self.on_node_tainted(self.world.on_node)
        threading.Thread(target=self.sample, daemon=True).start()

    def sample(self):
        while not self.stop.is_set():
            for name, p in list(self.procs.items()):
                if name.startswith(("agent-", "controller")) and p.poll() is None:
                    st = proc_stats(p.pid)
                    if st:
                        self.usage[name] = st[:2]
            time.sleep(0.25)

    # -- the peers' identities
    def peer_token(self):
        sa = PEER_SA[self.tool]
        k = self.kube
        k.create("/api/v1/namespaces/%s/serviceaccounts" % PEER_NS,
                 {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": PEER_NS}})
        role = "cluster-admin" if self.tool == "karpenter" else "peers-drain"
        k.create("/apis/rbac.authorization.k8s.io/v1/clusterroles", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "peers-drain"},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch", "update"]},
                      {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
                      {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
                      {"apiGroups": ["apps", "extensions"], "resources": ["daemonsets"], "verbs": ["get"]},
                      {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}]})
        k.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "peers-drain-" + sa},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": PEER_NS}]})
        tok = k.create("/api/v1/namespaces/%s/serviceaccounts/%s/token" % (PEER_NS, sa), {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 7200}})
        return tok["status"]["token"]

    def peer_user(self):
        return "system:serviceaccount:%s:%s" % (PEER_NS, PEER_SA[self.tool])

    def secrets_dir(self, name):
        """The files of an in-cluster ServiceAccount mount, for the private namespace to show."""
        d = os.path.join(self.dir, "sa-" + name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "token"), "w") as f:
            f.write(self.peer_token())
        with open(os.path.join(d, "namespace"), "w") as f:
            f.write(PEER_NS)
        with open(self.env["RK_CA"]) as src, open(os.path.join(d, "ca.crt"), "w") as dst:
            dst.write(src.read())
        return d

    def nth_argv(self, name):
        """NTH under `unshare -m`: a tmpfs on /run (/var/run's target) of its own mount namespace carries the
        ServiceAccount files where rest.InClusterConfig reads them; nothing of the machine's /run changes."""
        sa = self.secrets_dir(name)
        script = ('mount -t tmpfs peers /run && mkdir -p /run/secrets/kubernetes.io/serviceaccount && '
                  'cp "$1"/token "$1"/ca.crt "$1"/namespace /run/secrets/kubernetes.io/serviceaccount/ && '
                  'exec "$2"')
        return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "nth", sa,
                self.bin("aws-node-termination-handler")]

    def nth_env(self):
        url = self.env["RK_URL"].split("//", 1)[1]
        host, port = url.rsplit(":", 1)
        env = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port, "JSON_LOGGING": "true",
               "LOG_LEVEL": "INFO", "NAMESPACE": PEER_NS, "POD_NAME": "aws-node-termination-handler-peers"}
        if self.tool == "nth-large":
            env.update(NTH_LARGE)
        if self.sc.get("mode", "agent") == "agent":
            env.update(NTH_IMDS)
        return env

    # -- agent mode: the drainer of a notified node
    def start_agent(self, n, imds, kubeconfig, config):
        if self.tool == "spotdrain":
            return super().start_agent(n, imds, kubeconfig, config)
        name = "agent-" + n["name"]
        if self.tool in ("nth", "nth-large"):
            env = dict(self.nth_env(), NODE_NAME=n["name"], INSTANCE_METADATA_URL=imds)
            return self.spawn(name, self.nth_argv(n["name"]), env)
        if self.tool == "karpenter":
            self.karpenter_notice(n["name"], min(self.t0 + e["at"] for e in self.sc["events"]
                                                 if e["node"] == n["name"] and e["type"] != "rebalance-recommendation"))
            return None
        if self.tool == "kubectl":
            # `kubectl drain` at the notice, with what it needs to proceed past DaemonSets and emptyDirs.
            notice = min(self.t0 + e["at"] for e in self.sc["events"]
                         if e["node"] == n["name"] and e["type"] != "rebalance-recommendation")
            kc = self.peer_kubeconfig()
            script = ('sleep "$(python3 -c "import time; print(max(0, %f - time.time()))")" && '
                      'date -u +%%FT%%T.%%NZ && exec "$1" --kubeconfig "$2" drain "$3" --ignore-daemonsets '
                      '--delete-emptydir-data' % notice)
            return self.spawn(name, ["bash", "-c", script, "kubectl", self.bin("kubectl"), kc, n["name"]])
        raise RuntimeError("unknown tool " + self.tool)

    def peer_kubeconfig(self):
        path = os.path.join(self.dir, "peer.kubeconfig")
        with open(path, "w") as f:
            yaml.safe_dump({"apiVersion": "v1", "kind": "Config",
                            "clusters": [{"name": "realk8s", "cluster": {"server": self.env["RK_URL"],
                                                                         "certificate-authority": self.env["RK_CA"]}}],
                            "users": [{"name": "peer", "user": {"token": self.peer_token()}}],
                            "contexts": [{"name": "realk8s", "context": {"cluster": "realk8s", "user": "peer"}}],
                            "current-context": "realk8s"}, f)
        return path

    # -- Karpenter: its KWOK cloud provider owns the notified nodes, its termination controller drains them
    def karpenter_module(self):
        """The module directory of sigs.k8s.io/karpenter in the Go module cache (setup peers downloaded it):
        its CRDs and the KWOK provider's instance types are read from there, never committed."""
        if not getattr(self, "_karp_crds", None):
            out = subprocess.run([os.path.join(RK, "setup"), "karpenter_crds"], check=True, capture_output=True,
                                 text=True).stdout.split()
            self._karp_crds = out
        return self._karp_crds

    def karpenter_types(self):
        """The KWOK provider's instance types (kwok/cloudprovider/instance_types.json, embedded in its binary)."""
        mod = os.path.dirname(os.path.dirname(os.path.dirname(self.karpenter_module()[1])))
        with open(os.path.join(mod, "kwok", "cloudprovider", "instance_types.json")) as f:
            return json.load(f)

    def karpenter_instance_type(self, n):
        """The KWOK provider's amd64 Linux instance type of the scenario node's cpu and memory (the nearest
        larger one when none matches), so that the node has the room the scenario gives it."""
        types = self.karpenter_types()

        def qty(v):
            v = str(v)
            for suf, mul in (("Ti", 1024 ** 4), ("Gi", 1024 ** 3), ("Mi", 1024 ** 2), ("Ki", 1024)):
                if v.endswith(suf):
                    return float(v[:-len(suf)]) * mul
            return float(v)
        cpu, mem = qty(n["allocatable"].get("cpu", 2)), qty(n["allocatable"].get("memory", "8Gi"))
        fit = [t for t in types if t["name"].endswith("-amd64-linux") and qty(t["resources"]["cpu"]) >= cpu
               and qty(t["resources"]["memory"]) >= mem]
        return min(fit, key=lambda t: (qty(t["resources"]["cpu"]), qty(t["resources"]["memory"])))["name"]

    def karpenter_start(self, sc):
        """Karpenter's CRDs applied from its module, the controller started (out of cluster, like its chart's
        Deployment, with a ServiceAccount token), a KWOKNodeClass and a NodePool, and one NodeClaim per
        notified node, launched by its KWOK provider (the Node object it creates, made Ready by the tier's
        KWOK, which manages nodes annotated kwok.x-k8s.io/node=fake as the provider annotates them).
        Returns {scenario node name: (the Node Karpenter made, its NodeClaim)}."""
        kubectl = self.bin("kubectl")
        for d in self.karpenter_module():
            subprocess.run([kubectl, "--kubeconfig", self.env["RK_KUBECONFIG"], "apply", "--server-side",
                            "--force-conflicts", "-f", d], check=True, capture_output=True)
        subprocess.run([kubectl, "--kubeconfig", self.env["RK_KUBECONFIG"], "wait", "--for=condition=Established",
                        "--timeout=60s", "crd/nodepools.karpenter.sh", "crd/nodeclaims.karpenter.sh",
                        "crd/kwoknodeclasses.karpenter.kwok.sh"], check=True, capture_output=True)
        cache = os.environ.get("REALK8S_CACHE", "/var/cache/spotdrain/realk8s")
        binary = os.path.join(cache, "karpenter-%s" % version_of("KARPENTER_VERSION"), "bin", "kwok")
        self.spawn("controller", [binary], {
            "KUBECONFIG": self.peer_kubeconfig(), "DISABLE_LEADER_ELECTION": "true", "LOG_LEVEL": "debug",
            "METRICS_PORT": str(self.free_port()), "HEALTH_PROBE_PORT": str(self.free_port())})
        k = self.kube
        k.create("/apis/karpenter.kwok.sh/v1alpha1/kwoknodeclasses", {
            "apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": KARPENTER_POOL},
            "spec": {}})
        notified = [n for n in sc["nodes"] if any(e["node"] == n["name"] and e["type"] != "rebalance-recommendation"
                                                  for e in sc["events"])]
        types = {n["name"]: self.karpenter_instance_type(n) for n in notified}
        # The time left at the notice is the scenario's budget (the deadline is the notice plus it). A
        # NodeClaim's spec is immutable (its CRD: "spec is immutable") and takes its terminationGracePeriod
        # from the NodePool's template when it is made, so the NodePool carries it from the start: changing
        # it at the notice would reach no existing NodeClaim.
        tgp = "%ds" % int(sc["budget_seconds"])
        ref = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": KARPENTER_POOL}
        reqs = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": sorted(set(types.values()))}]
        cpu_of = {t["name"]: int(t["resources"]["cpu"]) for t in self.karpenter_types()}
        cpus = sum(cpu_of[t] for t in types.values())
        pool = k.create("/apis/karpenter.sh/v1/nodepools", {
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": KARPENTER_POOL},
            "spec": {"template": {"metadata": {"labels": {rk.LABEL: "1"}},
                                  "spec": {"nodeClassRef": ref, "requirements": reqs, "expireAfter": "Never",
                                           "terminationGracePeriod": tgp}},
                     "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never",
                                    "budgets": [{"nodes": "0"}]},
                     "limits": {"cpu": str(cpus)}}})
        claims = {}
        for n in notified:
            name = "%s-%s" % (KARPENTER_POOL, n["name"])
            k.create("/apis/karpenter.sh/v1/nodeclaims", {
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": {"name": name, "labels": {rk.LABEL: "1", "karpenter.sh/nodepool": KARPENTER_POOL},
                             "ownerReferences": [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                                                  "name": KARPENTER_POOL, "uid": pool["metadata"]["uid"],
                                                  "blockOwnerDeletion": True}]},
                "spec": {"nodeClassRef": ref, "expireAfter": "Never", "terminationGracePeriod": tgp,
                         "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                                          {"key": "node.kubernetes.io/instance-type", "operator": "In",
                                           "values": [types[n["name"]]]},
                                          {"key": "karpenter.sh/nodepool", "operator": "In",
                                           "values": [KARPENTER_POOL]}]}})
            claims[n["name"]] = name
        end = time.time() + 120
        out = {}
        while len(out) < len(claims):
            for sname, cname in claims.items():
                nc = k.get("/apis/karpenter.sh/v1/nodeclaims/%s" % cname, ok=(200, 404)) or {}
                st = nc.get("status") or {}
                conds = {c["type"]: c["status"] for c in st.get("conditions") or []}
                if conds.get("Initialized") == "True" and st.get("nodeName"):
                    out[sname] = (st["nodeName"], cname)
            if time.time() > end:
                raise RuntimeError("Karpenter did not initialize its NodeClaims %s in 120 s (its log: %s)" % (
                    sorted(set(claims.values()) - {c for _, c in out.values()}),
                    os.path.join(self.dir, "controller.log")))
            time.sleep(0.5)
        rk.log("karpenter: %s" % ", ".join("%s is %s (NodeClaim %s)" % (s, nn, c) for s, (nn, c) in out.items()))
        return out

    def on_node_tainted(self, on_node):
        """Karpenter cordons with a taint (karpenter.sh/disrupted:NoSchedule, terminator.Taint), not with
        spec.unschedulable: the first time a node carries it is its cordon."""
        def seen(typ, o, when):
            if any(t.get("key") == "karpenter.sh/disrupted" for t in o["spec"].get("taints") or []):
                with self.world.lock:
                    self.world.cordoned.setdefault(o["metadata"]["name"], when)
            on_node(typ, o, when)
        return seen

    def karpenter_rename(self, sc, nodes):
        """The scenario's notified nodes become Karpenter's: their names in the nodes, events and placements."""
        for n in sc["nodes"]:
            if n["name"] in nodes:
                n["name"] = nodes[n["name"]][0]
        for e in sc["events"]:
            if e["node"] in nodes:
                e["node"] = nodes[e["node"]][0]
        for w in sc["workloads"]:
            w["placement"] = {nodes.get(k, (k,))[0]: v for k, v in w["placement"].items()}

    def setup(self, sc):
        if self.tool != "karpenter":
            return super().setup(sc)
        made = self.karpenter_start(sc)
        self.karpenter_rename(sc, made)
        self.claims = {node: claim for node, claim in made.values()}
        create = self.kube.create

        def create_but_karpenters(path, obj):
            if path == "/api/v1/nodes" and obj["metadata"]["name"] in self.claims:
                return None  # Karpenter's KWOK provider made it
            return create(path, obj)
        self.kube.create = create_but_karpenters
        try:
            return super().setup(sc)
        finally:
            self.kube.create = create

    def clean(self):
        """An earlier Karpenter run's objects first: its finalizers (karpenter.sh/termination on the Nodes,
        on the NodeClaims) are lifted, for no Karpenter runs between the runs to lift them."""
        k = self.kube
        crd = k.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/nodeclaims.karpenter.sh", ok=(200, 404))
        if (crd or {}).get("kind") == "CustomResourceDefinition":
            for nc in k.get("/apis/karpenter.sh/v1/nodeclaims")["items"]:
                path = "/apis/karpenter.sh/v1/nodeclaims/%s" % nc["metadata"]["name"]
                k.patch(path, {"metadata": {"finalizers": None}})
                k.delete(path)
            for n in k.get("/api/v1/nodes")["items"]:
                if "karpenter.sh/termination" in (n["metadata"].get("finalizers") or []):
                    k.patch("/api/v1/nodes/%s" % n["metadata"]["name"], {"metadata": {"finalizers": None}})
                    k.delete("/api/v1/nodes/%s" % n["metadata"]["name"])
            k.delete("/apis/karpenter.sh/v1/nodepools/%s" % KARPENTER_POOL)
            k.delete("/apis/karpenter.kwok.sh/v1alpha1/kwoknodeclasses/%s" % KARPENTER_POOL)
        return super().clean()

    def karpenter_notice(self, node, at):
        """At the notice, what Karpenter's AWS provider does with a spot interruption warning
        (karpenter-provider-aws, its interruption controller): the NodeClaim deleted. Its lifecycle controller
        then deletes the Node, whose termination controller taints, drains and, at the NodeClaim's
        terminationGracePeriod, deletes what is left."""
        def fire():
            time.sleep(max(0.0, at - time.time()))
            self.kube.delete("/apis/karpenter.sh/v1/nodeclaims/%s" % self.claims[node])
        threading.Thread(target=fire, daemon=True).start()

    # -- controller mode
    def start_controller(self, kubeconfig, config):
        if self.tool == "spotdrain":
            return super().start_controller(kubeconfig, config)
        env = dict(self.nth_env(), **self.aws_env)
        env.update(QUEUE_URL=self.queue_url, AWS_ENDPOINT=self.moto_url, AWS_REGION="us-east-1",
                   ENABLE_SQS_TERMINATION_DRAINING="true",
                   # Required in queue mode too (its chart gives the node its Deployment's pod runs on): a node
                   # no warning names.
                   NODE_NAME=self.sc["nodes"][-1]["name"])
        return self.spawn("controller", self.nth_argv("controller"), env)

    # -- the result: the peer's requests counted as spotdrain's would be
    def audit(self):
        out = super().audit()
        if self.tool == "spotdrain":
            return out
        me = self.peer_user()
        return [(t, v, ns, n, "system:serviceaccount:spotdrain:" + self.tool if u == me else u)
                for t, v, ns, n, u in out]

    def api_requests(self):
        """The tool's writes (create, update, patch, delete: evictions, cordons, deletes) after scenario time
        0: the audit policy records every request of spotdrain's identities but only the writes of others,
        so the writes are what compare."""
        n = 0
        me = self.peer_user() if self.tool != "spotdrain" else "system:serviceaccount:spotdrain:"
        with open(os.path.join(self.env["RK_DIR"], "audit.log"), errors="replace") as f:
            for line in f:
                if me not in line or '"ResponseComplete"' not in line:
                    continue
                ev = json.loads(line)
                if ev["user"]["username"].startswith(me) and ev["verb"] in ("create", "update", "patch", "delete") \
                        and rk.parse_iso(ev["requestReceivedTimestamp"]) >= self.t0:
                    n += 1
        return n

    def evictions_refused(self):
        """The tool's evictions the API server refused with 429 (a PDB allowing no disruption) after scenario
        time 0, from the audit log."""
        n = 0
        me = self.peer_user() if self.tool != "spotdrain" else "system:serviceaccount:spotdrain:"
        with open(os.path.join(self.env["RK_DIR"], "audit.log"), errors="replace") as f:
            for line in f:
                if me not in line or '"eviction"' not in line or '"ResponseComplete"' not in line:
                    continue
                ev = json.loads(line)
                if ev["user"]["username"].startswith(me) and (ev.get("responseStatus") or {}).get("code") == 429 \
                        and rk.parse_iso(ev["requestReceivedTimestamp"]) >= self.t0:
                    n += 1
        return n

    def instance_gone(self, name):
        """As the tier's player does, and then the pods still on the node are deleted at once (grace 0, by the
        cluster's admin, not the tool): their processes died with the instance, which the disruption
        controller would learn only once the node lifecycle controller and pod GC caught up (tens of seconds
        later). So their PDB shows them gone when they are, and their replacements start: the time below the
        desired count is a lower bound of what the killed pods cost."""
        super().instance_gone(name)
        with self.world.lock:
            dead = [(r["ns"], r["name"]) for r in self.world.pods.values()
                    if r["node"] == name and r["gone_at"] is None and r["owner"] != "DaemonSet"]
        for ns, pod in dead:
            self.kube.delete("/api/v1/namespaces/%s/pods/%s" % (ns, pod), grace=0)

    def result(self, sc, t0, notices):
        """The run's result once every PDB is back at its desired healthy count (at most 90 s after the last
        deadline), so that the time below it that the pods killed with their node cost is counted too."""
        end = time.time() + 90

        def healed():
            with self.world.lock:
                return all(not h or h[-1][1].get("currentHealthy", 0) >= h[-1][1].get("desiredHealthy", 0)
                           for h in self.world.pdb_hist.values())
        while time.time() < end and not healed():
            time.sleep(0.5)
        return super().result(sc, t0, notices)

    def said_cannot_finish(self):
        """When the tool first said the drain could not finish, seconds after scenario time 0, and its words:
        spotdrain's drain-infeasible or drain-at-risk alert; NTH's failed drain; kubectl's exit with an error."""
        t0 = self.t0
        for name in sorted(self.procs):
            if not name.startswith(("agent-", "controller")):
                continue
            path = os.path.join(self.dir, name + ".log")
            with open(path, errors="replace") as f:
                lines = f.read().splitlines()
            for line in lines:
                try:
                    rec = json.loads(line)
                except ValueError:
                    rec = None
                if rec and rec.get("time") and rk.parse_iso(rec["time"]) < t0 - 60:
                    continue
                if self.tool == "spotdrain" and rec and rec.get("alert") in ("drain-infeasible", "drain-at-risk"):
                    return round(rk.parse_iso(rec["time"]) - t0, 1), "%s: %s" % (rec["alert"], rec.get("msg"))
                # NTH's words for a drain it gave up on (pkg/interruptionevent/draincordon/handler.go), or
                # the drain library's global timeout (its node-termination-grace-period); its per-eviction
                # "error when evicting ... will retry" lines at level error are retries, not a verdict.
                msg = (rec or {}).get("message") or ""
                # Karpenter has no such words (pkg/controllers/node/termination): it retries refused evictions
                # until the NodeClaim's terminationGracePeriod, publishing FailedDraining events per retry, then
                # deletes what is left, each pod at (termination time - its own grace), bypassing its PDB
                # (terminator.DeleteExpiringPods, logged at debug as "deleting pod"). The first such delete
                # is shown beside "never".
                if self.tool == "karpenter" and rec and rec.get("message") == "deleting pod":
                    notice = min(t0 + e["at"] for e in self.sc["events"] if e["type"] != "rebalance-recommendation")
                    return None, "never; it deleted past the PDBs from %.1f s after the notice (its " \
                        "terminationGracePeriod)" % (rk.parse_iso(rec["time"]) - notice)
                if self.tool.startswith("nth") and ("problem while trying to cordon" in msg or
                                                     "global timeout" in msg):
                    return round(rk.parse_iso(rec["time"]) - t0, 1), msg + " " + str(rec.get("error") or "")
            if self.tool == "kubectl":
                p = self.procs[name]
                if p.poll() not in (None, 0, -9):
                    return None, "exit %d: %s" % (p.returncode, (lines or [""])[-1][:200])
        return None, None


def run_env():
    env = {}
    with open(os.path.join(os.environ["RK_DIR"], "env")) as f:
        for line in f:
            k, _, v = line.strip()[len("export "):].partition("=")
            env[k] = subprocess.run(["bash", "-c", "printf %s " + v], capture_output=True, text=True).stdout
    return env


def uptime():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def play(tool, scenario, mode, workdir, extra=None):
    args = argparse.Namespace(scenario=scenario, mode=mode, json=True, cluster=os.environ["RK_DIR"],
                              spotdrain=os.path.abspath(os.environ.get("SPOTDRAIN", os.path.join(ROOT, "build",
                                                                                                   "spotdrain"))),
                              spotdrain_agent=None, keep=False, fault=None, prepare=False, strays=False,
                              dir=os.path.join(workdir, "%s-%s" % (os.path.basename(scenario).split(".")[0], tool)))
    args.spotdrain_agent = os.path.join(os.path.dirname(args.spotdrain), "spotdrain-agent")
    shutil.rmtree(args.dir, ignore_errors=True)  # its logs are appended to: an earlier run's would be read
    r = PeerRun(args, run_env(), tool)
    load = uptime()
    try:
        res = (extra or PeerRun.play)(r)
        res["said_cannot_finish"] = r.said_cannot_finish()
        res["evictions_refused"] = r.evictions_refused()
        res["usage"] = {k: {"cpu_seconds": round(v[0], 2), "peak_rss_mib": round(v[1] / 1024, 1)}
                        for k, v in snapshot(r.usage).items()}
    finally:
        r.close()
    res["tool"] = tool
    res["load"] = [load, uptime()]
    res["logs"] = r.dir
    return res


TOOLS_AGENT = ["spotdrain", "nth", "kubectl", "karpenter"]


def ratio(x, base):
    return "-" if x is None or not base else "%.2f" % (x / base)


def bench_a(workdir):
    sc_path = os.path.join(ROOT, "examples", "bench-8.yaml")
    with open(sc_path) as f:
        lb = lowerbound.bounds(yaml.safe_load(f))["spot-a"].lb
    rows = []
    for tool in TOOLS_AGENT:
        res = play(tool, sc_path, "agent", workdir)
        n = res["nodes"][0]
        took = None if n["drained_at"] is None else round(n["drained_at"] - n["notice_at"], 2)
        rows.append({"tool": tool, "notice_to_last_pod_gone": took, "cordoned_after_notice":
                     None if n["cordoned_at"] is None else round(n["cordoned_at"] - n["notice_at"], 2),
                     "first_eviction_after_notice":
                     None if n["first_eviction_at"] is None else round(n["first_eviction_at"] - n["notice_at"], 2),
                     "pdb_breaches": res["pdb_breaches"], "pods_killed": n["pods_killed"],
                     "evictions_refused": res["evictions_refused"],
                     "api_requests": res["api_requests"], "load": res["load"], "logs": res["logs"]})
    sd = rows[0]["notice_to_last_pod_gone"] if rows[0]["tool"] == "spotdrain" else None  # --tools without it
    print("\n(a) PDB-bound drain, examples/bench-8.yaml on the real control plane (lower bound %.1f s)" % lb)
    print("| tool | notice to last pod gone | / spotdrain | / lower bound | cordoned after | first eviction after "
          "| PDB breaches | pods killed | evictions refused (429) | API writes | load before, after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %s s | %s | %s | %s s | %s s | %d | %d | %d | %d | %s; %s |" % (
            r["tool"], r["notice_to_last_pod_gone"], ratio(r["notice_to_last_pod_gone"], sd),
            ratio(r["notice_to_last_pod_gone"], lb), r["cordoned_after_notice"], r["first_eviction_after_notice"],
            r["pdb_breaches"], r["pods_killed"], r["evictions_refused"], r["api_requests"], r["load"][0],
            r["load"][1]))
    others = [r["notice_to_last_pod_gone"] for r in rows[1:]]
    ok = sd is not None and all(o is not None and sd <= 0.7 * o for o in others) and sd <= 1.15 * lb and \
        rows[0]["pdb_breaches"] == 0 and rows[0]["pods_killed"] == 0
    print("goal (spotdrain <= 0.7x each peer, <= 1.15x the lower bound, no breach, none killed): %s"
          % ("met" if ok else "NOT met"))
    return {"lower_bound": lb, "rows": rows, "goal_met": ok}


def bench_b(workdir):
    sc_path = os.path.join(ROOT, "examples", "seed-504.yaml")
    rows = []
    for tool in TOOLS_AGENT:
        res = play(tool, sc_path, "agent", workdir)
        n = res["nodes"][0]
        said = res["said_cannot_finish"]
        rows.append({"tool": tool, "pods_evictable": n["pods_evictable"], "pods_graceful": n["pods_graceful"],
                     "pods_killed": n["pods_killed"], "pods_forced": n["pods_forced"],
                     "drained_after_notice": None if n["drained_at"] is None else
                     round(n["drained_at"] - n["notice_at"], 1),
                     "pdb_below_desired_seconds": res["pdb_below_desired_seconds"],
                     "pdb_breaches": res["pdb_breaches"],
                     "said_cannot_finish_after_notice": None if said[0] is None else round(said[0] - n["notice_at"], 1),
                     "said": said[1], "load": res["load"], "logs": res["logs"]})
    print("\n(b) seed-504 (examples/seed-504.yaml: 20 pods on spot-a, PDBs maxUnavailable 1, 2-minute notice)")
    print("| tool | pods killed | / spotdrain | graceful | deleted past a PDB | drained after notice "
          "| s below desired (api, web) | PDB breaches | said it could not finish | load before, after |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    sd = rows[0]["pods_killed"] if rows[0]["tool"] == "spotdrain" else None
    for r in rows:
        below = r["pdb_below_desired_seconds"]
        print("| %s | %d | %s | %d | %d | %s | %s, %s | %d | %s | %s; %s |" % (
            r["tool"], r["pods_killed"], ratio(r["pods_killed"], sd) if sd else "-", r["pods_graceful"],
            r["pods_forced"],
            r["drained_after_notice"], below.get("shop/api"), below.get("shop/web"), r["pdb_breaches"],
            "never" if r["said"] is None else r["said"] if r["said_cannot_finish_after_notice"] is None and
            r["tool"] == "karpenter" else "%s s after the notice: %s" % (
                r["said_cannot_finish_after_notice"], (r["said"] or "")[:90]), r["load"][0], r["load"][1]))
    return {"rows": rows}


def bench_d(workdir, window):
    """Both agents idle beside each other, polling the one metadata mock of one spot node with no notice,
    for WINDOW seconds after a settling minute; CPU seconds scaled to an hour."""
    sc_path = os.path.join(workdir, "idle.yaml")
    with open(sc_path, "w") as f:
        yaml.safe_dump({"name": "idle", "mode": "agent", "budget_seconds": 120,
                        "nodes": [{"name": "spot-a", "capacity_type": "spot"}, {"name": "od-1"}],
                        "workloads": [{"name": "web", "namespace": "shop", "replicas": 4,
                                       "placement": {"spot-a": 4}}],
                        "events": []}, f)

    def idle(r):
        sc = r.sc = rk.load_scenario(sc_path, "agent")
        r.clean()
        r.start_watches()
        r.setup(sc)
        config = r.install_chart(sc, ("agent.evictionWebhook.enabled=false",))
        n = sc["nodes"][0]
        r.t0 = time.time()
        imds = r.start_mock(n, [], r.t0)
        r.tool = "spotdrain"
        rk.Run.start_agent(r, n, imds, r.bound_kubeconfig(n["name"]), config)
        r.tool = "nth"
        env = dict(r.nth_env(), NODE_NAME=n["name"], INSTANCE_METADATA_URL=imds)
        r.spawn("agent-nth", r.nth_argv("nth"), env)
        time.sleep(60)
        load0 = uptime()
        a0 = {k: proc_stats(r.procs[k].pid) for k in ("agent-spot-a", "agent-nth")}
        t = time.time()
        time.sleep(window)
        dt = time.time() - t
        a1 = {k: proc_stats(r.procs[k].pid) for k in ("agent-spot-a", "agent-nth")}
        out = {}
        for k, label in (("agent-spot-a", "spotdrain"), ("agent-nth", "nth")):
            if not a0[k] or not a1[k]:
                raise RuntimeError("%s exited while idle (its log in %s)" % (label, r.dir))
            out[label] = {"rss_mib": round(a1[k][2] / 1024, 1), "peak_rss_mib": round(a1[k][1] / 1024, 1),
                          "cpu_seconds": round(a1[k][0] - a0[k][0], 2),
                          "cpu_seconds_per_hour": round((a1[k][0] - a0[k][0]) * 3600 / dt, 1)}
        return {"window_seconds": round(dt), "agents": out, "load": [load0, uptime()], "nodes": []}

    res = play("spotdrain", sc_path, "agent", workdir, extra=idle)
    a = res["agents"]
    print("\n(d) idle footprint, both polling one amazon-ec2-metadata-mock (spotdrain every 0.5 s, NTH every 2 s), "
          "measured over %d s and scaled to an hour; load %s, %s" % (res["window_seconds"], *res["load"]))
    print("| agent | RSS | / spotdrain | peak RSS | CPU s per idle hour | / spotdrain |")
    print("|---|---|---|---|---|---|")
    for k in ("spotdrain", "nth"):
        print("| %s | %.1f MiB | %s | %.1f MiB | %.1f | %s |" % (
            k, a[k]["rss_mib"], ratio(a[k]["rss_mib"], a["spotdrain"]["rss_mib"]), a[k]["peak_rss_mib"],
            a[k]["cpu_seconds_per_hour"], ratio(a[k]["cpu_seconds_per_hour"], a["spotdrain"]["cpu_seconds_per_hour"])))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("benches", nargs="*", default=["a", "b", "d", "c"])
    ap.add_argument("--idle-window", type=float, default=300, help="(d): seconds measured (scaled to an hour)")
    ap.add_argument("--dir", default=os.path.join(ROOT, "build", "peers"))
    import mass
    ap.add_argument("--tools", help="the comma-separated tools to play (default: %s in (a), (b); %s in (c))" % (
        ",".join(TOOLS_AGENT), ",".join(mass.TOOLS)))
    args = ap.parse_args()
    if args.tools:
        TOOLS_AGENT[:] = [t for t in TOOLS_AGENT if t in args.tools.split(",")]
        mass.TOOLS[:] = [t for t in mass.TOOLS if t in args.tools.split(",")]
    os.makedirs(args.dir, exist_ok=True)
    out = {"versions": {"spotdrain": subprocess.run([os.environ.get("SPOTDRAIN", os.path.join(ROOT, "build",
                                                                                             "spotdrain")),
                                                     "--version"], capture_output=True, text=True).stdout.strip(),
                        "aws-node-termination-handler": version_of("NTH_VERSION"),
                        "kubectl": version_of("K8S_VERSION"), "kube-apiserver": version_of("K8S_VERSION"),
                        "karpenter (sigs.k8s.io/karpenter/kwok)": version_of("KARPENTER_VERSION")},
           "nth_large_settings": NTH_LARGE}
    print("versions: %s" % json.dumps(out["versions"]))
    results = os.environ.get("PEERS_OUT", os.path.join(args.dir, "results.json"))
    failed = []
    for b in args.benches:
        try:
            run_one(b, args, out)
        except Exception as e:  # one benchmark's failure does not lose the others' figures
            print("\n(%s) FAILED: %s: %s" % (b, type(e).__name__, e))
            traceback.print_exc()
            failed.append(b)
        with open(results, "w") as f:
            json.dump(out, f, indent=1)
    print("\nresults in %s" % results)
    sys.exit(1 if failed else 0)


def run_one(b, args, out):
    if b == "a":
        out["a"] = bench_a(args.dir)
    elif b == "b":
        out["b"] = bench_b(args.dir)
    elif b == "d":
        out["d"] = bench_d(args.dir, args.idle_window)
    elif b == "c":
        import mass
        out["c"] = mass.bench_c(args.dir, sys.modules[__name__])
    else:
        raise ValueError("unknown benchmark %s (a, b, c, d)" % b)


if __name__ == "__main__":
    main()
