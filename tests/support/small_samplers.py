"""Sampler parameters small enough for a 1,500-node demo graph: every kind draws a few hundred nodes."""

from __future__ import annotations

SMALL_SAMPLERS = {
    "random_walk": {"roots": 60, "walk_length": 2},
    "frontier": {"frontier_size": 20, "node_budget": 300},
    "edge": {"edge_budget": 150},
    "node": {"node_budget": 250},
}
