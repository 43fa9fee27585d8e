"""The shard server's token check: every call but the health service's must carry the shared token.

:class:`TokenInterceptor` runs before any handler (and before any request is
parsed): a call whose ``authorization`` metadata is not ``Bearer <token>`` is
answered UNAUTHENTICATED "missing or wrong token" and never reaches the
servicer. The comparison is constant-time (both sides hashed, then
:func:`hmac.compare_digest`), so response timing tells nothing about the
token, not even its length. The gRPC health service stays open: container
probes carry no token (over TLS when TLS is on: it is the same port).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable

import grpc

from saintpipe.core.errors import AuthenticationFailed

HEALTH_METHODS = "/grpc.health.v1.Health/"
DENIED = "missing or wrong token"
_KINDS = ("unary_unary", "unary_stream", "stream_unary")  # a handler's behaviours; else stream_stream

# (method, context, the error, its status code): counts and logs a refused call.
OnDenied = Callable[[str, grpc.ServicerContext, Exception, grpc.StatusCode], None]


def _digest(value: str | bytes) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value).digest()


def bearer_matches(metadata, expected_digest: bytes) -> bool:
    """Whether the first ``authorization`` entry of ``metadata`` hashes to ``expected_digest``."""
    value = next((v for k, v in metadata or () if k == "authorization"), None)
    return value is not None and hmac.compare_digest(_digest(value), expected_digest)


class TokenInterceptor(grpc.ServerInterceptor):
    """Refuses (UNAUTHENTICATED) every call without ``authorization: Bearer <token>``, health checks excepted.

    Args:
        token: the shared token.
        on_denied: called for each refused call (the server counts and rate-limits a log line per peer).
    """

    def __init__(self, token: str, on_denied: OnDenied | None = None) -> None:
        self._expected = _digest(f"Bearer {token}")
        self._on_denied = on_denied

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(HEALTH_METHODS):
            return handler
        if bearer_matches(handler_call_details.invocation_metadata, self._expected):
            return handler

        def deny(request, context: grpc.ServicerContext):
            if self._on_denied is not None:
                self._on_denied(method, context, AuthenticationFailed(DENIED), grpc.StatusCode.UNAUTHENTICATED)
            context.abort(grpc.StatusCode.UNAUTHENTICATED, DENIED)

        # The same kind of handler (so gRPC frames the answer as the client expects), with no deserializer:
        # a refused request is never parsed.
        kind = next((k for k in _KINDS if getattr(handler, k) is not None), "stream_stream")
        return handler._replace(**{kind: deny}, request_deserializer=None)
