"""GraphSAINT's normalization coefficients of one graph and sampler configuration: what a sampler applies.

A :class:`~saintpipe.services.sampler.sampler.Sampler` given a
:class:`Normalization` weights each subgraph edge by ``1 / (deg(v) * alpha)``
and each node's loss by its loss coefficient. How the coefficients are
estimated (pre-sampling) is :mod:`saintpipe.services.sampler.normalization`;
how they are stored with a dataset is :mod:`saintpipe.services.dataset.normalization`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from saintpipe.core.errors import InvalidArgument


@dataclass(frozen=True)
class Normalization:
    """Per-node loss coefficients and per-edge aggregator coefficients of one graph and sampler config."""

    loss_coefficients: np.ndarray  # float32 [N]
    aggregator_coefficients: np.ndarray  # float32 [E], alpha at full-graph CSR positions
    num_subgraphs: int = 0  # pre-sampled subgraphs; online: how many each sampler counts (0: no end)
    config_key: str = ""
    seed: int = 0
    # How the coefficients were made: "exact" (closed form), "prior", "smoothed" (pre-sampled counts shrunk
    # toward the prior), "online" (the prior, refined by each sampler from what it produces, see
    # saintpipe.services.sampler.online) or "reference" (pre-sampled counts with GraphSAINT's floors).
    method: str = "reference"
    strength: float = 0.0  # smoothed and online: the prior's weight in pseudo-subgraphs
    # online: the /dev/shm file of the state the sampler service's workers share (online_shared); "" or a
    # file this host does not have: each sampler keeps its own.
    shared_state: str = ""

    def check_graph(self, num_nodes: int, num_edges: int) -> None:
        """Raise InvalidArgument unless the arrays fit a graph of this size."""
        if self.loss_coefficients.shape != (num_nodes,):
            raise InvalidArgument(f"normalization: loss_coefficients has shape "
                                  f"{self.loss_coefficients.shape}, the graph has {num_nodes} nodes")
        if self.aggregator_coefficients.shape != (num_edges,):
            raise InvalidArgument(f"normalization: aggregator_coefficients has shape "
                                  f"{self.aggregator_coefficients.shape}, the graph has {num_edges} edges")
