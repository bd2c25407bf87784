#!/usr/bin/env bash
# Help and manuals (issue 19 item 6): `spotdrain help COMMAND` and `COMMAND --help` print the same text, which
# describes every flag the command's option table takes (and none it does not), each with its default, and
# gives examples; `make install DESTDIR=...` ships spotdrain(1), spotdrain.yaml(5) and the bash completion;
# `man -l` renders both pages without a warning; spotdrain.yaml(5) lists every configuration key with the
# default `check-config` prints; the completion completes commands, subcommands and flags.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain man

# The getopt_long table(s) behind each command: its long options, one a line.
source_options() {
	local files
	case $1 in
	agent | controller | admission) files="$ROOT/src/cli/cmd_$1.c $ROOT/src/cli/frontend.h" ;;
	drain | plan | audit) files=$ROOT/src/cli/drain_cli.c ;;
	event) files=$ROOT/src/cli/cmd_event.c ;;
	sim) files=$ROOT/src/cli/cmd_sim.c ;;
	check-config) files=$ROOT/src/cli/cmd_config.c ;;
	*) files=$ROOT/src/cli/cmd_$1.c ;;
	esac
	# shellcheck disable=SC2086
	grep -ho '{ "[a-z0-9-]*", [a-z]*_argument' $files | sed 's/{ "\([^"]*\)".*/\1/' | grep -vx help | sort -u
}
# The flags a help text describes (its options section), one a line.
help_options() {
	sed -n '/^options:/,/^$/p' "$1" | grep -o '^  --[a-z0-9-]*' | sed 's/^  --//' | sort -u
}

commands=$("$SPOTDRAIN" --help | sed -n '/^commands:/,/^$/p' | awk 'NR > 1 && NF { print $1 }')
[ "$(echo "$commands" | wc -l)" -ge 10 ] || fail "spotdrain --help lists too few commands: $commands"
log "help of every command: $(echo "$commands" | tr '\n' ' ')"
for c in $commands; do
	"$SPOTDRAIN" help "$c" >"$TEST_TMP/help-$c.txt" || fail "spotdrain help $c failed"
	"$SPOTDRAIN" "$c" --help >"$TEST_TMP/dash-$c.txt" || fail "spotdrain $c --help failed"
	cmp -s "$TEST_TMP/help-$c.txt" "$TEST_TMP/dash-$c.txt" || fail "spotdrain $c --help differs from spotdrain help $c"
	grep -q "^usage: spotdrain $c" "$TEST_TMP/help-$c.txt" || fail "help $c has no usage line"
	sed -n '/^examples:/,/^$/p' "$TEST_TMP/help-$c.txt" | grep -q "^  .*spotdrain $c" ||
		fail "help $c gives no example of spotdrain $c"
	[ "$c" = version ] && continue
	# Every flag with its default; the same flags as the option table.
	flags=$(grep -c '^  --' "$TEST_TMP/help-$c.txt")
	defaults=$(grep -c '^ \{28\}default: ' "$TEST_TMP/help-$c.txt")
	if [ "$flags" -eq 0 ] || [ "$flags" -ne "$defaults" ]; then
		fail "help $c: $flags flags but $defaults defaults"
	fi
	help_options "$TEST_TMP/help-$c.txt" >"$TEST_TMP/documented-$c"
	source_options "$c" >"$TEST_TMP/table-$c"
	extra=$(comm -23 "$TEST_TMP/documented-$c" "$TEST_TMP/table-$c")
	[ -z "$extra" ] || fail "help $c describes flags its option table does not take: $extra"
	missing=$(comm -13 "$TEST_TMP/documented-$c" "$TEST_TMP/table-$c")
	case $c in
	drain | plan | audit)
		# One table for the three: a flag of another one's is refused (exit 2), not taken silently.
		for f in $missing; do
			rc=0 node=spot-a
			[ "$c" = audit ] && node=
			if grep -q "{ \"$f\", required_argument" "$ROOT/src/cli/drain_cli.c"; then
				"$SPOTDRAIN" "$c" $node "--$f" x >/dev/null 2>&1 || rc=$?
			else
				"$SPOTDRAIN" "$c" $node "--$f" >/dev/null 2>&1 || rc=$?
			fi
			[ "$rc" -eq 2 ] || fail "$c takes --$f, which its help does not describe (exit $rc)"
		done ;;
	*) [ -z "$missing" ] || fail "help $c does not describe: $missing" ;;
	esac
done
# A flag's default is the configuration key's (drain.budget_seconds set elsewhere would show here); drain's
# is none, or the node's notice's deadline (issue 32: a manual drain invents no deadline).
grep -q 'default: 120 (drain.budget_seconds)' "$TEST_TMP/help-plan.txt" || fail "plan --budget's default is not the key's"
grep -q "default: the node's notice's deadline, else none" "$TEST_TMP/help-drain.txt" ||
	fail "drain --budget's default is not the notice's deadline, else none"
rc=0
"$SPOTDRAIN" help no-such-command 2>"$TEST_TMP/err" || rc=$?
if [ "$rc" -ne 2 ] || ! grep -q "no command 'no-such-command'" "$TEST_TMP/err"; then
	fail "help of an unknown command: exit $rc"
fi

