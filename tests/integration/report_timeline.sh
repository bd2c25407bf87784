#!/usr/bin/env bash
# The --report timeline page, as a browser draws it: `simulate examples/seed-504.yaml --report` and `drain NODE
# --report` write one page that headless Chromium (Debian's chromium) lays out with a bar of non-zero size for
# every pod the drain moved (as many as the result counts, forced and killed ones marked as counted), the
# deadline line after every bar of a drain that made it, the last safe moment before the deadline, one marker per
# alert of the node (the result's kinds), and the PDBs' healthy curves. The page needs nothing from outside: no
# script, no link, no fetched resource.
# A bar ends when the engine saw its pod gone; beside five other tests the engine's watch once lagged a forced
# pod's end past the deadline at time scale 10 (3.6 scenario seconds, 0.36 s of real time), so seed-504 runs at
# 3, where the margin's 5 s before the deadline are 1.7 s of real time, and the test runs beside the others.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_tools
requires chromium
SCALE=${TIME_SCALE:-3}

# self_contained PAGE: nothing to run and nothing to fetch (the SVG namespace is a name, not a fetch).
self_contained() {
	! grep -Eiq '<script|<link|<img|<iframe|@import|url\(|(src|href)=' "$1" || fail "$1 is not self-contained"
	[ "$(grep -Eo 'https?://[^"]*' "$1" | sort -u)" = "http://www.w3.org/2000/svg" ] ||
		fail "$1 names an address other than the SVG namespace"
}

