#!/usr/bin/env bash
# Every libFuzzer target (fuzz/fuzz_*.c) briefly: first its regression inputs (fuzz/regressions/NAME/, each
# run once), then FUZZ_SMOKE_SECONDS (default 12) of fuzzing from its seeds (fuzz/seeds/NAME/). Any crash,
# leak, sanitizer report or timeout fails the test. Skipped (77) without clang's libFuzzer runtime.
#
# The library is compiled once with fuzzing instrumentation into BUILD/fuzz-smoke/ (next to $SPOTDRAIN's
# build directory; only changed sources are recompiled) and each target links against it, which is much
# faster than `make fuzz` compiling every source into every target. docs/fuzzing.md has the long runs.
source "$(dirname "$0")/lib.sh"

SECONDS_PER_TARGET=${FUZZ_SMOKE_SECONDS:-12}
OUT=$(dirname "$SPOTDRAIN")/fuzz-smoke
PKGS="libcurl libcjson yaml-0.1 openssl libsystemd expat libmicrohttpd"

command -v clang >/dev/null || skip "clang is not installed"
mkdir -p "$OUT/obj"
cat >"$TEST_TMP/probe.c" <<'EOF'
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { (void)data; (void)size; return 0; }
EOF
clang -fsanitize=fuzzer,address,undefined -o "$TEST_TMP/probe" "$TEST_TMP/probe.c" >/dev/null 2>&1 ||
	skip "clang's libFuzzer runtime is missing (clang -fsanitize=fuzzer fails)"

cd "$ROOT"
PKG_CFLAGS=$(pkg-config --cflags $PKGS)
PKG_LIBS="$(pkg-config --libs $PKGS) -lm -lpthread"
CFLAGS="-std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc -DSPOTDRAIN_VERSION=\"fuzz\" $PKG_CFLAGS"
SAN="-fsanitize=address,undefined"

# The library without the command line (no target reaches it).
log "compiling the library with fuzzing instrumentation into $OUT"
objs=()
stale=()
for src in src/*/*.c; do
	case "$src" in src/cli/*) continue ;; esac
	obj="$OUT/obj/$(echo "${src%.c}" | tr / _).o"
	objs+=("$obj")
	if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ -n "$(find include src -name '*.h' -newer "$obj" | head -n1)" ]; then
		stale+=("$src")
	fi
done
if [ "${#stale[@]}" -gt 0 ]; then
	printf '%s\n' "${stale[@]}" | xargs -P 2 -I{} sh -c \
		'src={}; obj="$1/obj/$(echo "${src%.c}" | tr / _).o"; clang $2 $3 -fsanitize=fuzzer-no-link -c "$src" -o "$obj"' \
		_ "$OUT" "$CFLAGS" "$SAN" || fail "compiling the library failed"
fi
rm -f "$OUT/libfuzz.a"
ar rcs "$OUT/libfuzz.a" "${objs[@]}"

failed=()
for src in fuzz/fuzz_*.c; do
	name=$(basename "$src" .c)
	bin="$OUT/$name"
	# shellcheck disable=SC2086
	clang $CFLAGS $SAN -fsanitize=fuzzer -o "$bin" "$src" "$OUT/libfuzz.a" $PKG_LIBS ||
		fail "$name does not build"

	if [ -d "fuzz/regressions/$name" ] && [ -n "$(ls -A "fuzz/regressions/$name")" ]; then
		log "$name: replaying fuzz/regressions/$name"
		if ! "$bin" -runs=1 fuzz/regressions/"$name"/* >"$TEST_TMP/$name.replay.log" 2>&1; then
			tail -n 40 "$TEST_TMP/$name.replay.log"
			failed+=("$name (regression)")
			continue
		fi
	fi

	log "$name: fuzzing for ${SECONDS_PER_TARGET}s"
	corpus="$TEST_TMP/corpus-$name"
	mkdir -p "$corpus"
	seeds=()
	[ -d "fuzz/seeds/$name" ] && seeds+=("fuzz/seeds/$name")
	[ -d "fuzz/regressions/$name" ] && seeds+=("fuzz/regressions/$name")
	if ! "$bin" -max_total_time="$SECONDS_PER_TARGET" -timeout=20 -rss_limit_mb=2048 -max_len=65536 \
		-artifact_prefix="$TEST_TMP/" "$corpus" "${seeds[@]}" >"$TEST_TMP/$name.log" 2>&1; then
		tail -n 40 "$TEST_TMP/$name.log"
		ls "$TEST_TMP"/crash-* "$TEST_TMP"/leak-* "$TEST_TMP"/timeout-* 2>/dev/null | while read -r f; do
			mkdir -p "$OUT/artifacts" && cp "$f" "$OUT/artifacts/$name-$(basename "$f")"
		done
		failed+=("$name")
		continue
	fi
	grep -E '^Done [0-9]+ runs' "$TEST_TMP/$name.log" || true
done

[ "${#failed[@]}" -eq 0 ] || fail "fuzz targets failed: ${failed[*]} (inputs kept in $OUT/artifacts)"
echo "fuzz smoke: every target ran clean"
