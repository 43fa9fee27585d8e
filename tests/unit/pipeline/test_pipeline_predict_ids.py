"""``saintpipe predict --original-ids``: the imported edge list's ids map back to node ids."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from saintpipe.core.errors import InvalidArgument
from saintpipe.pipeline.predict import map_original_ids, original_ids, read_original_nodes


def _known(tmp_path, ids: np.ndarray) -> np.ndarray:
    """The ids as a dataset directory keeps them, read back through original_ids."""
    np.save(tmp_path / "node_ids.npy", ids)
    return original_ids(SimpleNamespace(path=tmp_path))


def test_string_ids_map_in_the_order_given(tmp_path):
    ds = _known(tmp_path, np.array(["carol", "alice", "bob", "dave"]))
    assert map_original_ids(["bob", "carol", "bob"], ds, "--nodes").tolist() == [2, 0, 2]
    (tmp_path / "wanted.txt").write_text("dave, alice\nbob\n")
    assert read_original_nodes(str(tmp_path / "wanted.txt"), ds).tolist() == [3, 1, 2]


def test_integer_original_ids_are_not_node_ids(tmp_path):
    ds = _known(tmp_path, np.array([1000, 7, 42], dtype=np.int64))  # node 0 was 1000 in the edge list
    assert read_original_nodes("42,1000", ds).tolist() == [2, 0]
    with pytest.raises(InvalidArgument, match=r"'x1' is not an original id \(this dataset's are integers\)"):
        read_original_nodes("42,x1", ds)


def test_unknown_ids_and_datasets_without_ids_are_one_line_errors(tmp_path):
    ds = _known(tmp_path, np.array(["a", "b"]))
    with pytest.raises(InvalidArgument, match=r"--nodes: 'zz' is no node's original id \(1 of 2 not found\)"):
        read_original_nodes("a,zz", ds)
    with pytest.raises(InvalidArgument, match=r"keeps no original ids"):
        original_ids(SimpleNamespace(path=tmp_path / "none"))
