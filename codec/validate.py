"""A structural check of request bytes before kio's native reader sees them.

kio 0.6.5's native reader trusts array lengths: it sizes the array before reading an
element, so a 32-byte request claiming 2**34 elements makes it allocate 128 GiB and the
process aborts, beyond any Python `except`. Like Apache Kafka's generated readers, this
walk checks every array, string and byte length against the bytes that remain, and refuses
a null where the schema allows none, so kio only ever reads well-formed structure.

The walk is built once per entity type from kio's own field metadata and only moves an
offset: nothing is decoded or copied.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import Field, fields
from functools import cache
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from .errors import UndecodableRequest

Buffer = bytes | bytearray | memoryview
Step = Callable[[Buffer, int, int], int]
"""Checks one field at an offset, bounded by an end; returns the offset after it."""

_FIXED_SIZES = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def _fail(what: str, offset: int) -> UndecodableRequest:
    return UndecodableRequest(f"{what} at byte {offset}")


def _uvarint(data: Buffer, offset: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if offset >= end:
            raise _fail("truncated varint", offset)
        byte = data[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
        shift += 7
        if shift > 28:
            raise _fail("varint longer than 5 bytes", offset)


def _length(data: Buffer, offset: int, end: int, flexible: bool, wide: bool) -> tuple[int, int]:
    """A length prefix: compact (uvarint, 0 means null) or legacy int16/int32 (-1 null).
    Returns (length or -1 for null, offset after the prefix)."""
    if flexible:
        value, offset = _uvarint(data, offset, end)
        return value - 1, offset
    size = 4 if wide else 2
    if end - offset < size:
        raise _fail("truncated length", offset)
    (value,) = (_INT32 if wide else _INT16).unpack_from(data, offset)
    if value < -1:
        raise _fail(f"negative length {value}", offset)
    return value, offset + size


def _fixed(size: int, kafka_type: str) -> Step:
    def check(data: Buffer, offset: int, end: int) -> int:
        if end - offset < size:
            raise _fail(f"truncated {kafka_type}", offset)
        return offset + size

    return check


def _sized(kafka_type: str, flexible: bool, nullable: bool, field: str) -> Step:
    wide = kafka_type in ("bytes", "records")

    def check(data: Buffer, offset: int, end: int) -> int:
        length, offset = _length(data, offset, end, flexible, wide)
        if length == -1:
            if not nullable:
                raise _fail(f"null {field}, which cannot be null", offset)
            return offset
        if length > end - offset:
            raise _fail(f"{field} of {length} bytes with {end - offset} left", offset)
        return offset + length

    return check


def _array(element: Step, flexible: bool, nullable: bool, field: str) -> Step:
    def check(data: Buffer, offset: int, end: int) -> int:
        count, offset = _length(data, offset, end, flexible, wide=True)
        if count == -1:
            if not nullable:
                raise _fail(f"null array {field}, which cannot be null", offset)
            return offset
        # Every element takes at least one byte: Kafka's readers make the same check.
        if count > end - offset:
            raise _fail(f"array {field} of {count} elements with {end - offset} bytes left", offset)
        for _ in range(count):
            offset = element(data, offset, end)
        return offset

    return check


def _nullable_entity(inner: Step) -> Step:
    # KIP-893: a nullable struct is preceded by a marker byte, -1 for null.
    def check(data: Buffer, offset: int, end: int) -> int:
        if offset >= end:
            raise _fail("truncated struct marker", offset)
        return offset + 1 if data[offset] == 0xFF else inner(data, offset + 1, end)

    return check


def _primitive(kafka_type: str, flexible: bool, nullable: bool, field: str) -> Step:
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        return _fixed(size, kafka_type)
    if kafka_type in ("string", "bytes", "records"):
        return _sized(kafka_type, flexible, nullable, field)
    raise NotImplementedError(f"no check for Kafka type {kafka_type!r} ({field})")


def _field_step(field: Field[Any], flexible: bool, is_tag: bool, is_header: bool) -> Step:
    name = field.name
    nullable = not is_tag and is_optional(field)
    match classify_field(field):
        case PrimitiveField():
            # RequestHeader.client_id is always a legacy string, as in Kafka.
            legacy = is_header and name == "client_id"
            return _primitive(get_schema_field_type(field), flexible and not legacy, nullable, name)
        case PrimitiveTupleField():
            element = _primitive(get_schema_field_type(field), flexible, False, name)
            return _array(element, flexible, nullable, name)
        case EntityField(entity_type):
            inner = entity_check(entity_type)
            return _nullable_entity(inner) if nullable else inner
        case EntityTupleField(entity_type):
            return _array(entity_check(entity_type), flexible, nullable, name)
    raise NotImplementedError(name)


def _tagged_section(tagged: dict[int, Step]) -> Step:
    def check(data: Buffer, offset: int, end: int) -> int:
        count, offset = _uvarint(data, offset, end)
        if count > end - offset:
            raise _fail(f"{count} tagged fields with {end - offset} bytes left", offset)
        for _ in range(count):
            tag, offset = _uvarint(data, offset, end)
            size, offset = _uvarint(data, offset, end)
            if size > end - offset:
                raise _fail(f"tagged field {tag} of {size} bytes with {end - offset} left", offset)
            step = tagged.get(tag)
            if step is not None and step(data, offset, offset + size) != offset + size:
                raise _fail(f"tagged field {tag} does not fill its {size} bytes", offset)
            offset += size
        return offset

    return check


@cache
def entity_check(entity_type: type) -> Step:
    """The check of one kio entity type (a request, a header or a nested struct)."""
    flexible: bool = entity_type.__flexible__  # type: ignore[attr-defined]
    is_header = entity_type.__name__ == "RequestHeader"
    steps: list[Step] = []
    tagged: dict[int, Step] = {}
    for field in fields(entity_type):
        tag = get_field_tag(field)
        step = _field_step(field, flexible, tag is not None, is_header)
        if tag is None:
            steps.append(step)
        else:
            tagged[int(tag)] = step
    if flexible:
        steps.append(_tagged_section(tagged))

    def check(data: Buffer, offset: int, end: int) -> int:
        for step in steps:
            offset = step(data, offset, end)
        return offset

    return check
