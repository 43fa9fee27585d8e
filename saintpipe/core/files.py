"""Reading files a user names, without trusting them to be what they claim."""

from __future__ import annotations

import os


class TooLarge(Exception):
    """The file holds more than the caller's limit: not the kind of file asked for (a dataset, a device)."""


def read_capped(path: str | os.PathLike, limit: int) -> bytes:
    """The bytes of ``path``, reading at most ``limit`` + 1 of them (a wrong path may name a huge file or a device).

    Raises:
        TooLarge: the file holds more than ``limit`` bytes.
        OSError: it cannot be opened or read.
    """
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(f"{path}: larger than {limit} bytes")
    return data
