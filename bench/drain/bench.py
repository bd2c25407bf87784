"""Drain benchmarks of issue 3.

  bench.py kubectl [--runs N]     (a) kubectl 1.33 drain vs spotdrain drain on examples/bench-8.yaml, real time
  bench.py examples [--time-scale N] [SCENARIO...]
                                  (b) every example scenario through `spotdrain simulate --json`, drain time
                                      against the lower bound computed from the scenario (lowerbound.py)

Environment: SPOTDRAIN (default build/spotdrain), KUBECTL (default kubectl.1.33 beside `kubectl`)."""

import argparse
import glob
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import lowerbound  # noqa: E402

BENCH_SCENARIO = os.path.join(ROOT, "examples", "bench-8.yaml")


def spotdrain_bin():
    return os.environ.get("SPOTDRAIN", os.path.join(ROOT, "build", "spotdrain"))


def kubectl_bin():
    if os.environ.get("KUBECTL"):
        return os.environ["KUBECTL"]
    k = shutil.which("kubectl")
    if not k:
        sys.exit("bench: kubectl not found")
    return os.path.join(os.path.dirname(os.path.realpath(k)), "kubectl.1.33")


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


class Sim:
    """A fresh `spotdrain sim serve` in real time (--time-scale 1)."""

    def __init__(self, scenario):
        self.tmp = tempfile.mkdtemp(prefix="spotdrain-bench-")
        self.kubeconfig = os.path.join(self.tmp, "kubeconfig")
        endpoints = os.path.join(self.tmp, "endpoints")
        self.proc = subprocess.Popen(
            [spotdrain_bin(), "sim", "serve", scenario, "--listen", "127.0.0.1:0", "--kubeconfig-out",
             self.kubeconfig, "--endpoints-out", endpoints, "--time-scale", "1", "--log-level", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            if os.path.exists(endpoints) and os.path.getsize(endpoints) > 0:
                break
            if self.proc.poll() is not None:
                raise RuntimeError("sim serve exited with %d" % self.proc.returncode)
            time.sleep(0.05)
        with open(endpoints) as f:
            self.url = json.load(f)["kubernetes"]

    def now(self):
        return get_json(self.url + "/sim/v1/clock")["now"]

    def result(self):
        return get_json(self.url + "/sim/v1/result")

    def close(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


def drain_once(tool):
    sim = Sim(BENCH_SCENARIO)
    try:
        if tool == "kubectl":
            cmd = [kubectl_bin(), "--kubeconfig", sim.kubeconfig, "drain", "spot-a", "--ignore-daemonsets",
                   "--delete-emptydir-data", "--timeout=300s"]
        else:
            cmd = [spotdrain_bin(), "drain", "spot-a", "--budget", "120", "--kubeconfig", sim.kubeconfig,
                   "--log-level", "error"]
        start_sim = sim.now()
        start = time.monotonic()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        wall = time.monotonic() - start
        res = sim.result()
        node = next((n for n in res["nodes"] if n["name"] == "spot-a"), {})
        drained = node.get("drained_at")
        return {"tool": tool, "exit": p.returncode, "wall": wall,
                "sim": None if drained is None else drained - start_sim,
                "pdb_breaches": res["pdb_breaches"], "killed": node.get("pods_killed"),
                "output": p.stdout.decode(errors="replace")}
    finally:
        sim.close()


def bench_kubectl(args):
    with open(BENCH_SCENARIO) as f:
        lb = lowerbound.bounds(yaml.safe_load(f))["spot-a"].lb
    runs = {"kubectl": [], "spotdrain": []}
    print("bench (a): %s drain spot-a (8 pods, maxUnavailable 1, startup 3 s, shutdown 1 s), real time" %
          os.path.basename(kubectl_bin()))
    for i in range(args.runs):
        for tool in ("kubectl", "spotdrain"):
            r = drain_once(tool)
            runs[tool].append(r)
            print("  run %d %-9s exit %d  %.2f s (simulator: drained %.2f s after the start)  pdb_breaches %d  killed %s"
                  % (i + 1, tool, r["exit"], r["wall"], r["sim"] if r["sim"] is not None else float("nan"),
                     r["pdb_breaches"], r["killed"]))
            if r["exit"] != 0:
                print(r["output"][-2000:])
    k = statistics.median(r["wall"] for r in runs["kubectl"])
    s = statistics.median(r["wall"] for r in runs["spotdrain"])
    breaches = max(r["pdb_breaches"] for r in runs["spotdrain"])
    ok = s / k <= 0.75 and s / lb <= 1.15 and breaches == 0 and all(r["exit"] == 0 for r in runs["spotdrain"])
    print("  median of %d: kubectl %.2f s, spotdrain %.2f s; spotdrain/kubectl %.2f (goal <= 0.75); lower bound "
          "%.1f s, spotdrain/LB %.2f (goal <= 1.15); spotdrain pdb_breaches %d (goal 0): %s"
          % (args.runs, k, s, s / k, lb, s / lb, breaches, "goals met" if ok else "GOAL MISSED"))
    return 0 if ok else 1


def bench_examples(args):
    paths = args.scenarios or sorted(glob.glob(os.path.join(ROOT, "examples", "*.yaml")))
    print("bench (b): spotdrain simulate --time-scale %g, drain time (drained_at - notice_at) against the lower "
          "bound" % args.time_scale)
    print("  %-18s %-14s %8s %8s %8s %7s %-10s %6s %6s %9s %s" % (
        "scenario", "node", "LB s", "drain s", "drain/LB", "budget", "class", "forced", "killed", "infeas. s",
        "alerts"))
    for path in paths:
        with open(path) as f:
            sc = yaml.safe_load(f)
        bounds = lowerbound.bounds(sc)
        if not bounds:
            print("  %-18s (no interruption)" % sc["name"])
            continue
        p = subprocess.run([spotdrain_bin(), "simulate", "--json", "--time-scale", str(args.time_scale), path],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=1200)
        res = json.loads(p.stdout)
        for n in res["nodes"]:
            b = bounds.get(n["name"])
            took = None if n["drained_at"] is None else n["drained_at"] - n["notice_at"]
            lb = None if b is None else b.lb
            budget = float(sc.get("budget_seconds", 120))
            # Above the budget the drain finishes only by forcing pods, so drain/LB says nothing.
            cls = "unknown" if lb is None else "infeasible" if lb > budget else \
                "feasible" if lb < 0.7 * budget else "tight"
            ratio = "-" if not took or not lb or cls in ("infeasible", "unknown") else "%.2f" % (took / lb)
            kinds = sorted({a["kind"] for a in res["alerts"] if a["node"] == n["name"]} - {"notice-received"})
            # How long after the notice drain-infeasible came, if it did.
            infeasible = [a["at"] - n["notice_at"] for a in res["alerts"]
                          if a["node"] == n["name"] and a["kind"] == "drain-infeasible"]
            print("  %-18s %-14s %8s %8s %8s %7g %-10s %6d %6d %9s %s" % (
                sc["name"], n["name"], "-" if lb is None else "%.1f" % lb, "-" if took is None else "%.1f" % took,
                ratio, budget, cls, n["pods_forced"], n["pods_killed"],
                "%.2f" % min(infeasible) if infeasible else "-", ",".join(kinds)))
        print("  %-18s exit %d, delivery %s, pdb_breaches %d, api_requests %d" % (
            sc["name"], p.returncode, res.get("delivery"), res["pdb_breaches"], res["api_requests"]))
    return 0


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="what", required=True)
    a = sub.add_parser("kubectl")
    a.add_argument("--runs", type=int, default=3)
    b = sub.add_parser("examples")
    b.add_argument("--time-scale", type=float, default=1.0)
    b.add_argument("scenarios", nargs="*")
    args = ap.parse_args()
    return bench_kubectl(args) if args.what == "kubectl" else bench_examples(args)


if __name__ == "__main__":
    sys.exit(main())
