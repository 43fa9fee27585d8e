"""One error hierarchy for every saintpipe component.

Each error knows the gRPC status code it maps to, so servers translate them in
one place and clients turn the codes back into the same typed exceptions. Every
error also subclasses the matching built-in so callers can catch either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # grpc is imported when a server maps an error, not by every command that may raise one
    import grpc


class SaintpipeError(Exception):
    """Base of every error saintpipe raises on purpose.

    The CLI prints these as one clear line (no traceback) and exits non-zero.
    """

    exit_code: int = 2
    grpc_status: str = "INTERNAL"  # the name of its grpc.StatusCode

    def grpc_status_code(self) -> grpc.StatusCode:
        import grpc

        return grpc.StatusCode[self.grpc_status]


class ConfigError(SaintpipeError, ValueError):
    """A configuration file, environment variable or flag is invalid."""

    grpc_status = "INVALID_ARGUMENT"


class DatasetError(SaintpipeError, ValueError):
    """A dataset directory or an input file is missing, malformed or inconsistent.

    The message always names the file (and field) at fault.
    """

    grpc_status = "FAILED_PRECONDITION"


class InvalidArgument(SaintpipeError, ValueError):
    """A caller passed an impossible parameter (a bad id, a budget < 1, ...)."""

    grpc_status = "INVALID_ARGUMENT"


class DecodeError(SaintpipeError, ValueError):
    """A wire message is malformed; the message names the field."""

    grpc_status = "DATA_LOSS"


class ServiceUnavailable(SaintpipeError, ConnectionError):
    """A server (Redis, a feature shard, Ray) could not be reached."""

    grpc_status = "UNAVAILABLE"


class SaintpipeTimeout(SaintpipeError, TimeoutError):
    """An operation did not finish within its deadline."""

    grpc_status = "DEADLINE_EXCEEDED"


class AuthenticationFailed(SaintpipeError, PermissionError):
    """A server (Redis) refused the credentials given (a wrong or missing password).

    Not a ServiceUnavailable: retrying with the same credentials cannot succeed.
    """

    grpc_status = "UNAUTHENTICATED"


class StateCorrupted(SaintpipeError, RuntimeError):
    """State saintpipe keeps (a job's keys in Redis) holds something saintpipe did not write there.

    The message names the key and what was found in it. Retrying cannot cure it:
    the key must be deleted, or another job id used.
    """

    grpc_status = "FAILED_PRECONDITION"


class WorkerFailed(SaintpipeError, RuntimeError):
    """A worker (a sampler actor, a trainer) failed again and again; the message holds its last error.

    Raised by supervisors that stop restarting a worker which never gets any
    work done between failures (a bad configuration, a broken dataset).
    """

    grpc_status = "INTERNAL"