# spotdrain-agent has the DaemonSet's commands only, and help of those only.
if [ -x "$SPOTDRAIN_AGENT" ]; then
	"$SPOTDRAIN_AGENT" help agent | grep -q '^usage: spotdrain agent' || fail "spotdrain-agent help agent"
	rc=0
	"$SPOTDRAIN_AGENT" help drain >/dev/null 2>&1 || rc=$?
	[ "$rc" -eq 2 ] || fail "spotdrain-agent help drain: exit $rc, but it has no drain"
fi

log "make install DESTDIR=... ships the manuals and the completion"
dest=$TEST_TMP/root
# With the default compiler: integration-asan exports CC for the tools its tests build, not for make.
env -u CC make -C "$ROOT" --no-print-directory -s install DESTDIR="$dest" PREFIX=/usr \
	>"$TEST_TMP/install.log" 2>&1 || { cat "$TEST_TMP/install.log" >&2; fail "make install failed"; }
man1=$dest/usr/share/man/man1/spotdrain.1 man5=$dest/usr/share/man/man5/spotdrain.yaml.5
comp=$dest/usr/share/bash-completion/completions/spotdrain
for f in "$man1" "$man5" "$comp"; do [ -s "$f" ] || fail "make install did not ship $f"; done
for page in "$man1" "$man5"; do
	MANWIDTH=100 man --warnings -l "$page" >"$TEST_TMP/page.txt" 2>"$TEST_TMP/man.err" || fail "man -l $page failed"
	[ ! -s "$TEST_TMP/man.err" ] || fail "man -l $page warns: $(cat "$TEST_TMP/man.err")"
	[ "$(wc -l <"$TEST_TMP/page.txt")" -gt 40 ] || fail "man -l $page renders almost nothing"
done
MANWIDTH=100 man -l "$man1" 2>/dev/null >"$TEST_TMP/man1.txt"
for c in $commands; do grep -q "spotdrain $c" "$TEST_TMP/man1.txt" || fail "spotdrain(1) lacks $c"; done
# spotdrain.yaml(5): every key check-config prints, with the same default.
"$SPOTDRAIN" check-config >"$TEST_TMP/defaults.yaml"
/usr/bin/python3 - "$TEST_TMP/defaults.yaml" "$man5" <<'PY' || fail "spotdrain.yaml(5) does not match the configuration table"
import sys, yaml
def flat(d, prefix=""):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from flat(v, prefix + k + ".")
        else:
            yield prefix + k, v
def text(v):
    if v is None: return "unset"
    if isinstance(v, bool): return "true" if v else "false"
    if isinstance(v, list): return ",".join(map(str, v)) or "empty"
    if isinstance(v, float) and v.is_integer(): return str(int(v))
    return str(v)
roff = open(sys.argv[2]).read().replace("\\-", "-")
keys = dict(flat(yaml.safe_load(open(sys.argv[1]))))
bad = []
for k, v in keys.items():
    tag = "\\fB%s\\fR (" % k
    at = roff.find(tag)
    if at < 0:
        bad.append("%s: missing" % k); continue
    line = roff[at:roff.index("\n", at)]
    want = "default: %s" % text(v)
    if want + ")" not in line and want + ";" not in line and not (v is None or "<hidden>" == v):
        bad.append("%s: %s, want %s" % (k, line, want))
entries = roff.count("\n.TP\n\\fB") - roff.split(".SH KEYS")[0].count("\n.TP\n\\fB")
if entries != len(keys):
    bad.append("%d key entries, check-config prints %d keys" % (entries, len(keys)))
print("\n".join(bad) or "%d keys" % len(keys))
sys.exit(1 if bad else 0)
PY

log "plan's words (issue 32, item 4): in plan --help and in spotdrain(1), each heading of its tables explained"
"$SPOTDRAIN" plan --help >"$TEST_TMP/plan.help"
for word in "last safe moment" forced killed "pods never seen stopping" ESTIMATE GRADE VERDICT TIER WAVES RETURN \
	"FINISH, UNFORCED" LEFT; do
	grep -q "^  $word\$" "$TEST_TMP/plan.help" || fail "plan --help does not explain \"$word\""
	grep -Eq "^ *$word( |$)" "$TEST_TMP/man1.txt" || fail "spotdrain(1) does not explain \"$word\""
done
for heading in "EVICT AT" "GONE AT" "START BY" FORCED KILLED; do
	tr -s '\n ' '  ' <"$TEST_TMP/plan.help" | grep -qF "$heading" || fail "plan --help never says what $heading is"
done

log "bash completion"
complete_words() {
	# shellcheck disable=SC1090,SC2034
	bash -c 'source "$1"; read -ra COMP_WORDS <<<"spotdrain $2"; COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
		_spotdrain; echo "${COMPREPLY[*]}"' _ "$comp" "$1"
}
[ "$(complete_words "dr")" = drain ] || fail "completion of 'dr': $(complete_words dr)"
[ "$(complete_words "drain --bu")" = --budget ] || fail "completion of 'drain --bu': $(complete_words "drain --bu")"
[ "$(complete_words "simulate --rep")" = --report ] || fail "completion of 'simulate --rep'"
[ "$(complete_words "event p")" = parse ] || fail "completion of 'event p': $(complete_words "event p")"
echo "ok"
