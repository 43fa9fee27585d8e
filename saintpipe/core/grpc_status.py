"""The one place where saintpipe errors meet gRPC status codes.

Servers install :class:`StatusInterceptor`: a handler raises a typed
:class:`~saintpipe.core.errors.SaintpipeError` and the interceptor aborts the call
with that error's ``grpc_status_code()`` and message; anything else becomes
INTERNAL (logged with its traceback on the server, one line for the caller).
Clients call :func:`error_from_rpc_error` to turn a failed call back into the
same typed exception, prefixed with where the call went.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterator

import grpc

from saintpipe.core import errors

log = logging.getLogger(__name__)

# Status code -> the error class a client raises. INVALID_ARGUMENT maps to
# InvalidArgument (ConfigError shares the code, but a remote caller's mistake
# is an argument, not its own configuration).
_ERROR_FOR_CODE: dict[grpc.StatusCode, type[errors.SaintpipeError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: errors.InvalidArgument,
    grpc.StatusCode.OUT_OF_RANGE: errors.InvalidArgument,
    grpc.StatusCode.FAILED_PRECONDITION: errors.DatasetError,
    grpc.StatusCode.DATA_LOSS: errors.DecodeError,
    grpc.StatusCode.UNAVAILABLE: errors.ServiceUnavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: errors.SaintpipeTimeout,
}

ErrorHook = Callable[[str, grpc.StatusCode], None]


def error_from_rpc_error(exc: grpc.RpcError, where: str) -> errors.SaintpipeError:
    """The typed saintpipe error for a failed call.

    Args:
        exc: the ``grpc.RpcError`` a stub raised (it is also a ``grpc.Call``).
        where: what was called, e.g. ``"feature shard 1 at 127.0.0.1:50051"``;
            it prefixes the message.
    """
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    details = exc.details() if hasattr(exc, "details") else str(exc)
    cls = _ERROR_FOR_CODE.get(code, errors.SaintpipeError)
    return cls(f"{where}: {details} ({code.name})")


class StatusInterceptor(grpc.ServerInterceptor):
    """Maps exceptions raised by unary-unary and unary-stream handlers to status codes.

    Args:
        on_error: called with (method, status code) for every failed call, e.g.
            to count errors in a metric.
    """

    def __init__(self, on_error: ErrorHook | None = None) -> None:
        self._on_error = on_error

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        if handler.unary_unary is not None:
            return handler._replace(unary_unary=self._wrap_unary(handler.unary_unary, method))
        if handler.unary_stream is not None:
            return handler._replace(unary_stream=self._wrap_stream(handler.unary_stream, method))
        return handler

    def _abort(self, context: grpc.ServicerContext, method: str, exc: Exception) -> None:
        if context.code() not in (None, grpc.StatusCode.OK):
            raise exc  # the handler already chose a status (context.abort): keep it
        if isinstance(exc, errors.SaintpipeError):
            code, message = exc.grpc_status_code(), str(exc)
        else:
            log.exception("unexpected error in %s", method)
            code, message = grpc.StatusCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}"
        if self._on_error is not None:
            self._on_error(method, code)
        context.abort(code, message)

    def _wrap_unary(self, behavior, method: str):
        def unary(request, context):
            try:
                return behavior(request, context)
            except Exception as exc:  # noqa: BLE001 - this is the one place that maps them
                self._abort(context, method, exc)

        return unary

    def _wrap_stream(self, behavior, method: str):
        def stream(request, context) -> Iterator:
            try:
                yield from behavior(request, context)
            except Exception as exc:  # noqa: BLE001 - this is the one place that maps them
                self._abort(context, method, exc)

        return stream
