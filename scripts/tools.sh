#!/usr/bin/env bash
# Tools the chart and alert tests run beside the Python environment, each set up
# only when missing; a tool that cannot be had is reported in one line and its
# tests skip with the same reason (nothing else fails):
#   promtool  Debian's prometheus package (apt-get, as root): `promtool test rules`
#             on the alert rules, `promtool check config`; the real Prometheus the
#             dashboard-query test scrapes with.
#   checkov   PyPI, in its own virtual environment .venv-checkov (its pinned
#             dependencies conflict with Ray's and pytest's): scans the rendered chart.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHECKOV_VERSION=3.3.30

if ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian's prometheus package (promtool; first run only)" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null) \
      || echo "tools: prometheus could not be installed: the promtool and Prometheus tests skip" >&2
  else
    echo "tools: no promtool (install Debian's prometheus package as root): the promtool tests skip" >&2
  fi
fi

checkov="$root/.venv-checkov/bin/checkov"
if [ ! -x "$checkov" ] || ! "$checkov" --version 2>/dev/null | grep -qxF "$CHECKOV_VERSION"; then
  echo "installing checkov $CHECKOV_VERSION into .venv-checkov (first run only)" >&2
  python="$root/.venv/bin/python"
  { "$python" -m venv --clear "$root/.venv-checkov" &&
    "$root/.venv-checkov/bin/python" -m pip install --quiet --disable-pip-version-check "checkov==$CHECKOV_VERSION"; } >&2 \
    || echo "tools: checkov could not be installed: the checkov tests skip" >&2
fi
