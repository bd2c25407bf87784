#!/usr/bin/env bash
# botocore oracle: 1000 randomized requests (fixed seed) signed by botocore's SigV4Auth and by spotdrain's
# signer (tests/tools/sigv4_sign.c, compiled here against the built library); all Authorization headers must
# be identical. The library is the one next to $SPOTDRAIN (default build/), else $SPOTDRAIN_LIB.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=${SPOTDRAIN:-$ROOT/build/spotdrain}
bin=${bin%% *}
case "$bin" in /*) ;; *) bin=$ROOT/$bin ;; esac
lib=${SPOTDRAIN_LIB:-$(dirname "$bin")/libspotdrain.a}
[ -f "$lib" ] || { echo "skipped: no library at $lib (make first)"; exit 77; }
/usr/bin/python3 -c 'import botocore.auth' 2>/dev/null || { echo "skipped: python3-botocore missing"; exit 77; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pkgs=(libcurl libcjson yaml-0.1 openssl libsystemd expat libmicrohttpd)
read -ra cflags <<<"$(pkg-config --cflags "${pkgs[@]}")"
read -ra libs <<<"$(pkg-config --libs "${pkgs[@]}")"
${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -I"$ROOT/include" "${cflags[@]}" \
	"$ROOT/tests/tools/sigv4_sign.c" "$lib" "${libs[@]}" -lm -lpthread -o "$tmp/sigv4_sign"
out=$(/usr/bin/python3 "$ROOT/tests/integration/sigv4_botocore.py" "$tmp/sigv4_sign" 1000)
echo "$out"
grep -qx 'botocore agreement: 1000/1000' <<<"$out"
