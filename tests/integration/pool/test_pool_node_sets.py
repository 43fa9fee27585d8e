"""Node sets through a real Redis pool (wire ``nodes``): expanded by the consumer into the sampler's subgraphs."""

from __future__ import annotations

import numpy as np
import pytest

from saintpipe.core.errors import ConfigError
from saintpipe.core.subgraph import SubgraphNodes
from saintpipe.protos import subgraph_pb2
from saintpipe.services.dataset.demo import generate_demo
from saintpipe.minibatch.expand import SubgraphExpander
from saintpipe.services.dataset.normalization import load_or_estimate
from saintpipe.services.dataset.store import open_dataset, write_dataset
from saintpipe.services.pool.codec import schema
from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.services.sampler.config import parse_sampler_config
from saintpipe.services.sampler_service.worker import build_sampler, induction_for


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    """A dataset with a stored normalization, its sampler, and the induction its node sets carry."""
    path = tmp_path_factory.mktemp("compact") / "demo"
    write_dataset(path, **generate_demo(num_nodes=1200, feature_dim=4, seed=5))
    dataset = open_dataset(path)
    config = parse_sampler_config({"kind": "random_walk", "roots": 40})
    norm = load_or_estimate(dataset, config, 10, seed=0, processes=1)
    return dataset, build_sampler(config, dataset, norm), induction_for(dataset, norm)


def out_of_range_entry(induction, job: str) -> bytes:
    """A well-formed version-2 message (valid checksum) whose last id lies beyond the graph it names."""
    gaps = np.array([1, induction.graph_nodes - 1], dtype="<u4").tobytes()  # ids 0, 1, graph_nodes
    ind = (induction.graph_nodes, induction.graph_edges, induction.normalization, induction.norm_subgraphs,
           induction.norm_seed, induction.train_nodes)
    meta = (job, 0, 99, 0)
    msg = subgraph_pb2.Subgraph(
        format_version=2, job_id=job, sequence=99, checksum=schema.checksum_nodes(meta, 3, 0, 4, gaps, ind),
        nodes=subgraph_pb2.NodeSet(count=3, first=0, gap_bytes=4, gaps=gaps),
        induction=subgraph_pb2.Induction(**dict(zip(
            ("graph_nodes", "graph_edges", "normalization", "norm_subgraphs", "norm_seed", "train_nodes"), ind))))
    return msg.SerializeToString()


def test_node_sets_put_by_a_producer_come_out_of_a_consumer_as_the_sampler_s_subgraphs(redis_server, graph):
    dataset, sampler, induction = graph
    job = "compact"
    with SubgraphPool(redis_server.url, job, capacity=8, wire="nodes") as producer, \
            SubgraphPool(redis_server.url, job) as consumer:
        assert producer.wire == "nodes"
        for seq in range(3):
            producer.put(SubgraphNodes(sampler.sample_nodes(seq), induction, job_id=job, worker=2, sequence=seq,
                                       seed=seq))
        producer.put_encoded(out_of_range_entry(induction, job))
        producer.put_nowait(SubgraphNodes(sampler.sample_nodes(3), induction, job_id=job, worker=2, sequence=3,
                                          seed=3))
        producer.settle()
        # The bytes Redis holds are the node set's: a few hundred, where the whole subgraph takes kilobytes.
        client = redis_server.client()
        stored = [client.strlen(k) for k in client.scan_iter(f"saintpipe:pool:{{{job}}}:sg:*")]
        assert len(stored) == 5 and max(stored) < 1000

        expander = SubgraphExpander(dataset)
        got = []
        while len(got) < 4:
            entry = consumer.get("trainer-0", timeout=5, expand=expander)
            assert entry is not None
            got.append(entry.subgraph)
            consumer.ack(entry.entry_id)
        for sg in got:
            expected = sampler.sample(sg.seed, job_id=job, worker=2, sequence=sg.sequence)
            assert sg.equals(expected)
            assert sg.num_edges > 0
        assert [sg.sequence for sg in got] == [0, 1, 2, 3]
        # The hostile entry went to the dead-letter stream on the way, with the field at fault.
        dead = consumer.dead_letters()
        assert len(dead) == 1 and "out of range" in dead[0].reason and "nodes" in dead[0].reason
        stats = consumer.stats()
        assert (stats.acknowledged, stats.dead_lettered) == (4, 1)


def test_a_consumer_that_cannot_expand_leaves_the_entry_for_another(redis_server, graph):
    _, sampler, induction = graph
    job = "compact-noexpand"
    with SubgraphPool(redis_server.url, job, visibility_timeout=0.2) as pool:
        pool.put(SubgraphNodes(sampler.sample_nodes(7), induction, job_id=job, sequence=7, seed=7))
        with pytest.raises(ConfigError, match="node set .* cannot induce it"):
            pool.get("no-dataset", timeout=5)
        assert pool.stats().pending == 1 and pool.stats().dead_lettered == 0  # still there, not dead-lettered
