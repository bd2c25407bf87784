#!/usr/bin/env python3
"""Checks a simulator result (GET /sim/v1/result, docs/contracts.md §4) after a drain under faults or a
crash.

usage: faults_check.py RESULT.json NODE... [--drained]

Without --drained it only answers (exit 0 / 1) whether every NODE has drained_at set, for polling.
With --drained it asserts the outcome the fault and crash-resume tests require of every NODE:
  - the notice was seen and the node cordoned (notice_at and cordoned_at set): no notice lost;
  - the node drained, and before its deadline (drained_at <= deadline_at);
  - no pod killed on it (pods_killed == 0);
and of the whole run: pdb_breaches == 0. It prints one summary line per node and exits 1 with the reasons
otherwise.
"""
import json
import sys


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    check = "--drained" in sys.argv[1:]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        with open(args[0], encoding="utf-8") as f:
            result = json.load(f)
    except (OSError, ValueError) as e:
        if check:
            print(f"FAIL: cannot read the result: {e}", file=sys.stderr)
        return 1
    nodes = {n.get("name"): n for n in result.get("nodes") or []}
    wanted = args[1:]
    if not check:
        return 0 if all(nodes.get(w, {}).get("drained_at") is not None for w in wanted) else 1

    problems = []
    for name in wanted:
        n = nodes.get(name)
        if n is None:
            problems.append(f"{name}: not in the result (no notice reached the simulator)")
            continue
        print(
            f"  {name}: notice {n.get('notice_at')} cordoned {n.get('cordoned_at')} drained {n.get('drained_at')} "
            f"deadline {n.get('deadline_at')} killed {n.get('pods_killed')}"
        )
        for key in ("notice_at", "cordoned_at", "drained_at", "deadline_at"):
            if n.get(key) is None:
                problems.append(f"{name}: no {key}")
        if n.get("drained_at") is not None and n.get("deadline_at") is not None:
            if n["drained_at"] > n["deadline_at"]:
                problems.append(f"{name}: drained at {n['drained_at']} after its deadline {n['deadline_at']}")
        if (n.get("pods_killed") or 0) != 0:
            problems.append(f"{name}: {n['pods_killed']} pods killed")
    if (result.get("pdb_breaches") or 0) != 0:
        problems.append(f"{result['pdb_breaches']} PDB breaches")
    for p in problems:
        print(f"FAIL: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
