"""Compiled writers: a kio entity to bytes, byte-identical to kio's generic writer.

kio 0.6.5 writes an entity by walking its dataclass fields in Python on every call, one
`struct.pack` and one buffer write per field: about 20 µs for a Metadata response. A compiled
writer is generated once per entity class from the same field metadata kio's writer reads
(`kafka_type`, `tag`, optional or not, nested or array) and does on each call only what the
values decide: runs of fixed-size fields become one precompiled `struct.Struct`, nested
entities are inlined, arrays of fixed-size entities are packed in one call, and byte fields
(records) are handed on as they are, never copied until the caller joins the parts.

A writer appends the entity's encoding to a list of parts; `b"".join(parts)` is the bytes.
The rules mirror kio's `kio.serial._serialize` (tests prove the output equal for every
served API version), with one exception: kio writes a None array as null whatever the schema
says, and a compiled writer refuses None for any array, string, bytes or struct field the
schema does not make nullable (ResponseSchemaError naming the entity and the field), since
the Java client trusts the schema. Otherwise: a tagged field equal to its default is left
out, tagged fields go in tag order.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import Field, fields
from functools import cache, partial
from itertools import chain
from operator import attrgetter
from typing import Any, NamedTuple

from kio.serial._implicit_defaults import get_tagged_field_default
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
from kio.static.constants import uuid_zero

from .codegen import Source, compiled
from .errors import ResponseSchemaError
from .framing import Buffer

Parts = list[Buffer]
Writer = Callable[[Any, Parts], None]
"""Appends the encoding of an entity to a list of parts."""
FrameWriter = Callable[[int, Any], bytes]
"""A whole response frame (size prefix, header, body) from a correlation id and an entity."""

# Kafka types a single struct format code writes as they are (an ErrorCode is an IntEnum).
_DIRECT_FORMATS = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "float64": "d",
    "bool": "?",
    "error_code": "h",
}
_SMALL_VARINTS = tuple(bytes([value]) for value in range(0x80))
_NULL_MARKER = b"\xff"  # KIP-893: -1 before a null struct
_EMPTY = b""

_ZERO_UUID_BYTES = uuid_zero.bytes
"""One object: UUID.bytes makes a new one on every call, and the generated writers share it."""


def _refuse_null(where: str) -> None:
    raise ResponseSchemaError(f"{where} is not nullable, but the response holds None for it")


def _uvarint(value: int) -> bytes:
    """An unsigned varint, as kio's writer encodes one (at any size)."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def uvarint(value: int) -> bytes:
    """An unsigned varint; the ones below 128 are shared objects."""
    return _SMALL_VARINTS[value] if value < 0x80 else _uvarint(value)


def compact_length(length: int) -> bytes:
    """A compact string, bytes or array length: the length plus one, as a varint."""
    return _SMALL_VARINTS[length + 1] if length < 0x7F else _uvarint(length + 1)


_ARRAY_PACKERS = 16


@cache
def _array_packers(fmt: str) -> tuple[Callable[..., bytes], ...]:
    """Packers of 0 to 15 values of one struct format code."""
    return tuple(struct.Struct(f">{count}{fmt}").pack for count in range(_ARRAY_PACKERS))


def _pack_each(fmt: str, items: Any, getter: Any) -> bytes:
    """Every item's one fixed-size field in one pack: `fmt` is one item's format."""
    return struct.pack(">" + fmt * len(items), *map(getter, items))


def _pack_many(fmt: str, items: Any, getter: Any) -> bytes:
    """Every item's fixed-size fields in one pack: `fmt` is one item's format."""
    return struct.pack(">" + fmt * len(items), *chain.from_iterable(map(getter, items)))


class _Pending(NamedTuple):
    """One value waiting to be packed: its struct format code and expression, or (`varint`)
    the name holding a varint's value, packed as one byte when it is below 128."""

    fmt: str
    value: str | None
    varint: bool = False


