#!/usr/bin/env bash
# Issue 32, item 6: the README's recipe "Pointing kubectl at the simulator" runs as written (the binary and
# /tmp aside), and its last line reads the simulator's result: its `sed` once expected a space where the
# endpoints file has a tab, and printed nothing.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tools

# The sh block under the heading, build/spotdrain and /tmp/ made this test's.
awk '/^## Pointing kubectl at the simulator/ { on = 1; next } on && /^```sh/ { code = 1; next }
	code && /^```/ { exit } code { print }' "$ROOT/README.md" |
	sed -e "s#build/spotdrain#$SPOTDRAIN#g" -e "s#/tmp/#$TEST_TMP/#g" >"$TEST_TMP/recipe.sh"
grep -q 'sim serve' "$TEST_TMP/recipe.sh" && grep -q 'sim/v1/result' "$TEST_TMP/recipe.sh" ||
	fail "no recipe found in README.md: $(cat "$TEST_TMP/recipe.sh")"
# Its server stopped whatever the recipe does.
printf 'kill %%1\nwait\n' >>"$TEST_TMP/recipe.sh"
(cd "$ROOT" && timeout 180 bash -e "$TEST_TMP/recipe.sh") >"$TEST_TMP/out" 2>"$TEST_TMP/err" ||
	{ tail -5 "$TEST_TMP/err" >&2; fail "the recipe failed"; }
# The result is the last thing it prints: a JSON document of the scenario drain-8 with spot-a drained by kubectl.
sed -n '/^{/,$p' "$TEST_TMP/out" | jq -e '.scenario == "drain-8" and (.api_requests > 0)' >/dev/null ||
	fail "the recipe's last command did not print the simulator's result: $(tail -5 "$TEST_TMP/out")"
grep -q '^spot-a' "$TEST_TMP/out" || fail "the recipe's kubectl get nodes did not list spot-a"
log "ok"
