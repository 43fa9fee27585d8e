#!/usr/bin/env bash
# Tools the chart and alert tests run beside the Python environment, each set up
# only when missing, none needing root; a tool that cannot be had is reported in
# one line (also written to $tools/missing.txt, which ./scripts/test.sh repeats
# at its end) and its tests skip with the same reason (nothing else fails):
#   promtool, prometheus  Debian's prometheus package, fetched with
#             `apt-get download` and unpacked with `dpkg-deb -x` into
#             $tools/prometheus (no root: nothing is installed system-wide;
#             tests/support/prometheus.py looks there after PATH). Used for
#             `promtool test rules` on the alert rules, `promtool check config`,
#             and the real Prometheus the dashboard-query test scrapes with.
#   checkov   PyPI, in its own virtual environment .venv-checkov (its pinned
#             dependencies conflict with Ray's and pytest's): scans the rendered chart.
# $tools is $SAINTPIPE_TOOLS_DIR, else $XDG_CACHE_HOME/saintpipe/tools (~/.cache/...).
# Arguments name the tools to set up (prometheus, checkov); none: all of them.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHECKOV_VERSION=3.3.30
tools="${SAINTPIPE_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/saintpipe/tools}"
mkdir -p "$tools"
missing="$tools/missing.txt"
: > "$missing"
wanted=" ${*:-prometheus checkov} "

report_missing() {  # one line on stderr and in $missing
  echo "tools: $*" >&2
  echo "$*" >> "$missing"
}

# Debian packages ($2...) fetched into the folder $1 and unpacked into $1/root. apt-get download needs no
# root; where the machine has no package lists (images often delete them) apt-get reads a private copy that
# it fetches into $1. On failure, one line on stdout says why.
fetch_debs() {
  local work="$1" apt_dirs=() deb
  shift
  command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1 || {
    echo "no apt-get/dpkg-deb (not Debian or Ubuntu)"; return 1; }
  rm -rf "$work" && mkdir -p "$work"
  if ! (cd "$work" && apt-get download -qq "$@" >"$work/apt.log" 2>&1); then
    mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
    apt_dirs=(-o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Debug::NoLocking=1)
    if ! { apt-get -qq "${apt_dirs[@]}" update && (cd "$work" && apt-get -qq "${apt_dirs[@]}" download "$@"); } \
        >>"$work/apt.log" 2>&1; then
      echo "apt-get download $* failed (offline? $(grep -v '^W:' "$work/apt.log" | tail -n 1))"; return 1
    fi
  fi
  for deb in "$work"/*.deb; do
    dpkg-deb -x "$deb" "$work/root" || { echo "dpkg-deb -x failed on $deb"; return 1; }
  done
}

# Debian's prometheus package unpacked into $tools/prometheus.
fetch_prometheus() {
  local work="$tools/prometheus.download.$$"
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" RETURN
  fetch_debs "$work" prometheus || return 1
  "$work/root/usr/bin/promtool" --version >/dev/null 2>&1 || { echo "the unpacked promtool does not run"; return 1; }
  rm -rf "$tools/prometheus" && mv "$work/root" "$tools/prometheus"
}

prom_bin="$tools/prometheus/usr/bin"
if [[ "$wanted" == *" prometheus "* ]] &&
   { ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; } &&
   { [ ! -x "$prom_bin/promtool" ] || [ ! -x "$prom_bin/prometheus" ]; }; then
  echo "fetching Debian's prometheus package into $tools/prometheus (first run only, no root needed)" >&2
  if ! why="$(fetch_prometheus)"; then
    report_missing "prometheus/promtool: ${why:-unknown failure}: the promtool and Prometheus tests skip;" \
      "on Debian/Ubuntu run ./scripts/tools.sh prometheus again when online, elsewhere put Prometheus 2.x's" \
      "prometheus and promtool on PATH (https://prometheus.io/download/)"
  fi
fi

checkov="$root/.venv-checkov/bin/checkov"
# The installed version from the package's metadata: `checkov --version` loads all of checkov (8 s).
checkov_version() {
  "$root/.venv-checkov/bin/python" -c 'import importlib.metadata as m; print(m.version("checkov"))' 2>/dev/null
}
if [[ "$wanted" == *" checkov "* ]] && { [ ! -x "$checkov" ] || [ "$(checkov_version)" != "$CHECKOV_VERSION" ]; }; then
  echo "installing checkov $CHECKOV_VERSION into .venv-checkov (first run only)" >&2
  python="$root/.venv/bin/python"
  { "$python" -m venv --clear "$root/.venv-checkov" &&
    "$root/.venv-checkov/bin/python" -m pip install --quiet --disable-pip-version-check "checkov==$CHECKOV_VERSION"; } >&2 \
    || report_missing "checkov: pip could not install checkov==$CHECKOV_VERSION into .venv-checkov: the checkov tests skip"
fi
