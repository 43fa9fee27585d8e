"""Where the tests find prometheus and promtool: PATH, else the tools folder ./scripts/tools.sh fills without root
(issue 22); when neither has them, the skip reason says why and what to run."""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

from tests.support.prometheus import ROOT, find_prometheus_tool, missing_reason, tools_dir


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho fake\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def run_tools_sh(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([shutil.which("bash"), str(ROOT / "scripts" / "tools.sh"), "prometheus"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_tools_folder_follows_the_scripts_rule(tmp_path):
    assert tools_dir({"SAINTPIPE_TOOLS_DIR": str(tmp_path)}) == tmp_path
    assert tools_dir({"XDG_CACHE_HOME": "/c"}) == Path("/c/saintpipe/tools")
    assert tools_dir({}) == Path.home() / ".cache" / "saintpipe" / "tools"
    script = (ROOT / "scripts" / "tools.sh").read_text()
    assert 'tools="${SAINTPIPE_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/saintpipe/tools}"' in script
    assert 'prom_bin="$tools/prometheus/usr/bin"' in script


def test_path_first_then_the_unpacked_package(tmp_path):
    empty = tmp_path / "empty-path"
    empty.mkdir()
    env = {"PATH": str(empty), "SAINTPIPE_TOOLS_DIR": str(tmp_path / "tools")}
    assert find_prometheus_tool("promtool", env) is None
    cached = _executable(tmp_path / "tools" / "prometheus" / "usr" / "bin" / "promtool")
    assert find_prometheus_tool("promtool", env) == str(cached)
    on_path = _executable(empty / "promtool")
    assert find_prometheus_tool("promtool", env) == str(on_path)


def test_the_skip_reason_repeats_what_tools_sh_found_or_says_what_to_run(tmp_path):
    env = {"PATH": "", "SAINTPIPE_TOOLS_DIR": str(tmp_path)}
    reason = missing_reason("promtool", env)
    assert reason.startswith(f"promtool not found on PATH nor in {tmp_path}/prometheus/usr/bin: ")
    assert "run ./scripts/tools.sh" in reason and "apt-get download" in reason and "\n" not in reason
    (tmp_path / "missing.txt").write_text("checkov: no\nprometheus/promtool: no apt-get/dpkg-deb (not Debian)\n")
    reason = missing_reason("prometheus", env)
    assert reason.endswith("./scripts/tools.sh said: prometheus/promtool: no apt-get/dpkg-deb (not Debian)")


def test_tools_sh_keeps_what_it_fetched_and_fetches_nothing_twice(tmp_path):
    """With both binaries in the tools folder and none on PATH, the script neither fetches nor reports one missing
    (a fetch would fail here: the PATH it gets has no apt-get, and that failure would be reported)."""
    tools = tmp_path / "tools"
    for name in ("promtool", "prometheus"):
        _executable(tools / "prometheus" / "usr" / "bin" / name)
    bin_dir = tmp_path / "bin"  # the commands the script runs, and not promtool, prometheus or apt-get
    bin_dir.mkdir()
    for name in ("dirname", "mkdir", "grep", "cat", "rm", "ls", "mv", "tail"):
        (bin_dir / name).symlink_to(shutil.which(name))
    env = {"HOME": str(tmp_path), "SAINTPIPE_TOOLS_DIR": str(tools), "PATH": str(bin_dir)}
    done = run_tools_sh(env)
    assert done.returncode == 0, done.stderr
    assert "fetching" not in done.stderr and done.stderr == ""
    assert (tools / "missing.txt").read_text() == ""
    (tools / "prometheus" / "usr" / "bin" / "promtool").unlink()  # half a package: fetched again, and here it fails
    done = run_tools_sh(env)
    assert done.returncode == 0, done.stderr
    assert (tools / "missing.txt").read_text().startswith("prometheus/promtool: no apt-get/dpkg-deb (not Debian")
