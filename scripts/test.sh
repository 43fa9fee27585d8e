#!/usr/bin/env bash
# The README's test command: set up (first run only, with the test extras),
# check the import contracts (import-linter), then run the whole test suite.
# Extra arguments go to pytest. A broken contract fails the command, after the
# tests have run, so one run shows both.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh" test
cd "$root"
lint_status=0
"$root/scripts/lint-imports.sh" || lint_status=$?
status=0
"$root/.venv/bin/python" -m pytest "$@" || status=$?
if [ "$status" -eq 5 ]; then
  echo "no tests were collected: that is a failure here" >&2
  status=1
fi
if [ "$lint_status" -ne 0 ]; then
  echo "import contracts broken (see lint-imports above; contracts in pyproject.toml, layers in docs/architecture.md)" >&2
  [ "$status" -ne 0 ] || status="$lint_status"
fi
exit "$status"
