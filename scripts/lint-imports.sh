#!/usr/bin/env bash
# Check the import contracts in pyproject.toml ([tool.importlinter]) with
# import-linter. Its graph builder walks the root package's own folder, while
# saintpipe.services and saintpipe.trainer live in the top-level services/ and
# trainer/ folders (pyproject.toml's package-dir mapping). So the check runs on
# a throw-away copy laid out as the namespace is: saintpipe/{services,trainer}.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
lint="${LINT_IMPORTS:-$root/.venv/bin/lint-imports}"
mirror_prefix=saintpipe-imports
source "$root/scripts/namespace-mirror.sh"
cd "$mirror"
PYTHONPATH="$mirror" "$lint" --no-cache --no-logo "$@" "$root/pyproject.toml"
