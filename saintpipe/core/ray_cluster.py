"""Starting or joining Ray: the one way every entry point does it.

:func:`connect_ray` joins a cluster by address (its token checked first) or
starts a private local one, and a local start whose node did not come up in
time is tried again (:func:`init_local_ray`). ``saintpipe run``, the sampler
service, ``serve trainer`` and the benchmarks all start Ray through it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from typing import Any

log = logging.getLogger(__name__)

# Ray's messages when a new node did not come up within its waits: the raylet did not register with its GCS
# (30 s; a bare Exception), or the GCS did not publish its port (RAY_gcs_server_port_wait_time_s, 30 s; a
# RuntimeError naming the session's gcs_server_port file).
STARTUP_TIMEOUTS = ("timed out during startup", "Timed out waiting for file")

# Ray's processes connect to the raylet and its object store in up to 10 attempts 1 s apart: a new node's raylet
# that tried before its own store listened waited a whole second (1 s added to `ray.init` in 5 of 10 starts
# measured here, 0 of 7 with these). Ten times as many attempts, ten times closer: the same 10 s in all. Set for a
# local cluster only, before its processes start (they read these at start-up); a value already set is kept.
LOCAL_RAY_ENV = {"RAY_raylet_client_num_connect_attempts": "100",
                 "RAY_raylet_client_connect_timeout_milliseconds": "100"}


def connect_ray(address: str | None = None, *, num_cpus: int | None = None, log_to_driver: bool = True,
                **init_kwargs: Any) -> bool:
    """Join the Ray cluster at ``address``, or start a private local one; returns whether this call did either.

    Nothing happens (False) when this process is already connected: whoever connected it shuts it down.
    ``address`` None or ``"local"``: always a new private cluster of ``num_cpus`` logical CPUs (never one
    another driver left running), started again when its node times out during start-up. Any other
    address (``"auto"``, ``host:port``, ``ray://...``) is joined after the cluster token is checked.
    ``init_kwargs`` go to ``ray.init`` (``logging_level``, ``configure_logging``, ...); the dashboard stays off.

    Raises:
        ServiceUnavailable: the cluster cannot be started or joined (the message names the address).
        ConfigError: a cluster token left at its placeholder.
    """
    import ray

    from saintpipe.core.credentials import check_ray_token
    from saintpipe.core.errors import ServiceUnavailable

    if ray.is_initialized():
        return False
    local = address in (None, "local")
    if not local:
        check_ray_token()  # a cluster token left at the .env.example placeholder: refuse it, say so
    try:
        if local:
            for name, value in LOCAL_RAY_ENV.items():
                os.environ.setdefault(name, value)
            with _quiet_token_notice():
                init_local_ray(address="local", num_cpus=num_cpus, include_dashboard=False,
                               log_to_driver=log_to_driver, **init_kwargs)
        else:
            ray.init(address=address, include_dashboard=False, log_to_driver=log_to_driver, **init_kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ServiceUnavailable(f"ray: cannot start or join {address or 'a local cluster'}: {exc}") from exc
    return True


# The logger of Ray's notice, at every new local cluster's start, that it turned token authentication on and how
# to turn it off (its other warning, that a cluster runs without it, is never dropped).
_TOKEN_NOTICE_LOGGER = "ray._private.authentication.authentication_token_setup"


class _TokenNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Token authentication is enabled")


@contextlib.contextmanager
def _quiet_token_notice() -> Any:
    """Without Ray's notice that a new local cluster uses token authentication: a private cluster should, and the
    notice, on stderr at every run, invites the user to turn it off."""
    notice = logging.getLogger(_TOKEN_NOTICE_LOGGER)
    quiet = _TokenNotice()
    notice.addFilter(quiet)
    try:
        yield
    finally:
        notice.removeFilter(quiet)


def init_local_ray(attempts: int = 3, pause_s: float = 5.0, **init_kwargs: Any) -> None:
    """``ray.init(**init_kwargs)``, again (after ``ray.shutdown``) when the node timed out during start-up.

    On a loaded 2-core machine, right after a previous cluster's shutdown (whose processes take a while
    to go), Ray's wait for the new raylet can run out although nothing is wrong; measured in about one of
    four full test runs. Its wait for the new GCS's port file ran out once in a full test run too. Any other
    error is raised at once, and the last attempt's too.
    """
    import psutil
    import ray

    me = psutil.Process()
    for attempt in range(1, attempts + 1):
        before = {p.pid for p in me.children(recursive=True)}
        try:
            ray.init(**init_kwargs)
            return
        except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception for this
            if not any(timeout in str(exc) for timeout in STARTUP_TIMEOUTS) or attempt == attempts:
                raise
            log.warning("local Ray node did not come up in time (attempt %d of %d); starting it again",
                        attempt, attempts)
            ray.shutdown()
            _stop_new_children(me, before)
            time.sleep(pause_s)


def _stop_new_children(me: Any, before: set[int], timeout_s: float = 10.0) -> None:
    """Stop the processes the failed attempt started (its GCS, raylet, dashboard, monitors): a node that did
    not come up was never Ray's global node, so ``ray.shutdown`` does not know them and they would outlive us.
    Only Ray's: the local run starts Redis and the feature shards meanwhile, on other threads."""
    import psutil

    started = [p for p in me.children(recursive=True) if p.pid not in before and _is_rays(p)]
    for p in started:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(started, timeout=timeout_s)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()


def _is_rays(process: Any) -> bool:
    """Whether a child process is one of Ray's: its own binaries and scripts live in the ray package."""
    import psutil

    try:
        command = " ".join(process.cmdline())
        return f"{os.sep}ray{os.sep}" in command or process.name() in ("gcs_server", "raylet")
    except psutil.Error:
        return False
