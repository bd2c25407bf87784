"""Lower bounds of scenario drains, computed from the scenario YAML alone (CONTRACTS §3), independently of
spotdrain's planner. Used by bench/drain/run and tests/integration/examples_acceptance.py.

The model, as the simulator defines the cluster (CONTRACTS §3 "Simulator semantics"):
- an interrupted node gets its notice at the event's `at`; the instance is gone budget_seconds later;
- a pod without a PDB can be evicted at the notice and is gone min(shutdown, grace) later;
- a PDB allows k = replicas - desiredHealthy disruptions at once (percentages rounded up, as Kubernetes
  does); an eviction takes a slot, which comes back when the replacement is Ready: startup_seconds after the
  eviction for a Deployment (the replacement is created at once), shutdown + startup for a StatefulSet (only
  once the old pod is gone);
- PDB slots shared by several draining nodes go to the earliest deadline first (issue 3, item 1): the pods
  of all draining nodes are queued in deadline order and each takes the first slot free at or after its
  node's notice.
- a pod annotated karpenter.sh/do-not-disrupt: "true" or spotdrain.io/keep-until-last-moment keeps running
  until its last safe moment (issue 16): deadline - the safety margin (5 s, drain.safety_margin_seconds) - its
  grace period (half of it when the whole does not fit, drain.expected_shutdown_fraction), and is gone its
  shutdown later;
Replacements are assumed to be scheduled at once. When the other nodes lack the room for every replacement
(aggregate CPU, memory, pod count) the bound is left unknown: slots might never come back.
A node's lower bound is the time from its notice until its last evictable pod is gone."""

import math
import re

INTERRUPTIONS = ("spot-interruption", "scheduled-change", "asg-lifecycle-terminate")
MARGIN = 5.0  # drain.safety_margin_seconds
EXPECTED_SHUTDOWN_FRACTION = 0.5  # drain.expected_shutdown_fraction


def kept_until_last_moment(w):
    """The workload's pods are not evicted before their last safe moment."""
    ann = w.get("annotations") or {}
    return str(ann.get("karpenter.sh/do-not-disrupt", "")) == "true" or \
        "spotdrain.io/keep-until-last-moment" in ann


def parse_cpu(v):
    s = str(v)
    return float(s[:-1]) / 1000 if s.endswith("m") else float(s)


_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def parse_bytes(v):
    m = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(v))
    if not m:
        raise ValueError("bad quantity %r" % v)
    return float(m.group(1)) * _UNITS.get(m.group(2), 1)


def scaled(v, total):
    """An int-or-percent PDB value against `total`, rounded up as Kubernetes does for PDBs."""
    s = str(v)
    if s.endswith("%"):
        return int(math.ceil(float(s[:-1]) * total / 100.0))
    return int(s)


def allowed_disruptions(pdb, replicas):
    if "max_unavailable" in pdb:
        desired = replicas - scaled(pdb["max_unavailable"], replicas)
    else:
        desired = scaled(pdb["min_available"], replicas)
    return max(0, replicas - max(desired, 0))


class Bound:
    def __init__(self, node, notice_at, deadline_at):
        self.node = node
        self.notice_at = notice_at
        self.deadline_at = deadline_at
        self.lb = 0.0  # seconds from the notice; None = unknown, math.inf = never through the PDBs
        self.pods = 0
        self.shutdown_fits_grace = True
        self.limit = "no pods"

    def take(self, gone_at, why):
        if self.lb is None:
            return
        d = gone_at - self.notice_at
        if d > self.lb:
            self.lb = d
            self.limit = why


