#!/usr/bin/env bash
# Issue 3 acceptance over every examples/*.yaml scenario with interruptions (see examples_acceptance.py).
# SPOTDRAIN: the binary (default build/spotdrain); TIME_SCALE: scenario seconds per real second (default 10);
# ACCEPTANCE_JOBS (default 6).
set -euo pipefail
cd "$(dirname "$0")/../.."
export SPOTDRAIN=${SPOTDRAIN:-build/spotdrain}
[ -x "$SPOTDRAIN" ] || { echo "no $SPOTDRAIN"; exit 77; }
/usr/bin/python3 -c 'import yaml' 2>/dev/null || { echo "python3-yaml missing"; exit 77; }
exec /usr/bin/python3 tests/integration/examples_acceptance.py "$@"