class _Emitter:
    """Writes the code that appends one entity's bytes to a list through `append`.

    Fixed-size values wait in a pending struct format until something variable (a string's
    bytes, a branch or a loop) needs them written first: then one precompiled Struct packs
    the whole run. Varints (lengths and counts) wait there too, as one byte: the code packs
    the run at once when every one of them is below 128, as they nearly always are, and in
    pieces around the longer ones otherwise.
    """

    def __init__(self, source: Source, append: str) -> None:
        self.source = source
        self.append = append
        self._pending: list[_Pending] = []
        self.appended = False
        """Whether any code appending a part was written (not only pending values)."""

    @property
    def pending(self) -> tuple[str, list[str]]:
        """The struct format and the value expressions waiting to be packed (no varints)."""
        assert not any(item.varint for item in self._pending)
        fmt = ">" + "".join(item.fmt for item in self._pending)
        return fmt, [item.value for item in self._pending if item.value is not None]

    def fixed(self, fmt: str, value: str | None = None) -> None:
        self._pending.append(_Pending(fmt, value))

    def varint(self, value: str) -> None:
        name = self.bind(value, "n")
        self._pending.append(_Pending("B", name, varint=True))

    def flush(self) -> None:
        if not self._pending:
            return
        varints = [item.value for item in self._pending if item.varint]
        if not varints:
            self._pack(self._pending)
        else:
            small = " and ".join(f"{name} < 128" for name in varints)
            with self.source.block(f"if {small}"):
                self._pack(self._pending)
            with self.source.block("else"):
                run: list[_Pending] = []
                large = self.source.shared("_uvarint", _uvarint)
                for item in self._pending:
                    if not item.varint:
                        run.append(item)
                        continue
                    self._pack(run)
                    run = []
                    self.source.line(f"{self.append}({large}({item.value}))")
                self._pack(run)
        self._pending = []

    def _pack(self, items: list[_Pending]) -> None:
        if not items:
            return
        self.appended = True
        fmt = ">" + "".join(item.fmt for item in items)
        values = [item.value for item in items if item.value is not None]
        if values:
            pack = self.source.constant(struct.Struct(fmt).pack, "_pack")
            self.source.line(f"{self.append}({pack}({', '.join(values)}))")
        else:  # only padding: a constant
            self.source.line(f"{self.append}({self.source.constant(struct.pack(fmt))})")

    def part(self, value: str) -> None:
        self.flush()
        self.appended = True
        self.source.line(f"{self.append}({value})")

    def bind(self, value: str, hint: str = "v") -> str:
        """`value` evaluated once into a local, for code that reads it more than once."""
        name = self.source.fresh(hint)
        self.source.line(f"{name} = {value}")
        return name

    # -- entities and fields ------------------------------------------------------------------

    def entity(self, entity_type: type, value: str) -> None:
        flexible: bool = entity_type.__flexible__  # type: ignore[attr-defined]
        tagged: list[tuple[int, Field[Any]]] = []
        for field in fields(entity_type):
            tag = get_field_tag(field)
            if tag is not None:
                tagged.append((int(tag), field))
                continue
            self.field(
                field,
                flexible,
                f"{value}.{field.name}",
                False,
                f"{entity_type.__name__}.{field.name}",
            )
        if tagged and not flexible:
            raise ValueError(f"{entity_type.__name__}: tagged fields on a non-flexible entity")
        if flexible:
            self.tagged_fields(
                sorted(tagged, key=lambda item: item[0]), value, entity_type.__name__
            )

    def field(
        self, field: Field[Any], flexible: bool, value: str, is_tag: bool, where: str
    ) -> None:
        # kio writes a tagged field with its non-null writer: a tag is present or absent.
        optional = False if is_tag else is_optional(field)
        kind = classify_field(field)
        if not optional and _may_be_written_as_null(kind, field):
            # Appends nothing, so values waiting to be packed can go on waiting.
            value = self.bind(value)
            refuse = self.source.shared("_refuse_null", _refuse_null)
            with self.source.block(f"if {value} is None"):
                self.source.line(f"{refuse}({where!r})")
        match kind:
            case PrimitiveField():
                self.primitive(get_schema_field_type(field), flexible, optional, value)
            case PrimitiveTupleField():
                self.primitive_array(get_schema_field_type(field), flexible, value)
            case EntityField(entity_type):
                if optional:
                    self.nullable_entity(entity_type, value)
                else:
                    self.entity(entity_type, self.bind(value, "e"))
            case EntityTupleField(entity_type):
                self.entity_array(entity_type, flexible, value)
            case _:
                raise NotImplementedError(field.name)

    def primitive(self, kafka_type: str, flexible: bool, optional: bool, value: str) -> None:
        direct = _DIRECT_FORMATS.get(kafka_type)
        if direct is not None and not optional:
            self.fixed(direct, value)
        elif kafka_type in ("timedelta_i32", "timedelta_i64") and not optional:
            # kio's exact conversion: float seconds, times 1000, rounded half to even; no
            # throttling (a zero timedelta is false) is the usual value, and 0 however read.
            bound = self.bind(value, "t")
            milliseconds = f"0 if not {bound} else round({bound}.total_seconds() * 1000)"
            self.fixed("i" if kafka_type == "timedelta_i32" else "q", milliseconds)
        elif kafka_type == "datetime_i64":
            if optional:
                bound = self.bind(value)
                self.fixed("q", f"(-1 if {bound} is None else round({bound}.timestamp() * 1000))")
            else:
                self.fixed("q", f"round({value}.timestamp() * 1000)")
        elif kafka_type == "uuid":
            # kio writes a None UUID as the zero UUID, nullable or not.
            bound = self.bind(value)
            zero = self.source.shared("_zero_uuid", _ZERO_UUID_BYTES)
            self.fixed("16s", f"({zero} if {bound} is None else {bound}.bytes)")
        elif kafka_type == "string":
            self.string(flexible, optional, value)
        elif kafka_type in ("bytes", "records"):
            self.bytes_field(flexible, optional, value)
        else:
            raise NotImplementedError(f"no writer for {kafka_type!r} ({optional=})")

    def string(self, flexible: bool, optional: bool, value: str) -> None:
        if optional:
            bound = self.bind(value)
            empty = self.source.shared("_empty", _EMPTY)
            encoded = self.bind(f"{empty} if {bound} is None else {bound}.encode()", "s")
            null = f"{bound} is None"
        else:
            encoded = self.bind(f"{value}.encode()", "s")
        if flexible:
            length = f"len({encoded}) + 1"
            self.varint(f"0 if {null} else {length}" if optional else length)
        else:
            length = f"len({encoded})"
            self.fixed("h", f"-1 if {null} else {length}" if optional else length)
        self.part(encoded)

    def bytes_field(self, flexible: bool, optional: bool, value: str) -> None:
        bound = self.bind(value, "b")
        if flexible:
            # kio's compact writer is its string writer: a str would be UTF-8 encoded.
            encoded = self.bind(f"{bound}.encode() if isinstance({bound}, str) else {bound}", "b")
            length = f"len({encoded}) + 1"
            self.varint(length if not optional else f"0 if {bound} is None else {length}")
        else:
            encoded = bound
            length = f"len({bound})"
            self.fixed("i", length if not optional else f"-1 if {bound} is None else {length}")
        if optional:
            empty = self.source.shared("_empty", _EMPTY)
            self.part(f"{empty} if {bound} is None else {encoded}")
        else:
            self.part(encoded)

    def array_length(self, flexible: bool, items: str) -> None:
        # kio writes None as a null array whether or not the schema allows one.
        if flexible:
            self.varint(f"0 if {items} is None else len({items}) + 1")
        else:
            self.fixed("i", f"-1 if {items} is None else len({items})")

    def primitive_array(self, kafka_type: str, flexible: bool, value: str) -> None:
        items = self.bind(value, "a")
        self.array_length(flexible, items)
        self.flush()
        direct = _DIRECT_FORMATS.get(kafka_type)
        if direct is not None:
            # Packers for the usual short arrays (replica lists), beyond them a format.
            packers = self.source.shared(f"_array_packers_{direct}", _array_packers(direct))
            pack = self.source.shared("_struct_pack", struct.pack)
            count = self.source.fresh("count")
            with self.source.block(f"if {items}"):
                self.source.line(f"{count} = len({items})")
                self.source.line(
                    f"{self.append}({packers}[{count}](*{items}) if {count} < {_ARRAY_PACKERS}"
                    f" else {pack}('>%d{direct}' % {count}, *{items}))"
                )
            return
        item = self.source.fresh("x")
        with self.source.block(f"for {item} in {items} or ()"):
            self.primitive(kafka_type, flexible, False, item)
            self.flush()

    def entity_array(self, entity_type: type, flexible: bool, value: str) -> None:
        items = self.bind(value, "a")
        self.array_length(flexible, items)
        self.flush()
        flat = _flat_format(entity_type)
        if flat is not None:
            fmt, names = flat
            getter = self.source.constant(attrgetter(*names), "_get")
            pack = self.source.constant(_pack_many if len(names) > 1 else _pack_each, "_pack")
            with self.source.block(f"if {items}"):
                self.source.line(f"{self.append}({pack}({fmt!r}, {items}, {getter}))")
            return
        item = self.source.fresh("e")
        with self.source.block(f"for {item} in {items} or ()"):
            self.entity(entity_type, item)
            self.flush()

    def nullable_entity(self, entity_type: type, value: str) -> None:
        bound = self.bind(value, "e")
        self.flush()
        with self.source.block(f"if {bound} is None"):
            self.part(self.source.shared("_null", _NULL_MARKER))
        with self.source.block("else"):
            self.fixed("b", "1")
            self.entity(entity_type, bound)
            self.flush()

    def tagged_fields(
        self, tagged: list[tuple[int, Field[Any]]], value: str, entity_name: str
    ) -> None:
        if not tagged:
            self.fixed("x")  # no tagged fields: a count of zero
            return
        self.flush()
        present = self.bind("[]", "tags")
        for tag, field in tagged:
            current = self.bind(f"{value}.{field.name}", "t")
            default = self.source.constant(get_tagged_field_default(field), "_default")
            # Identity first: equal to kio's `==` test, and cheap for a default struct.
            with self.source.block(f"if not ({current} is {default} or {current} == {default})"):
                parts = self.bind("[]", "tag_parts")
                inner = _Emitter(self.source, f"{parts}.append")
                inner.field(field, True, current, True, f"{entity_name}.{field.name}")
                inner.flush()
                encoded = self.bind(f"b''.join({parts})", "tag_bytes")
                uvarint_name = self.source.shared("_uv", uvarint)
                self.source.line(
                    f"{present}.append({uvarint_name}({tag}) + "
                    f"{uvarint_name}(len({encoded})) + {encoded})"
                )
        uvarint_name = self.source.shared("_uv", uvarint)
        none = self.source.shared("_no_tags", b"\x00")
        self.part(f"{uvarint_name}(len({present})) + b''.join({present}) if {present} else {none}")


