#!/usr/bin/env bash
# The agent SIGKILLed in the middle of a drain and started again: it resumes from what it recorded on the
# node (the notice is still in IMDS), and the drain finishes in time under its PDB, nothing killed or forced.
# shellcheck source=tests/realk8s/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

play "$RK_HERE/scenarios/faults.yaml" agent --fault kill@15:agent-spot-a
[ "$PLAY_RC" -eq 0 ] || fail "run exited $PLAY_RC: $(res -c .nodes)"
a=$(res -c '.nodes[0]')
jq -e '.pods_killed == 0 and .pods_forced == 0 and .pods_evictable == 8' <<<"$a" >/dev/null || fail "spot-a: $a"
jq -e '.drained_at > 15' <<<"$a" >/dev/null || fail "drained before the kill: the fault proved nothing"
[ "$(res .pdb_breaches)" -eq 0 ] || fail "PDB breaches: $(res .pdb_breaches)"
[ "$(grep -c 'spotdrain agent' "$CASE_TMP/run/agent-spot-a.log" | head -1)" -ge 1 ] || fail "no agent log"
grep -q 'SIGKILL of agent-spot-a' "$CASE_TMP/run.err" || fail "the agent was not killed"
log "drained at $(jq -r .drained_at <<<"$a") s of $(jq -r .deadline_at <<<"$a"), the agent killed at 15 s"
echo ok
