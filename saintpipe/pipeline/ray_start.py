"""Starting a private local Ray cluster, tried again when its node does not come up in time."""

from __future__ import annotations

import logging
import time
from typing import Any

log = logging.getLogger(__name__)

# Ray's message when a new raylet did not register with its GCS within its wait (30 s); a bare Exception.
STARTUP_TIMEOUT = "timed out during startup"


def init_local_ray(attempts: int = 3, pause_s: float = 5.0, **init_kwargs: Any) -> None:
    """``ray.init(**init_kwargs)``, again (after ``ray.shutdown``) when the node timed out during start-up.

    On a loaded 2-core machine, right after a previous cluster's shutdown (whose processes take a while
    to go), Ray's wait for the new raylet can run out although nothing is wrong; measured in about one of
    four full test runs. Any other error is raised at once, and the last attempt's too.
    """
    import ray

    for attempt in range(1, attempts + 1):
        try:
            ray.init(**init_kwargs)
            return
        except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception for this
            if STARTUP_TIMEOUT not in str(exc) or attempt == attempts:
                raise
            log.warning("local Ray node did not come up in time (attempt %d of %d); starting it again",
                        attempt, attempts)
            ray.shutdown()
            time.sleep(pause_s)
