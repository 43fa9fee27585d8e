#!/usr/bin/env bash
# The README's main command: set up (first run only), then run the local
# pipeline on the built-in demo dataset. Extra arguments go to `saintpipe run`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh"
# The Numba kernels compile once, here, rather than in the first run while its trainer waits.
"$root/.venv/bin/saintpipe" warmup --if-cold
# exec keeps this shell's process, whose start the run's timeline would count from: the run starts now.
SAINTPIPE_STARTED_AT="$(date +%s.%N)" exec "$root/.venv/bin/saintpipe" run "$@"
