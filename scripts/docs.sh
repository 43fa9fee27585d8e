#!/usr/bin/env bash
# The documentation site (mkdocs.yml): set-up (first run only: the virtual environment with the docs extra,
# at constraints.txt's versions), then MkDocs with --strict, so that a broken link or anchor, a page missing
# from the nav or an unresolved Python API reference fails the build. The reference pages are generated from
# the code as the site builds (docs/hooks/reference.py).
#
#   ./scripts/docs.sh               # build the site into site/ (open site/index.html)
#   ./scripts/docs.sh --serve       # serve it on http://127.0.0.1:8000, rebuilt as you edit
#   ./scripts/docs.sh [--serve] ARGS...   # further arguments go to `mkdocs build` / `mkdocs serve`
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
"$root/scripts/bootstrap.sh" docs
# The Material theme's banner about MkDocs 2, printed on every build, says nothing about this site.
export NO_MKDOCS_2_WARNING=1
mkdocs=("$root/.venv/bin/python" -m mkdocs)
if [ "${1:-}" = "--serve" ]; then
  shift
  exec "${mkdocs[@]}" serve --strict "$@"
fi
exec "${mkdocs[@]}" build --strict -d "$root/site" "$@"
