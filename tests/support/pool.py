"""Helpers of the pool's tests: numbered random subgraphs, and the balance of a pool's counts."""

from __future__ import annotations

from collections.abc import Callable

from saintpipe.core.subgraph import Subgraph
from saintpipe.services.pool.pool import SubgraphPool
from saintpipe.services.pool.synthetic import random_subgraph


def numbered_subgraphs(nodes: int = 16, edges: int = 40, job: str | None = None) -> Callable[..., Subgraph]:
    """A test's ``sg(seq, job, nodes, edges)``: subgraph number ``seq`` of a job, the same for the same ``seq``.

    It is ``random_subgraph(nodes, edges, seed=seq, job_id=job, sequence=seq)``; the arguments here are
    its defaults (without ``job``, every call names the job).
    """

    def sg(seq: int, job: str | None = job, nodes: int = nodes, edges: int = edges) -> Subgraph:
        if job is None:
            raise TypeError("sg() missing the job")
        return random_subgraph(nodes, edges, seed=seq, job_id=job, sequence=seq)

    return sg


# Subgraph ``seq`` of ``job``: 16 nodes, about 40 edges.
sg = numbered_subgraphs()


def assert_balanced(pool: SubgraphPool) -> None:
    """Every entry ever put is acknowledged, waiting, held by a consumer or dead-lettered."""
    s = pool.stats()
    assert s.produced == s.acknowledged + s.depth + s.pending + s.dead_lettered, s
