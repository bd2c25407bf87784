"""Acceptance of issue 3 over every example scenario, through `spotdrain simulate --json`.

For each interrupted node, with its lower bound computed from the YAML alone (bench/drain/lowerbound.py):
- pods_killed is 0 whenever every pod's shutdown fits its grace period;
- lower bound > budget: a drain-infeasible alert for the node between its notice and its first eviction or
  forced delete;
- lower bound < 70 % of the budget: no drain-infeasible alert, drained before the deadline with no pod
  forced, and (when every interrupted node of the scenario is in this class) pdb_breaches is 0.
The result must carry the docs/contracts.md §4 keys and the exit status must agree with it (0 / 3).

How soon after the notice drain-infeasible comes (issue 3: within 1 s) and how close a feasible drain comes to
its lower bound (within 1.15 x LB + 1.5 s) are figures, measured by bench/drain on a quiet machine at time
scale 1 (BENCHMARKS.md (b): "infeas. s", "drain/LB"); here, beside other tests on a shared machine, they
would measure the machine. The checks above are outcomes and an order, whatever the machine's load.

KNOWN_GAPS lists scenarios whose timing checks fail for a documented reason in another component: those
failures are reported as XFAIL (the safety checks stay strict), and a listed scenario that passes everything
says so, so that its entry gets removed."""

import concurrent.futures
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "drain"))
import lowerbound  # noqa: E402

TOP_KEYS = {"scenario", "mode", "time_scale", "nodes", "pdb_breaches", "alerts", "replacements", "api_requests"}
NODE_KEYS = {"name", "notice_at", "deadline_at", "cordoned_at", "drained_at", "pods_evictable", "pods_graceful",
             "pods_forced", "pods_killed", "verdict", "estimates_at_start"}
ALERT_KEYS = {"kind", "node", "at", "message"}

# Scenarios whose verdict and drain checks (drain-infeasible before the first eviction, no such alert and
# nothing forced when clearly feasible, no PDB breach) fail today for a reason in another component. Their
# failures are reported as XFAIL; the safety checks (result keys, exit status, pods_killed) stay strict.
KNOWN_GAPS = {}

# See run_scenario: the time scale of scenarios with more interruptions than this, and of those with faults.
MANY_NOTICES = 4
MANY_NOTICES_SCALE = 2.0
FAULTS_SCALE = 3.0


# The lower bound is that of a drain through the PDBs alone: surge before evict (drain.surge, which starts
# replacements first and beats it) is off here; tests/integration/surge_sim.sh covers it.
CONFIG = "drain:\n  surge: \"off\"\n"


