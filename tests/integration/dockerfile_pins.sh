#!/usr/bin/env bash
# The Dockerfile takes its base images by digest: every FROM is a build stage or IMAGE@sha256:HEX, HEX being
# 64 hex digits or a global ARG (declared before the first FROM, without a default: a build that is not
# given the digest fails rather than take the tag's current image); COPY --from names only build stages.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || skip "python3 not installed"

check() {
	"$PY" - "$1" <<'PY'
import re, sys
lines, cont = [], ""
for raw in open(sys.argv[1]):
    line = raw.rstrip("\n")
    if not cont and re.match(r"\s*#", line):
        continue
    if line.endswith("\\"):
        cont += line[:-1] + " "
        continue
    lines.append(cont + line)
    cont = ""
global_args, stages, froms, bad = {}, set(), 0, []
for line in lines:
    words = line.split()
    if not words:
        continue
    op = words[0].upper()
    if op == "ARG" and froms == 0:
        name, _, default = words[1].partition("=")
        global_args[name] = default
    elif op == "FROM":
        froms += 1
        args = [w for w in words[1:] if not w.startswith("--")]
        image = args[0]
        if len(args) >= 3 and args[1].upper() == "AS":
            stages_after = args[2]
        else:
            stages_after = None
        if image in stages:
            pass
        else:
            m = re.fullmatch(r"[^@\s]+@sha256:(?:([0-9a-f]{64})|\$\{([A-Za-z_][A-Za-z0-9_]*)\})", image)
            if not m:
                bad.append(f"FROM {image}: not pinned by @sha256")
            elif m.group(2):
                arg = m.group(2)
                if arg not in global_args:
                    bad.append(f"FROM {image}: {arg} is no global ARG")
                elif global_args[arg] and not re.fullmatch(r"[0-9a-f]{64}", global_args[arg]):
                    bad.append(f"FROM {image}: {arg} defaults to {global_args[arg]!r}, not a digest")
        if stages_after:
            stages.add(stages_after)
    elif op == "COPY":
        for w in words[1:]:
            if w.startswith("--from=") and w[len("--from="):] not in stages:
                bad.append(f"COPY {w}: not a build stage of this file")
if froms == 0:
    bad.append("no FROM")
if bad:
    print("\n".join(bad))
    sys.exit(1)
print(f"{froms} FROM lines, all pinned")
PY
}

log "the Dockerfile's FROM lines"
check "$ROOT/Dockerfile" || fail "the Dockerfile takes an image by tag"

log "the check refuses a tag, a digest argument with a tag for default, and an outside COPY --from"
for bad in 'FROM debian:12-slim' \
	$'ARG D=latest\nFROM debian:12@sha256:${D}' \
	$'FROM debian:12@sha256:'"$(printf 'a%.0s' {1..64})"$' AS b\nCOPY --from=alpine:3 / /'; do
	printf '%s\n' "$bad" >"$TEST_TMP/Dockerfile.bad"
	if check "$TEST_TMP/Dockerfile.bad" >/dev/null; then
		fail "accepted: $bad"
	fi
done
echo "ok"
