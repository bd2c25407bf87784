#!/usr/bin/python3
"""Writes a controller-mode scale scenario for `spotdrain sim serve` (issue 8 item 6).

usage: gen.py [--nodes N] [--pods P] [--interruptions I] [--window S] [--workloads W] [--budget S]
              [--apf-qps Q] > scenario.yaml

The cluster: N nodes, 60 % spot (m5.4xlarge-like) and 40 % on-demand, three zones. One DaemonSet runs a pod
on every node; most of the other pods belong to W Deployments,
placed round-robin over all nodes so that every node holds pods of about P/N different workloads. PDBs cycle
through maxUnavailable int / percent, minAvailable int / percent, and none (Deployments). I spot nodes, spread over the
spot pool, get spot-interruption notices evenly within S seconds from --start (so that the controller
is up and leading before the first notice, and its own start-up is not counted as cordon latency). Every node has room for about
five times its share of pods, so the displaced pods fit on the nodes that stay. W/8 StatefulSets of 3
replicas (PDB maxUnavailable 1) have one replica on each of three nodes far apart. --apf-qps Q (> 0) turns on
the simulator's priority and fairness: Q requests a second per client, a burst of 2 Q.
"""
import argparse
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--pods", type=int, default=40000)
    ap.add_argument("--interruptions", type=int, default=200)
    ap.add_argument("--window", type=float, default=20.0)
    ap.add_argument("--workloads", type=int, default=0, help="default: pods / 400, at least 4")
    ap.add_argument("--budget", type=float, default=120.0)
    ap.add_argument("--start", type=float, default=10.0, help="first notice at this simulated second")
    ap.add_argument("--apf-qps", type=float, default=0, help="the API server's priority and fairness, per client")
    a = ap.parse_args()
    n, p, k = a.nodes, a.pods, a.interruptions
    w = a.workloads or max(4, p // 400)
    n_spot = (n * 6) // 10
    if k > n_spot or p < n + 2 * w:
        sys.exit("gen.py: need interruptions <= 60 % of nodes and pods >= nodes + workloads")
    zones = ["us-east-1a", "us-east-1b", "us-east-1c"]
    spot = [f"spot-{i:04d}" for i in range(n_spot)]
    od = [f"od-{i:04d}" for i in range(n - n_spot)]
    names = []
    # Interleave spot and on-demand so that round-robin placement mixes both.
    si = oi = 0
    for i in range(n):
        if oi < len(od) and (si >= len(spot) or i % 5 in (1, 3)):
            names.append(od[oi]); oi += 1
        else:
            names.append(spot[si]); si += 1
    out = [f"# generated: bench/scale/gen.py --nodes {n} --pods {p} --interruptions {k} --window {a.window} "
           f"--workloads {w} --budget {a.budget} --start {a.start}",
           f"name: scale-{n}n-{p}p-{k}i", "mode: controller", f"budget_seconds: {a.budget:g}"]
    if a.apf_qps > 0:
        out.append(f"api_priority_fairness: {{qps: {a.apf_qps:g}, burst: {2 * a.apf_qps:g}}}")
    out.append("nodes:")
    for i, nm in enumerate(names):
        ct = "spot" if nm.startswith("spot") else "on-demand"
        out.append(f"  - {{name: {nm}, zone: {zones[i % 3]}, capacity_type: {ct}, instance_type: m5.4xlarge, "
                   f"allocatable: {{cpu: \"16\", memory: 64Gi, pods: 110}}}}")
    out.append("workloads:")
    n_sts = max(2, w // 8)
    sts_replicas = 3
    rest = p - n - n_sts * sts_replicas
    base, extra = divmod(rest, w)
    cursor = 0
    pdb_kinds = [
        lambda r: f"{{max_unavailable: {max(1, r // 20)}}}",
        lambda r: '{max_unavailable: "10%"}',
        lambda r: f"{{min_available: {max(0, r - max(1, r // 10))}}}",
        lambda r: '{min_available: "80%"}',
        lambda r: '{max_unavailable: "25%"}',
        lambda r: None,
    ]
    for j in range(w):
        r = base + (1 if j < extra else 0)
        kind = "Deployment"
        place = {}
        for _ in range(r):
            nm = names[cursor]
            place[nm] = place.get(nm, 0) + 1
            cursor = (cursor + 1) % n
        pm = ", ".join(f"{k2}: {v}" for k2, v in place.items())
        startup = 5 + (j % 4) * 5
        shutdown = 2 + (j % 3) * 3
        cpu = [100, 200, 250][j % 3]
        mem = [128, 256, 512][j % 3]
        pdb = pdb_kinds[j % len(pdb_kinds)](r)
        line = (f"  - {{name: app-{j:04d}, namespace: ns-{j % 10}, kind: {kind}, replicas: {r}, placement: {{{pm}}}, "
                f"requests: {{cpu: {cpu}m, memory: {mem}Mi}}, termination_grace_seconds: 30, "
                f"shutdown_seconds: {shutdown}, startup_seconds: {startup}")
        if pdb:
            line += f", pdb: {pdb}"
        out.append(line + "}")
    for j in range(n_sts):
        # One replica per node, on nodes far apart (the simulator's first fit would stack them on one node).
        pm = ", ".join(f"{names[(j * 97 + r * (n // sts_replicas)) % n]}: 1" for r in range(sts_replicas))
        out.append(f"  - {{name: db-{j:04d}, namespace: data, kind: StatefulSet, replicas: {sts_replicas}, "
                   f"placement: {{{pm}}}, requests: {{cpu: 500m, memory: 1Gi}}, termination_grace_seconds: 30, shutdown_seconds: 5, "
                   f"startup_seconds: 15, pdb: {{max_unavailable: 1}}}}")
    out.append("  - {name: node-agent, namespace: kube-system, kind: DaemonSet, priority_class: system-node-critical, "
               "requests: {cpu: 50m, memory: 100Mi}, termination_grace_seconds: 10, shutdown_seconds: 1, "
               "startup_seconds: 2}")
    out.append("events:")
    step = n_spot / k
    for i in range(k):
        at = a.start + a.window * i / k
        out.append(f"  - {{at: {at:.3f}, type: spot-interruption, node: {spot[int(i * step)]}}}")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
