"""Redis connections for the pool: one client factory, one reconnect loop, clear errors.

redis-py's own retries are switched off so that a single policy (exponential
backoff up to a deadline, :class:`ReconnectPolicy`) governs every call, and so
that a server that stays unreachable ends in one clear
:class:`~saintpipe.core.errors.ServiceUnavailable` naming the server (password
redacted) instead of a driver traceback.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar, overload
from urllib.parse import urlsplit, urlunsplit

import redis
from redis import exceptions as rexc
from redis.backoff import NoBackoff
from redis.retry import Retry

from saintpipe.core.credentials import redis_password
from saintpipe.core.errors import (
    AuthenticationFailed,
    ConfigError,
    InvalidArgument,
    ServiceUnavailable,
    StateCorrupted,
)
from saintpipe.core.report import plural

log = logging.getLogger(__name__)

T = TypeVar("T")

# Errors that a restart or a network blip causes and that a later attempt can cure.
# AuthenticationError is a ConnectionError subclass but retrying cannot cure it.
_TRANSIENT = (redis.ConnectionError, redis.TimeoutError)
_PERMANENT = (rexc.AuthenticationError, rexc.AuthorizationError, rexc.AuthenticationWrongNumberOfArgsError)


@dataclass(frozen=True)
class ReconnectPolicy:
    """How long and how often to retry while Redis is unreachable.

    Attributes:
        initial_backoff: seconds to wait after the first failure.
        max_backoff: the wait doubles up to this many seconds.
        give_up_after: seconds of continuous failure before ServiceUnavailable.
    """

    initial_backoff: float = 0.05
    max_backoff: float = 2.0
    give_up_after: float = 30.0


@overload
def redact_url(url: str) -> str: ...
@overload
def redact_url(url: str | None) -> str | None: ...
def redact_url(url: str | None) -> str | None:
    """The URL with its password replaced by ``***`` (for messages and logs); None (no URL yet) stays None."""
    if url is None:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable Redis URL>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))


# Subgraphs are about a megabyte: reading replies in 1 MiB socket reads instead
# of redis-py's default 64 KiB halves the time to GET one.
SOCKET_READ_SIZE = 1 << 20


def make_client(
    url: str, *, socket_timeout: float | None = 10.0, connect_timeout: float = 5.0
) -> redis.Redis:
    """A redis-py client for ``url`` with driver retries off (the caller retries with a policy).

    Every saintpipe connection to Redis is made here, with the same settings
    (the pool benchmark gives its baseline the same client).

    Raises:
        ConfigError: the URL is not a redis:// (or rediss://, unix://) URL, or its password (or that of the
            file ``SAINTPIPE_REDIS_PASSWORD_FILE`` names) is unusable or a placeholder.
    """
    scheme = urlsplit(url).scheme
    if scheme not in ("redis", "rediss", "unix"):
        raise ConfigError(f"Redis URL {redact_url(url)!r}: scheme must be redis://, rediss:// or unix://")
    password = redis_password(url)  # the URL's, else SAINTPIPE_REDIS_PASSWORD_FILE's; placeholders refused
    try:
        return redis.Redis.from_url(
            url,
            **({"password": password} if password is not None else {}),
            socket_timeout=socket_timeout,
            socket_connect_timeout=connect_timeout,
            retry=Retry(NoBackoff(), 0),
            health_check_interval=0,
            socket_read_size=SOCKET_READ_SIZE,
        )
    except ValueError as exc:
        raise ConfigError(f"Redis URL {redact_url(url)!r}: {exc}") from None


def call_with_reconnect(fn: Callable[[], T], *, url: str, policy: ReconnectPolicy, what: str) -> T:
    """Run ``fn`` (one Redis operation), retrying with backoff while Redis is unreachable.

    Args:
        fn: the operation; it must be safe to run again after a connection error.
        url: the server's URL, for messages (the password is redacted).
        policy: the backoff and the deadline.
        what: a few words saying what was attempted, for messages.

    Raises:
        ServiceUnavailable: Redis stayed unreachable for ``policy.give_up_after`` seconds.
        AuthenticationFailed: Redis refused the password.
    """
    start = time.monotonic()
    delay = policy.initial_backoff
    attempt = 0
    while True:
        attempt += 1
        try:
            result = fn()
        except _PERMANENT as exc:
            raise auth_error(url, exc) from None
        except redis.ResponseError as exc:
            raise translate_error(url, exc) from None
        except _TRANSIENT as exc:
            elapsed = time.monotonic() - start
            if elapsed + delay > policy.give_up_after:
                raise ServiceUnavailable(
                    f"Redis at {redact_url(url)} unreachable while trying to {what}: gave up after "
                    f"{elapsed:.1f} s and {plural(attempt, 'attempt')} (last error: {exc}). Is the server running? "
                    "Point saintpipe at one "
                    "with --redis-url or SAINTPIPE_REDIS_URL."
                ) from None
            log.warning(
                "Redis at %s unreachable (%s: %s); retry %d in %.2f s",
                redact_url(url),
                type(exc).__name__,
                exc,
                attempt,
                delay,
            )
            time.sleep(delay)
            delay = min(delay * 2, policy.max_backoff)
            continue
        if attempt > 1:
            log.info("Redis at %s reachable again after %d attempts", redact_url(url), attempt)
        return result


def translate_error(url: str, exc: redis.ResponseError) -> Exception:
    """The error to raise for an error reply.

    AuthenticationFailed for a refused password; StateCorrupted for a pool script's answer that a key of
    its job holds the wrong type (``SAINTPIPE-WRONGTYPE``, job_keys.lua); InvalidArgument for a consumer
    group the job's stream does not have (Redis's ``NOGROUP``, raised by a stream command of a script or
    of a blocking read, or a script's ``SAINTPIPE-NOGROUP``); else the reply.
    """
    if _is_auth_response(exc):
        return auth_error(url, exc)
    text = str(exc)
    if text.startswith(_WRONG_TYPE):
        found, expected, key = text[len(_WRONG_TYPE):].split(" ", 2)
        return wrong_type_error(key, found, expected)
    if text.startswith(_NO_GROUP):
        group, key = text[len(_NO_GROUP):].split(" ", 1)
        return missing_group_error(key, group)
    nogroup = _REDIS_NO_GROUP.search(text)
    if nogroup and _JOB_OF_KEY.match(nogroup.group(1)):
        return missing_group_error(nogroup.group(1), nogroup.group(2))
    return exc


_WRONG_TYPE = "SAINTPIPE-WRONGTYPE "
_NO_GROUP = "SAINTPIPE-NOGROUP "  # job_keys.lua's no_group(): '<group> <stream key>'
# What Redis answers a stream command (XREADGROUP, XAUTOCLAIM, XPENDING, XCLAIM) naming a group the stream
# lacks, also inside a script's error ("Error running script ...: @user_script:N: NOGROUP ..."). The pool's
# scripts look for the stream first (and create it, or answer "nothing", when it is missing), so from them it
# means that the stream is there and the group is not.
_REDIS_NO_GROUP = re.compile(r"NOGROUP No such key '([^']*)' or consumer group '([^']*)'")
_JOB_OF_KEY = re.compile(r"saintpipe:pool:\{([^}]*)\}:")


def wrong_type_error(key: str, found: str, expected: str) -> StateCorrupted:
    """The error for a job's key that holds ``found`` where the pool keeps ``expected``."""
    job = _JOB_OF_KEY.match(key)
    return StateCorrupted(
        f"pool job {job.group(1) if job else '?'}: key {key} holds a {found}, not a {expected}; it was changed "
        "outside saintpipe (delete it, or use another job id)"
    )


def missing_group_error(key: str, group: str) -> InvalidArgument:
    """The error for a consumer of ``group``, which the job's stream ``key`` does not have."""
    job = _JOB_OF_KEY.match(key)
    return InvalidArgument(
        f"pool job {job.group(1) if job else '?'}: consumer group {group!r} does not exist on the job's "
        "stream: it was removed (remove_group) or never added (add_group, before the producers start)"
    )


def auth_error(url: str, exc: Exception) -> AuthenticationFailed:
    return AuthenticationFailed(
        f"Redis at {redact_url(url)} refused the credentials ({exc}). Check the password in the Redis URL "
        "(--redis-url / SAINTPIPE_REDIS_URL): redis://:PASSWORD@HOST:PORT/DB"
    )


def _is_auth_response(exc: redis.ResponseError) -> bool:
    text = str(exc)
    return text.startswith(("NOAUTH", "WRONGPASS")) or "AUTH" in text and "password" in text