def run(binary, scale, path, config):
    p = subprocess.run([binary, "simulate", "--json", "--time-scale", str(scale), "--config", config, path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    if p.returncode not in (0, 3):
        raise RuntimeError("%s: exit %d\n%s" % (path, p.returncode, p.stderr.decode(errors="replace")[-2000:]))
    return p.returncode, json.loads(p.stdout)


def main():
    binary = os.environ.get("SPOTDRAIN", os.path.join(ROOT, "build", "spotdrain"))
    # 10: the checks are outcomes and an order, not figures in scenario time (see the docstring); a feasible
    # drain (LB < 70 % of the budget) has 36 s of scenario time to spare, 3.6 s of real time.
    scale = float(os.environ.get("TIME_SCALE", "10"))
    jobs = int(os.environ.get("ACCEPTANCE_JOBS", "6"))
    paths = sys.argv[1:] or sorted(glob.glob(os.path.join(ROOT, "examples", "*.yaml")))
    failures, xfails, checked = [], [], 0
    tmp = tempfile.mkdtemp(prefix="spotdrain-acceptance-")
    config = os.path.join(tmp, "config.yaml")
    with open(config, "w") as f:
        f.write(CONFIG)

    try:
        # The scenarios run ACCEPTANCE_JOBS at a time (default 6): a simulation waits on its scaled clock
        # and takes a few per cent of a core (mass-interruption: 2 s of CPU in 60 s), so running them side
        # by side leaves each its share of a second; the checks then go in order.
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            # The slowest (many notices, a slower clock) first, so that they do not run on alone at the end.
            runs = {path: pool.submit(run_scenario, binary, scale, path, config)
                    for path in sorted(paths, key=lambda p: -notice_count(p))}
            for path in paths:
                checked += check_scenario(path, runs[path].result(), failures, xfails)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for x in xfails:
        print("XFAIL " + x)
    for f in failures:
        print("FAIL " + f)
    print("examples acceptance: %d checks, %d failed, %d known gaps" % (checked, len(failures), len(xfails)))
    return 1 if failures else 0


def notices_of(sc):
    return sum(1 for e in sc.get("events") or [] if e.get("type") in ("spot-interruption", "asg-termination"))


def notice_count(path):
    with open(path) as f:
        return notices_of(yaml.safe_load(f))


def run_scenario(binary, scale, path, config):
    """Runs one scenario with interruptions: (scenario, its lower bounds, exit status, result), or None."""
    with open(path) as f:
        sc = yaml.safe_load(f)
    bounds = lowerbound.bounds(sc)
    if not bounds:
        return None
    # A dozen drains planning at once in one process share a core with the other tests: scenarios with many
    # interruptions run at most 2x, so that their at-risk nodes' slots are not lost to lag (mass-interruption's
    # spot-12 and spot-14 fit their budget by 13 s).
    if notices_of(sc) > MANY_NOTICES:
        scale = min(scale, MANY_NOTICES_SCALE)
    # A scenario's faults (API latency, errors, throttling, dropped watches) cost the drain real time, which a
    # time scale multiplies into scenario time: at 10, on a loaded machine, faults-agent's feasible drain
    # (LB 11 s of 120) was judged infeasible at its notice. They run at 3, as the whole test did before.
    if sc.get("faults"):
        scale = min(scale, FAULTS_SCALE)
    rc, res = run(binary, scale, path, config)
    return sc, bounds, rc, res


def check_scenario(path, ran, failures, xfails):
    """Checks one scenario's run; returns the number of checks made."""
    if ran is None:
        print("skip %s: no interruption" % os.path.basename(path))
        return 0
    sc, bounds, rc, res = ran
    budget = float(sc.get("budget_seconds", 120))
    name = sc["name"]
    gap = KNOWN_GAPS.get(name)
    counts = {"checked": 0, "gap": 0}

    def check(ok, node, what, timing=False):
        counts["checked"] += 1
        if ok:
            return
        if gap and timing:
            counts["gap"] += 1
            xfails.append("%s/%s: %s" % (name, node, what))
        else:
            failures.append("%s/%s: %s" % (name, node, what))

    check(TOP_KEYS <= set(res), None, "result keys %s" % sorted(res))
    for a in res["alerts"]:
        # CONTRACTS §4: an alert about pods deleted at their last safe moment (or a Job's or bare pod's)
        # also carries its postmortem list.
        check(ALERT_KEYS <= set(a) <= ALERT_KEYS | {"postmortem"}, None, "alert keys %s" % sorted(a))
    nodes = {n["name"]: n for n in res["nodes"]}
    check(set(nodes) == set(bounds), None, "interrupted nodes %s, expected %s" % (sorted(nodes), sorted(bounds)))
    in_time = all(n["drained_at"] is not None and n["drained_at"] <= n["deadline_at"] and n["pods_killed"] == 0
                  for n in res["nodes"])
    check(rc == (0 if in_time else 3), None, "exit status %d, every node drained in time: %s" % (rc, in_time))

    all_feasible = True
    for node, b in bounds.items():
        n = nodes.get(node)
        if n is None:
            continue
        check(set(n) == NODE_KEYS, node, "node keys %s" % sorted(n))
        check(abs(n["notice_at"] - b.notice_at) < 0.5, node,
              "notice_at %s, the scenario says %s" % (n["notice_at"], b.notice_at))
        infeasible = [a for a in res["alerts"] if a["kind"] == "drain-infeasible" and a["node"] == node]
        took = None if n["drained_at"] is None else n["drained_at"] - n["notice_at"]
        if b.lb is None:
            cls = "unknown"
        elif b.lb > budget:
            cls = "infeasible"
        elif b.lb < 0.7 * budget:
            cls = "feasible"
        else:
            cls = "tight"
        all_feasible &= cls == "feasible"
        print("%-18s %-14s LB %7s  drained after %7s  budget %g  class %-10s killed %d forced %d alerts %s" % (
            name, node, "-" if b.lb is None else "%.1f" % b.lb, "-" if took is None else "%.1f" % took, budget,
            cls, n["pods_killed"], n["pods_forced"],
            ",".join(a["kind"] for a in res["alerts"] if a["node"] == node)))
        if b.shutdown_fits_grace:
            check(n["pods_killed"] == 0, node,
                  "pods_killed %d although every shutdown fits its grace" % n["pods_killed"])
        if cls == "infeasible":
            acts = [a["at"] for a in res["alerts"] if a["node"] == node and a["kind"] in ("pod-evicted", "pods-forced")]
            first_act = min(acts) if acts else n["deadline_at"]
            check(any(n["notice_at"] <= a["at"] <= first_act for a in infeasible), node,
                  "infeasible (LB %.1f s > budget %g s): no drain-infeasible between the notice (%s) and the first "
                  "eviction (%s) (alerts at %s)" % (b.lb, budget, n["notice_at"], first_act,
                                                   [a["at"] for a in infeasible]), timing=True)
        elif cls == "feasible":
            # The alert's own words go into the failure: why the drain judged itself infeasible (seen once,
            # at load 14, for bench-8 in agent mode, and not since).
            check(not infeasible, node,
                  "feasible (LB %.1f s < 70%% of %g s) but drain-infeasible was raised: %s" % (
                      b.lb, budget, "; ".join("at %s: %s" % (a["at"], a["message"]) for a in infeasible)),
                  timing=True)
            check(n["drained_at"] is not None and n["drained_at"] <= n["deadline_at"] and n["pods_forced"] == 0,
                  node, "feasible (LB %.1f s): drained after %s s, deadline after %.1f s, %d forced" % (
                      b.lb, took, n["deadline_at"] - n["notice_at"], n["pods_forced"]), timing=True)
    if all_feasible:
        check(res["pdb_breaches"] == 0, None, "every node feasible but pdb_breaches %d" % res["pdb_breaches"],
              timing=True)
    if gap:
        print("known gap in %s: %s; %s" % (
            name, gap, "%d timing checks failed (XFAIL)" % counts["gap"] if counts["gap"]
            else "every check passed: remove it from KNOWN_GAPS"))
    return counts["checked"]


if __name__ == "__main__":
    sys.exit(main())
