#!/usr/bin/env bash
# Docs that cannot drift (issue 19 item 7): every configuration key, SPOTDRAIN_* variable and flag default that
# README.md, docs/*.md and helm/spotdrain/README.md name is the binary's (check-config, help): docs_drift.py.
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain
/usr/bin/python3 -c 'import yaml' 2>/dev/null || skip "python3-yaml not installed"
/usr/bin/python3 "$ROOT/tests/integration/docs_drift.py" "$SPOTDRAIN" "$ROOT" || fail "the documents drifted from the table"
echo "ok"
