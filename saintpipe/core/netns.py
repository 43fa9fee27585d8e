"""A second host on this machine: a network namespace joined to this one by a veth pair.

The benchmarks' cross-host mode (``--cross-host veth``) runs the servers in such a namespace and the clients
here, so every byte crosses a real link with its own addresses (the veth driver, the namespace's own TCP
stack) instead of loopback. It needs root (CAP_NET_ADMIN) and iproute2; :func:`netns_unavailable` says why it
cannot be had elsewhere, so a caller can skip with that reason.

Only the network is separate: the namespace shares this machine's filesystem, ``/dev/shm`` included, so a
benchmark in this mode must not use same-host shortcuts (shared memory) and say so.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import shutil
import subprocess
from types import TracebackType

log = logging.getLogger(__name__)

# A /30 per host out of a private range unlikely to be routed on the machine; the index picks the block.
_BASE = ipaddress.IPv4Address("10.213.0.0")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def netns_unavailable() -> str | None:
    """None if a namespace with a veth pair can be made here, else the reason it cannot."""
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN)"
    probe = f"spprobe{os.getpid() % 100000}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip() or made.returncode}"
    try:
        veth = _ip("link", "add", f"{probe}a", "type", "veth", "peer", "name", f"{probe}b", "netns", probe,
                   check=False)
        if veth.returncode != 0:
            return f"`ip link add … type veth` failed: {veth.stderr.strip() or veth.returncode}"
        _ip("link", "del", f"{probe}a", check=False)
        return None
    finally:
        _ip("netns", "del", probe, check=False)


class VethHost:
    """A network namespace ``namespace`` reachable at ``address`` from this one (``peer_address`` back).

    Example::

        with VethHost(prefix="spb") as host:
            server = subprocess.Popen(host.command(["redis-server", "--bind", host.address]))
            client = redis.Redis(host.address)   # over the veth pair

    Raises:
        OSError: the namespace or the link cannot be made (see :func:`netns_unavailable`).
    """

    def __init__(self, prefix: str = "sp", *, index: int | None = None, mtu: int = 1500) -> None:
        self.index = (os.getpid() % 16000) if index is None else int(index)
        # Interface names are at most 15 bytes: prefix (<= 5) + index + one letter.
        tag = f"{prefix[:5]}{self.index}"
        self.namespace = f"{tag}ns"
        self._outer, self._inner = f"{tag}o", f"{tag}i"
        block = _BASE + 4 * self.index
        self.peer_address, self.address = str(block + 1), str(block + 2)
        self.mtu = int(mtu)
        self._made = False

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the namespace."""
        return ["ip", "netns", "exec", self.namespace, *argv]

    def __enter__(self) -> "VethHost":
        try:
            _ip("netns", "add", self.namespace)
            self._made = True
            _ip("link", "add", self._outer, "mtu", str(self.mtu), "type", "veth", "peer", "name", self._inner,
                "mtu", str(self.mtu), "netns", self.namespace)
            _ip("addr", "add", f"{self.peer_address}/30", "dev", self._outer)
            _ip("link", "set", self._outer, "up")
            inside = ["-n", self.namespace]
            _ip(*inside, "addr", "add", f"{self.address}/30", "dev", self._inner)
            _ip(*inside, "link", "set", self._inner, "up")
            _ip(*inside, "link", "set", "lo", "up")
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, FileNotFoundError) as exc:
            detail = getattr(exc, "stderr", "") or exc
            self.close()
            raise OSError(f"cannot make network namespace {self.namespace} with a veth pair: {detail}") from None
        log.info("namespace %s at %s (this side %s)", self.namespace, self.address, self.peer_address)
        return self

    def close(self) -> None:
        """Delete the namespace and the link (idempotent); processes still inside lose their network."""
        if self._made:
            _ip("link", "del", self._outer, check=False)
            _ip("netns", "del", self.namespace, check=False)
            self._made = False

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
