"""The sweep's metrics endpoints, as Prometheus file-based service discovery reads them.

A sweep's endpoints come and go: the shared services' (the sampler service with the pool gauges per trial
group, the feature shards) live as long as the sweep, each trial's trainer serves its own on a free port while
it trains. They are listed in ``<sweep dir>/prometheus/``, one JSON file per part, in the ``file_sd_configs``
format (``[{"targets": ["host:port"], "labels": {...}}]``): ``services.json`` from the start, ``<trial>.json``
while the trial trains (written by the trial once its endpoint is up, removed when it ends). A Prometheus
told ``file_sd_configs: [{files: ["<sweep dir>/prometheus/*.json"]}]`` follows the trials as they start and
end (docs/how-to/sweeps.md). Each file is replaced whole (renamed into place), so Prometheus never reads half
of one.

The target labels are the ``component`` of compose's scrape configuration; the trial is in the trainer's own
series (their ``trial`` label), not a target label, so that a scrape without ``honor_labels`` does not turn it
into ``exported_trial``.
"""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from saintpipe.core.files import write_atomic

log = logging.getLogger(__name__)

TARGETS = "prometheus"  # in the sweep directory
SERVICES = "services.json"


def targets_dir(sweep_dir: Path) -> Path:
    return sweep_dir / TARGETS


def target(url: str) -> str:
    """``http://host:port/metrics`` -> ``host:port``; an endpoint bound to every address is named by this host's
    name (a Prometheus elsewhere cannot reach 0.0.0.0)."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    if host in ("0.0.0.0", "::"):
        host = socket.gethostname()
    return f"[{host}]:{parts.port}" if ":" in host else f"{host}:{parts.port}"


def _component(name: str) -> str:
    """The endpoint names of :class:`~saintpipe.pipeline.runner.Endpoints` as compose's component labels."""
    return "feature-shard" if name.startswith("feature shard") else name


def _write(path: Path, groups: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(groups, indent=2) + "\n").encode())


def write_services(sweep_dir: Path, endpoints: Mapping[str, str]) -> Path | None:
    """List the shared services' endpoints (``name -> URL``, as the embedded pipeline has them); returns the
    file, or None when there are none (``[run] metrics = false``)."""
    if not endpoints:
        return None
    path = targets_dir(sweep_dir) / SERVICES
    _write(path, [{"targets": [target(url)], "labels": {"component": _component(name)}}
                  for name, url in endpoints.items()])
    return path


def write_trial(sweep_dir: Path, trial: str, url: str) -> Path:
    """List ``trial``'s trainer endpoint while it trains."""
    path = targets_dir(sweep_dir) / f"{trial}.json"
    _write(path, [{"targets": [target(url)], "labels": {"component": "trainer"}}])
    return path


def remove_trial(sweep_dir: Path, trial: str) -> None:
    """The trial ended: its endpoint is gone (idempotent: the trial and the driver both call it)."""
    (targets_dir(sweep_dir) / f"{trial}.json").unlink(missing_ok=True)


def clear(sweep_dir: Path) -> None:
    """Remove every target file (the sweep starts, or its services stopped)."""
    for path in targets_dir(sweep_dir).glob("*.json"):
        path.unlink(missing_ok=True)
