"""Shard address lists: one list of replica ``host:port`` addresses per shard, in shard order.

Three spellings, all giving ``[["host:port", ...], ...]``:

* a Python list of lists (``[["127.0.0.1:50051", "127.0.0.1:50061"], ["127.0.0.1:50052"]]``);
* a string for command lines: shards separated by ``;``, replicas of a shard
  by ``,`` - ``"127.0.0.1:50051,127.0.0.1:50061;127.0.0.1:50052"`` is shard 0
  with two replicas and shard 1 with one;
* a JSON address manifest file: ``{"shards": [["127.0.0.1:50051"], ["127.0.0.1:50052"]]}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from saintpipe.core.errors import ConfigError


def check_address(address: str, where: str) -> str:
    """``address`` stripped, if it is ``host:port`` (or ``[v6]:port``) with a port in 1..65535."""
    address = str(address).strip()
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{where}: {address!r} is not a host:port address")
    return address


def normalize_shards(shards: Sequence[Sequence[str]], where: str = "shard addresses") -> list[list[str]]:
    """Validate a per-shard list of replica addresses.

    Raises:
        ConfigError: no shards, a shard without replicas, or a malformed address (naming shard and address).
    """
    if isinstance(shards, (str, bytes)) or not shards:
        raise ConfigError(f"{where}: expected a non-empty list of shards, each a list of host:port addresses")
    out: list[list[str]] = []
    for k, replicas in enumerate(shards):
        if isinstance(replicas, str):
            replicas = [replicas]
        if not replicas:
            raise ConfigError(f"{where}: shard {k} has no address")
        out.append([check_address(a, f"{where}, shard {k}") for a in replicas])
    return out


def parse_shard_addresses(text: str) -> list[list[str]]:
    """Parse ``"a:1,b:2;c:3"``: shards separated by ``;``, replicas of one shard by ``,``.

    >>> parse_shard_addresses("127.0.0.1:50051,127.0.0.1:50061;127.0.0.1:50052")
    [['127.0.0.1:50051', '127.0.0.1:50061'], ['127.0.0.1:50052']]
    """
    shards = [[a for a in part.split(",") if a.strip()] for part in text.strip().strip(";").split(";")]
    return normalize_shards(shards, where=f"shard addresses {text!r}")


def read_address_manifest(path: Path | str) -> list[list[str]]:
    """Read a JSON address manifest ``{"shards": [[...], ...]}``."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: address manifest not found")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, dict) or "shards" not in data:
        raise ConfigError(f'{path}: expected an object with a "shards" field (a list of address lists)')
    return normalize_shards(data["shards"], where=f"{path}: field shards")


def write_address_manifest(path: Path | str, shards: Sequence[Sequence[str]]) -> Path:
    """Write a JSON address manifest (validated first); returns its path."""
    path = Path(path)
    path.write_text(json.dumps({"shards": normalize_shards(shards)}, indent=2) + "\n")
    return path


def resolve_shards(shards: Sequence[Sequence[str]] | str | Path) -> list[list[str]]:
    """Any of the three spellings -> a validated per-shard address list.

    A :class:`~pathlib.Path`, a string ending in ``.json`` or naming an existing
    file is read as a manifest; any other string is parsed by
    :func:`parse_shard_addresses`.
    """
    if isinstance(shards, str) and not (shards.endswith(".json") or Path(shards).is_file()):
        return parse_shard_addresses(shards)
    if isinstance(shards, (str, Path)):
        return read_address_manifest(shards)
    return normalize_shards(shards)
