"""Run ``saintpipe run`` as a real subprocess and watch its process tree, for the whole-system tests.

:class:`PipelineProcess` starts the console script (stdout and stderr to
files, so nothing blocks on a full pipe), waits for lines it prints, scrapes
the metrics endpoints it announces, and keeps the union of every descendant
process it has seen (Ray spawns workers late, so the tree is sampled
repeatedly) together with the TCP ports they listen on. After the run exits,
:func:`alive` and :func:`open_ports` tell what it left behind.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
METRICS_LINE = re.compile(r"^\s+(?P<name>\S.*?)\s+(?P<url>http://\S+/metrics)\s*$", re.M)


def small_dataset(out: Path, nodes: int = 3000) -> Path:
    """A small demo dataset (2 feature shards) written in-process."""
    from saintpipe.services.dataset.demo import generate_demo
    from saintpipe.services.dataset.store import write_dataset

    write_dataset(out, num_shards=2, **generate_demo(num_nodes=nodes, seed=1))
    return out


def write_config(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


class PipelineProcess:
    """One ``saintpipe run`` subprocess.

    Args:
        command: the saintpipe console script argv prefix (tests/conftest.py's ``saintpipe_command()``).
        args: arguments after ``saintpipe``.
        workdir: where stdout.txt and stderr.txt go.
    """

    def __init__(self, command: list[str], args: list[str], workdir: Path, env: dict[str, str] | None = None) -> None:
        full_env = dict(os.environ)
        full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
        full_env.pop("SAINTPIPE_REDIS_URL", None)
        full_env.update(env or {})
        self.stdout_path, self.stderr_path = workdir / "stdout.txt", workdir / "stderr.txt"
        self._out, self._err = self.stdout_path.open("w"), self.stderr_path.open("w")
        # A session of its own, as a shell gives a foreground job: signal_group() is then a terminal's Ctrl-C.
        self.proc = subprocess.Popen([*command, *args], stdout=self._out, stderr=self._err, env=full_env,
                                     stdin=subprocess.DEVNULL, cwd=workdir, start_new_session=True)
        self.seen: dict[int, psutil.Process] = {}
        self.ports: set[int] = set()

    # --- output --------------------------------------------------------------------------------------
    @property
    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="replace")

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def output(self) -> str:
        return f"--- stdout ---\n{self.stdout}\n--- stderr (tail) ---\n{self.stderr[-6000:]}"

    def wait_for_line(self, pattern: str, timeout: float) -> re.Match:
        """Wait until stdout matches ``pattern``; fail (with the output) when the run exits or time runs out."""
        deadline = time.monotonic() + timeout
        while True:
            self.sample_tree(ports=True)
            found = re.search(pattern, self.stdout, re.M)
            if found:
                return found
            if self.proc.poll() is not None:
                raise AssertionError(f"saintpipe run exited {self.proc.returncode} before printing "
                                     f"{pattern!r}\n{self.output()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {pattern!r} within {timeout} s\n{self.output()}")
            time.sleep(0.5)

    def metrics_urls(self) -> dict[str, str]:
        """The metrics endpoints the run announced, by component name."""
        return {m["name"]: m["url"] for m in METRICS_LINE.finditer(self.stdout)}

    def scrape(self, url: str) -> dict[str, float]:
        """Sample name -> value summed over labels, from one endpoint."""
        return scrape_metrics(url)

    def wait_for_steps(self, steps: int, timeout: float) -> None:
        """Wait until the trainer's endpoint counts ``steps`` optimizer steps."""
        url = self.metrics_urls()["trainer 0"]
        deadline = time.monotonic() + timeout
        while True:
            self.sample_tree()
            try:
                if self.scrape(url).get("saintpipe_trainer_steps_total", 0) >= steps:
                    return
            except OSError:
                pass
            self.sample_tree()
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the trainer did not reach {steps} steps\n{self.output()}")
            time.sleep(0.3)

    # --- the process tree ----------------------------------------------------------------------------
    def sample_tree(self, ports: bool = False) -> None:
        """Add the current descendants (and with ``ports`` the TCP ports they listen on) to what was seen."""
        try:
            children = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for child in children:
            self.seen.setdefault(child.pid, child)
        if not ports:
            return
        self.ports |= listening_ports({self.proc.pid, *(child.pid for child in children)})

    def pid_of(self, needle: str) -> psutil.Process:
        """The first descendant whose command line contains ``needle``."""
        self.sample_tree()
        for proc in self.seen.values():
            try:
                if needle in " ".join(proc.cmdline()):
                    return proc
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                continue
        raise AssertionError(f"no child process runs {needle!r}: {[p.pid for p in self.seen.values()]}")

    def signal(self, sig: int) -> None:
        self.sample_tree(ports=True)
        self.proc.send_signal(sig)

    def signal_group(self, sig: int) -> None:
        """``sig`` to the run's whole process group, as a terminal's Ctrl-C sends SIGINT."""
        self.sample_tree(ports=True)
        os.killpg(self.proc.pid, sig)

    def wait(self, timeout: float) -> int:
        """Wait for the run to exit, sampling its process tree meanwhile."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"saintpipe run did not exit within {timeout} s\n{self.output()}")
            self.sample_tree()
            time.sleep(0.5)
        return self.proc.returncode

    def alive(self) -> list[str]:
        """Descendants seen during the run that still exist (zombies excluded), described."""
        out = []
        for pid, proc in self.seen.items():
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    out.append(f"{pid} {' '.join(proc.cmdline())[:120]}")
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                continue
        return out

    def open_ports(self) -> list[str]:
        """Ports the run's processes listened on that some process of the run still listens on.

        A port that accepts connections again may have been reused by an unrelated process on a busy
        machine (ports come from the ephemeral range); only a listener that is one of the run's own
        processes, or whose owner cannot be told, counts.
        """
        still = []
        ours = set(self.seen) | {self.proc.pid}
        for port in sorted(self.ports):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.settimeout(0.5)
                if sock.connect_ex(("127.0.0.1", port)) != 0:
                    continue
            owners = {c.pid for c in psutil.net_connections(kind="tcp")
                      if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN}
            if not owners or None in owners or owners & ours:
                still.append(f"{port} (listener pids {sorted(p for p in owners if p) or 'unknown'})")
        return still

    def cleanup(self) -> None:
        """Fixture teardown: kill whatever is left (a failed test must not leak processes)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for proc in self.seen.values():
            try:
                if proc.is_running():
                    proc.kill()
            except psutil.NoSuchProcess:
                pass
        self._out.close()
        self._err.close()


def listening_ports(pids: set[int]) -> set[int]:
    """The TCP ports that the processes ``pids`` listen on.

    One pass over the machine's sockets: asked process by process, psutil reads every socket table again
    for each one: 1.46 s against 0.23 s for a 15-process tree on a loaded 2-core machine, and
    the waits sample the tree every half second while the run starts.
    """
    try:
        conns = psutil.net_connections(kind="tcp")
    except psutil.AccessDenied:  # where other processes' sockets may not be listed: ask each of ours
        conns = []
        for pid in pids:
            try:
                conns += [c._replace(pid=pid) for c in psutil.Process(pid).net_connections(kind="tcp")]
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                pass
    return {c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN and c.pid in pids}


def scrape_metrics(url: str) -> dict[str, float]:
    """Sample name -> value summed over labels, from one /metrics endpoint (Prometheus text parser)."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url, timeout=5) as reply:
        text = reply.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[sample.name] = out.get(sample.name, 0.0) + sample.value
    return out
