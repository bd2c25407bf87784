#!/usr/bin/env bash
# The systemd units: `systemd-analyze verify` says nothing at all (it exits 0 even for unknown keys, so any
# output fails the test), and `systemd-analyze security --offline=true` rates every unit's exposure <= 2.0.
# verify insists that ExecStart's binary exists: the units are checked as copies in a temp dir whose
# ExecStart points at the built binary.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires systemd-analyze spotdrain

units=("$ROOT"/systemd/*.service)
[ -e "${units[0]}" ] || fail "no units in $ROOT/systemd"

# The agent's unit runs the agent's own binary (without the simulator), the others spotdrain.
for unit in "${units[@]}"; do
	name=$(basename "$unit")
	bin=spotdrain built=$SPOTDRAIN
	[ "$name" = spotdrain-agent.service ] && bin=spotdrain-agent built=$SPOTDRAIN_AGENT
	grep -q "^ExecStart=/usr/local/bin/$bin " "$unit" || fail "$name: ExecStart is not /usr/local/bin/$bin"
	[ -x "$built" ] || fail "$built not built"
	sed "s#^ExecStart=/usr/local/bin/$bin #ExecStart=$built #" "$unit" >"$TEST_TMP/$name"
done

for unit in "${units[@]}"; do
	name=$(basename "$unit")
	log "verify $name"
	out=$(cd "$TEST_TMP" && systemd-analyze verify "./$name" 2>&1) || fail "verify $name failed: $out"
	[ -z "$out" ] || fail "verify $name is not clean: $out"

	log "security $name"
	out=$(cd "$TEST_TMP" && systemd-analyze security --offline=true --no-pager "./$name" 2>&1) ||
		fail "security $name failed: $out"
	level=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$out")
	[ -n "$level" ] || fail "no exposure level for $name: $out"
	echo "$name: exposure $level"
	awk -v l="$level" 'BEGIN { exit !(l <= 2.0) }' || fail "$name: exposure $level > 2.0"
done

log "the example config is YAML"
if /usr/bin/python3 -c 'import yaml' 2>/dev/null; then
	/usr/bin/python3 -c 'import sys, yaml; yaml.safe_load(open(sys.argv[1]))' "$ROOT/systemd/spotdrain.yaml" ||
		fail "systemd/spotdrain.yaml is not YAML"
fi
echo "ok"
