"""Writers of the foreign dataset layouts the importers read, built from a Planetoid npz (tests/data/cora.npz).

- :func:`write_graphsaint` writes GraphSAINT's format with scipy's own ``save_npz``
  (so the importer is tested on what scipy writes), ``adj_train`` being the graph the
  training nodes induce, as GraphSAINT's datasets ship it;
- :func:`write_ogb` writes OGB's raw node property prediction layout, gzip-compressed.

Both return the arrays they wrote, for comparisons.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np


def planetoid(npz: Path) -> dict[str, np.ndarray]:
    """indptr, indices, features, labels and the train/val/test ids of a Planetoid npz."""
    with np.load(npz) as z:
        data = {k: z[k] for k in ("indptr", "indices", "features", "labels")}
        for split in ("train", "val", "test"):
            data[split] = np.flatnonzero(z[f"{split}_mask"])
    return data


def induced(indptr: np.ndarray, indices: np.ndarray, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The subgraph ``nodes`` (sorted) induce, over local ids 0..len(nodes)-1, computed the slow, obvious way."""
    local = {int(v): i for i, v in enumerate(nodes)}
    rows = [[local[int(u)] for u in indices[indptr[v]:indptr[v + 1]] if int(u) in local] for v in nodes]
    sub_indptr = np.zeros(len(nodes) + 1, dtype=np.int64)
    sub_indptr[1:] = np.cumsum([len(r) for r in rows])
    return sub_indptr, np.array([u for r in rows for u in r], dtype=np.int32)


def write_graphsaint(npz: Path, out: Path, *, multilabel: bool = False) -> dict[str, np.ndarray]:
    """A GraphSAINT dataset directory built from ``npz``; returns the source arrays."""
    import scipy.sparse as sp

    data = planetoid(npz)
    n = data["indptr"].size - 1
    out.mkdir(parents=True, exist_ok=True)
    full = sp.csr_matrix((np.ones(data["indices"].size, dtype=np.float32), data["indices"], data["indptr"]),
                         shape=(n, n))
    mask = np.zeros(n, dtype=bool)
    mask[data["train"]] = True
    keep = sp.diags(mask.astype(np.float32))
    train = (keep @ full @ keep).tocsr()
    train.eliminate_zeros()
    train.sort_indices()
    sp.save_npz(out / "adj_full.npz", full)
    sp.save_npz(out / "adj_train.npz", train)
    np.save(out / "feats.npy", data["features"])
    if multilabel:
        classes = int(data["labels"].max()) + 1
        rows = np.eye(classes, dtype=np.int64)[data["labels"]]
        rows[:, 0] = 1  # a second label on every node
        data["multilabel"] = rows.astype(np.uint8)
        class_map = {str(i): row.tolist() for i, row in enumerate(rows)}
    else:
        class_map = {str(i): int(c) for i, c in enumerate(data["labels"])}
    # GraphSAINT's files list nodes in no particular order.
    items = list(class_map.items())
    np.random.default_rng(0).shuffle(items)
    (out / "class_map.json").write_text(json.dumps(dict(items)))
    (out / "role.json").write_text(json.dumps({"tr": data["train"][::-1].tolist(), "va": data["val"].tolist(),
                                               "te": data["test"].tolist()}))
    return data


def _parent(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _gz(path: Path, lines: list[str]) -> None:
    with gzip.open(_parent(path), "wt") as fh:
        fh.write("".join(line + "\n" for line in lines))


def write_ogb(npz: Path, out: Path, *, split_names: tuple[str, ...] = ("random",),
              unlabelled: tuple[int, ...] = ()) -> dict[str, np.ndarray]:
    """An OGB raw layout built from ``npz``: one direction of each edge (OGB graphs may be directed);
    nodes in ``unlabelled`` get an empty label line or ``nan``. Returns the source arrays."""
    data = planetoid(npz)
    indptr, indices = data["indptr"], data["indices"]
    n = indptr.size - 1
    rows = np.repeat(np.arange(n), np.diff(indptr))
    one_way = rows < indices
    _gz(out / "raw" / "edge.csv.gz", [f"{u},{v}" for u, v in zip(rows[one_way], indices[one_way])])
    with gzip.open(_parent(out / "raw" / "node-feat.csv.gz"), "wt") as fh:
        np.savetxt(fh, data["features"], fmt="%.9g", delimiter=",")  # 9 digits: float32 exactly
    labels = [str(int(c)) for c in data["labels"]]
    for k, node in enumerate(unlabelled):
        labels[node] = "" if k % 2 == 0 else "nan"
    _gz(out / "raw" / "node-label.csv.gz", labels)
    _gz(out / "raw" / "num-node-list.csv.gz", [str(n)])
    for name in split_names:
        for ours, theirs in (("train", "train"), ("val", "valid"), ("test", "test")):
            _gz(out / "split" / name / f"{theirs}.csv.gz", [str(i) for i in data[ours]])
    return data
