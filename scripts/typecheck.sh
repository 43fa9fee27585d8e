#!/usr/bin/env bash
# Type-check saintpipe with mypy, configured by pyproject.toml's [tool.mypy]: strict on saintpipe.loader,
# saintpipe.core and the config models, mypy's default checks elsewhere. Like scripts/lint-imports.sh, it
# checks a throw-away copy laid out as the namespace is (saintpipe/{services,trainer}): saintpipe.services and
# saintpipe.trainer live in the top-level services/ and trainer/ folders (pyproject.toml's package-dir
# mapping), which mypy cannot follow from the source folders as they lie. Paths in its report are mapped back
# to the checkout's (saintpipe/services/X -> services/X, saintpipe/trainer/X -> trainer/X).
#
#   ./scripts/typecheck.sh              # the whole package; exits non-zero on any error
#   ./scripts/typecheck.sh ARGS...      # extra mypy arguments, e.g. --no-incremental
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${TYPECHECK_PYTHON:-$root/.venv/bin/python}"
mirror_prefix=saintpipe-types
source "$root/scripts/namespace-mirror.sh"
cd "$mirror"
t0=$SECONDS
status=0
# The cache lives with the checkout (.mypy_cache, git-ignored), so a second run only checks what changed.
"$python" -m mypy --config-file "$root/pyproject.toml" --cache-dir "$root/.mypy_cache" "$@" -p saintpipe \
  >"$mirror/.report" 2>&1 || status=$?
sed -e 's#^saintpipe/services/#services/#' -e 's#^saintpipe/trainer/#trainer/#' "$mirror/.report"
echo "typecheck: mypy exited $status after $((SECONDS - t0)) s"
exit "$status"