def _may_be_written_as_null(kind: object, field: Field[Any]) -> bool:
    """Whether None would reach the wire as something: arrays (kio writes null), strings,
    bytes and structs (which would fail obscurely). Fixed-size values fail in struct.pack,
    and a None UUID is the zero UUID, as Kafka writes "no id"."""
    if isinstance(kind, PrimitiveTupleField | EntityTupleField | EntityField):
        return True
    return isinstance(kind, PrimitiveField) and get_schema_field_type(field) in (
        "string",
        "bytes",
        "records",
    )


def _flat_format(entity_type: type) -> tuple[str, tuple[str, ...]] | None:
    """The struct format and field names of an entity made only of fixed-size values
    written as they are (and no tagged fields), or None."""
    flexible: bool = entity_type.__flexible__  # type: ignore[attr-defined]
    formats = []
    names = []
    for field in fields(entity_type):
        if get_field_tag(field) is not None or is_optional(field):
            return None
        if not isinstance(classify_field(field), PrimitiveField):
            return None
        fmt = _DIRECT_FORMATS.get(get_schema_field_type(field))
        if fmt is None:
            return None
        formats.append(fmt)
        names.append(field.name)
    if not names:
        return None
    if flexible:
        formats.append("x")  # the empty tagged-field section
    return "".join(formats), tuple(names)


