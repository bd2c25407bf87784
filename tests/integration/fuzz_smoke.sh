#!/usr/bin/env bash
# Every libFuzzer target (fuzz/fuzz_*.c) briefly: first its regression inputs (fuzz/regressions/NAME/, each
# run once), then FUZZ_SMOKE_SECONDS (default 10) of fuzzing from its seeds (fuzz/seeds/NAME/). Any crash,
# leak, sanitizer report or timeout fails the test. Skipped (77) without clang's libFuzzer runtime.
#
# The library is compiled once with fuzzing instrumentation into BUILD/fuzz-smoke/ (next to $SPOTDRAIN's
# build directory; only changed sources are recompiled) and each target links against it, which is much
# faster than `make fuzz` compiling every source into every target. docs/fuzzing.md has the long runs.
source "$(dirname "$0")/lib.sh"

SECONDS_PER_TARGET=${FUZZ_SMOKE_SECONDS:-10}
OUT=$(dirname "$SPOTDRAIN")/fuzz-smoke
PKGS=(libcurl libcjson yaml-0.1 openssl libsystemd expat libmicrohttpd)

requires clang
mkdir -p "$OUT/obj"
cat >"$TEST_TMP/probe.c" <<'EOF'
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { (void)data; (void)size; return 0; }
EOF
clang -fsanitize=fuzzer,address,undefined -o "$TEST_TMP/probe" "$TEST_TMP/probe.c" >/dev/null 2>&1 ||
	skip "clang's libFuzzer runtime is missing (clang -fsanitize=fuzzer fails)"

cd "$ROOT" || exit 1
read -r -a PKG_CFLAGS <<<"$(pkg-config --cflags "${PKGS[@]}")"
read -r -a PKG_LIBS <<<"$(pkg-config --libs "${PKGS[@]}")"
CFLAGS=(-std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc '-DSPOTDRAIN_VERSION="fuzz"' "${PKG_CFLAGS[@]}")
SAN=-fsanitize=address,undefined

obj_of() {
	local s=${1%.c}
	echo "$OUT/obj/${s//\//_}.o"
}

# The library without the command line (no target reaches it); two compilers at a time.
log "compiling the library with fuzzing instrumentation into $OUT"
objs=()
pids=()
for src in src/*/*.c; do
	case "$src" in src/cli/*) continue ;; esac
	obj=$(obj_of "$src")
	objs+=("$obj")
	if [ -f "$obj" ] && [ ! "$src" -nt "$obj" ] && [ -z "$(find include src -name '*.h' -newer "$obj" | head -n1)" ]; then
		continue
	fi
	clang "${CFLAGS[@]}" "$SAN" -fsanitize=fuzzer-no-link -c "$src" -o "$obj" &
	pids+=($!)
	if [ "${#pids[@]}" -ge 2 ]; then
		wait "${pids[0]}" || fail "compiling the library failed"
		pids=("${pids[@]:1}")
	fi
done
for pid in "${pids[@]}"; do
	wait "$pid" || fail "compiling the library failed"
done
rm -f "$OUT/libfuzz.a"
ar rcs "$OUT/libfuzz.a" "${objs[@]}"

failed=()
for src in fuzz/fuzz_*.c; do
	name=$(basename "$src" .c)
	bin="$OUT/$name"
	clang "${CFLAGS[@]}" "$SAN" -fsanitize=fuzzer -o "$bin" "$src" "$OUT/libfuzz.a" "${PKG_LIBS[@]}" \
		-lm -lpthread ||
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
	# As `make fuzz` does: the shared wire-format fixtures seed every target (fuzz_notice has no others).
	for d in ../shared/fixtures/eventbridge ../shared/fixtures/imds ../shared/fixtures/sqs; do
		[ -d "$d" ] && seeds+=("$d")
	done
	if ! "$bin" -max_total_time="$SECONDS_PER_TARGET" -timeout=20 -rss_limit_mb=2048 -max_len=65536 \
		-artifact_prefix="$TEST_TMP/" "$corpus" "${seeds[@]}" >"$TEST_TMP/$name.log" 2>&1; then
		tail -n 40 "$TEST_TMP/$name.log"
		for f in "$TEST_TMP"/crash-* "$TEST_TMP"/leak-* "$TEST_TMP"/timeout-* "$TEST_TMP"/oom-*; do
			[ -e "$f" ] || continue
			mkdir -p "$OUT/artifacts"
			mv "$f" "$OUT/artifacts/$name-$(basename "$f")"
		done
		failed+=("$name")
		continue
	fi
	grep -E '^Done [0-9]+ runs' "$TEST_TMP/$name.log" || true
done

[ "${#failed[@]}" -eq 0 ] || fail "fuzz targets failed: ${failed[*]} (inputs kept in $OUT/artifacts)"
echo "fuzz smoke: every target ran clean"
