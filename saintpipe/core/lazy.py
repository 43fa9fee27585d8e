"""A package's public names, imported from their modules on first use (PEP 562 module ``__getattr__``).

A component package names what callers import from it (``from saintpipe.services.pool import
SubgraphPool``) without importing its modules, so that importing the package, or one light module of
it, does not load torch, Numba, Ray or gRPC::

    __getattr__, __dir__ = lazy_exports(__name__, {"SubgraphPool": "pool", "PoolConfig": "config"})

Each name is looked up in its module (relative to the package) on first use and then kept in the
package's namespace. Static type checkers and IDEs read the names from an ``if TYPE_CHECKING:`` block
of imports beside the table (``TYPE_CHECKING = False`` at the package's top, which type checkers read
as ``typing.TYPE_CHECKING``, rather than importing ``typing``, which costs more than such a package).
"""

from __future__ import annotations

import sys
from importlib import import_module

TYPE_CHECKING = False  # typing itself is not imported: it would double the import time of a light package
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, for ``exports`` (public name -> module in the package)."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)  # the next lookup finds it without calling here
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
