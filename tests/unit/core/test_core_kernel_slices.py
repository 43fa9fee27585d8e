"""No Numba kernel assigns an array to a slice (``a[i:j] = b``): it copies with a loop.

Numba compiles an array's slice assignment together with its shape-mismatch error, whose message formatting
took 2 s to compile on the 2-core machine, once in every process that compiles such a kernel: on a cold kernel
cache the sampler worker and the codec's precompile paid it before the first subgraph (docs/benchmarks/startup.md).
A slice filled with a number (``counts[:] = 0``) has no such error and stays allowed.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SOURCES = ("services", "saintpipe", "trainer")
# What a slice may be filled with: a number, or a number made by a numpy scalar type.
SCALAR_TYPES = {"float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                "bool_", "intp", "uintp"}


def _kernels(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                call = decorator.func if isinstance(decorator, ast.Call) else decorator
                if (call.attr if isinstance(call, ast.Attribute) else getattr(call, "id", "")) in ("njit", "jit"):
                    yield node


def _is_number(value: ast.expr) -> bool:
    if isinstance(value, ast.Constant):
        return isinstance(value.value, (int, float, bool))
    if isinstance(value, ast.UnaryOp):
        return _is_number(value.operand)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        return value.func.attr in SCALAR_TYPES
    return False


def _slices(target: ast.expr) -> bool:
    if not isinstance(target, ast.Subscript):
        return False
    index = target.slice
    return isinstance(index, ast.Slice) or (isinstance(index, ast.Tuple) and any(isinstance(e, ast.Slice)
                                                                                  for e in index.elts))


def _array_slice_assignments(source: str) -> list[tuple[str, int, str]]:
    found = []
    for kernel in _kernels(ast.parse(source)):
        for node in ast.walk(kernel):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AugAssign) else []
            if any(_slices(t) for t in targets) and not _is_number(node.value):
                found.append((kernel.name, node.lineno, ast.unparse(node)))
    return found


def test_the_rule_sees_array_copies_and_lets_numbers_through():
    source = ("from numba import njit\n"
              "@njit(cache=True)\n"
              "def k(a, b, n):\n"
              "    a[:n] = b[:n]\n"
              "    a[1:3] = b\n"
              "    a[:] = 0\n"
              "    a[:] = -1.5\n"
              "    a[:] = np.float32(1.0 / n)\n"
              "def plain(a, b):\n"
              "    a[:] = b\n")
    assert [line for _, line, _ in _array_slice_assignments(source)] == [4, 5]


def test_no_kernel_assigns_an_array_to_a_slice():
    found = []
    files = [p for top in SOURCES for p in sorted((ROOT / top).rglob("*.py"))]
    assert len(files) > 100  # the tree was found
    for path in files:
        for kernel, line, text in _array_slice_assignments(path.read_text()):
            found.append(f"{path.relative_to(ROOT)}:{line} in {kernel}: {text}")
    assert found == [], "copy with a loop instead (see this test's docstring):\n" + "\n".join(found)
