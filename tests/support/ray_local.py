"""A private local Ray cluster for the integration tests."""

from __future__ import annotations

import time


def start_local_ray(attempts: int = 3) -> None:
    """``ray.init`` of a private 2-CPU cluster, tried again when its node does not come up in time.

    Ray waits 30 s for a new raylet to register with its GCS; on a loaded 2-core machine, right after a
    previous cluster's shutdown (whose processes take a while to go), that wait can run out.
    """
    import ray

    for attempt in range(1, attempts + 1):
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            return
        except Exception as exc:  # Ray raises a bare Exception for this
            if "timed out during startup" not in str(exc) or attempt == attempts:
                raise
            ray.shutdown()
            time.sleep(5)
