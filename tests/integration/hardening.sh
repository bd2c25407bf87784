#!/usr/bin/env bash
# The shipped binaries are built hardened (the Makefile's HARDEN_CFLAGS and HARDEN_LDFLAGS): full RELRO
# (a GNU_RELRO segment and BIND_NOW: the GOT is resolved at start and then read-only), stack canaries
# (__stack_chk_fail is linked) and _FORTIFY_SOURCE (glibc's checked __*_chk functions are linked). The
# sanitizer build goes without these by design (ASan checks instead): there the test skips.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires readelf nm spotdrain
# The symbols are read whole before grep looks at them: `nm | grep -q` under pipefail fails when grep stops
# reading at the first match and nm dies of SIGPIPE, and the sanitizer build was then taken for a default one.
dynsyms=$(nm -D "$SPOTDRAIN" 2>/dev/null) || true
grep -q ' __asan_init$' <<<"$dynsyms" && skip "a sanitizer build: hardening flags are left to the default build"

for bin in "$SPOTDRAIN" "$SPOTDRAIN_AGENT"; do
	log "$(basename "$bin")"
	[ -x "$bin" ] || fail "$bin not built"
	segments=$(readelf -lW "$bin") dynamic=$(readelf -dW "$bin")
	grep -q 'GNU_RELRO' <<<"$segments" || fail "$bin: no GNU_RELRO segment"
	grep -Eq '\(FLAGS\).*BIND_NOW|\(FLAGS_1\).*NOW' <<<"$dynamic" || fail "$bin: not linked with -z now"
	syms=$(nm -D --undefined-only "$bin")
	grep -q ' __stack_chk_fail' <<<"$syms" || fail "$bin: no stack protector"
	chk=$(grep -Ec ' __[a-z0-9_]+_chk(@|$)' <<<"$syms") || true
	[ "$chk" -gt 0 ] || fail "$bin: no _FORTIFY_SOURCE checked functions"
	echo "relro, bind now, stack protector, $chk fortified functions"
done
echo "ok"
