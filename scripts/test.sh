#!/usr/bin/env bash
# The README's test command: set up (first run only, with the test extras),
# then run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh" test
cd "$root"
status=0
"$root/.venv/bin/python" -m pytest "$@" || status=$?
if [ "$status" -eq 5 ]; then
  echo "no tests were collected: that is a failure here" >&2
  exit 1
fi
exit "$status"
