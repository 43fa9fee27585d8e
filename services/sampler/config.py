"""Sampler configuration: one pydantic model per sampler, a discriminated union on ``kind``.

Defaults are the GraphSAINT paper's: frontier m=1000, n=8000 (eta=2); random
walk r=3000 roots of length h=2; edge budget 4000; node budget 8000; node
clipping to a multiple of 16 (section 6.2).

Example:
    >>> cfg = parse_sampler_config({"kind": "random_walk", "roots": 100})
    >>> cfg.walk_length, config_key(cfg) == config_key(RandomWalkConfig(roots=100))
    (2, True)
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any, Literal, Mapping, Union

import pydantic
from pydantic import Field

from saintpipe.core.config import StrictModel
from saintpipe.core.errors import InvalidArgument

# Budgets count nodes or edges of one subgraph, whose ids are int32: larger values cannot be drawn.
MAX_NODES = 2**31 - 1

ClipMultiple = Annotated[
    int | None,
    Field(ge=1, le=2**20, description="drop random nodes so the node count is a multiple of this (None: no clipping); "
                            "node sets smaller than it are kept whole"),
]
# Cooperative Minibatching's kappa (section 4.2, appendix A.7): the random variates behind a worker's subgraphs
# change completely over kappa consecutive subgraphs, 1/kappa of them per subgraph
# (docs/explanation/sampler.md).
MAX_KAPPA = 2**20
Kappa = Annotated[
    int,
    Field(ge=1, le=MAX_KAPPA, description="dependent minibatches: consecutive subgraphs of a worker share most "
                                          "nodes, renewed over kappa subgraphs (1: independent subgraphs)"),
]
InductionMode = Annotated[
    Literal["oriented", "scan"],
    Field(description="how a node set's edges are found: 'oriented' reads each edge once from its lower-ranked "
                      "end (lists built once per graph, 12-20 bytes per undirected edge; kernels/oriented.py), "
                      "'scan' reads every sampled node's whole row; the subgraphs are the same"),
]
# Fields that do not change the law of one subgraph, left out of config_key: pre-sampling draws independent
# subgraphs whatever kappa is, so the stored normalization is the same; the induction mode changes only how.
_LAW_NEUTRAL = frozenset({"kappa", "induction"})


class FrontierConfig(StrictModel):
    """Frontier sampling (Algorithm 2) on the Dashboard (Algorithms 3 and 4)."""

    kind: Literal["frontier"] = "frontier"
    frontier_size: int = Field(1000, ge=1, le=MAX_NODES,
                               description="m: nodes in the frontier (clamped to the graph's size)")
    node_budget: int = Field(8000, ge=1, le=MAX_NODES, description="n: the sampler runs n - m pop iterations")
    eta: float = Field(2.0, gt=1.0, le=64.0,
                       description="dashboard enlargement factor (length eta * m * d; dashboard = 'pins' only)")
    dashboard: Literal["tree", "pins"] = Field(
        "tree", description="how pops are drawn in proportion to degree (the same law): 'tree', the frontier's "
                            "degrees in a sum tree, O(log m) per pop whatever the degrees; 'pins', the paper's "
                            "dashboard, deg(v) pins written per node added, cleanups as it fills "
                            "(kernels/frontier.py)")
    clip_multiple: ClipMultiple = 16
    kappa: Kappa = 1
    induction: InductionMode = "oriented"

    @pydantic.model_validator(mode="after")
    def _budget_covers_frontier(self) -> "FrontierConfig":
        if self.node_budget < self.frontier_size:
            raise ValueError(
                f"node_budget ({self.node_budget}) must be >= frontier_size ({self.frontier_size})")
        return self


class RandomWalkConfig(StrictModel):
    """Unbiased random walks (Algorithm 5, RW)."""

    kind: Literal["random_walk"] = "random_walk"
    roots: int = Field(3000, ge=1, le=MAX_NODES, description="r: walks, each from a uniformly drawn root")
    walk_length: int = Field(2, ge=0, le=10_000, description="h: steps per walk")
    clip_multiple: ClipMultiple = 16
    kappa: Kappa = 1
    induction: InductionMode = "oriented"


class EdgeConfig(StrictModel):
    """Random edges with p(u, v) proportional to 1/deg(u) + 1/deg(v) (Algorithm 5, Edge)."""

    kind: Literal["edge"] = "edge"
    edge_budget: int = Field(4000, ge=1, le=MAX_NODES, description="edges drawn (with replacement)")
    clip_multiple: ClipMultiple = 16
    kappa: Kappa = 1
    induction: InductionMode = "oriented"


class NodeConfig(StrictModel):
    """Nodes drawn with probability proportional to their degree (GraphSAINT's node sampler), mixed with uniform."""

    kind: Literal["node"] = "node"
    node_budget: int = Field(8000, ge=1, le=MAX_NODES, description="nodes drawn (with replacement)")
    uniform_mix: float = Field(
        0.5, ge=0.0, le=1.0, description="beta: draw from (1 - beta) * degree-proportional + beta * uniform; "
        "beta > 0 bounds the smallest inclusion probability and with it the largest normalization weight "
        "(kernels/node.py; on Cora 0.5 cuts the largest aggregation row sum from 7.6 to 3.4); 0 is GraphSAINT's "
        "sampler exactly")
    clip_multiple: ClipMultiple = 16
    kappa: Kappa = 1
    induction: InductionMode = "oriented"


SamplerConfig = Annotated[
    Union[FrontierConfig, RandomWalkConfig, EdgeConfig, NodeConfig], Field(discriminator="kind")
]
SamplerConfigModel = FrontierConfig | RandomWalkConfig | EdgeConfig | NodeConfig
_ADAPTER: pydantic.TypeAdapter[SamplerConfigModel] = pydantic.TypeAdapter(SamplerConfig)
KINDS: tuple[str, ...] = ("frontier", "random_walk", "edge", "node")
# The samplers whose inclusion probabilities have a closed form (services/sampler/inclusion.py).
EXACT_KINDS: tuple[str, ...] = ("node", "edge")


def parse_sampler_config(data: Mapping[str, Any]) -> SamplerConfigModel:
    """Build the sampler config named by ``data["kind"]``.

    Raises:
        InvalidArgument: naming the field at fault (an unknown kind, a budget < 1, ...).
    """
    try:
        return _ADAPTER.validate_python(dict(data))
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'kind'}: {err['msg']}" for err in exc.errors()
        )
        raise InvalidArgument(f"invalid sampler config: {problems}") from None


def config_key(config: SamplerConfigModel) -> str:
    """A stable name for a sampler configuration: ``<kind>-<16 hex digits of sha256>``.

    Every field that changes the law of one subgraph takes part (clipping
    changes which nodes are sampled); ``kappa`` does not (one subgraph has the
    same law whatever kappa is, and pre-sampling draws independent subgraphs),
    so configs that differ only in kappa share their stored normalization.
    Keys are serialized sorted, so the key is the same across processes and
    versions that keep the fields. Stored normalization is keyed by it.
    """
    payload = json.dumps(config.model_dump(mode="json", exclude=set(_LAW_NEUTRAL)), sort_keys=True,
                         separators=(",", ":"))
    return f"{config.kind}-{hashlib.sha256(payload.encode()).hexdigest()[:16]}"
