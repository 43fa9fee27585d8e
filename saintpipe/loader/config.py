"""The loader's own settings: how long it runs and what it calls itself in the pool.

Everything else it reads is a trainer's: the pool section (``[pool]``: job,
visibility timeout, reconnects) and the feeding part of ``[trainer]``
(``pool_timeout_s``, ``prefetch``, ``feature_shared_memory``,
``feature_retry_deadline_s``, ``feature_tls_*``, ``feature_token_file``), so a
loader and a trainer of the same job are configured by the same file.
:class:`LoaderConfig` itself comes from keyword arguments only: a
``[loader]`` section (or ``SAINTPIPE_LOADER__*`` variable) would be an unknown
section to ``saintpipe run``'s strict configuration, which reads the same file
and the same environment.
"""

from __future__ import annotations

from typing import Any

import pydantic
from pydantic import Field

from saintpipe.core.config import StrictModel
from saintpipe.core.errors import ConfigError

# A consumer name part: the pool's job-id alphabet, short enough that "<job>-<name>-w<k>" stays readable.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"


class LoaderConfig(StrictModel):
    """A loader's options (its keyword arguments): the length of an iteration and its consumer name."""

    steps: int | None = Field(
        None, ge=1, le=10**9,
        description="minibatches per iteration (split between DataLoader workers); none: no step bound")
    epochs: float | None = Field(
        None, gt=0, le=1_000_000,
        description="iteration ends once the minibatches' training nodes add up to this many times the train "
                    "split (the trainer's epoch: |V_train| labelled nodes); none: no epoch bound")
    name: str = Field(
        "loader", pattern=NAME_PATTERN,
        description="consumer name in the job's pool, as <job>-<name> (-w<k> for DataLoader worker k); a "
                    "loader restarted under the same name gets what its previous life held back at once")
    connect_timeout_s: float = Field(
        10.0, gt=0, le=3600,
        description="how long the loader tries to reach Redis and the feature shards before it says which one "
                    "is unreachable")

    def worker_share(self, worker: int, workers: int) -> tuple[int | None, float | None]:
        """(steps, epochs) of DataLoader worker ``worker`` of ``workers``: the bounds split evenly."""
        steps = None
        if self.steps is not None:
            steps = self.steps // workers + (1 if worker < self.steps % workers else 0)
        epochs = None if self.epochs is None else self.epochs / workers
        return steps, epochs


def loader_options(options: dict[str, Any]) -> LoaderConfig:
    """:class:`LoaderConfig` from a loader's keyword arguments.

    Raises:
        ConfigError: naming the first bad option, e.g. ``SubgraphLoader option steps: ...``.
    """
    try:
        return LoaderConfig(**options)
    except pydantic.ValidationError as exc:
        err = exc.errors()[0]
        name = ".".join(str(p) for p in err["loc"]) or "?"
        got = f", got {err['input']!r}" if err["type"] != "extra_forbidden" else ""
        raise ConfigError(f"SubgraphLoader option {name}: {err['msg']}{got} (options: "
                          f"{', '.join(LoaderConfig.model_fields)})") from None
