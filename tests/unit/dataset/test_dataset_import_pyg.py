"""Importing a PyG ``Data``: the same graph as the npz importer, errors that name the field."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset.importers.pyg import from_pyg, import_pyg
from saintpipe.services.dataset.store import open_dataset

CORA = Path(__file__).resolve().parents[2] / "data" / "cora.npz"


def _cora() -> dict[str, np.ndarray]:
    with np.load(CORA) as npz:
        arrays = {key: npz[key] for key in npz.files}
    rows = np.repeat(np.arange(arrays["indptr"].size - 1), np.diff(arrays["indptr"]))
    arrays["edge_index"] = np.stack([rows, arrays["indices"].astype(np.int64)])
    return arrays


def _data(arrays: dict[str, np.ndarray], **changes) -> SimpleNamespace:
    fields = {"edge_index": arrays["edge_index"], "x": arrays["features"], "y": arrays["labels"],
              "train_mask": arrays["train_mask"], "val_mask": arrays["val_mask"], "test_mask": arrays["test_mask"]}
    fields.update(changes)
    return SimpleNamespace(**{k: v for k, v in fields.items() if v is not None})


def test_a_planetoid_style_data_gives_the_npz_graph(tmp_path):
    arrays = _cora()
    manifest = import_pyg(_data(arrays), tmp_path / "cora", name="cora")
    ds = open_dataset(tmp_path / "cora", verify=True)
    assert manifest.num_nodes == 2708 and manifest.num_edges == arrays["indices"].size
    assert np.array_equal(ds.indptr, arrays["indptr"]) and np.array_equal(ds.indices, arrays["indices"])
    assert np.array_equal(ds.splits["train"], np.flatnonzero(arrays["train_mask"]))
    assert np.array_equal(ds.gather_features(np.arange(2708)), arrays["features"])


def test_a_directed_edge_index_is_symmetrized_and_index_splits_work():
    arrays = _cora()
    upper = arrays["edge_index"][:, arrays["edge_index"][0] < arrays["edge_index"][1]]  # one direction only
    split = {"train": np.flatnonzero(arrays["train_mask"]), "valid": np.flatnonzero(arrays["val_mask"]),
             "test": np.flatnonzero(arrays["test_mask"])}
    out = from_pyg(_data(arrays, edge_index=upper, train_mask=None, val_mask=None, test_mask=None), split=split)
    assert np.array_equal(out["indices"], arrays["indices"]) and out["splits"]["val"].size == 500


def test_ogb_style_labels_and_split_columns():
    arrays = _cora()
    second = arrays["train_mask"].copy()
    second[0] = False
    masks = np.stack([arrays["train_mask"], second], axis=1)  # [N, 2], WikiCS-style
    y = arrays["labels"].astype(np.float64)[:, None]
    y[640] = np.nan  # unlabelled, as ogbn-papers100M marks it
    data = _data(arrays, y=y, train_mask=masks)
    with pytest.raises(DatasetError, match=r"Data.train_mask: 2 split columns .* split_column"):
        from_pyg(data)
    out = from_pyg(data, split_column=1)
    assert out["labels"][640] == -1 and out["splits"]["train"].size == arrays["train_mask"].sum() - 1


@pytest.mark.parametrize("changes, message", [
    ({"x": None}, r"Data.x is missing"),
    ({"edge_index": np.zeros((3, 4), dtype=np.int64)}, r"Data.edge_index: must be integer \[2, E\]"),
    ({"edge_index": np.array([[0, 5000], [1, 2]])}, r"Data.edge_index: edge 1 \(5000 -> 2\) is out of range"),
    ({"test_mask": None}, r"Data has no test split"),
    ({"x": np.zeros(2708, dtype=np.float32)}, r"Data.x: features must be \[N, F\]"),
    ({"y": np.zeros(10, dtype=np.int64)}, r"Data.y"),
])
def test_bad_fields_are_named(changes, message):
    with pytest.raises(DatasetError, match=message):
        from_pyg(_data(_cora(), **changes))


def test_a_real_torch_geometric_data(tmp_path):
    torch = pytest.importorskip("torch")
    pyg = pytest.importorskip("torch_geometric.data")
    arrays = _cora()
    data = pyg.Data(edge_index=torch.from_numpy(arrays["edge_index"]), x=torch.from_numpy(arrays["features"]),
                    y=torch.from_numpy(arrays["labels"]), train_mask=torch.from_numpy(arrays["train_mask"]),
                    val_mask=torch.from_numpy(arrays["val_mask"]), test_mask=torch.from_numpy(arrays["test_mask"]))
    import_pyg(data, tmp_path / "cora")
    ds = open_dataset(tmp_path / "cora")
    assert np.array_equal(ds.indices, arrays["indices"]) and np.array_equal(ds.labels, arrays["labels"])
