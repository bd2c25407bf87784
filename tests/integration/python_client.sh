#!/usr/bin/env bash
# The official Kubernetes Python client (python3-kubernetes) against `spotdrain sim serve`: paging, a watch
# from a list's resourceVersion seeing what an eviction causes, eviction answers (201, 429 by the PDB), a
# lease, a cordon by strategic merge patch, and pod logs (tail, since, timestamps, follow).
# shellcheck source=tests/integration/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
requires spotdrain jq
/usr/bin/python3 -c 'import kubernetes' 2>/dev/null || skip "python3-kubernetes missing"

start_sim python "$ROOT/examples/drain-8.yaml"
/usr/bin/python3 "$ROOT/tests/integration/python_client.py" "$SIM_KUBECONFIG"
stop_sim "$SIM_PID"