@cache
def entity_writer(entity_type: type) -> Writer:
    """The compiled writer of a kio entity class: `writer(entity, parts)` appends its bytes.

    Raises NotImplementedError for a field kio's writer has no writer for either.
    """
    writer: Writer = compiled(partial(_entity_writer_source, entity_type))
    return writer


def _entity_writer_source(entity_type: type) -> Source:
    source = Source(f"write_{entity_type.__name__}", "entity, parts")
    source.namespace["round"] = round
    source.line("append = parts.append")
    emitter = _Emitter(source, "append")
    emitter.entity(entity_type, "entity")
    emitter.flush()
    return source


@cache
def response_frame_writer(entity_type: type, header_version: int) -> FrameWriter:
    """The compiled writer of a whole response frame: `writer(correlation_id, entity)`.

    The response header (v0: the correlation id; v1: plus an empty tagged-field section)
    is packed with the first fields of the body. A frame whose size is fixed by its schema
    (Heartbeat, LeaveGroup v0-2, InitProducerId, ...) is a single pack, size included;
    otherwise the size is the sum of the parts' lengths, and the parts are joined once.
    """
    writer: FrameWriter = compiled(partial(_frame_writer_source, entity_type, header_version))
    return writer


def _frame_writer_source(entity_type: type, header_version: int) -> Source:
    source = Source(f"write_{entity_type.__name__}_frame", "correlation_id, entity")
    source.namespace["round"] = round
    emitter = _Emitter(source, "append")
    emitter.fixed("i", "correlation_id")
    if header_version >= 1:
        emitter.fixed("x")  # no tagged fields in the response header
    emitter.entity(entity_type, "entity")
    if not emitter.appended:
        fmt, values = emitter.pending
        pack = source.constant(struct.Struct(">i" + fmt[1:]).pack, "_pack")
        source.line(f"return {pack}({', '.join([str(struct.calcsize(fmt)), *values])})")
    else:
        emitter.flush()
        source.prepend("append = parts.append")
        source.prepend(f"parts = [{source.shared('_empty', _EMPTY)}]")
        size = source.shared("_pack_size", struct.Struct(">i").pack)
        source.line(f"parts[0] = {size}(sum(map(len, parts)))")
        source.line("return b''.join(parts)")
    return source


def encode(entity_type: type, entity: Any) -> bytes:
    """An entity's bytes through the compiled writer of `entity_type`."""
    parts: Parts = []
    entity_writer(entity_type)(entity, parts)
    return b"".join(parts)
