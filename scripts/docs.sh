#!/usr/bin/env bash
# The documentation site (mkdocs.yml): set-up (first run only: the virtual environment with the docs extra,
# at constraints.txt's versions), then MkDocs with --strict, so that a broken link or anchor, a page missing
# from the nav or an unresolved Python API reference fails the build. The reference pages are generated from
# the code as the site builds (docs/hooks/reference.py).
#
#   ./scripts/docs.sh               # build the site into site/ (open site/index.html)
#   ./scripts/docs.sh --serve       # serve it on http://127.0.0.1:8000, rebuilt as you edit
#   ./scripts/docs.sh [--serve] ARGS...   # further arguments go to `mkdocs build` / `mkdocs serve`
#   ./scripts/docs.sh --screenshots [DIR]  # build it into site/, save screenshots of it (below)
#
# --screenshots: what headless Chromium shows of the home page, the tutorial and the first reference page (the
# nav's first page, the page after it, the first page of "Reference"), 1280x900 pixels each, as DIR/home.png,
# DIR/tutorial.png and DIR/reference.png; DIR defaults to site/screenshots/ (which the next build empties).
# Chromium is `chromium` on PATH, else Debian's package that ./scripts/tools.sh chromium fetches without root
# on the first run (scripts/docs_browser.py takes the pictures).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shots=
if [ "${1:-}" = "--screenshots" ]; then
  [ "$#" -le 2 ] || { echo "usage: $0 --screenshots [DIR]" >&2; exit 2; }
  shots="${2:-$root/site/screenshots}"
  [[ "$shots" = /* ]] || shots="$PWD/$shots"
fi
cd "$root"
"$root/scripts/bootstrap.sh" docs
# The Material theme's banner about MkDocs 2, printed on every build, says nothing about this site.
export NO_MKDOCS_2_WARNING=1
mkdocs=("$root/.venv/bin/python" -m mkdocs)
if [ "${1:-}" = "--serve" ]; then
  shift
  exec "${mkdocs[@]}" serve --strict "$@"
fi
if [ -n "$shots" ]; then
  "$root/scripts/tools.sh" chromium  # nothing to do once Chromium is there
  "${mkdocs[@]}" build --strict -d "$root/site"
  exec "$root/.venv/bin/python" "$root/scripts/docs_browser.py" "$root/site" "$shots"
fi
exec "${mkdocs[@]}" build --strict -d "$root/site" "$@"
