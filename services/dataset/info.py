"""A human-readable summary of a dataset."""

from __future__ import annotations

import numpy as np

from saintpipe.services.dataset.store import Dataset


def summary(dataset: Dataset) -> dict[str, object]:
    m = dataset.manifest
    deg = dataset.degrees()
    return {
        "name": m.name,
        "path": str(dataset.path),
        "nodes": m.num_nodes,
        "edges (directed)": m.num_edges,
        "mean degree": float(deg.mean()),
        "max degree": int(deg.max()),
        "isolated nodes": int((deg == 0).sum()),
        "feature dim": m.feature_dim,
        "feature dtype": m.feature_dtype,
        "classes": m.num_classes,
        "multi-label": m.multilabel,
        "train / val / test": " / ".join(str(dataset.splits[s].size) for s in ("train", "val", "test")),
        "feature shards": ", ".join(f"[{a}, {b})" for a, b in m.shards),
        "source": m.source,
    }


def describe(dataset: Dataset) -> str:
    rows = summary(dataset)
    width = max(len(k) for k in rows)
    lines = []
    for key, value in rows.items():
        if isinstance(value, float):
            value = f"{value:.2f}"
        elif isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            value = f"{value:,}"
        lines.append(f"{key.ljust(width)}  {value}")
    return "\n".join(lines)
