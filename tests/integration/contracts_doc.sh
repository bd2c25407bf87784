#!/usr/bin/env bash
# docs/contracts.md keeps up with the code: every command `spotdrain --help` lists has its row in the command
# table and every row names a listed command; every metric family the code declares (#define ... "spotdrain_...")
# and every alert kind of src/alert/bus.c is named in the document. A command, metric or alert kind added without
# documentation fails here.
source "$(dirname "$0")/lib.sh"

requires spotdrain
DOC=$ROOT/docs/contracts.md
[ -f "$DOC" ] || fail "docs/contracts.md is missing"

# The commands of `spotdrain --help`: the first word of each line between "commands:" and the blank line.
"$SPOTDRAIN" --help >"$TEST_TMP/help" || fail "spotdrain --help exited $?"
awk '/^commands:/ {on = 1; next} on && /^$/ {exit} on {print $1}' "$TEST_TMP/help" | sort -u >"$TEST_TMP/listed"
[ -s "$TEST_TMP/listed" ] || fail "no commands found in spotdrain --help: $(cat "$TEST_TMP/help")"

# The command table of section 1: rows starting | `spotdrain NAME ...`.
sed -n 's/^| `spotdrain \([a-z][a-z-]*\).*/\1/p' "$DOC" | sort -u >"$TEST_TMP/documented"

missing=$(comm -23 "$TEST_TMP/listed" "$TEST_TMP/documented")
[ -z "$missing" ] || fail "commands in spotdrain --help but not in docs/contracts.md's table: $missing"
stale=$(comm -13 "$TEST_TMP/listed" "$TEST_TMP/documented")
[ -z "$stale" ] || fail "commands in docs/contracts.md's table but not in spotdrain --help: $stale"
log "$(wc -l <"$TEST_TMP/listed") commands documented"

# Every subcommand's --help answers 0 (the table would otherwise describe a command that cannot be asked).
while read -r cmd; do
	"$SPOTDRAIN" "$cmd" --help >/dev/null 2>&1 || fail "spotdrain $cmd --help exited $?"
done <"$TEST_TMP/listed"

# Metric families: the predeclared ones (metrics.h) and those the front ends register.
grep -rhoE '#define [A-Z_]+ +"spotdrain_[a-z0-9_]+"' "$ROOT/include" "$ROOT/src" |
	sed 's/.*"\(spotdrain_[a-z0-9_]*\)"/\1/' | sort -u >"$TEST_TMP/metrics"
grep -q '^spotdrain_drains_total$' "$TEST_TMP/metrics" || fail "metric families not found in the sources"
while read -r m; do
	grep -q "\`$m\`" "$DOC" || fail "metric family $m is not in docs/contracts.md"
done <"$TEST_TMP/metrics"
log "$(wc -l <"$TEST_TMP/metrics") metric families documented"

# Alert kinds: the table of src/alert/bus.c, [ALERT_X] = { "kind", "Reason", ... }.
sed -n 's/.*\[ALERT_[A-Z_]*\] = { "\([a-z-]*\)".*/\1/p' "$ROOT/src/alert/bus.c" | sort -u >"$TEST_TMP/alerts"
grep -q '^drain-infeasible$' "$TEST_TMP/alerts" || fail "alert kinds not found in src/alert/bus.c"
while read -r k; do
	grep -q "^| \`$k\` |" "$DOC" || fail "alert kind $k is not in docs/contracts.md's alert table"
done <"$TEST_TMP/alerts"
log "$(wc -l <"$TEST_TMP/alerts") alert kinds documented"
