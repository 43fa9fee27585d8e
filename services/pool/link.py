"""One pool object's round trips to Redis: reconnects, scripts reloaded after a restart, queued acks sent along."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import redis
from saintpipe.services.pool.acks import AckQueue
from saintpipe.services.pool.connection import (
    ReconnectPolicy,
    call_with_reconnect,
    make_client,
    translate_error,
    wrong_type_error,
)
from saintpipe.services.pool.keys import JobKeys, log
from saintpipe.services.pool.resp import Connections, raise_first_error
from saintpipe.services.pool.scripts import SCRIPTS

from saintpipe.core.errors import StateCorrupted

T = TypeVar("T")

# Packed commands, or a function that packs them afresh for every attempt.
Commands = list[list] | Callable[[], list[list]]


class RedisLink:
    """The connections of one pool object, and every round trip made on them.

    Args:
        url: Redis URL.
        job_id: the job (named in errors and logs).
        reconnect: backoff and deadline while Redis is unreachable.
        socket_timeout: seconds one Redis call may take.
        keys: the job's keys (queued acknowledgements name them; the pool's parts read them here).
        acks: the queue whose acknowledgements go first in each round trip (the parts queue them here).
    """

    def __init__(
        self,
        url: str,
        job_id: str,
        reconnect: ReconnectPolicy,
        socket_timeout: float,
        keys: JobKeys,
        acks: AckQueue,
    ) -> None:
        self.url = url
        self.job_id = job_id
        self.reconnect = reconnect
        self.client = make_client(url, socket_timeout=socket_timeout)
        self.conns = Connections(self.client)
        self.keys = keys
        self.acks = acks
        self._ack = SCRIPTS["ACK"]

    def run(self, commands: Commands, what: str) -> list:
        """One round trip of packed commands, with reconnects and scripts reloaded after a restart.

        Acknowledgements queued by ``ack(wait=False)`` go first, in the same write.

        An attempt that fails after sending may still have run on the server (a stalled Redis runs
        it once it resumes; only the reply was lost), and the next attempt sends the commands again.
        Commands that must not be repeated as they are, because they name a key that only one
        attempt may use (a get's destination key), are given as a function that packs them afresh.
        """
        try:
            return self._attempt(commands)
        except (redis.ConnectionError, redis.TimeoutError, redis.exceptions.NoScriptError):
            pass  # the reconnect loop below tries again (as it would after its own first failure)
        except redis.ResponseError as exc:
            raise translate_error(self.url, exc) from None

        def attempt_with_scripts() -> list:
            try:
                return self._attempt(commands)
            except redis.exceptions.NoScriptError:
                for script in SCRIPTS.values():
                    self.client.script_load(script.text)
                return self._attempt(commands)

        return self.call(attempt_with_scripts, what)

    def _attempt(self, commands: Commands) -> list:
        sent = commands() if callable(commands) else commands
        acks = self.acks.take()
        if acks:
            sent = [self._ack.command(self.keys.entry, [self.keys.group, "acknowledged", "", *acks]), *sent]
        try:
            replies = scripts_known(self.conns.exchange(sent, raise_errors=False))
        except BaseException:
            # Whether Redis ran them is unknown, or nothing ran (a restarted Redis forgot the scripts): they are
            # sent again (acknowledging twice is harmless).
            self.acks.requeue(acks)
            raise
        if acks:
            done = replies[0]
            replies = replies[1:]
            if isinstance(done, redis.RedisError):
                failure = translate_error(self.url, done) if isinstance(done, redis.ResponseError) else done
                log.warning("pool job %s: queued acknowledgements failed: %s", self.job_id, failure)
            elif done != len(acks):
                self.acks.note_stale(len(acks) - done, len(acks))
        return raise_first_error(replies)

    def eval(self, name: str, keys: list, args: list, what: str) -> Any:
        """Run script ``name`` (a key of ``scripts.SCRIPTS``) in its own round trip; its reply."""
        return self.run([SCRIPTS[name].command(keys, args)], what)[0]

    def call(self, fn: Callable[[], T], what: str) -> T:
        """``fn()`` (redis-py calls), retried through reconnects."""
        return call_with_reconnect(fn, url=self.url, policy=self.reconnect, what=f"{what} (job {self.job_id!r})")

    def wrong_type(self, key: str, expected: str) -> StateCorrupted:
        """The error for a plain command answered WRONGTYPE on ``key`` of the job: names what it holds."""
        found = self.call(lambda: self.client.type(key), "check the type of a key")
        return wrong_type_error(key, found.decode() if isinstance(found, bytes) else str(found), expected)

    def close(self) -> None:
        self.conns.close()
        self.client.close()


def scripts_known(replies: list) -> list:
    """``replies``, or NoScriptError when Redis answered that it does not know a script (nothing ran)."""
    if any(isinstance(r, redis.exceptions.NoScriptError) for r in replies):
        raise redis.exceptions.NoScriptError("a restarted Redis has forgotten the pool's scripts")
    return replies
