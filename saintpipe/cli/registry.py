"""Lazy registration of subcommands that live in component packages.

A component exposes ``register(subparsers)`` in a small module that imports
nothing heavy at module level; the handler imports what it needs when it runs,
so ``saintpipe --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Iterable


def register_all(subparsers: argparse._SubParsersAction, modules: Iterable[str]) -> None:
    for name in modules:
        importlib.import_module(name).register(subparsers)
