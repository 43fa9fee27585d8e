"""Layer-wise inference: row blocks, block cuts, and the outputs against a dense reference and the full pass."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from saintpipe.trainer.config import ModelConfig
from saintpipe.trainer.evaluate import EvalGraph
from saintpipe.trainer.row_blocks import block_bounds, hop_counts, row_block
from saintpipe.trainer.inference import InferenceLimits, LayerwiseInference
from saintpipe.trainer.models import build_model
from saintpipe.trainer.synthetic import random_subgraph


def graph(n: int = 80, f: int = 6, classes: int = 3, hub: bool = True) -> EvalGraph:
    """A random symmetric graph, with node 5 joined to every other node (a hub, as power-law graphs have)."""
    sub = random_subgraph(n, 4.0, 3)
    adj = np.zeros((n, n), dtype=bool)
    for v in range(n):
        adj[v, sub.indices[sub.indptr[v]:sub.indptr[v + 1]]] = True
    if hub:
        adj[5, :] = adj[:, 5] = True
        adj[5, 5] = False
    indptr = np.concatenate([[0], np.cumsum(adj.sum(1))]).astype(np.int64)
    indices = np.nonzero(adj)[1].astype(np.int32)
    rng = np.random.default_rng(0)
    splits = {"train": np.arange(0, 30), "val": np.arange(30, 50), "test": np.arange(50, n)}
    return EvalGraph.from_arrays(indptr, indices, rng.normal(size=(n, f)).astype(np.float32),
                                 rng.integers(0, classes, n), splits)


def dense_adjacency(g: EvalGraph) -> np.ndarray:
    a = np.zeros((g.num_nodes, g.num_nodes))
    for v in range(g.num_nodes):
        a[v, g.indices[g.indptr[v]:g.indptr[v + 1]]] = 1.0
    return a


def test_a_row_block_holds_its_rows_first_then_each_neighbour_once():
    g = graph()
    scratch = np.full(g.num_nodes, -1, dtype=np.int32)
    sources, bptr, bidx = row_block(g.indptr, g.indices, 3, 11, scratch)
    assert sources[:8].tolist() == list(range(3, 11))
    assert len(set(sources.tolist())) == sources.size  # each source once
    assert bptr[-1] == g.indptr[11] - g.indptr[3]
    for i, v in enumerate(range(3, 11)):
        cols = bidx[bptr[i]:bptr[i + 1]]
        assert (np.diff(cols) > 0).all()  # sorted local ids
        assert sorted(sources[cols].tolist()) == g.indices[g.indptr[v]:g.indptr[v + 1]].tolist()
    assert set(sources[8:].tolist()) == set(g.indices[g.indptr[3]:g.indptr[11]].tolist()) - set(range(3, 11))
    assert (scratch == -1).all()  # restored for the next block


def test_block_cuts_respect_rows_and_entries_and_a_heavy_row_stands_alone():
    g = graph()
    cuts = block_bounds(g.indptr, 10, 40)
    assert cuts[0] == 0 and cuts[-1] == g.num_nodes and (np.diff(cuts) > 0).all()
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        rows, units = b - a, b - a + g.indptr[b] - g.indptr[a]
        assert rows <= 10
        assert units <= 40 or rows == 1
    assert [5, 6] in [[int(a), int(b)] for a, b in zip(cuts[:-1], cuts[1:], strict=True)]  # the hub: 79 entries


def test_hop_counts_equal_the_sets_they_count():
    g = graph()
    seen = np.zeros(g.num_nodes, dtype=np.int32)
    for stamp, (a, b) in enumerate([(0, 3), (3, 11), (11, 12)], start=1):  # the same nodes meet again: stamps
        first = np.union1d(np.arange(a, b), g.indices[g.indptr[a]:g.indptr[b]])
        second = np.concatenate([g.indices[g.indptr[v]:g.indptr[v + 1]] for v in first])
        assert hop_counts(g.indptr, g.indices, a, b, seen, stamp) == (first.size, np.union1d(first, second).size)


@pytest.mark.parametrize("arch", ["gcn", "sage"])
def test_logits_and_embeddings_equal_a_dense_reference(arch):
    g = graph()
    torch.manual_seed(1)
    model = build_model(ModelConfig(arch=arch, hidden=[8, 4]), g.feature_dim, 3, False)
    a = dense_adjacency(g)
    d = a.sum(1)
    mean = a / np.maximum(d, 1)[:, None]  # Ã = D⁻¹A
    hat = (np.eye(g.num_nodes) + a) / (1 + d)[:, None]  # Â = (I+D)⁻¹(I+A)
    p = {k: v.detach().double().numpy() for k, v in model.state_dict().items()}
    h = g.gather(np.arange(g.num_nodes)).astype(np.float64)
    hidden = []
    for i in range(2):
        pre = f"layers.{i}."
        if arch == "gcn":
            z = hat @ h @ p[pre + "weight"]
        else:
            z = np.concatenate([mean @ h @ p[pre + "weight_neigh"], h @ p[pre + "weight_self"]], axis=1)
        h = np.maximum(z + p[pre + "bias"], 0.0)
        hidden.append(h)
    logits = h @ p["classifier"] + p["classifier_bias"]
    # Blocks of at most 7 rows, every layer's output in a memory-mapped file (spill_bytes=0).
    infer = LayerwiseInference(model, g, InferenceLimits(block_rows=7, spill_bytes=0))
    np.testing.assert_allclose(infer.logits(), logits, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(infer.embeddings(1), hidden[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(infer.embeddings(), hidden[1], rtol=1e-4, atol=1e-5)
    assert model.training  # the mode it found


@pytest.mark.parametrize("sliced", [True, False], ids=["sliced", "gathered"])
@pytest.mark.parametrize("arch,extra", [("gat", {"heads": 2}), ("mixhop", {"mixhop_powers": [0, 1, 3]}),
                                        ("gcn", {"classifier": "graph"}), ("sage", {"classifier": "graph"})])
def test_every_architecture_equals_the_one_pass_forward_with_tiny_blocks(arch, extra, sliced):
    g = graph()
    torch.manual_seed(2)
    hidden = [6, 3] if arch == "mixhop" else [8, 4]  # widths divisible by the paths
    model = build_model(ModelConfig(arch=arch, hidden=hidden, **extra), g.feature_dim, 3, False).eval()
    with torch.no_grad():
        full = model(g.full_batch()).numpy()
        hidden = model.embed(g.full_batch()).numpy()
    # block_bytes=1: every block is one row (the budget's floor), the hub's included
    infer = LayerwiseInference(model, g, InferenceLimits(block_rows=5, block_bytes=1, spill_bytes=0))
    infer.sliced = sliced  # gathered: what a GPU gets (GAT and a graph classifier always are)
    np.testing.assert_allclose(infer.logits(), full, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(infer.embeddings(), hidden, rtol=1e-4, atol=1e-5)


def test_embeddings_go_into_the_given_array_and_the_layer_is_checked(tmp_path):
    g = graph(hub=False)
    model = build_model(ModelConfig(arch="sage", hidden=[8, 4]), g.feature_dim, 3, False)
    out = np.lib.format.open_memmap(tmp_path / "emb.npy", mode="w+", dtype=np.float32, shape=(g.num_nodes, 8))
    infer = LayerwiseInference(model, g)
    assert infer.embeddings(1, out=out) is out
    out.flush()
    np.testing.assert_allclose(np.load(tmp_path / "emb.npy"), infer.embeddings(1), rtol=1e-6)
    with pytest.raises(ValueError, match="layer 3: the model has graph layers 1 to 2"):
        infer.embeddings(3)
