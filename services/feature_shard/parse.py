"""Requests from the wire: parse them, or say in one line which field is wrong.

The server registers its methods with raw ``bytes`` requests and parses them
here, inside the call: gRPC's own deserializer, when it fails, answers
INTERNAL and logs a traceback for every bad message. Here a message that cannot be
decoded is an :class:`~saintpipe.core.errors.InvalidArgument` naming the field
at fault (found by walking the bytes with :mod:`saintpipe.core.protowire`),
which the status interceptor turns into INVALID_ARGUMENT.
"""

from __future__ import annotations

from typing import TypeVar

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from saintpipe.core import protowire as pw
from saintpipe.core.errors import DecodeError, InvalidArgument

M = TypeVar("M", bound=Message)
_MAX_DEPTH = 8  # our messages nest one level; deeper is unknown data, left to protobuf's verdict


def short_repr(value: str, limit: int = 64) -> str:
    """``repr(value)`` cut to about ``limit`` characters: error messages that echo caller input stay short."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}...[{len(value)} characters]"


def parse_request(cls: type[M], data: bytes) -> M:
    """``cls.FromString(data)``, or InvalidArgument naming the message and, where it can, the field.

    Raises:
        InvalidArgument: ``data`` is not a valid serialized ``cls``.
    """
    try:
        return cls.FromString(data)
    except Exception as exc:  # noqa: BLE001 - upb raises DecodeError; whatever else it raises is still bad input
        name = cls.DESCRIPTOR.name
        why = find_fault(cls.DESCRIPTOR, data)
        if why is None:
            # upb says "Error parsing message with type 'pkg.Name': <why>"; keep the why.
            reason = str(exc).rsplit(": ", 1)[-1][:100]
            why = f"{name}: not a valid {name} message ({len(data)} bytes): {reason}"
        raise InvalidArgument(why) from None


def find_fault(
    descriptor: Descriptor,
    data: bytes | memoryview,
    start: int = 0,
    end: int | None = None,
    prefix: str = "",
    depth: int = 0,
) -> str | None:
    """Why ``data[start:end]`` is not a valid message of ``descriptor``, naming the field; None if not found.

    Checks the framing (protowire's rules), that string fields are UTF-8 (proto3
    requires it) and, recursively, the framing of message fields.
    """
    end = len(data) if end is None else end
    where = prefix or descriptor.name
    names = {f.number: f"{where}.{f.name}" for f in descriptor.fields}
    try:
        for number, wire_type, value, length in pw.iter_fields(data, start, end, where, names):
            field = descriptor.fields_by_number.get(number)
            if field is None or wire_type != pw.LEN:  # unknown, or a known one of another type: skipped
                continue
            if field.type == FieldDescriptor.TYPE_STRING:
                try:
                    bytes(data[value : value + length]).decode("utf-8")
                except UnicodeDecodeError as exc:
                    return f"{names[number]}: not valid UTF-8 (byte {exc.start} of {length})"
            elif field.type == FieldDescriptor.TYPE_MESSAGE and depth < _MAX_DEPTH:
                fault = find_fault(field.message_type, data, value, value + length, names[number], depth + 1)
                if fault is not None:
                    return fault
    except DecodeError as exc:
        return str(exc)
    return None
