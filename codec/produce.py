"""Produce, decoded and encoded by hand: the broker's hottest path.

The request decoder reads a Produce payload straight from the frame, handing each
partition's records out as a zero-copy slice, and checks every length against the bytes
left before it uses it: a hostile count can never make it allocate (kio 0.6.5's native
reader trusts them). kio's generic writer walks dataclass fields in Python for every
response; the response encoder writes the common shape (no record errors, no leader hints)
straight into bytes. Tests prove the decoder equal to kio's reader and the encoder
byte-identical to kio's writer, for every version and any content.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .errors import UndecodableRequest

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
# index, error code, base offset, log append time, log start offset
_PARTITION_V5 = struct.Struct(">ihqqq")
_PARTITION_V2 = struct.Struct(">ihqq")

NO_LOG_APPEND_TIME = -1
NO_THROTTLE = _INT32.pack(0)
FIRST_FLEXIBLE_VERSION = 9
FIRST_TOPIC_ID_VERSION = 13


class PartitionResult(NamedTuple):
    """What the broker answers for one partition of a Produce request."""

    partition: int
    error_code: int
    base_offset: int
    log_start_offset: int
    error_message: str | None = None


TopicResults = tuple[str | uuid.UUID, Sequence[PartitionResult]]
"""A topic's name (or, from v13, its id) and its partitions' results."""


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _compact_string(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    encoded = text.encode()
    return _uvarint(len(encoded) + 1) + encoded


def _legacy_string(text: str | None) -> bytes:
    if text is None:
        return _INT16.pack(-1)
    encoded = text.encode()
    return _INT16.pack(len(encoded)) + encoded


def encode_produce_response_body(version: int, topics: Sequence[TopicResults]) -> bytes:
    """The ProduceResponse payload for `version` (3 to 13): no record errors, no current
    leader or node endpoints (the tagged fields a single-node broker never sets)."""
    flexible = version >= FIRST_FLEXIBLE_VERSION
    parts: list[bytes] = []
    add = parts.append
    add(_uvarint(len(topics) + 1) if flexible else _INT32.pack(len(topics)))
    for topic, partitions in topics:
        if version >= FIRST_TOPIC_ID_VERSION:
            assert isinstance(topic, uuid.UUID)
            add(topic.bytes)
        elif flexible:
            assert isinstance(topic, str)
            add(_compact_string(topic))
        else:
            assert isinstance(topic, str)
            add(_legacy_string(topic))
        add(_uvarint(len(partitions) + 1) if flexible else _INT32.pack(len(partitions)))
        for partition, error_code, base_offset, log_start_offset, message in partitions:
            if version >= 5:
                add(
                    _PARTITION_V5.pack(
                        partition, error_code, base_offset, NO_LOG_APPEND_TIME, log_start_offset
                    )
                )
            else:
                add(_PARTITION_V2.pack(partition, error_code, base_offset, NO_LOG_APPEND_TIME))
            if flexible:
                # empty record errors, error message, no tagged fields
                add(b"\x01" + _compact_string(message) + b"\x00")
            elif version >= 8:
                add(_INT32.pack(0) + _legacy_string(message))
        if flexible:
            add(b"\x00")  # topic: no tagged fields
    add(NO_THROTTLE)
    if flexible:
        add(b"\x00")  # response: no tagged fields
    return b"".join(parts)


# --- the request -------------------------------------------------------------------------

_ACKS_TIMEOUT = struct.Struct(">hi")
_ACKS_TIMEOUT_COUNT = struct.Struct(">hii")
_INDEX_SIZE = struct.Struct(">ii")
_UUID_BYTES = 16
FIRST_VERSION = 3
LAST_VERSION = 13
# The fewest bytes an entry of each array can take, to refuse a count the frame cannot hold
# before looping over it: name length + partition count; index + records length; and in
# flexible versions one byte each for a short length or count and an empty tag section.
_LEGACY_TOPIC_MIN = 2 + 4
_LEGACY_PARTITION_MIN = 4 + 4
_FLEXIBLE_TOPIC_MIN = 1 + 1 + 1
_TOPIC_ID_TOPIC_MIN = _UUID_BYTES + 1 + 1
_FLEXIBLE_PARTITION_MIN = 4 + 1 + 1
_TAGGED_FIELD_MIN = 1 + 1
_MAX_VARINT_SHIFT = 28  # Kafka's unsigned varints are at most 5 bytes long
_VARINT_LAST_BYTE = 0x7F  # a varint byte above this says another byte follows
_unpack_int16 = _INT16.unpack_from
_unpack_int32 = _INT32.unpack_from
_unpack_acks_timeout = _ACKS_TIMEOUT.unpack_from
_unpack_acks_timeout_count = _ACKS_TIMEOUT_COUNT.unpack_from
_unpack_index_size = _INDEX_SIZE.unpack_from


@dataclass(slots=True)
class PartitionProduceData:
    """One partition's records, a zero-copy slice of the request frame (None if null).

    Read-only by convention: not frozen, since a frozen dataclass costs twice as much to
    build, once per partition per request.
    """

    index: int
    records: memoryview | None


@dataclass(slots=True)
class TopicProduceData:
    """A topic and its partitions: by name before v13, by id (`name` None) from v13."""

    name: str | None
    topic_id: uuid.UUID | None
    partition_data: tuple[PartitionProduceData, ...]


@dataclass(slots=True)
class ProduceRequestView:
    """A decoded ProduceRequest (v3 to 13), with the attribute names of kio's entity.

    `timeout_ms` is kio's `timeout` as an integer, not a timedelta. A v13 topic id of all
    zeros is the zero UUID here, where kio reads None.
    """

    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: tuple[TopicProduceData, ...]


def decode_produce_request(
    frame: bytes | bytearray | memoryview, offset: int, version: int
) -> tuple[ProduceRequestView, int]:
    """Decode the ProduceRequest payload of `version` that starts at `offset` of `frame`.

    Returns the request and the number of bytes it took (bytes after it are left alone,
    as Kafka leaves them). Unknown tagged fields are skipped, as Kafka skips them. Raises
    UndecodableRequest for a payload that ends early, holds a length or count the frame
    cannot hold, a negative length, null where the schema has no null, a string that is
    not UTF-8 or a varint over 5 bytes.
    """
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    if FIRST_VERSION <= version < FIRST_FLEXIBLE_VERSION:
        return _decode_legacy(view, offset, version)
    if FIRST_FLEXIBLE_VERSION <= version <= LAST_VERSION:
        return _decode_flexible(view, offset, version)
    raise UndecodableRequest(
        f"Produce v{version} body does not decode: "
        f"the fast decoder reads v{FIRST_VERSION}-v{LAST_VERSION}"
    )


def _decode_legacy(view: memoryview, offset: int, version: int) -> tuple[ProduceRequestView, int]:
    # Fixed-size reads past the end raise struct.error, caught below; every length is
    # checked against the bytes left before it is used, every count before its loop.
    end = len(view)
    pos = offset
    try:
        (size,) = _unpack_int16(view, pos)
        pos += 2
        transactional_id = None
        if size != -1:
            _check_size(size, end - pos, version, "transactional id", pos, offset)
            transactional_id = str(view[pos : pos + size], "utf-8")
            pos += size
        acks, timeout_ms, topic_count = _unpack_acks_timeout_count(view, pos)
        pos += _ACKS_TIMEOUT_COUNT.size
        if topic_count < 0 or topic_count * _LEGACY_TOPIC_MIN > end - pos:
            raise _bad_count(topic_count, _LEGACY_TOPIC_MIN, end, version, "topic", pos, offset)
        topics = []
        for _ in range(topic_count):
            (size,) = _unpack_int16(view, pos)
            pos += 2
            if size == -1:
                raise _error(version, "null topic name (not nullable)", pos - 2, offset)
            _check_size(size, end - pos, version, "topic name", pos, offset)
            name = str(view[pos : pos + size], "utf-8")
            pos += size
            (count,) = _unpack_int32(view, pos)
            pos += 4
            if count < 0 or count * _LEGACY_PARTITION_MIN > end - pos:
                raise _bad_count(
                    count, _LEGACY_PARTITION_MIN, end, version, "partition", pos, offset
                )
            partitions = []
            for _ in range(count):
                index, size = _unpack_index_size(view, pos)
                pos += 8
                if size > end - pos or size < -1:
                    _check_size(size, end - pos, version, "records", pos, offset)
                records = None
                if size != -1:
                    records = view[pos : pos + size]
                    pos += size
                partitions.append(PartitionProduceData(index, records))
            topics.append(TopicProduceData(name, None, tuple(partitions)))
    except struct.error:
        raise _error(version, "the frame ends inside a fixed-size field", pos, offset) from None
    except UnicodeDecodeError:
        raise _error(version, "a string is not UTF-8", pos, offset) from None
    return ProduceRequestView(transactional_id, acks, timeout_ms, tuple(topics)), pos - offset


def _decode_flexible(view: memoryview, offset: int, version: int) -> tuple[ProduceRequestView, int]:
    # As in _decode_legacy, and reading a byte past the end raises IndexError. Varints of
    # one byte (counts, short strings, empty tag sections) are read inline; longer ones by
    # _uvarint_rest.
    end = len(view)
    by_id = version >= FIRST_TOPIC_ID_VERSION
    topic_min = _TOPIC_ID_TOPIC_MIN if by_id else _FLEXIBLE_TOPIC_MIN
    pos = offset
    try:
        size = view[pos]
        pos += 1
        if size > _VARINT_LAST_BYTE:
            size, pos = _uvarint_rest(view, pos, size, version, offset)
        transactional_id = None
        if size:  # compact: length + 1, 0 for null
            size -= 1
            _check_size(size, end - pos, version, "transactional id", pos, offset)
            transactional_id = str(view[pos : pos + size], "utf-8")
            pos += size
        acks, timeout_ms = _unpack_acks_timeout(view, pos)
        pos += _ACKS_TIMEOUT.size
        topic_count, pos = _compact_count(view, pos, end, topic_min, version, "topic", offset)
        topics = []
        for _ in range(topic_count):
            name = None
            topic_id = None
            if by_id:
                if end - pos < _UUID_BYTES:
                    raise _error(version, "the frame ends inside a topic id", pos, offset)
                topic_id = uuid.UUID(bytes=bytes(view[pos : pos + _UUID_BYTES]))
                pos += _UUID_BYTES
            else:
                size = view[pos]
                pos += 1
                if size > _VARINT_LAST_BYTE:
                    size, pos = _uvarint_rest(view, pos, size, version, offset)
                if not size:
                    raise _error(version, "null topic name (not nullable)", pos - 1, offset)
                size -= 1
                _check_size(size, end - pos, version, "topic name", pos, offset)
                name = str(view[pos : pos + size], "utf-8")
                pos += size
            count, pos = _compact_count(
                view, pos, end, _FLEXIBLE_PARTITION_MIN, version, "partition", offset
            )
            partitions = []
            for _ in range(count):
                (index,) = _unpack_int32(view, pos)
                size = view[pos + 4]
                pos += 5
                if size > _VARINT_LAST_BYTE:
                    # Records of 127 bytes to 16 KiB: a two-byte length, read inline.
                    second = view[pos]
                    if second > _VARINT_LAST_BYTE:
                        size, pos = _uvarint_rest(view, pos, size, version, offset)
                    else:
                        size = (size & _VARINT_LAST_BYTE) | (second << 7)
                        pos += 1
                records = None
                if size:
                    size -= 1
                    if size > end - pos:
                        _check_size(size, end - pos, version, "records", pos, offset)
                    records = view[pos : pos + size]
                    pos += size
                if view[pos]:
                    pos = _skip_tagged_fields(view, pos, end, version, offset)
                else:
                    pos += 1
                partitions.append(PartitionProduceData(index, records))
            if view[pos]:
                pos = _skip_tagged_fields(view, pos, end, version, offset)
            else:
                pos += 1
            topics.append(TopicProduceData(name, topic_id, tuple(partitions)))
        if view[pos]:
            pos = _skip_tagged_fields(view, pos, end, version, offset)
        else:
            pos += 1
    except (IndexError, struct.error):
        raise _error(version, "the frame ends inside a field", pos, offset) from None
    except UnicodeDecodeError:
        raise _error(version, "a string is not UTF-8", pos, offset) from None
    return ProduceRequestView(transactional_id, acks, timeout_ms, tuple(topics)), pos - offset


def _compact_count(
    view: memoryview, pos: int, end: int, entry_min: int, version: int, what: str, offset: int
) -> tuple[int, int]:
    """A compact array's count, refused if null or if its entries of at least `entry_min`
    bytes each cannot fit in the frame; and the position after it."""
    count = view[pos] - 1  # compact: count + 1, 0 for null
    pos += 1
    if count >= _VARINT_LAST_BYTE:
        count, pos = _uvarint_rest(view, pos, count + 1, version, offset)
        count -= 1
    if count < 0 or count * entry_min > end - pos:
        raise _bad_count(count, entry_min, end, version, what, pos, offset)
    return count, pos


def _uvarint_rest(
    view: memoryview, pos: int, first: int, version: int, offset: int
) -> tuple[int, int]:
    """An unsigned varint whose first byte, `first`, says more follow; and the position
    after it. Raises IndexError at the end of the frame."""
    start = pos - 1
    value = first & 0x7F
    shift = 7
    while True:
        byte = view[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte <= _VARINT_LAST_BYTE:
            return value, pos
        shift += 7
        if shift > _MAX_VARINT_SHIFT:
            raise _error(version, "a varint is longer than 5 bytes", start, offset)


def _read_uvarint(view: memoryview, pos: int, version: int, offset: int) -> tuple[int, int]:
    first = view[pos]
    if first > _VARINT_LAST_BYTE:
        return _uvarint_rest(view, pos + 1, first, version, offset)
    return first, pos + 1


def _skip_tagged_fields(view: memoryview, pos: int, end: int, version: int, offset: int) -> int:
    """The position after a tagged-field section, each field skipped by its size. None of
    Produce's request versions defines a tagged field, so all are unknown ones."""
    count, pos = _read_uvarint(view, pos, version, offset)
    if count * _TAGGED_FIELD_MIN > end - pos:
        raise _bad_count(count, _TAGGED_FIELD_MIN, end, version, "tagged field", pos, offset)
    for _ in range(count):
        _tag, pos = _read_uvarint(view, pos, version, offset)
        size, pos = _read_uvarint(view, pos, version, offset)
        _check_size(size, end - pos, version, "tagged field", pos, offset)
        pos += size
    return pos


def _check_size(size: int, left: int, version: int, what: str, pos: int, offset: int) -> None:
    if size < 0:
        raise _error(version, f"{what} length {size} is negative", pos, offset)
    if size > left:
        raise _error(version, f"{what} length {size} exceeds the {left} bytes left", pos, offset)


def _bad_count(
    count: int, entry_min: int, end: int, version: int, what: str, pos: int, offset: int
) -> UndecodableRequest:
    if count < 0:
        description = "null (not nullable)" if count == -1 else f"negative ({count})"
        return _error(version, f"{what} array is {description}", pos, offset)
    return _error(
        version,
        f"{what} count {count} needs at least {count * entry_min} bytes, {end - pos} are left",
        pos,
        offset,
    )


def _error(version: int, message: str, pos: int, offset: int) -> UndecodableRequest:
    # Worded like codec.decode_request's errors for the payloads kio reads.
    return UndecodableRequest(
        f"Produce v{version} body does not decode: {message} (payload byte {pos - offset})"
    )
