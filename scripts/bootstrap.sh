#!/usr/bin/env bash
# Create or reuse the checkout's virtual environment (.venv) and install
# saintpipe into it, with the extras named in $1 (e.g. "test"), at the exact
# versions of constraints.txt (pyproject.toml states ranges; the lock makes
# every set-up, CI's included, install the same set). Python 3.11 or newer
# (python3.11 first: constraints.txt is resolved for it; PYTHON=... picks another).
# A second run with unchanged pyproject.toml and constraints.txt installs nothing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
extras="${1:-}"
venv="$root/.venv"

find_python() {
  for candidate in "${PYTHON:-}" python3.11 python3.12 python3.13 python3 python; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  echo "saintpipe needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)" >&2
  return 1
}

if [ ! -x "$venv/bin/python" ]; then
  py="$(find_python)"
  echo "creating virtual environment in $venv" >&2
  "$py" -m venv "$venv"
fi

stamp_file="$venv/.saintpipe-installed"
hash="$(cat "$root/pyproject.toml" "$root/constraints.txt" | sha256sum | cut -d' ' -f1)"
# The stamp lists "hash:extras" for each install against these two files;
# the plain install is covered by any of them.
if [ -f "$stamp_file" ] && { grep -qxF -- "$hash:$extras" "$stamp_file" ||
     { [ -z "$extras" ] && grep -q -- "^$hash:" "$stamp_file"; }; }; then
  exit 0
fi
echo "installing saintpipe${extras:+[$extras]} into $venv (first run only)" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
spec="$root"
[ -n "$extras" ] && spec="$root[$extras]"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -c "$root/constraints.txt" -e "$spec" >&2
{ grep -- "^$hash:" "$stamp_file" 2>/dev/null || true; echo "$hash:$extras"; } | sort -u > "$stamp_file.tmp"
mv "$stamp_file.tmp" "$stamp_file"
