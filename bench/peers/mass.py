"""(c) of bench/peers: a mass reclaim through moto's SQS queue, played by spotdrain's controller and by NTH in
queue mode (its defaults, and its settings for large clusters), each on the same freshly set up cluster.

NODES spot KWOK nodes (and one on-demand node) are EC2 instances of moto's (run-instances, tagged aws-node-termination-handler/managed as
NTH's queue mode checks by default), each Node named by its instance's PrivateDnsName (NTH finds the node by
that name) with the instance's providerID (spotdrain maps an instance to its node by it). WORKLOADS Deployments
of NODES replicas each spread over them (about WORKLOADS pods a node), each under a PDB of maxUnavailable 10 %.
SPOT EventBridge spot warnings are sent within SPREAD seconds by one long-lived boto3 client, each message's
send time recorded; a node's cordon latency is from its message's send to the cordon the API server's watch saw.
"""

import json
import os
import shutil
import threading
import time

NODES = int(os.environ.get("PEERS_C_NODES", 100))
WORKLOADS = int(os.environ.get("PEERS_C_PODS_PER_NODE", 20))
SPOT = int(os.environ.get("PEERS_C_WARNINGS", 20))
SPREAD = 5.0
TOOLS = ["spotdrain", "nth", "nth-large"]  # bench/peers/run --tools picks some

