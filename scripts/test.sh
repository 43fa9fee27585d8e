#!/usr/bin/env bash
# The README's test command: set up (first run only, with the test extras at
# constraints.txt's versions, and the tools of scripts/tools.sh: prometheus and
# promtool, fetched without root, and checkov), check the import contracts (import-linter), run the whole test suite, then
# the compose test under a real Docker Engine (scripts/compose-test.sh; it
# prints one line and passes when no engine can be had). Extra arguments go to
# pytest and leave the compose test out (a developer's quick run:
# ./scripts/test.sh tests/unit tests/integration). A broken contract fails the
# command, after the tests have run, so one run shows all. A tool that could not
# be had is named again in the last lines, with what to run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/bootstrap.sh" test
"$root/scripts/tools.sh"
cd "$root"
lint_status=0
"$root/scripts/lint-imports.sh" || lint_status=$?
status=0
"$root/.venv/bin/python" -m pytest "$@" || status=$?
if [ "$status" -eq 5 ]; then
  echo "no tests were collected: that is a failure here" >&2
  status=1
fi
compose_status=0
if [ "$#" -eq 0 ]; then
  "$root/scripts/compose-test.sh" || compose_status=$?
fi
if [ "$compose_status" -ne 0 ]; then
  echo "the compose test failed (scripts/compose-test.sh)" >&2
  [ "$status" -ne 0 ] || status="$compose_status"
fi
if [ "$lint_status" -ne 0 ]; then
  echo "import contracts broken (see lint-imports above; contracts in pyproject.toml, layers in docs/architecture.md)" >&2
  [ "$status" -ne 0 ] || status="$lint_status"
fi
tools="${SAINTPIPE_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/saintpipe/tools}"
if [ -s "$tools/missing.txt" ]; then
  while IFS= read -r line; do echo "tests skipped for want of a tool: $line" >&2; done < "$tools/missing.txt"
fi
exit "$status"
