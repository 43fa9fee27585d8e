"""A multi-label dataset end to end: ``saintpipe data import arrays`` of a 0/1 label matrix, then ``saintpipe run``.

``saintpipe data generate`` has no multi-label generator, so the arrays are
built here: the demo generator's graph and features (planted communities), and
labels from the community, each community owning a fixed random set of the
labels, with a few bits flipped per node. The trainer takes the multi-label
path (sigmoid + binary cross-entropy, F1-micro), with the default
normalization (``auto``: online for the random walk). The score must beat
the best constant predictor, which is what F1-micro gives without learning.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

RUN = """
[run]
progress = false
checkpoints = false
metrics = false
[trainer]
epochs = 6
patience = 0
[samplers]
normalization = "auto"
[samplers.sampler]
kind = "random_walk"
roots = 150
walk_length = 2
"""


def write_multilabel_arrays(out: Path, num_nodes: int = 3000, num_labels: int = 10, flip: float = 0.05,
                            seed: int = 1) -> dict[str, np.ndarray]:
    """Write indptr, indices, features, labels (uint8 [N, num_labels]) and train/val/test ids as .npy into ``out``.

    Each of the demo's 8 communities owns a random ~35% of the labels (at least one); a node has its
    community's labels with each bit flipped with probability ``flip``. Returns the arrays written.
    """
    from saintpipe.services.dataset.demo import generate_demo

    demo = generate_demo(num_nodes=num_nodes, seed=seed)
    rng = np.random.default_rng(seed + 1)
    communities = demo["labels"]
    owned = rng.random((int(communities.max()) + 1, num_labels)) < 0.35
    owned[np.arange(owned.shape[0]), rng.integers(0, num_labels, owned.shape[0])] = True
    labels = owned[communities] ^ (rng.random((num_nodes, num_labels)) < flip)
    arrays = {"indptr": demo["indptr"], "indices": demo["indices"], "features": demo["features"],
              "labels": labels.astype(np.uint8), **demo["splits"]}
    out.mkdir(parents=True, exist_ok=True)
    for name, array in arrays.items():
        np.save(out / f"{name}.npy", array)
    return arrays


def constant_f1_micro(labels: np.ndarray) -> float:
    """The best F1-micro of a predictor that ignores its input (the same label set for every node).

    Predicting label set S gives TP = sum of the positives of S, FP + FN = |S| N - TP + (all positives - TP),
    so F1 = 2 TP / (|S| N + P); for a given |S| the most frequent labels maximise it, so the best S is a
    prefix of the labels sorted by frequency.
    """
    n, positives = labels.shape[0], np.sort(labels.sum(axis=0))[::-1]
    total = positives.sum()
    return max(2 * positives[:k].sum() / (k * n + total) for k in range(1, labels.shape[1] + 1))


def test_multilabel_dataset_trains_end_to_end_with_f1_micro(cli, tmp_path):
    arrays = write_multilabel_arrays(tmp_path / "arrays")
    data = tmp_path / "multilabel"
    proc = cli("data", "import", "arrays", str(tmp_path / "arrays"), "--out", str(data), "--name", "multilabel")
    assert "wrote" in proc.stdout, proc.stdout
    manifest = json.loads((data / "manifest.json").read_text())
    assert manifest["multilabel"] is True and manifest["num_classes"] == 10

    config = tmp_path / "run.toml"
    config.write_text(RUN)
    proc = cli("run", "--data", str(data), "--config", str(config), "--json", timeout=240,
               env={"SAINTPIPE_HOME": str(tmp_path / "home")})
    summary = json.loads(proc.stdout.strip().splitlines()[-1])

    assert summary["metric"] == "F1-micro"
    assert "test F1-micro" in proc.stdout
    chance = constant_f1_micro(arrays["labels"][arrays["test"]])
    assert 0.3 < chance < 0.8  # the labels are neither empty nor all set: the bar below means something
    # Halfway from the constant predictor to perfect: only a model that learned the communities gets there.
    assert summary["test_score"] > chance + (1 - chance) / 2, (summary["test_score"], chance)
    losses = summary["step_losses"]
    assert len(losses) == summary["steps"] > 0 and all(math.isfinite(v) for v in losses)
    assert math.isfinite(summary["loss_spike_ratio"])
    assert summary["normalization"].startswith("online")  # auto on the random walk
