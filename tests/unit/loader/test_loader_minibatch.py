"""Minibatches from subgraphs: orientation of the edges, masks, loss, the project's batch, PyG's Data."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from saintpipe.core.subgraph import Subgraph
from saintpipe.loader.minibatch import Minibatch
from saintpipe.minibatch.batch import build_minibatch
from saintpipe.loader.pyg import to_pyg, with_self_loops

# A path 0-1-2 plus 1-3, as the subgraph of global nodes [2, 5, 7, 9] (local 0..3); asymmetric weights, so
# an edge read the wrong way round gives another result.
INDPTR = np.array([0, 1, 4, 5, 6], dtype=np.int64)
INDICES = np.array([1, 0, 2, 3, 1, 1], dtype=np.int32)
WEIGHTS = np.array([0.9, 0.2, 0.3, 0.4, 0.7, 0.6], dtype=np.float32)
IDS = np.array([2, 5, 7, 9], dtype=np.int64)


def transposed(indptr, indices, w):
    """Weight of (row u, column v) at the position of (row v, column u)."""
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    at = {(int(r), int(c)): k for k, (r, c) in enumerate(zip(rows, indices))}
    return np.array([w[at[(int(c), int(r))]] for r, c in zip(rows, indices)], dtype=np.float32)


def subgraph(loss=(0.5, 0.25, 0.125, 1.0)) -> Subgraph:
    return Subgraph(node_ids=IDS, indptr=INDPTR, indices=INDICES, edge_weights=WEIGHTS,
                    edge_weights_t=transposed(INDPTR, INDICES, WEIGHTS),
                    loss_weights=np.array(loss, dtype=np.float32), job_id="j", worker=1, sequence=3)


def batch(**kw):
    n = 10
    labels = np.arange(n, dtype=np.int64) % 3
    labels[9] = -1
    train = np.zeros(n, dtype=bool)
    train[[2, 5, 9]] = True
    degrees = np.arange(n) + 1
    features = np.arange(4 * 2, dtype=np.float32).reshape(4, 2)
    return build_minibatch(subgraph(**kw), features, labels, train, degrees, entry_id="1-0", step=4, epoch=1,
                           kind=Minibatch)  # the loader's, with graph_batch()


def dense(b) -> torch.Tensor:
    """Ã with Ã[v, u] = weight of the message u -> v."""
    a = torch.zeros(b.num_nodes, b.num_nodes)
    a[b.edge_index[1], b.edge_index[0]] = b.edge_weight
    return a


def test_fields_follow_the_subgraph_and_the_dataset_arrays():
    b = batch()
    assert b.num_nodes == 4 and b.num_edges == 6 and (b.step, b.epoch, b.entry_id) == (4, 1, "1-0")
    assert b.edge_index.dtype == torch.int64 and b.node_ids.tolist() == IDS.tolist()
    # edge_index[1] is the aggregating node (CSR row), edge_index[0] its neighbour (CSR column).
    assert b.edge_index[1].tolist() == [0, 1, 1, 1, 2, 3] and b.edge_index[0].tolist() == INDICES.tolist()
    assert b.y.tolist() == [2, 2, 1, -1] and b.train_mask.tolist() == [True, True, False, True]
    assert b.degree.tolist() == [3.0, 6.0, 8.0, 10.0]
    # Only training nodes carry loss, whatever the sampler weighted.
    assert b.loss_weight.tolist() == [0.5, 0.25, 0.0, 1.0]
    assert b.num_labelled == 3


def test_loss_is_the_weighted_mean_over_loss_carrying_nodes():
    b = batch()
    logits = torch.randn(4, 3)
    per_node = torch.nn.functional.cross_entropy(logits, b.y.clamp(min=0), reduction="none")
    expected = (b.loss_weight * per_node).sum() / b.loss_weight.sum()
    torch.testing.assert_close(b.loss(logits), expected)


def test_graph_batch_aggregates_as_the_edge_index_says():
    b = batch()
    gb = b.graph_batch()
    x = torch.randn(4, 5)
    torch.testing.assert_close(gb.adj.matmul(x), dense(b) @ x)
    torch.testing.assert_close(gb.adj.matmul_t(x), dense(b).T @ x)  # edge_weight_t is the transpose's weights
    assert gb.loss_weights.tolist() == b.loss_weight.tolist() and gb.node_ids.tolist() == IDS.tolist()


def test_self_loops_are_the_projects_gcn_renormalization():
    b = batch()
    edge_index, weight = with_self_loops(b)
    a_hat = torch.zeros(4, 4)
    a_hat.index_put_((edge_index[1], edge_index[0]), weight, accumulate=True)
    x = torch.randn(4, 5)
    torch.testing.assert_close(a_hat @ x, b.graph_batch().adj_hat.matmul(x))


def test_to_pyg_matches_the_projects_aggregation():
    pytest.importorskip("torch_geometric")
    from torch_geometric.nn import GCNConv

    b = batch()
    data = to_pyg(b, self_loops=True)
    assert data.num_nodes == 4 and data.node_norm is b.loss_weight and data.n_id.tolist() == IDS.tolist()
    assert data.train_mask.tolist() == b.train_mask.tolist() and data.edge_index.shape == (2, 6 + 4)
    conv = GCNConv(5, 5, normalize=False, bias=False)
    with torch.no_grad():
        conv.lin.weight.copy_(torch.eye(5))
    x = torch.randn(4, 5)
    torch.testing.assert_close(conv(x, data.edge_index, data.edge_weight), b.graph_batch().adj_hat.matmul(x))
    plain = to_pyg(b)
    assert plain.edge_index is b.edge_index and plain.edge_weight is b.edge_weight


def test_to_pyg_without_pyg_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_geometric", None)
    monkeypatch.setitem(sys.modules, "torch_geometric.data", None)
    with pytest.raises(ImportError, match=r"saintpipe\[pyg\]"):
        to_pyg(batch())


def test_features_that_do_not_fit_and_ids_outside_the_dataset_are_refused():
    labels, train, degrees = np.zeros(10, dtype=np.int64), np.zeros(10, dtype=bool), np.ones(10)
    with pytest.raises(ValueError, match="3 feature rows for 4 nodes"):
        build_minibatch(subgraph(), np.zeros((3, 2), np.float32), labels, train, degrees)
    with pytest.raises(ValueError, match="not the samplers'"):
        build_minibatch(subgraph(), np.zeros((4, 2), np.float32), labels[:8], train[:8], degrees[:8])


def test_to_keeps_every_field():
    b = batch()
    moved = b.to("cpu")
    assert moved.entry_id == b.entry_id and torch.equal(moved.edge_index, b.edge_index)
    assert "nodes=4, edges=6" in repr(b)
