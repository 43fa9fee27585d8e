"""A private local Ray cluster for the integration tests."""

from __future__ import annotations

from saintpipe.core.ray_cluster import init_local_ray


def start_local_ray(attempts: int = 3) -> None:
    """A private 2-CPU cluster, started again when its node does not come up in time (see init_local_ray)."""
    init_local_ray(attempts=attempts, num_cpus=2, include_dashboard=False, log_to_driver=False)