# measure PAGE OUT: lays PAGE out in headless Chromium and writes what is drawn, with each element's box in
# CSS pixels, as JSON to OUT. The measuring script is added to a copy: the page itself has none.
measure() {
	local page=$1 out=$2 copy
	copy=$TEST_TMP/measured-$(basename "$1")
	python3 - "$page" "$copy" <<'PY'
import sys
page = open(sys.argv[1], encoding="utf-8").read()
js = r"""<script>
const box = e => { const b = e.getBoundingClientRect(); return {x: b.x, y: b.y, w: b.width, h: b.height}; };
const all = (root, sel) => Array.from(root.querySelectorAll(sel));
const out = {
  nodes: all(document, "section.node").map(n => ({
    name: n.dataset.node,
    bars: all(n, "rect.pod-bar").map(e => Object.assign(box(e), {cls: e.getAttribute("class"), pod: e.parentNode.dataset.pod,
      safe: e.parentNode.querySelector(".pod-last-safe") && box(e.parentNode.querySelector(".pod-last-safe"))})),
    deadline: all(n, "line.deadline").map(box), last_safe: all(n, "line.last-safe").map(box),
    notice: all(n, ".notice").map(box), cordon: all(n, ".cordon").map(box),
    alerts: all(n, "g.alert").map(g => Object.assign(box(g.querySelector(".alert-marker")), {kind: g.dataset.kind})),
  })),
  pdbs: all(document, "div.pdb").map(d => ({name: d.dataset.pdb, healthy: box(d.querySelector("polyline.pdb-healthy")),
                                           desired: box(d.querySelector("polyline.pdb-desired"))})),
  legend: all(document, "section.legend .legend-item").map(box),
};
const pre = document.createElement("pre"); pre.id = "measured"; pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""
open(sys.argv[2], "w", encoding="utf-8").write(page.replace("</body>", js + "</body>"))
PY
	# Its profile, caches and crash reports in the test's directory, whatever HOME the run has.
	mkdir -p "$TEST_TMP/home"
	HOME=$TEST_TMP/home XDG_CONFIG_HOME=$TEST_TMP/home XDG_CACHE_HOME=$TEST_TMP/home \
		chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
			--disable-component-update --disable-sync --user-data-dir="$TEST_TMP/chromium" --window-size=1200,900 \
			--dump-dom "file://$copy" 2>"$TEST_TMP/chromium.log" >"$TEST_TMP/dom.html" ||
		{ cat "$TEST_TMP/chromium.log" >&2; fail "chromium could not open $page"; }
	python3 - "$TEST_TMP/dom.html" "$out" <<'PY' || fail "chromium drew no measurable page for $page"
import html, re, sys
m = re.search(r'<pre id="measured">(.*?)</pre>', open(sys.argv[1], encoding="utf-8").read(), re.S)
open(sys.argv[2], "w").write(html.unescape(m.group(1)))
PY
}

log "simulate seed-504 --report"
"$SPOTDRAIN" simulate "$ROOT/examples/seed-504.yaml" --time-scale "$SCALE" --json --report "$TEST_TMP/sim.html" \
	>"$TEST_TMP/sim.json" || true
jq -e '.nodes[0].name == "spot-a"' "$TEST_TMP/sim.json" >/dev/null || fail "simulate gave no result"
self_contained "$TEST_TMP/sim.html"
measure "$TEST_TMP/sim.html" "$TEST_TMP/sim-drawn.json"
jq -c '.nodes[0] | {bars: (.bars | length), deadline, alerts: [.alerts[].kind]}' "$TEST_TMP/sim-drawn.json"
# What is drawn against what the simulation counted.
jq -e --slurpfile res "$TEST_TMP/sim.json" '
	($res[0].nodes[0]) as $n | ([$res[0].alerts[] | select(.node == "spot-a") | .kind] | sort) as $kinds |
	(.nodes | length) == 1 and .nodes[0].name == "spot-a" and
	(.nodes[0].bars | length) == $n.pods_evictable and
	([.nodes[0].bars[] | select(.w > 0 and .h > 0)] | length) == $n.pods_evictable and
	([.nodes[0].bars[] | select(.cls | test("forced"))] | length) == $n.pods_forced and
	([.nodes[0].bars[] | select(.cls | test("killed"))] | length) == $n.pods_killed and
	(.nodes[0].deadline | length) == 1 and .nodes[0].deadline[0].h > 0 and
	(.nodes[0].last_safe | length) == 1 and .nodes[0].last_safe[0].x < .nodes[0].deadline[0].x and
	(.nodes[0].notice | length) == 1 and .nodes[0].notice[0].w > 0 and
	(.nodes[0].cordon | length) == 1 and .nodes[0].cordon[0].w > 0 and
	([.nodes[0].alerts[] | select(.w > 0 and .h > 0) | .kind] | sort) == $kinds' \
	"$TEST_TMP/sim-drawn.json" >/dev/null || fail "the page does not draw what the result counts: $(cat "$TEST_TMP/sim-drawn.json")"
# seed-504 drains in time: every bar ends before the deadline line, and starts after the notice.
jq -e '.nodes[0] as $n | [$n.bars[] | select(.x + .w > $n.deadline[0].x + 0.5 or .x < $n.notice[0].x)] | length == 0' \
	"$TEST_TMP/sim-drawn.json" >/dev/null || fail "a pod bar crosses the deadline or starts before the notice: $(jq -c \
		'.nodes[0] as $n | {notice: $n.notice[0].x, deadline: $n.deadline[0].x, bars: [$n.bars[] |
		select(.x + .w > $n.deadline[0].x + 0.5 or .x < $n.notice[0].x)]}' "$TEST_TMP/sim-drawn.json")"
# Every pod with its last safe moment as the drain planned it; a forced pod was deleted at it, not before it
# (less 1 s: the margin, 5 s, gives the scale) and before the deadline. How late after it is lag on a loaded
# machine, not a property of the page.
jq -e '.nodes[0] as $n | (($n.deadline[0].x - $n.last_safe[0].x) / 5) as $px_per_s |
	([$n.bars[] | select(.safe.w > 0)] | length) == ($n.bars | length) and
	([$n.bars[] | select(.cls | test("forced")) |
	  select(.x - (.safe.x + .safe.w / 2) < -$px_per_s or .x > $n.deadline[0].x)] | length) == 0' \
	"$TEST_TMP/sim-drawn.json" >/dev/null ||
	fail "last safe moments missing, or a forced pod deleted before its own: $(jq -c '.nodes[0].bars' "$TEST_TMP/sim-drawn.json")"
# Both PDBs of the node's pods, with a healthy curve drawn.
jq -e '[.pdbs[] | select(.healthy.w > 0) | .name] | sort == ["shop/api", "shop/web"]' "$TEST_TMP/sim-drawn.json" \
	>/dev/null || fail "the PDB charts are missing: $(jq -c .pdbs "$TEST_TMP/sim-drawn.json")"
jq -e '(.legend | length) >= 10 and ([.legend[] | select(.h > 0)] | length) == (.legend | length)' \
	"$TEST_TMP/sim-drawn.json" >/dev/null || fail "no legend drawn"

log "drain --report: a drain in time, then one that leaves pods past its deadline"
# drain-8: eight pods of a PDB allowing one at a time on spot-a, and a DaemonSet's (which the drain leaves).
start_sim drain8 "$ROOT/examples/drain-8.yaml" --time-scale 4
"$SPOTDRAIN" drain spot-a --kubeconfig "$SIM_KUBECONFIG" --budget 120 --json --report "$TEST_TMP/drain.html" \
	>"$TEST_TMP/drain.json" || fail "drain spot-a failed: $(cat "$TEST_TMP/drain.json")"
self_contained "$TEST_TMP/drain.html"
measure "$TEST_TMP/drain.html" "$TEST_TMP/drain-drawn.json"
# The eight web pods, evicted one after the other and gone before the deadline (the DaemonSet's pod stays and is
# not drawn), each with its last safe moment as the drain planned it, at the latest the node's (the deadline less
# the margin); the drain-completed marker; the PDB's curve.
jq -e --slurpfile res "$TEST_TMP/drain.json" '.nodes[0] as $n |
	($n.bars | length) == $res[0].evicted and $res[0].evicted == 8 and
	([$n.bars[] | select(.w > 0 and (.cls | test("evicted")) and (.pod | startswith("shop/web-")))] | length) == 8 and
	($n.deadline | length) == 1 and ([$n.bars[] | select(.x + .w > $n.deadline[0].x)] | length) == 0 and
	([$n.alerts[] | .kind] | index("drain-completed")) != null and
	([.pdbs[] | select(.name == "shop/web" and .healthy.w > 0)] | length) == 1 and
	([$n.bars[] | select(.safe.w > 0 and .safe.x + .safe.w / 2 <= $n.last_safe[0].x + 0.5)] | length) == 8' \
	"$TEST_TMP/drain-drawn.json" \
	>/dev/null || fail "drain --report draws the wrong pods: $(cat "$TEST_TMP/drain-drawn.json")"
# od-1 now holds some of the replacements; a second's budget under policy respect leaves some of them behind,
# and those still there at the deadline are drawn killed.
rc=0
"$SPOTDRAIN" drain od-1 --kubeconfig "$SIM_KUBECONFIG" --budget 1 --policy respect --json \
	--report "$TEST_TMP/missed.html" >"$TEST_TMP/missed.json" || rc=$?
[ "$rc" -eq 3 ] || fail "drain od-1: exit $rc, expected 3: $(cat "$TEST_TMP/missed.json")"
measure "$TEST_TMP/missed.html" "$TEST_TMP/missed-drawn.json"
jq -e --slurpfile res "$TEST_TMP/missed.json" '.nodes[0] as $n | $res[0].left >= 1 and
	([$n.bars[] | select(.cls | test("killed")) | select(.w > 0)] | length) == $res[0].left and
	([$n.alerts[] | .kind] | index("deadline-missed")) != null' "$TEST_TMP/missed-drawn.json" >/dev/null ||
	fail "the pods left past the deadline are not drawn killed: $(cat "$TEST_TMP/missed-drawn.json")"

log "--report is a drain option, and an unwritable report is an error"
rc=0
"$SPOTDRAIN" plan spot-a --report "$TEST_TMP/x.html" --kubeconfig "$SIM_KUBECONFIG" 2>/dev/null || rc=$?
[ "$rc" -eq 2 ] || fail "plan --report: exit $rc, expected 2"
rc=0
"$SPOTDRAIN" simulate "$ROOT/examples/seed-504.yaml" --time-scale 50 --report "$TEST_TMP/no/such/dir/r.html" \
	>/dev/null 2>"$TEST_TMP/unwritable.err" || rc=$?
[ "$rc" -eq 1 ] || fail "simulate with an unwritable report: exit $rc, expected 1"
grep -q "cannot write the report" "$TEST_TMP/unwritable.err" || fail "no word on the unwritable report"
echo "ok"
