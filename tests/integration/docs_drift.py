#!/usr/bin/env python3
"""Docs that cannot drift (issue 19 item 7): every configuration key named in README.md, docs/*.md and the chart's
README is a key of the configuration table, and every default they give for a key, for a SPOTDRAIN_* variable or
for a command's flag is the table's; every key under the chart values' config: is a key. The table is what the binary says: `check-config` (every key with its
default) and `help COMMAND` (every flag with its default, a key's where it stands for one).

usage: docs_drift.py SPOTDRAIN ROOT"""
import re
import subprocess
import sys

import yaml

spotdrain, root = sys.argv[1], sys.argv[2]
FILES = ["README.md", "helm/spotdrain/README.md"]
FILES += sorted("docs/" + f for f in __import__("os").listdir(root + "/docs") if f.endswith(".md"))


def flat(d, prefix=""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from flat(v, prefix + k + ".")
        else:
            yield prefix + k, v


keys = dict(flat(yaml.safe_load(subprocess.run([spotdrain, "check-config"], check=True, capture_output=True,
                                               text=True).stdout)))
sections = {k.split(".")[0] for k in keys if "." in k}

# Flags: --name -> the defaults help gives it (by command; a flag may mean one thing per command).
flag_defaults = {}
commands = [l.split()[0] for l in subprocess.run([spotdrain, "--help"], capture_output=True, text=True).stdout
            .split("commands:")[1].split("\n\n")[0].splitlines() if l.strip()]
for c in commands:
    text = subprocess.run([spotdrain, "help", c], capture_output=True, text=True).stdout
    for m in re.finditer(r"^  --([a-z0-9-]+)[^\n]*\n(?: {28}[^\n]*\n)*? {28}default: ([^\n]*)", text, re.M):
        d = m.group(2)
        k = re.search(r"\(([a-z_.]+)\)$", d)
        flag_defaults.setdefault(m.group(1), []).append((k.group(1), keys.get(k.group(1))) if k else (None, d))

UNITS = {"ms": 0.001, "s": 1, "sec": 1, "second": 1, "seconds": 1, "min": 60, "minute": 60, "minutes": 60,
         "m": 60, "h": 3600, "hour": 3600, "hours": 3600}


def seconds(text):
    """'10 min' -> 600.0, '500ms' -> 0.5, '5' -> 5.0; None when it is no duration."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([a-z]*)", text.strip())
    if not m or m.group(2) not in UNITS and m.group(2) != "":
        return None
    return float(m.group(1)) * UNITS.get(m.group(2) or "s")


def same(key, table, said):
    """Does the value a document says equal the table's default of key?"""
    said = said.strip().strip("`\"'")
    if table is None:
        return said in ("unset", "none", "null", "empty")
    if isinstance(table, bool):
        return said == ("true" if table else "false")
    if isinstance(table, list):
        return said.replace(" ", "") in (",".join(table), str(table).replace("'", '"').replace(" ", ""), "[]" if not table else "")
    if isinstance(table, (int, float)):
        unit = 0.001 if key.endswith("_ms") else 1
        s = seconds(said)
        return s is not None and abs(s - float(table) * unit) < 1e-9
    return said == str(table)


# A key, then within its clause "default VALUE" or " (VALUE)" right after it. VALUE: a number with an optional
# unit, or one word.
VALUE = r"`?([0-9.]+:[0-9]+|[0-9][0-9.]*\s*(?:ms|s|sec|seconds?|min|minutes?|m|h|hours?)?|true|false|[a-z][a-z0-9_.-]*)`?\b"
errors, checked, defaults = [], 0, 0
for name in FILES:
    try:
        lines = open(f"{root}/{name}", encoding="utf-8").read().splitlines()
    except FileNotFoundError:
        continue
    in_code = False
    for no, line in enumerate(lines, 1):
        if line.startswith("```"):
            in_code = not in_code
            continue
        where = f"{name}:{no}"
        for m in re.finditer(r"`(?:config\.)?([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+)(?:[:=] ?([^`]*))?`", line):
            key, example = m.group(1), m.group(2)
            if key.split(".")[0] not in sections or key in ("aws.ec2", "aws.autoscaling", "aws.health"):
                continue  # a file name, an EventBridge source
            if name.startswith("helm/") and not m.group(0).startswith("`config."):
                continue  # the chart's own values; its configuration is under config.
            if re.search(r"\.(ya?ml|md|c|h|sh|py|json|service)$", key):
                continue
            if key not in keys:
                errors.append(f"{where}: `{key}` is no configuration key")
                continue
            checked += 1
            rest = line[m.end():]
            # `key: VALUE` (default): the example is the default.
            if example and re.match(r"\s*\(default\)", rest) and not same(key, keys[key], example):
                errors.append(f"{where}: `{key}` default said {example!r}, the table's is {keys[key]!r}")
            d = re.match(r"\s*\((?:default:?\s*)?(?!default\b)" + VALUE + r"\s*\)", rest) or \
                re.match(r"[^.;|]{0,40}?\bdefaults? (?:is |to |of )?" + VALUE, rest)
            defaults += bool(d)
            if d and not same(key, keys[key], d.group(1)):
                errors.append(f"{where}: `{key}` default said {d.group(1)!r}, the table's is {keys[key]!r}")
        for m in re.finditer(r"\bSPOTDRAIN_([A-Z0-9_]+)", line):
            key = next((k for k in keys if k.upper().replace(".", "_") == m.group(1)), None)
            if key is None and m.group(1) not in ("CATALOG",):
                errors.append(f"{where}: SPOTDRAIN_{m.group(1)} names no configuration key")
        for m in re.finditer(r"`--([a-z0-9-]+)(?: [A-Z][A-Za-z:|.]*)?`\s*\(default:? " + VALUE, line):
            flag, said = m.group(1), m.group(2)
            if flag not in flag_defaults:
                errors.append(f"{where}: --{flag} is no flag of any command")
                continue
            checked += 1
            defaults += 1
            if not any(said == k or (same(k, v, said) if k else v.split(" ")[0].strip("`,") == said)
                       for k, v in flag_defaults[flag]):
                errors.append(f"{where}: --{flag} default said {said!r}, help says {flag_defaults[flag]!r}")
# The chart's values pass config: through to the configuration file: each key must be one.
values = yaml.safe_load(open(f"{root}/helm/spotdrain/values.yaml", encoding="utf-8"))
for key, _ in flat(values.get("config") or {}):
    checked += 1
    if key not in keys:
        errors.append(f"helm/spotdrain/values.yaml: config.{key} is no configuration key")
print(f"{checked} mentions of keys and flags, {defaults} of them with a default, checked in {len(FILES)} files")
if defaults < 5:
    errors.append("hardly any default found: the patterns no longer match how the documents say them")
print("\n".join(errors))
sys.exit(1 if errors else 0)
