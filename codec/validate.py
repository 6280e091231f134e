"""A structural check of request bytes before kio's native reader sees them.

kio 0.6.5's native reader trusts array lengths: it sizes the array before reading an
element, so a 32-byte request claiming 2**34 elements makes it allocate 128 GiB and the
process aborts, beyond any Python `except`. Like Apache Kafka's generated readers, this
check walks the structure, refuses an array count larger than the bytes that remain, a
negative length, and a null where the schema allows none, so kio only ever reads
well-formed structure.

Arrays are the only danger: kio's string, bytes, varint and tagged-field readers check
every length against the buffer before they allocate. A schema without an array anywhere
(ApiVersions, Heartbeat, InitProducerId, ...) is therefore given to kio unchecked:
`needs_check()` says which. For the same reason `safety_check()`, the check decode_request
runs, stops after the last array count kio will read: what follows, kio reads safely and
refuses if it is malformed. `entity_check()` walks everything, to where kio stops.

A check is compiled once per entity class into one straight-line function from kio's own
field metadata: fixed-size fields only move the offset (added up at compile time), and the
truncation they could cause is caught by the next read past the end or by the final bound
check. Nothing is decoded or copied.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import Field, fields
from functools import cache, partial
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

from .codegen import Source, compiled
from .errors import UndecodableRequest
from .framing import Buffer

Step = Callable[[Buffer, int, int], int]
"""Checks a structure at an offset, bounded by an end; returns the offset after it."""

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
_VARIABLE_TYPES = ("string", "bytes", "records")
_unpack_int16 = struct.Struct(">h").unpack_from
_unpack_int32 = struct.Struct(">i").unpack_from
_MAX_VARINT_SHIFT = 28  # Kafka's unsigned varints are at most 5 bytes long
_NULL_STRUCT = 0xFF  # KIP-893: a nullable struct is preceded by -1 when null


def _fail(what: str, offset: int) -> UndecodableRequest:
    return UndecodableRequest(f"{what} at byte {offset}")


def _uvarint_rest(data: Buffer, offset: int, first: int) -> tuple[int, int]:
    """The value of a varint whose first byte, already read, says more follow; and the
    offset after it. Reading past the end raises IndexError."""
    value = first & 0x7F
    shift = 7
    while True:
        byte = data[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, offset
        shift += 7
        if shift > _MAX_VARINT_SHIFT:
            raise _fail("varint longer than 5 bytes", offset)


def _read_uvarint(data: Buffer, offset: int) -> tuple[int, int]:
    first = data[offset]
    if first < 0x80:
        return first, offset + 1
    return _uvarint_rest(data, offset + 1, first)


def _tagged_fields(data: Buffer, offset: int, end: int, count: int, known: dict[int, Step]) -> int:
    """The offset after `count` tagged fields: each skipped by its size, a known one also
    checked to fill it exactly. Rare in requests, so not inlined."""
    if count > end - offset:
        raise _fail(f"{count} tagged fields with {end - offset} bytes left", offset)
    for _ in range(count):
        tag, offset = _read_uvarint(data, offset)
        size, offset = _read_uvarint(data, offset)
        if size > end - offset:
            raise _fail(f"tagged field {tag} of {size} bytes with {end - offset} left", offset)
        step = known.get(tag)
        if step is not None and step(data[offset : offset + size], 0, size) != size:
            raise _fail(f"tagged field {tag} does not fill its {size} bytes", offset)
        offset += size
    return offset


class _Emitter:
    """Writes the code that moves `offset` over one structure in `data`.

    Fixed-size fields wait in `pending` (a byte count) until a read needs the offset:
    then the read happens at `offset + pending` and both are added at once.
    """

    def __init__(self, source: Source) -> None:
        self.source = source
        self.pending = 0

    def at(self) -> str:
        """The offset expression of the next byte."""
        return f"offset + {self.pending}" if self.pending else "offset"

    def advance(self, size: int) -> str:
        """The offset expression of the next byte, the offset moved past `size` more."""
        where = self.at()
        self.source.line(f"offset += {self.pending + size}")
        self.pending = 0
        return where

    def sync(self) -> None:
        if self.pending:
            self.source.line(f"offset += {self.pending}")
            self.pending = 0

    def fail(self, what: str) -> None:
        fail = self.source.shared("_fail", _fail)
        self.source.line(f"raise {fail}({what}, offset)")

    def varint(self, hint: str) -> str:
        """Code reading an unsigned varint at the next byte; the name holding its value."""
        name = self.source.fresh(hint)
        rest = self.source.shared("_uvarint_rest", _uvarint_rest)
        self.source.line(f"{name} = data[{self.at()}]")
        self.advance(1)
        with self.source.block(f"if {name} > 127"):
            self.source.line(f"{name}, offset = {rest}(data, offset, {name})")
        return name

    def legacy_length(self, wide: bool, hint: str) -> str:
        name = self.source.fresh(hint)
        unpack = self.source.shared(
            "_unpack_int32" if wide else "_unpack_int16",
            _unpack_int32 if wide else _unpack_int16,
        )
        where = self.at()
        self.source.line(f"{name} = {unpack}(data, {where})[0]")
        self.advance(4 if wide else 2)
        return name

    # -- entities and fields ------------------------------------------------------------------

    def entity(self, entity_type: type, tail: bool = False) -> bool:
        """The walk of an entity. In the `tail` of a request (nothing after this entity
        holds an array), the walk stops once nothing left in it holds one either: it
        returns True then, and nothing more is to be walked."""
        flexible: bool = entity_type.__flexible__  # type: ignore[attr-defined]
        plain: list[Field[Any]] = []
        known: dict[int, Step] = {}
        tags_hold_arrays = False
        for field in fields(entity_type):
            tag = get_field_tag(field)
            if tag is None:
                plain.append(field)
            else:
                known[int(tag)] = _field_check(field)
                tags_hold_arrays = tags_hold_arrays or _holds_array(field)
        for index, field in enumerate(plain):
            rest = tags_hold_arrays or any(map(_holds_array, plain[index + 1 :]))
            if tail and not rest and not _holds_array(field):
                return True
            if self.field(field, flexible, is_tag=False, tail=tail and not rest):
                return True
        if not flexible:
            return False
        if tail and not tags_hold_arrays:
            return True
        count = self.varint("tags")
        with self.source.block(f"if {count}"):
            tagged = self.source.shared("_tagged_fields", _tagged_fields)
            table = self.source.constant(known, "_known_tags")
            self.source.line(f"offset = {tagged}(data, offset, end, {count}, {table})")
        return False

    def field(self, field: Field[Any], flexible: bool, is_tag: bool, tail: bool = False) -> bool:
        """The walk of one field; True if it stopped the walk (see entity())."""
        name = field.name
        nullable = not is_tag and is_optional(field)
        match classify_field(field):
            case PrimitiveField():
                self.primitive(get_schema_field_type(field), flexible, nullable, name)
                return False
            case PrimitiveTupleField():
                kafka_type = get_schema_field_type(field)
                return self.array(
                    flexible,
                    nullable,
                    name,
                    lambda _tail: self.primitive(kafka_type, flexible, False, name),
                    _FIXED_SIZES.get(kafka_type),
                    tail=tail,
                    element_holds_array=False,
                )
            case EntityField(entity_type):
                if nullable:
                    return self.nullable_entity(entity_type, tail)
                return self.entity(entity_type, tail)
            case EntityTupleField(entity_type):
                return self.array(
                    flexible,
                    nullable,
                    name,
                    lambda tail: self.entity(entity_type, tail),
                    None,
                    tail=tail,
                    element_holds_array=needs_check(entity_type),
                )
            case _:
                raise NotImplementedError(name)

    def primitive(self, kafka_type: str, flexible: bool, nullable: bool, name: str) -> None:
        size = _FIXED_SIZES.get(kafka_type)
        if size is not None:
            self.pending += size
        elif kafka_type in _VARIABLE_TYPES:
            self.sized(flexible, nullable, name, wide=kafka_type != "string")
        else:
            raise NotImplementedError(f"no check for Kafka type {kafka_type!r} ({name})")

    def sized(self, flexible: bool, nullable: bool, name: str, wide: bool) -> None:
        """A string or bytes: a length (compact: plus one, 0 for null; legacy: -1 for null),
        then that many bytes. A length past the end is caught by the next bound check."""
        if flexible:
            length = self.varint("length")
            if nullable:
                with self.source.block(f"if {length}"):
                    self.source.line(f"offset += {length} - 1")
                return
            with self.source.block(f"if not {length}"):
                self.fail(f"'null {name}, which cannot be null'")
            self.source.line(f"offset += {length} - 1")
            return
        length = self.legacy_length(wide, "length")
        with self.source.block(f"if {length} < 0"):
            with self.source.block(f"if {length} != -1"):
                self.fail(f"f'negative length {{{length}}}'")
            if not nullable:
                self.fail(f"'null {name}, which cannot be null'")
        with self.source.block("else"):
            self.source.line(f"offset += {length}")

    def array(
        self,
        flexible: bool,
        nullable: bool,
        name: str,
        element: Callable[[bool], object],
        element_size: int | None,
        tail: bool,
        element_holds_array: bool,
    ) -> bool:
        """An array's count, checked, then its elements; in the tail of a request, the
        elements only as far as they hold arrays (True: the walk stops after it)."""
        if flexible:
            count = self.varint("count")
            self.source.line(f"{count} -= 1")
        else:
            count = self.legacy_length(True, "count")
            with self.source.block(f"if {count} < -1"):
                self.fail(f"f'negative length {{{count}}}'")
        with self.source.block(f"if {count} == -1"):
            if not nullable:
                self.fail(f"'null array {name}, which cannot be null'")
        # Every element takes at least one byte: Kafka's readers make the same check, and
        # it is what keeps kio from sizing an array by a hostile count.
        with self.source.block(f"elif {count} > end - offset"):
            self.fail(f"f'array {name} of {{{count}}} elements with {{end - offset}} bytes left'")
        if tail and not element_holds_array:
            return True
        if element_size is not None:
            with self.source.block(f"elif {count} > 0"):
                self.source.line(f"offset += {count} * {element_size}")
            return tail
        if not tail:
            with self.source.block("else"), self.source.block(f"for _ in range({count})"):
                element(False)
                self.sync()
            return False
        # In the tail, the last element is the tail of the request: walked until nothing
        # left in it holds an array.
        with self.source.block(f"elif {count} > 0"):
            with self.source.block(f"for _ in range({count} - 1)"):
                element(False)
                self.sync()
            element(True)
            self.sync()
        return True

    def nullable_entity(self, entity_type: type, tail: bool) -> bool:
        marker = self.source.fresh("marker")
        self.source.line(f"{marker} = data[{self.at()}]")
        self.advance(1)
        with self.source.block(f"if {marker} != {_NULL_STRUCT}"):
            self.entity(entity_type, tail)
            self.sync()
        return tail


def _holds_array(field: Field[Any]) -> bool:
    match classify_field(field):
        case PrimitiveTupleField() | EntityTupleField():
            return True
        case EntityField(nested):
            return needs_check(nested)
    return False


def _compile(name: str, emit: Callable[[_Emitter], object]) -> Step:
    step: Step = compiled(partial(_source, name, emit))
    return step


def _source(name: str, emit: Callable[[_Emitter], object]) -> Source:
    source = Source(name, "data, offset, end")
    with source.block("if end != len(data)"):
        # Bounded by the buffer itself, a read past `end` fails like one past the frame.
        source.line("data = data[:end]")
    with source.block("try"):
        emitter = _Emitter(source)
        emit(emitter)
        emitter.sync()
    with source.block(f"except (IndexError, {source.shared('_struct_error', struct.error)})"):
        source.line(
            f"raise {source.shared('_fail', _fail)}('truncated structure', offset) from None"
        )
    with source.block("if offset > end"):
        source.line("raise _fail(f'structure of {offset} bytes with {end} present', end)")
    source.line("return offset")
    return source


@cache
def entity_check(entity_type: type) -> Step:
    """The full check of one kio entity type: a walk of all of it, to where kio's reader
    stops on the same bytes."""
    return _compile(f"check_{entity_type.__name__}", lambda emitter: emitter.entity(entity_type))


@cache
def safety_check(entity_type: type) -> Step:
    """The check that makes kio's reader safe on a request payload: the walk up to the last
    array count kio will read. What follows holds no array, so kio reads it safely, and
    refuses it if it is malformed; the offset returned is where the walk stopped."""
    return _compile(
        f"safety_check_{entity_type.__name__}",
        lambda emitter: emitter.entity(entity_type, tail=True),
    )


@cache
def _field_check(field: Field[Any]) -> Step:
    """The check of one tagged field's value (within its size). Cached: making a check's
    source again for a traceback (codegen.Source.function) compiles nothing new."""
    return _compile(
        f"check_tag_{field.name}", lambda emitter: emitter.field(field, True, is_tag=True)
    )


@cache
def needs_check(entity_type: type) -> bool:
    """Whether an entity type holds an array anywhere: only then can kio's reader be made to
    allocate by a length it has not checked."""
    for field in fields(entity_type):
        match classify_field(field):
            case PrimitiveTupleField() | EntityTupleField():
                return True
            case EntityField(nested) if needs_check(nested):
                return True
    return False
