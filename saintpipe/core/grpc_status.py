"""The one place where saintpipe errors meet gRPC status codes.

Servers install :class:`StatusInterceptor`: a handler raises a typed
:class:`~saintpipe.core.errors.SaintpipeError` and the interceptor aborts the call
with that error's ``grpc_status_code()`` and message; anything else becomes
INTERNAL (logged with its traceback on the server, one line for the caller).
A server may pass its own ``log_failure`` instead (the feature shards
rate-limit theirs per peer). Every message sent is one line of at most
:data:`MAX_DETAILS` characters: a message may echo a field of the request (a
region name, a dtype), and status details travel in a header that clients
refuse above 8 KiB. Clients call :func:`error_from_rpc_error` to turn a failed
call back into the same typed exception, prefixed with where the call went.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterator

import grpc

from saintpipe.core import errors

log = logging.getLogger(__name__)

# Status code -> the error class a client raises. INVALID_ARGUMENT maps to InvalidArgument (ConfigError shares
# the code, but a remote caller's mistake is an argument, not its own configuration).
_ERROR_FOR_CODE: dict[grpc.StatusCode, type[errors.SaintpipeError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: errors.InvalidArgument,
    grpc.StatusCode.OUT_OF_RANGE: errors.InvalidArgument,
    grpc.StatusCode.FAILED_PRECONDITION: errors.DatasetError,
    grpc.StatusCode.DATA_LOSS: errors.DecodeError,
    grpc.StatusCode.UNAVAILABLE: errors.ServiceUnavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: errors.SaintpipeTimeout,
}

ErrorHook = Callable[[str, grpc.StatusCode], None]
# (method, context, the exception, the status code it became): logs a failed call.
FailureLogger = Callable[[str, grpc.ServicerContext, Exception, grpc.StatusCode], None]
MAX_DETAILS = 500


def one_line(text: str, limit: int = MAX_DETAILS) -> str:
    """``text`` on one line (line breaks become spaces), cut to ``limit`` characters with a marker."""
    text = " ".join(str(text).splitlines())
    return text if len(text) <= limit else text[: limit - 15] + " ...[truncated]"


def log_unexpected(
    method: str, context: grpc.ServicerContext, exc: Exception, code: grpc.StatusCode
) -> None:
    """The default :data:`FailureLogger`: a traceback for errors not saintpipe's own, else nothing."""
    if not isinstance(exc, errors.SaintpipeError):
        log.error("unexpected error in %s", method, exc_info=exc)


def error_from_rpc_error(exc: grpc.RpcError, where: str) -> errors.SaintpipeError:
    """The typed saintpipe error for a failed call.

    Args:
        exc: the ``grpc.RpcError`` a stub raised (it is also a ``grpc.Call``).
        where: what was called, e.g. ``"feature shard 1 at 127.0.0.1:50051"``; it prefixes the message.
    """
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    details = exc.details() if hasattr(exc, "details") else str(exc)
    cls = _ERROR_FOR_CODE.get(code, errors.SaintpipeError)
    return cls(f"{where}: {details} ({code.name})")


class _Undecodable:
    """Handed to a handler instead of a request its deserializer refused (see :class:`StatusInterceptor`)."""

    def __init__(self, method: str, size: int, exc: Exception) -> None:
        self.error = errors.InvalidArgument(
            f"{method}: the request is not a valid message ({size} bytes): {type(exc).__name__}: {exc}"
        )


def _safe_deserializer(deserialize: Callable[[bytes], object], method: str) -> Callable[[bytes], object]:
    def safe(data: bytes) -> object:
        try:
            return deserialize(data)
        except Exception as exc:  # noqa: BLE001 - any refusal is the caller's malformed message
            return _Undecodable(method, len(data), exc)

    return safe


class StatusInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]  # grpc ships no annotations
    """Maps exceptions raised by unary-unary and unary-stream handlers to status codes.

    A request that the handler's deserializer refuses becomes INVALID_ARGUMENT too (gRPC itself would answer
    INTERNAL and log a traceback per message); services that want the field named parse raw bytes themselves.

    Args:
        on_error: called with (method, status code) for every failed call, e.g. to count errors in a metric.
        log_failure: called for every failed call to log it (default
            :func:`log_unexpected`: a traceback for unexpected errors only).
    """

    def __init__(self, on_error: ErrorHook | None = None, log_failure: FailureLogger | None = None) -> None:
        self._on_error = on_error
        self._log_failure = log_failure or log_unexpected

    def intercept_service(self, continuation: Callable[[Any], Any], handler_call_details: Any) -> Any:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        single_request = handler.unary_unary is not None or handler.unary_stream is not None
        if single_request and handler.request_deserializer is not None:
            safe = _safe_deserializer(handler.request_deserializer, method)
            handler = handler._replace(request_deserializer=safe)
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
            code, message = grpc.StatusCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}"
        try:
            self._log_failure(method, context, exc, code)
        except Exception:  # logging must never turn an answer into another error
            log.debug("logging the failure of %s failed", method, exc_info=True)
        if self._on_error is not None:
            self._on_error(method, code)
        context.abort(code, one_line(message))

    def _wrap_unary(self, behavior: Callable[[Any, Any], Any], method: str) -> Callable[[Any, Any], Any]:
        def unary(request: Any, context: Any) -> Any:
            try:
                if isinstance(request, _Undecodable):
                    raise request.error
                return behavior(request, context)
            except Exception as exc:  # noqa: BLE001 - this is the one place that maps them
                self._abort(context, method, exc)

        return unary

    def _wrap_stream(self, behavior: Callable[[Any, Any], Iterator[Any]],
                     method: str) -> Callable[[Any, Any], Iterator[Any]]:
        def stream(request: Any, context: Any) -> Iterator[Any]:
            try:
                if isinstance(request, _Undecodable):
                    raise request.error
                yield from behavior(request, context)
            except Exception as exc:  # noqa: BLE001 - this is the one place that maps them
                self._abort(context, method, exc)

        return stream
