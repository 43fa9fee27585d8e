#!/usr/bin/env bash
# The README's test command.
#
#   ./scripts/test.sh            # everything (what CI runs, via .ci/run)
#   ./scripts/test.sh --quick    # a contributor's loop: import contracts, types, tests/unit and tests/integration
#   ./scripts/test.sh ARGS...    # pytest ARGS as given (one process), e.g. tests/unit/pool -x
#
# Everything is: set-up (first run only: the virtual environment with the test extras at constraints.txt's
# versions, and the tools of scripts/tools.sh: prometheus, promtool and Chromium, fetched without root, and
# checkov, set up in the background while the next two steps run; the tests wait for them), the import
# contracts (import-linter), the type check (mypy: scripts/typecheck.sh), the whole test suite,
# then the compose test under a real Docker Engine (scripts/compose-test.sh; it prints one line and passes
# when no engine can be had). The engine, its base image, the wheelhouse and the images are prepared in the
# background while the suite runs (scripts/compose-test.sh --prepare), so the compose test only runs the stack
# at the end.
#
# The suite runs in two phases (docs/how-to/contributing.md): the tests not marked `serial` on pytest-xdist workers
# ($SAINTPIPE_TEST_WORKERS, default 2), then the `serial` ones alone in one process (they need the cores to
# themselves: pinned sampler workers, whole `saintpipe run`s, the fault suite, benchmarks; tests/conftest.py
# lists them). Python writes its bytecode (and pytest its rewritten test modules) once per checkout, not
# once per process: an environment with PYTHONDONTWRITEBYTECODE set would compile every module again in
# every process the tests start.
#
# A broken contract or a type error fails the command after the tests have run, so one run shows all. A tool
# that could not be had is named again in the last lines, with what to run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
unset PYTHONDONTWRITEBYTECODE

mode=all
if [ "${1:-}" = "--quick" ]; then
  mode=quick
  shift
  [ "$#" -eq 0 ] || { echo "usage: $0 [--quick | PYTEST_ARGS...]" >&2; exit 2; }
elif [ "$#" -gt 0 ]; then
  mode=pytest
fi

log_dir="${SAINTPIPE_TEST_LOGS:-$root/.test-logs}"
mkdir -p "$log_dir"
prepare_pid=
if [ "$mode" = all ]; then
  # The compose test's slow set-up (engine, base image, wheelhouse, image builds) needs neither the virtual
  # environment nor the cores much (downloads, unpacking): it overlaps the set-up and the parallel phase.
  echo "preparing the compose test in the background (log: $log_dir/compose-prepare.log)"
  "$root/scripts/compose-test.sh" --prepare >"$log_dir/compose-prepare.log" 2>&1 &
  prepare_pid=$!
fi

"$root/scripts/bootstrap.sh" test
tools_pid=
if [ "$mode" != pytest ]; then
  # Chromium alone is some 120 MB to fetch and 360 MB to unpack on a first run: the tools are set up while
  # the import contracts and the types are checked. --quick runs no test of the documentation site: no
  # Chromium.
  wanted_tools=()
  [ "$mode" = quick ] && wanted_tools=(prometheus checkov)
  "$root/scripts/tools.sh" "${wanted_tools[@]}" >"$log_dir/tools.log" 2>&1 &
  tools_pid=$!
fi

lint_status=0
[ "$mode" = pytest ] || "$root/scripts/lint-imports.sh" || lint_status=$?
types_status=0
[ "$mode" = pytest ] || "$root/scripts/typecheck.sh" || types_status=$?
if [ -n "$tools_pid" ]; then
  tools_status=0; wait "$tools_pid" || tools_status=$?
  cat "$log_dir/tools.log" >&2
  [ "$tools_status" -eq 0 ] || { echo "scripts/tools.sh failed (exit $tools_status)" >&2; exit "$tools_status"; }
fi

pytest=("$root/.venv/bin/python" -m pytest)
workers="${SAINTPIPE_TEST_WORKERS:-2}"
# SAINTPIPE_TEST_TIMES=DIR: each phase writes a JUnit XML there (every test's seconds, setup and teardown
# included); scripts/test_times.py DIR/*.xml prints the tables of docs/explanation/test-suite.md from them.
junit() { [ -z "${SAINTPIPE_TEST_TIMES:-}" ] || { mkdir -p "$SAINTPIPE_TEST_TIMES"; echo "--junitxml=$SAINTPIPE_TEST_TIMES/$1.xml"; }; }
status=0
note_status() {  # keep the first failure; pytest's 5 (nothing collected) is a failure here
  local code="$1" what="$2"
  [ "$code" -eq 0 ] && return 0
  [ "$code" -eq 5 ] && echo "no tests were collected ($what): that is a failure here" >&2
  [ "$status" -ne 0 ] || status="$code"
}

if [ "$mode" = pytest ]; then
  code=0; "${pytest[@]}" "$@" || code=$?
  note_status "$code" "pytest $*"
else
  paths=(tests)
  [ "$mode" = quick ] && paths=(tests/unit tests/integration)
  t0=$SECONDS
  echo "=== phase 1 of 2: tests not marked serial, on $workers pytest-xdist workers ==="
  code=0; "${pytest[@]}" -n "$workers" --dist worksteal -m "not serial" $(junit parallel) "${paths[@]}" || code=$?
  note_status "$code" "parallel phase"
  t1=$SECONDS
  if [ -n "$prepare_pid" ]; then
    # The serial phase gets the cores to itself: wait for the compose preparation first.
    echo "=== waiting for the compose test's preparation (log: $log_dir/compose-prepare.log) ==="
    prepare_status=0; wait "$prepare_pid" || prepare_status=$?
    prepare_pid=
    [ "$prepare_status" -eq 0 ] || { tail -n 30 "$log_dir/compose-prepare.log" >&2; }
  fi
  t2=$SECONDS
  echo "=== phase 2 of 2: tests marked serial, one at a time ==="
  code=0; "${pytest[@]}" -m "serial" $(junit serial) "${paths[@]}" || code=$?
  note_status "$code" "serial phase"
  t3=$SECONDS
  echo "test phases: parallel $((t1 - t0)) s, waiting for the compose preparation $((t2 - t1)) s, serial $((t3 - t2)) s"
fi

compose_status=0
if [ "$mode" = all ]; then
  "$root/scripts/compose-test.sh" --run || compose_status=$?
fi
if [ "$compose_status" -ne 0 ]; then
  echo "the compose test failed (scripts/compose-test.sh)" >&2
  [ "$status" -ne 0 ] || status="$compose_status"
fi
if [ "$lint_status" -ne 0 ]; then
  echo "import contracts broken (see lint-imports above; contracts in pyproject.toml, layers in docs/explanation/architecture.md)" >&2
  [ "$status" -ne 0 ] || status="$lint_status"
fi
if [ "$types_status" -ne 0 ]; then
  echo "type errors (see mypy above; ./scripts/typecheck.sh, configured in pyproject.toml's [tool.mypy])" >&2
  [ "$status" -ne 0 ] || status="$types_status"
fi
tools="${SAINTPIPE_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/saintpipe/tools}"
if [ -s "$tools/missing.txt" ]; then
  while IFS= read -r line; do echo "tests skipped for want of a tool: $line" >&2; done < "$tools/missing.txt"
fi
exit "$status"
