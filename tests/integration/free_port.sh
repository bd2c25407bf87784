#!/usr/bin/env bash
# lib.sh free_port: ports handed out side by side, within one test and across tests, are never the same one
# (each is reserved until its test exits), and a test's exit gives its reservations back.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires python3

# pick N OUT: N ports picked at once by another test (a shell of its own) into OUT, one a line.
pick() {
	bash -c 'source "$1"; for i in $(seq "$2"); do free_port & done; wait' _ "$ROOT/tests/integration/lib.sh" "$1" >"$2"
}
pick 8 "$TEST_TMP/a" &
pick 8 "$TEST_TMP/b" &
for i in $(seq 8); do free_port >"$TEST_TMP/own.$i" & done
wait
cat "$TEST_TMP"/own.* "$TEST_TMP/a" "$TEST_TMP/b" >"$TEST_TMP/all"
[ "$(wc -l <"$TEST_TMP/all")" -eq 24 ] || fail "$(wc -l <"$TEST_TMP/all") ports of 24 asked for"
dups=$(sort "$TEST_TMP/all" | uniq -d)
[ -z "$dups" ] || fail "ports handed out twice: $dups"
# The other tests have exited: theirs are free again; this one's are still held.
for p in $(cat "$TEST_TMP/a" "$TEST_TMP/b"); do
	[ ! -e "$PORT_DIR/$p" ] || fail "port $p still reserved after its test exited"
done
for p in $(cat "$TEST_TMP"/own.*); do
	[ "$(cat "$PORT_DIR/$p")" = "$$" ] || fail "port $p is not reserved for this test"
done
log "ok: 24 ports, none twice"
