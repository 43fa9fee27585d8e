"""Checkpoints of a trainer: model, optimizer, step, early-stopping state and loop progress.

Written with ``torch.save`` to a temporary file in the checkpoint directory and renamed into place
(``os.replace``), so a crash mid-write never leaves a torn file; ``latest.pt`` is always the newest complete
checkpoint and ``keep`` older ones stay beside it as ``step-<N>.pt``.

A checkpoint holds only tensors and plain data (dicts, lists, numbers, strings), and is loaded with
``weights_only=True``: a file that asks the unpickler for anything else (a crafted ``latest.pt`` that would
run code on load) is refused, never executed.
"""

from __future__ import annotations

import logging
import os
import pickle
import re
from pathlib import Path

import torch

from saintpipe.core.errors import DatasetError
from saintpipe.core.files import stage
from saintpipe.trainer.run_dir import LATEST

log = logging.getLogger(__name__)


class Checkpointer:
    """Saves and loads one trainer group's checkpoints in ``directory``.

    Args:
        directory: created if missing.
        keep: how many step-numbered copies to keep besides ``latest.pt``.
    """

    def __init__(self, directory: Path | str, keep: int = 2) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.keep = keep

    @property
    def latest(self) -> Path:
        return self.directory / LATEST

    def save(self, state: dict, step: int) -> Path:
        """Write ``state`` atomically as ``latest.pt`` (and ``step-<step>.pt``); returns the latest path."""
        tmp = stage(self.latest, lambda fh: torch.save(state, fh), 0o600, prefix=".ckpt-")
        try:
            numbered = self.directory / f"step-{step:09d}.pt"
            if self.keep and not numbered.exists():
                os.link(tmp, numbered)  # the same bytes under a second name, no copy
            os.replace(tmp, self.latest)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        for old in sorted(self.directory.glob("step-*.pt"))[: -self.keep or None]:
            old.unlink(missing_ok=True)
        log.debug("checkpoint at step %d: %s", step, self.latest)
        return self.latest

    def load(self, map_location: torch.device | str = "cpu") -> dict | None:
        """The latest checkpoint, or None when there is none.

        Raises:
            DatasetError: naming the file when it exists but cannot be read.
        """
        if not self.latest.is_file():
            return None
        try:
            return torch.load(self.latest, map_location=map_location, weights_only=True)
        except pickle.UnpicklingError as exc:
            # torch's message is a page of advice about weights_only=False, which is exactly what must not be done
            # with a file of unknown origin: name what the file asked for instead.
            raise DatasetError(
                f"{self.latest}: refused: the checkpoint holds Python objects other than tensors and plain data "
                f"({_offending_global(exc)}); saintpipe never writes such a file, so it may have been tampered "
                "with; move it away to start afresh"
            ) from None
        except Exception as exc:  # noqa: BLE001 - any unreadable file (torn, foreign, old): say which
            raise DatasetError(
                f"{self.latest}: unreadable checkpoint ({exc}); move it away to start afresh"
            ) from None


def _offending_global(exc: pickle.UnpicklingError) -> str:
    """What a refused checkpoint asked the unpickler for (e.g. ``GLOBAL posix.system``), from torch's message."""
    found = re.search(r"(?:unsupported |Unsupported global: )(GLOBAL [\w.]+)", str(exc))
    return f"it asks for {found.group(1)}" if found else "it asks for more than weights"
