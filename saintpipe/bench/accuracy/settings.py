"""The settings of ``saintpipe bench accuracy``'s subgraph runs: samplers, their parameters, normalization.

Apart from :mod:`saintpipe.bench.accuracy.experiment` so that the command's flags
and defaults are known without importing torch (``saintpipe --help`` stays fast).
"""

from __future__ import annotations

from dataclasses import dataclass

from saintpipe.core.errors import InvalidArgument

SAMPLERS: tuple[str, ...] = ("random_walk", "node", "edge", "frontier")
NORMALIZATIONS: tuple[str, ...] = ("auto", "exact", "prior", "smoothed", "online", "reference", "none")
# Test accuracy of the GCN paper (Kipf and Welling, ICLR 2017, table 2), for the report.
PUBLISHED_GCN = {"cora": 0.815, "citeseer": 0.703}


@dataclass(frozen=True)
class SamplingSetup:
    """The four samplers' parameters and the normalization of the subgraph runs.

    The defaults give subgraphs of about 650 nodes on Cora and CiteSeer (a quarter of the
    graph, about 37 resp. 25 training nodes) for every sampler, so the samplers are compared
    at the same subgraph size (measured sizes in docs/benchmarks/accuracy.md).

    Attributes:
        roots, walk_length: the random walk sampler (r, h).
        node_budget: nodes drawn by the node sampler (with replacement).
        edge_budget: edges drawn by the edge sampler (with replacement).
        frontier_size, frontier_budget: the frontier sampler's m and n.
        normalization: ``auto`` (``exact`` for node and edge, ``smoothed`` for random walk and frontier),
            an estimator of :data:`~saintpipe.services.sampler.normalization.NORMALIZATION_METHODS`,
            ``online`` (the prior, refined from the subgraphs the run consumes) or ``none``.
        norm_subgraphs: pre-sampled subgraphs of ``smoothed`` and ``reference``.
    """

    roots: int = 300
    walk_length: int = 2
    node_budget: int = 850
    edge_budget: int = 400
    frontier_size: int = 300
    frontier_budget: int = 1150
    normalization: str = "auto"
    norm_subgraphs: int = 200

    def sampler_config(self, kind: str):
        """The sampler configuration of ``kind`` (``random_walk``, ``node``, ``edge`` or ``frontier``)."""
        from saintpipe.services.sampler.config import EdgeConfig, FrontierConfig, NodeConfig, RandomWalkConfig

        if kind == "random_walk":
            return RandomWalkConfig(roots=self.roots, walk_length=self.walk_length)
        if kind == "node":
            return NodeConfig(node_budget=self.node_budget)
        if kind == "edge":
            return EdgeConfig(edge_budget=self.edge_budget)
        if kind == "frontier":
            return FrontierConfig(frontier_size=self.frontier_size, node_budget=self.frontier_budget)
        raise InvalidArgument(f"unknown sampler {kind!r}; samplers: {', '.join(SAMPLERS)}")

    def method(self, kind: str) -> str:
        """The normalization of ``kind``'s runs, ``auto`` resolved (``none``: no normalization)."""
        if self.normalization == "auto":
            return "exact" if kind in ("node", "edge") else "smoothed"
        return self.normalization
