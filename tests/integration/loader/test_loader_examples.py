"""docs/how-to/loader.md's examples, run as written on a small demo dataset: the models learn from the loader.

Each Python block of docs/how-to/loader.md that starts an embedded pipeline is
executed with only its dataset path replaced (``data/demo`` becomes the test's
3,000-node demo). The PyG block runs only where PyTorch Geometric is
installed (the ``pyg`` extra).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def example(marker: str) -> str:
    """The one Python block of docs/how-to/loader.md that contains ``marker``."""
    text = (ROOT / "docs" / "how-to" / "loader.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.DOTALL) if marker in b]
    assert len(blocks) == 1, f"{len(blocks)} python blocks of docs/how-to/loader.md contain {marker!r}"
    return blocks[0]


def run_example(marker: str, data: Path) -> dict:
    code = example(marker)
    assert 'Path("data/demo")' in code
    namespace: dict = {"__name__": "docs_loader_example"}
    code = code.replace('Path("data/demo")', f"Path({str(data)!r})")
    exec(compile(code, "docs/how-to/loader.md", "exec"), namespace)
    return namespace


def test_the_pyg_example_learns(loader_data, capsys):
    pytest.importorskip("torch_geometric")
    ns = run_example("GCNConv", loader_data)
    losses = ns["losses"]
    assert len(losses) == 60
    assert sum(losses[-10:]) / 10 < 0.5 * sum(losses[:10]) / 10
    chance = 1 / ns["loader"].num_classes
    assert ns["labelled"] > 0 and ns["correct"] / ns["labelled"] > 3 * chance
    assert "held-out accuracy" in capsys.readouterr().out


def test_the_plain_torch_example_with_the_projects_model_learns(loader_data):
    ns = run_example("build_model", loader_data)
    losses, last = ns["losses"], ns["batch"]
    assert last.epoch <= 9 and len(losses) >= 10  # epochs=10: no minibatch past the tenth epoch
    assert sum(losses[-3:]) < 0.5 * sum(losses[:3])