def bounds(sc):
    """{node: Bound} for every interrupted node of a scenario (a dict loaded from YAML)."""
    budget = float(sc.get("budget_seconds", 120))
    nodes = {n["name"]: n for n in sc["nodes"]}
    out = {}
    for e in sorted(sc.get("events") or [], key=lambda e: float(e["at"])):
        if e["type"] in INTERRUPTIONS and e["node"] not in out:
            at = float(e["at"])
            out[e["node"]] = Bound(e["node"], at, at + budget)
    if not out:
        return out
    order = sorted(out.values(), key=lambda b: (b.deadline_at, list(nodes).index(b.node)))

    # Room for the replacements on the nodes that stay.
    room = {"cpu": 0.0, "memory": 0.0, "pods": 0.0}
    for n in sc["nodes"]:
        if n["name"] in out:
            continue
        a = n.get("allocatable", {})
        room["cpu"] += parse_cpu(a.get("cpu", "0"))
        room["memory"] += parse_bytes(a.get("memory", "0"))
        room["pods"] += float(a.get("pods", 110))
    need = {"cpu": 0.0, "memory": 0.0, "pods": 0.0}
    for w in sc.get("workloads") or []:
        req = w.get("requests", {})
        cpu, mem = parse_cpu(req.get("cpu", "0")), parse_bytes(req.get("memory", "0"))
        kind = w.get("kind", "Deployment")
        if kind == "DaemonSet":
            stay = len(sc["nodes"]) - len(out)
        else:
            placement = w.get("placement") or {}
            stay = int(w.get("replicas", 1)) - sum(v for k, v in placement.items() if k in out)
            moving = sum(v for k, v in placement.items() if k in out)
            if kind in ("Deployment", "StatefulSet"):
                need["cpu"] += moving * cpu
                need["memory"] += moving * mem
                need["pods"] += moving
        room["cpu"] -= stay * cpu
        room["memory"] -= stay * mem
        room["pods"] -= stay
    capacity_ok = all(need[k] <= room[k] + 1e-9 for k in room)

    for w in sc.get("workloads") or []:
        kind = w.get("kind", "Deployment")
        if kind == "DaemonSet":
            continue
        grace = float(w.get("termination_grace_seconds", 30))
        shutdown = min(float(w.get("shutdown_seconds", 0)), grace)
        startup = float(w.get("startup_seconds", 0))
        placement = w.get("placement") or {}
        replicas = int(w.get("replicas", 1))
        for b in order:
            n = int(placement.get(b.node, 0))
            b.pods += n
            if n and float(w.get("shutdown_seconds", 0)) > grace:
                b.shutdown_fits_grace = False
        pdb = w.get("pdb")
        if kept_until_last_moment(w) and (not pdb or kind == "Pod"):
            for b in order:
                if placement.get(b.node):
                    left = b.deadline_at - MARGIN - b.notice_at
                    stop = grace if grace <= left else min(EXPECTED_SHUTDOWN_FRACTION * grace, left)
                    b.take(max(b.notice_at, b.deadline_at - MARGIN - stop) + shutdown,
                           "%s: do-not-disrupt, kept until its last safe moment" % w["name"])
            continue
        if not pdb or kind == "Pod":
            for b in order:
                if placement.get(b.node):
                    b.take(b.notice_at + shutdown, "%s: shutdown %g s" % (w["name"], shutdown))
            continue
        k = allowed_disruptions(pdb, replicas)
        if not any(placement.get(b.node) for b in order):
            continue
        if k == 0:
            for b in order:
                if placement.get(b.node):
                    b.lb, b.limit = math.inf, "%s: PDB allows no disruption" % w["name"]
            continue
        if not capacity_ok:
            for b in order:
                if placement.get(b.node):
                    b.lb, b.limit = None, "%s: not enough room for the replacements" % w["name"]
            continue
        slot_return = startup + (shutdown if kind == "StatefulSet" else 0.0)
        slots = [0.0] * k
        for b in order:
            for _ in range(int(placement.get(b.node, 0))):
                i = min(range(k), key=lambda j: slots[j])
                evict = max(slots[i], b.notice_at)
                slots[i] = evict + slot_return
                b.take(evict + shutdown,
                       "%s: PDB allows %d at a time, slot back after %g s" % (w["name"], k, slot_return))
    return out
