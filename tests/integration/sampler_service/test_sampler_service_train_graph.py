"""``[samplers] graph = "train"`` on the real service: no validation or test node ever reaches the pool.

Every sampler kind, with the estimators that apply to it, through a real Redis and real Ray workers; each
subgraph carries global ids of training nodes only, and exactly the edges the full graph induces on them.
"""

from __future__ import annotations

import numpy as np
import pytest

from saintpipe.core.subgraph import Subgraph
from saintpipe.services.dataset import train_graph as tg
from saintpipe.services.dataset.demo import generate_demo
from saintpipe.minibatch.expand import SubgraphExpander
from saintpipe.services.dataset.normalization import load_stored
from saintpipe.services.dataset.sample_graph import open_sample_graph
from saintpipe.services.dataset.store import open_dataset, write_dataset
from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.services.sampler.parallel import subgraph_seed
from saintpipe.services.sampler_service.worker import build_sampler

SUBGRAPHS = 40
CASES = {
    # kind: (sampler parameters, estimator, pool wire the service should end up with)
    "node": ({"kind": "node", "node_budget": 200}, "exact", "nodes"),
    "edge": ({"kind": "edge", "edge_budget": 100}, "smoothed", "nodes"),
    "random_walk": ({"kind": "random_walk", "roots": 40, "walk_length": 2, "kappa": 4}, "online", "full"),
    "frontier": ({"kind": "frontier", "frontier_size": 20, "node_budget": 200}, "reference", "nodes"),
}


def induced(indptr: np.ndarray, indices: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR the full graph induces on the sorted ``ids`` (local ids), the slow obvious way."""
    rows, counts = [], [0]
    for v in ids:
        nbrs = np.asarray(indices[indptr[v]:indptr[v + 1]], dtype=np.int64)
        kept = nbrs[np.isin(nbrs, ids)]
        rows.append(np.searchsorted(ids, kept))
        counts.append(kept.size)
    return np.cumsum(counts), np.concatenate(rows) if rows else np.empty(0, dtype=np.int64)


def drain(url: str, job: str, expander: SubgraphExpander, count: int) -> list[Subgraph]:
    out = []
    with SubgraphPool(url, job) as pool:
        while len(out) < count:
            entry = pool.get("test-consumer", timeout=60, expand=expander)
            assert entry is not None, f"only {len(out)} of {count} subgraphs arrived"
            out.append(entry.subgraph)
            pool.ack(entry.entry_id)
    return out


def check_only_training_nodes_and_induced_edges(dataset, subgraphs: list[Subgraph]) -> None:
    train = np.zeros(dataset.num_nodes, dtype=bool)
    train[dataset.splits["train"]] = True
    seen = np.zeros(dataset.num_nodes, dtype=bool)
    for sg in subgraphs:
        ids = np.asarray(sg.node_ids)
        assert (np.diff(ids) > 0).all()
        assert train[ids].all(), f"val/test node {ids[~train[ids]][:5]} in subgraph {sg.worker}/{sg.sequence}"
        indptr, indices = induced(dataset.indptr, dataset.indices, ids)
        assert np.array_equal(sg.indptr, indptr) and np.array_equal(sg.indices, indices)
        assert sg.loss_weights.min() > 0  # every node of the training graph trains
        seen[ids] = True
    assert seen.sum() > 0.5 * train.sum()  # the draws cover the training graph, not a corner of it


@pytest.mark.parametrize("kind", CASES)
def test_no_validation_or_test_node_is_ever_sampled(make_service, svc_dataset, redis_server_session, kind):
    sampler, method, wire = CASES[kind]
    service = make_service(workers=2, transport="redis", graph="train", sampler=sampler, normalization=method,
                           norm_subgraphs=8)
    assert service.graph == "train" and (service._wire or service._pool.wire) == wire
    dataset = open_dataset(svc_dataset)
    got = drain(redis_server_session.url, service.config.job, SubgraphExpander(dataset), SUBGRAPHS)
    check_only_training_nodes_and_induced_edges(dataset, got)
    if wire == "nodes":
        # The trainer's induction (training graph, stored coefficients) equals the workers' own draw.
        graph = open_sample_graph(dataset, "train")
        norm = load_stored(graph, service.config.sampler, service.config.norm_subgraphs if method != "exact" else 0,
                           service.config.norm_seed if method != "exact" else 0, method=method)
        assert norm is not None and norm.loss_coefficients.shape == (graph.num_nodes,)
        for sg in got[:10]:
            again = build_sampler(service.config.sampler, graph, norm, chain=0).sample(
                subgraph_seed(service.config.seed, sg.worker, sg.sequence), job_id=service.config.job,
                worker=sg.worker, sequence=sg.sequence)
            assert sg.equals(again)
    assert service.failure is None


def test_a_read_only_dataset_sends_the_training_graph_through_the_object_store(
        make_service, tmp_path, redis_server_session, monkeypatch, caplog):
    path = tmp_path / "ro"
    write_dataset(path, **generate_demo(num_nodes=2000, feature_dim=4, seed=8))

    def read_only(target):  # what creating a folder in a read-only dataset directory raises
        raise PermissionError(30, "Read-only file system", str(target))

    monkeypatch.setattr(tg, "replacing_dir", read_only)
    service = make_service(workers=2, transport="redis", data=path, graph="train", normalization="exact",
                           sampler={"kind": "node", "node_budget": 150})
    assert not (path / "train_graph").exists() and "keeping it in memory" in caplog.text
    assert service._wire == "full"  # trainers could not read the graph the coefficients index
    dataset = open_dataset(path)
    got = drain(redis_server_session.url, service.config.job, SubgraphExpander(dataset), 20)
    check_only_training_nodes_and_induced_edges(dataset, got)
