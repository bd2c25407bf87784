#!/usr/bin/env bash
# Agent mode (IMDS) and controller mode (SQS) drain every example scenario alike (see modes_parity.py).
# SPOTDRAIN: the binary (default build/spotdrain); TIME_SCALE (default 10); PARITY_JOBS (default 2).
# Its agents and controller must keep up with a scaled clock in one process each: mass-interruption's twenty
# agents run in real time (AGENT_CORE_SCALE), which lets the test run beside the others.
set -euo pipefail
cd "$(dirname "$0")/../.."
export SPOTDRAIN=${SPOTDRAIN:-build/spotdrain}
[ -x "$SPOTDRAIN" ] || { echo "no $SPOTDRAIN"; exit 77; }
/usr/bin/python3 -c 'import yaml' 2>/dev/null || { echo "python3-yaml missing"; exit 77; }
exec /usr/bin/python3 tests/integration/modes_parity.py "$@"