def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def bench_c(workdir, peers):
    rk = peers.rk

    class MassRun(peers.PeerRun):
        def setup_instances(self):
            """moto's instances, before the scenario's nodes are made from them."""
            out = json.loads(self.aws("ec2", "run-instances", "--image-id", "ami-12c6146b", "--count", str(NODES),
                                      "--instance-type", "m5.xlarge", "--tag-specifications",
                                      "ResourceType=instance,Tags=[{Key=aws-node-termination-handler/managed,"
                                      "Value=''}]"))
            return [(i["InstanceId"], i["PrivateDnsName"], i["Placement"]["AvailabilityZone"])
                    for i in out["Instances"]]

        def play(self):
            # moto first: the nodes are its instances.
            self.start_moto()
            inst = self.setup_instances()
            sc = {"name": "mass-reclaim", "mode": "controller", "budget_seconds": 120,
                  "nodes": [{"name": dns, "instance_id": iid, "zone": az, "capacity_type": "spot",
                             "instance_type": "m5.xlarge", "allocatable": {"cpu": "4", "memory": "16Gi", "pods": 110}}
                            for iid, dns, az in inst] +
                  # An on-demand node that no warning names, where the chart's controller pod goes (its
                  # affinity keeps it off spot capacity) and NTH's NODE_NAME points.
                  [{"name": "od-control", "zone": "us-east-1a", "capacity_type": "on-demand",
                    "instance_type": "m5.xlarge", "allocatable": {"cpu": "4", "memory": "16Gi", "pods": 110}}],
                  "workloads": [{"name": "app-%02d" % i, "namespace": "shop", "replicas": NODES,
                                 "termination_grace_seconds": 30, "shutdown_seconds": 1, "startup_seconds": 2,
                                 "pdb": {"max_unavailable": "10%"}} for i in range(WORKLOADS)],
                  "events": [{"at": round(i * SPREAD / SPOT, 2), "type": "spot-interruption", "node": inst[i][1]}
                             for i in range(SPOT)]}
            path = os.path.join(self.dir, "mass.yaml")
            with open(path, "w") as f:
                json.dump(sc, f)
            self.args.scenario = path
            self.sender = rk.SqsSender(self.moto_venv, self.moto_url, self.aws_env)
            self.sent = {}
            threading.Thread(target=self.read_sent, daemon=True).start()
            return rk.Run.play(self)

        def clean(self):
            """The earlier run's 2,000 pods and 101 nodes in a few collection deletes: the player's clean,
            one request per pod, takes longer than its bound on a loaded machine."""
            k = self.kube
            for ns in k.get("/api/v1/namespaces?labelSelector=%s" % rk.LABEL)["items"]:
                k.request("DELETE", "/api/v1/namespaces/%s/pods" % ns["metadata"]["name"],
                          {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}, ok=(200, 202, 404))
            k.request("DELETE", "/api/v1/nodes?labelSelector=%s" % rk.LABEL, None, ok=(200, 202, 404))
            rk.Run.clean(self)

        def start_moto(self):
            if getattr(self, "moto_dir", None):
                return
            rk.Run.start_moto(self)

        def read_sent(self):
            for line in self.sender.p.stdout:
                m = json.loads(line)
                self.sent[m["tag"]] = m["sent"]

        def send_event(self, e, t0):
            n = next(x for x in self.sc["nodes"] if x["name"] == e["node"])
            body = {"version": "0", "id": "peers-%s" % n["instance_id"],
                    "detail-type": "EC2 Spot Instance Interruption Warning", "source": "aws.ec2",
                    "account": self.aws_env.get("MOTO_ACCOUNT"), "time": rk.rfc3339(t0 + e["at"]),
                    "region": "us-east-1", "resources": ["arn:aws:ec2:%s:instance/%s" % (n["zone"], n["instance_id"])],
                    "detail": {"instance-id": n["instance_id"], "instance-action": "terminate"}}
            self.sender.send(self.queue_url, json.dumps(body), n["name"])


    rows = []
    for tool in TOOLS:
        holder = {}

        def extra(r):
            res = r.play()
            holder["sent"] = peers.snapshot(r.sent)
            return res

        args_dir = os.path.join(workdir, "mass-%s" % tool)
        shutil.rmtree(args_dir, ignore_errors=True)
        import argparse
        args = argparse.Namespace(scenario="mass", mode="controller", json=True, cluster=os.environ["RK_DIR"],
                                  spotdrain=os.path.abspath(os.environ.get("SPOTDRAIN", os.path.join(
                                      peers.ROOT, "build", "spotdrain"))), spotdrain_agent=None, keep=False,
                                  fault=None, prepare=False, strays=False, dir=args_dir)
        r = MassRun(args, peers.run_env(), tool)
        load = peers.uptime()
        try:
            res = extra(r)
            usage = peers.snapshot(r.usage)
        finally:
            r.close()
        sent = holder["sent"]
        lat, in_time, killed, never = [], 0, 0, 0
        t0 = r.t0
        for n in res["nodes"]:
            s = sent.get(n["name"])
            if n["cordoned_at"] is None or s is None:
                never += 1
            else:
                lat.append(t0 + n["cordoned_at"] - s)
            if n["pods_killed"] == 0 and n["drained_at"] is not None and n["drained_at"] <= n["deadline_at"]:
                in_time += 1
            killed += n["pods_killed"]
        # The same latency where the API server received the cordon (its audit log: the tool's first
        # successful write to the node), free of this process's own watch lag on a loaded machine.
        me = "system:serviceaccount:spotdrain:" if tool == "spotdrain" else r.peer_user()
        first = {}
        with open(os.path.join(r.env["RK_DIR"], "audit.log"), errors="replace") as f:
            for line in f:
                if me not in line or '"nodes"' not in line:
                    continue
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                ref = ev.get("objectRef") or {}
                if ev.get("stage") == "ResponseComplete" and ev["verb"] in ("patch", "update") and \
                        ev["user"]["username"].startswith(me) and ref.get("name") in sent and \
                        (ev.get("responseStatus") or {}).get("code") == 200:
                    t = rk.parse_iso(ev["requestReceivedTimestamp"])
                    if t >= sent[ref["name"]] and ref["name"] not in first:
                        first[ref["name"]] = t
        alat = [first[n] - sent[n] for n in first]
        u = usage.get("controller", (0, 0))
        rows.append({"tool": tool, "nodes_notified": len(res["nodes"]), "cordon_p50": pct(lat, 50),
                     "cordon_p99": pct(lat, 99), "cordon_max": max(lat) if lat else None, "never_cordoned": never,
                     "apiserver_cordon_p50": pct(alat, 50), "apiserver_cordon_p99": pct(alat, 99),
                     "drained_in_time": in_time, "pods_killed": killed, "pdb_breaches": res["pdb_breaches"],
                     "cpu_seconds": round(u[0], 1), "peak_rss_mib": round(u[1] / 1024, 1),
                     "api_requests": res["api_requests"], "load": [load, peers.uptime()], "logs": r.dir,
                     "sends_span": round(max(sent.values()) - min(sent.values()), 2) if sent else None})
        print("(c) %s: %s" % (tool, json.dumps(rows[-1])), flush=True)
    sd = next((r for r in rows if r["tool"] == "spotdrain"), None)  # --tools without it: no ratios
    sd_cpu, sd_rss = (sd["cpu_seconds"], sd["peak_rss_mib"]) if sd else (None, None)
    print("\n(c) mass reclaim through moto's SQS: %d KWOK nodes x ~%d pods, %d spot warnings sent within %.0f s"
          % (NODES, WORKLOADS, SPOT, SPREAD))
    print("| tool | cordon p50 | p99 | max | at the API server p50, p99 | never cordoned | drained in time "
          "| pods killed | PDB breaches "
          "| CPU s | / spotdrain | peak RSS | / spotdrain | API writes | load before, after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    fmt = lambda x: "-" if x is None else "%.2f s" % x  # noqa: E731
    for r in rows:
        print("| %s | %s | %s | %s | %s, %s | %d | %d/%d | %d | %d | %.1f | %s | %.1f MiB | %s | %d | %s; %s |" % (
            r["tool"], fmt(r["cordon_p50"]), fmt(r["cordon_p99"]), fmt(r["cordon_max"]),
            fmt(r["apiserver_cordon_p50"]), fmt(r["apiserver_cordon_p99"]), r["never_cordoned"],
            r["drained_in_time"], r["nodes_notified"], r["pods_killed"], r["pdb_breaches"], r["cpu_seconds"],
            peers.ratio(r["cpu_seconds"], sd_cpu), r["peak_rss_mib"],
            peers.ratio(r["peak_rss_mib"], sd_rss), r["api_requests"], r["load"][0], r["load"][1]))
    ok = sd is not None and sd["apiserver_cordon_p99"] is not None and sd["apiserver_cordon_p99"] <= 1.0 and sd["never_cordoned"] == 0 and \
        sd["pods_killed"] == 0 and sd["drained_in_time"] == sd["nodes_notified"]
    print("goal (spotdrain cordons every node within 1 s p99 at the API server, drains every node in time, kills "
          "none): %s"
          % ("met" if ok else "NOT met" if sd else "not measured (--tools without spotdrain)"))
    return {"nodes": NODES, "pods_per_node": WORKLOADS, "warnings": SPOT, "rows": rows, "goal_met": ok}
