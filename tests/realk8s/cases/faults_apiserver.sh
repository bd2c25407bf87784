#!/usr/bin/env bash
# kube-apiserver stopped for 10 s in the middle of a drain and started again: the agent's watches and
# requests fail, then resume from where they were; the drain finishes in time, under its PDB, nothing killed
# or forced, and no eviction is lost (every pod of spot-a is gone).
# shellcheck source=tests/realk8s/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

play "$RK_HERE/scenarios/faults.yaml" agent --fault apiserver-down@14:10
[ "$PLAY_RC" -eq 0 ] || fail "run exited $PLAY_RC: $(res -c .nodes)"
a=$(res -c '.nodes[0]')
jq -e '.pods_killed == 0 and .pods_forced == 0 and .pods_evictable == 8 and .pods_graceful == 8' <<<"$a" \
	>/dev/null || fail "spot-a: $a"
jq -e '.drained_at > 24' <<<"$a" >/dev/null || fail "drained at $(jq .drained_at <<<"$a"), before the API server was back: the fault proved nothing"
[ "$(res .pdb_breaches)" -eq 0 ] || fail "PDB breaches: $(res .pdb_breaches)"
grep -q 'stop-apiserver at scenario time' "$CASE_TMP/run.err" || fail "the API server was not stopped"
log "drained at $(jq -r .drained_at <<<"$a") s of $(jq -r .deadline_at <<<"$a") with the API server down from 14 s to 24 s"
echo ok
