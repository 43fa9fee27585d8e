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
#   chromium  Debian's chromium and chromium-common packages and the shared libraries
#             they need that a Debian machine usually lacks (CHROMIUM_LIBS), fetched
#             and unpacked as prometheus is, into $tools/chromium, with a launcher
#             $tools/chromium/bin/chromium that puts those libraries on LD_LIBRARY_PATH
#             (scripts/docs_browser.py looks there after PATH). Some 120 MB to fetch,
#             360 MB unpacked: ./scripts/test.sh sets the tools up in the background.
#             Headless, it loads the built documentation site (tests/e2e/docs/
#             test_docs_browser.py, ./scripts/docs.sh --screenshots).
# $tools is $SAINTPIPE_TOOLS_DIR, else $XDG_CACHE_HOME/saintpipe/tools (~/.cache/...).
# Arguments name the tools to set up (prometheus, checkov, chromium); none: all of them.
# A run reports afresh on the tools it sets up; what $tools/missing.txt said of the others stays.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHECKOV_VERSION=3.3.30
# The shared libraries Debian's chromium links that a Debian bookworm machine with Python, fontconfig and the
# X11 client libraries lacks: the packages holding what `ldd` said was "not found" for the unpacked binary,
# then for what those bring, until nothing was (fetch_chromium checks it again on each fetch).
CHROMIUM_LIBS=(libdouble-conversion3 libharfbuzz-subset0 libminizip1 libopenh264-7 libopenjp2-7 libopus0
  libxnvctrl0 libflac12 libogg0 libpulse0 libasyncns0 libsndfile1 libvorbis0a libvorbisenc2 libmpg123-0
  libmp3lame0)
tools="${SAINTPIPE_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/saintpipe/tools}"
mkdir -p "$tools"
missing="$tools/missing.txt"
wanted=" ${*:-prometheus checkov chromium} "
if [ -f "$missing" ]; then  # forget what was said of the tools wanted now (a line starts "TOOL:" or "TOOL/")
  forget=()
  for tool in $wanted; do forget+=(-e "^$tool[:/]"); done
  grep -v "${forget[@]}" "$missing" > "$missing.tmp" || true
  mv "$missing.tmp" "$missing"
else
  : > "$missing"
fi

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

# Debian's chromium unpacked into $tools/chromium with CHROMIUM_LIBS beside it, and bin/chromium: a launcher
# that puts every folder of shared libraries in the unpacked tree on LD_LIBRARY_PATH (found from where the
# launcher lies, so the folder can move).
fetch_chromium() {
  local work="$tools/chromium.download.$$" folders=() in_work=() in_launcher=() lacking
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" RETURN
  fetch_debs "$work" chromium chromium-common "${CHROMIUM_LIBS[@]}" || return 1
  [ -x "$work/root/usr/lib/chromium/chromium" ] || { echo "the package has no usr/lib/chromium/chromium"; return 1; }
  mapfile -t folders < <(cd "$work/root" && find . -name '*.so*' -printf '%h\n' | sort -u | cut -c3-)
  in_work=("${folders[@]/#/$work/root/}")
  in_launcher=("${folders[@]/#/\$top/}")
  lacking="$(LD_LIBRARY_PATH="$(IFS=:; echo "${in_work[*]}")" ldd "$work/root/usr/lib/chromium/chromium" |
    awk '/not found/ { print $1 }' | paste -sd' ')"
  [ -z "$lacking" ] || {
    echo "the unpacked chromium lacks $lacking (add their packages to CHROMIUM_LIBS in scripts/tools.sh)"
    return 1; }
  mkdir -p "$work/root/bin"
  {
    echo '#!/bin/sh'
    echo "# Debian's chromium as scripts/tools.sh unpacked it, with the libraries it fetched beside it."
    echo 'top="$(cd "$(dirname "$0")/.." && pwd)"'
    echo "LD_LIBRARY_PATH=\"$(IFS=:; echo "${in_launcher[*]}")\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\" \\"
    echo '  exec "$top/usr/lib/chromium/chromium" "$@"'
  } > "$work/root/bin/chromium"
  chmod +x "$work/root/bin/chromium"
  "$work/root/bin/chromium" --version >/dev/null 2>&1 || { echo "the unpacked chromium does not run"; return 1; }
  rm -rf "$tools/chromium" && mv "$work/root" "$tools/chromium"
}

if [[ "$wanted" == *" chromium "* ]] && ! command -v chromium >/dev/null 2>&1 &&
   [ ! -x "$tools/chromium/bin/chromium" ]; then
  echo "fetching Debian's chromium package into $tools/chromium (first run only, no root needed)" >&2
  if ! why="$(fetch_chromium)"; then
    report_missing "chromium: ${why:-unknown failure}: the documentation site's browser tests skip;" \
      "on Debian/Ubuntu run ./scripts/tools.sh chromium again when online, elsewhere put Chromium on PATH" \
      "as chromium"
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
