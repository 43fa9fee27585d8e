"""A package's public names, imported from their modules on first use (PEP 562 module ``__getattr__``).

A component package names what callers import from it (``from saintpipe.services.pool import
SubgraphPool``) without importing its modules, so that importing the package, or one light module of
it, does not load torch, Numba, Ray or gRPC. The names are written once, as the imports of the
package's ``if TYPE_CHECKING:`` block, which static type checkers and IDEs read as they are::

    TYPE_CHECKING = False
    if TYPE_CHECKING:
        from saintpipe.services.pool.pool import SubgraphPool

    __all__ = ["SubgraphPool"]
    __getattr__, __dir__ = lazy_exports(__name__)

At run time the block does not run; on the first lookup of a name the package does not hold,
:func:`lazy_exports` reads that block from the package's source (once) to learn which module holds
each name, imports it and keeps the value in the package's namespace. ``TYPE_CHECKING = False`` at the
package's top, which type checkers read as ``typing.TYPE_CHECKING``, spares importing ``typing``, which
costs more than such a package.
"""

from __future__ import annotations

import sys
from importlib import import_module

TYPE_CHECKING = False  # typing itself is not imported: it would double the import time of a light package
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def declared_exports(source: str) -> dict[str, str]:
    """Public name -> module, from the ``from M import A, B`` lines inside a source's ``if TYPE_CHECKING:``."""
    import ast

    exports: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    exports.update((alias.asname or alias.name, statement.module) for alias in statement.names)
    return exports


def lazy_exports(package: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, for the names its ``if TYPE_CHECKING:`` block imports."""
    table: dict[str, str] = {}

    def exports() -> dict[str, str]:
        path = sys.modules[package].__file__
        if not table and path is not None:  # a package without a file (a namespace package) declares nothing
            with open(path, encoding="utf-8") as source:
                table.update(declared_exports(source.read()))
        return table

    def __getattr__(name: str) -> Any:
        module = exports().get(name) if not name.startswith("__") else None
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        setattr(sys.modules[package], name, value)  # the next lookup finds it without calling here
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports()})

    return __getattr__, __dir__
