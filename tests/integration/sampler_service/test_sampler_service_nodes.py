"""Workers in the pool's ``nodes`` wire: node sets through a real Redis, expanded into the sampler's subgraphs."""

from __future__ import annotations

import threading

from saintpipe.minibatch.expand import SubgraphExpander
from saintpipe.services.dataset.normalization import load_or_estimate
from saintpipe.services.dataset.store import open_dataset
from saintpipe.services.pool.config import PoolConfig
from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.services.sampler.config import parse_sampler_config
from saintpipe.services.sampler.parallel import subgraph_seed
from saintpipe.services.sampler_service.production import Producer
from saintpipe.services.sampler_service.sequence import SequenceCursor
from saintpipe.services.sampler_service.worker import build_sampler, induction_for


def test_the_production_loop_sends_node_sets_that_expand_into_its_subgraphs(redis_server, svc_dataset):
    dataset = open_dataset(svc_dataset)
    config = parse_sampler_config({"kind": "random_walk", "roots": 40})
    norm = load_or_estimate(dataset, config, 8, seed=0, processes=1)
    sampler = build_sampler(config, dataset, norm)
    pool_config = PoolConfig(url=redis_server.url, job_id="nodes-loop", capacity=8, transport="redis")
    pool = SubgraphPool.from_config(pool_config)
    assert pool.wire == "nodes"  # auto, the bytes going through Redis
    producer = Producer(sampler, pool, SequenceCursor(pool_config, 1), job_id="nodes-loop", worker=1, job_seed=11,
                        push_poll_s=0.05, induction=induction_for(dataset, norm))
    assert producer.sends_nodes
    consumer = SubgraphPool(redis_server.url, "nodes-loop")
    expander = SubgraphExpander(dataset)
    stop = threading.Event()
    taken = []

    def consume():
        while len(taken) < 20:
            entry = consumer.get("t", timeout=10, expand=expander)
            taken.append(entry.subgraph)
            consumer.ack(entry.entry_id)
        stop.set()

    reader = threading.Thread(target=consume)
    reader.start()
    producer.run(stop)
    reader.join()
    assert [sg.sequence for sg in taken] == list(range(20))
    for sg in taken:
        expected = sampler.sample(subgraph_seed(11, 1, sg.sequence), job_id="nodes-loop", worker=1,
                                  sequence=sg.sequence)
        assert sg.equals(expected)
    counts = producer.snapshot()
    assert counts.subgraphs >= 20 and counts.nodes > 0 and counts.edges == 0  # edges: induced by trainers
    pool.close()
    consumer.close()


def test_the_service_in_the_nodes_wire_fills_the_pool_with_node_sets(make_service, svc_dataset, drain_pool,
                                                                     redis_server_session):
    service = make_service(workers=1, transport="redis", wire="nodes")
    dataset = open_dataset(svc_dataset)
    expander = SubgraphExpander(dataset)
    with SubgraphPool(redis_server_session.url, service.config.job) as pool:
        got = []
        while len(got) < 3:
            entry = pool.get("t", timeout=60, expand=expander)
            assert entry is not None
            got.append(entry.subgraph)
            pool.ack(entry.entry_id)
    sampler = build_sampler(service.config.sampler, dataset, load_or_estimate(
        dataset, service.config.sampler, service.config.norm_subgraphs, seed=service.config.norm_seed))
    for sg in got:
        assert sg.equals(sampler.sample(subgraph_seed(11, sg.worker, sg.sequence), job_id=service.config.job,
                                        worker=sg.worker, sequence=sg.sequence))
    assert service.stats().workers[0].counters.edges == 0
