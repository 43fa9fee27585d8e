"""How the sweep words what ended a trial's trainer, from the exception Ray Tune kept for it: a dead actor
process ("killed"), or the first line of what the trainer raised."""

from __future__ import annotations

from ray.exceptions import ActorDiedError, RayTaskError

from saintpipe.core.errors import SaintpipeTimeout
from saintpipe.sweep.driver import _reason


class KeptError:
    """Stands in for a Tune Trial: only the pickled error it kept (pure wording logic)."""

    def __init__(self, error: BaseException | None) -> None:
        self.error = error

    def get_pickled_error(self) -> BaseException | None:
        return self.error


def test_a_dead_actor_process_reads_killed():
    assert _reason(KeptError(ActorDiedError())) == "trainer killed"
    assert _reason(KeptError(None)) == "trainer killed"  # Tune kept nothing: the process went


def test_an_exception_reads_as_its_type_and_first_line():
    cause = SaintpipeTimeout("no subgraph within 60 s\n(the pool is empty)")
    error = RayTaskError("train", "Traceback ...", cause)
    assert _reason(KeptError(error)) == "trainer failed (SaintpipeTimeout: no subgraph within 60 s)"
    assert _reason(KeptError(ValueError())) == "trainer failed (ValueError)"
