"""Produce, decoded and encoded by hand: the broker's hottest path.

The request decoder reads a Produce payload straight from the frame, handing each
partition's records out as a zero-copy slice, and checks every length against the bytes
left before it uses it: a hostile count can never make it allocate (kio 0.6.5's native
reader trusts them). Unknown tagged fields are skipped by their size, as Kafka skips them.
The response encoder writes the common shape (no record errors, no leader hints) a partition
at a time, one struct each. Tests prove the decoder equal to kio's reader and the encoder
byte-identical to kio's writer, for every version and any content.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from functools import partial
from typing import NamedTuple, cast

from . import native
from .errors import UndecodableRequest
from .writers import compact_length

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
    log_append_time: int = NO_LOG_APPEND_TIME
    """-1, as Kafka answers a batch of a CreateTime topic; an idempotent batch's retry gets the
    timestamp recorded for the batch the first time, as Kafka's UnifiedLog answers it."""


TopicResults = tuple[str | uuid.UUID | None, Sequence[PartitionResult]]
"""A topic's name (or, from v13, its id, None written as the zero UUID as kio writes it) and
its partitions' results."""


def _compact_string(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    encoded = text.encode()
    return compact_length(len(encoded)) + encoded


def _legacy_string(text: str | None) -> bytes:
    if text is None:
        return _INT16.pack(-1)
    encoded = text.encode()
    return _INT16.pack(len(encoded)) + encoded


# A flexible partition without an error message: the fields, then an empty record-errors
# array (compact length 1), a null error message (0) and no tagged fields (0).
_PARTITION_FLEXIBLE = struct.Struct(">ihqqqB2x")
_pack_partition_flexible = _PARTITION_FLEXIBLE.pack
_pack_partition_v5 = _PARTITION_V5.pack
_pack_partition_v2 = _PARTITION_V2.pack
_EMPTY_RECORD_ERRORS = 1
_NO_TAGGED_FIELDS = b"\x00"
# v8 without an error message: then no record errors (a count of 0) and a null message.
_pack_partition_v8 = struct.Struct(">ihqqqih").pack
_NO_RECORD_ERRORS = 0
_NULL_STRING = -1
# Throttle time 0, then (flexible) no tagged fields.
_FLEXIBLE_END = NO_THROTTLE + _NO_TAGGED_FIELDS
_ZERO_UUID = bytes(16)


def encode_produce_response_body_python(version: int, topics: Sequence[TopicResults]) -> bytes:
    """The ProduceResponse payload for `version` (3 to 13): no record errors, no current
    leader or node endpoints (the tagged fields a single-node broker never sets)."""
    if version >= FIRST_FLEXIBLE_VERSION:
        return _encode_flexible(version, topics)
    parts: list[bytes] = [_INT32.pack(len(topics))]
    add = parts.append
    with_log_start = version >= 5
    with_errors = version >= 8  # record errors and an error message
    for topic, partitions in topics:
        name = cast(str, topic).encode()
        add(_INT16.pack(len(name)) + name + _INT32.pack(len(partitions)))
        for partition, error_code, base_offset, log_start, message, append_time in partitions:
            if with_errors and message is None:
                add(
                    _pack_partition_v8(
                        partition,
                        error_code,
                        base_offset,
                        append_time,
                        log_start,
                        _NO_RECORD_ERRORS,
                        _NULL_STRING,
                    )
                )
            elif with_log_start:
                add(_pack_partition_v5(partition, error_code, base_offset, append_time, log_start))
                if with_errors:
                    add(_INT32.pack(_NO_RECORD_ERRORS) + _legacy_string(message))
            else:
                add(_pack_partition_v2(partition, error_code, base_offset, append_time))
    add(NO_THROTTLE)
    return b"".join(parts)


def with_throttle(body: bytes, version: int, throttle_time_ms: int) -> bytes:
    """A ProduceResponse payload from encode_produce_response_body with its
    throttle_time_ms set: the field closes the payload (before the tagged fields, one empty
    byte, from v9), so a quota's throttle costs the encoders nothing."""
    end = len(body) - 1 if version >= FIRST_FLEXIBLE_VERSION else len(body)
    return body[: end - 4] + _INT32.pack(throttle_time_ms) + body[end:]


def _encode_flexible(version: int, topics: Sequence[TopicResults]) -> bytes:
    parts: list[bytes] = [compact_length(len(topics))]
    add = parts.append
    by_id = version >= FIRST_TOPIC_ID_VERSION
    for topic, partitions in topics:
        if by_id:
            # A v13 topic the broker does not know by its id is echoed as it came.
            topic_id = cast(uuid.UUID | None, topic)
            head = _ZERO_UUID if topic_id is None else topic_id.bytes
        else:
            name = cast(str, topic).encode()
            head = compact_length(len(name)) + name
        add(head + compact_length(len(partitions)))
        for partition, error_code, base_offset, log_start, message, append_time in partitions:
            if message is None:
                add(
                    _pack_partition_flexible(
                        partition,
                        error_code,
                        base_offset,
                        append_time,
                        log_start,
                        _EMPTY_RECORD_ERRORS,
                    )
                )
            else:
                add(_pack_partition_v5(partition, error_code, base_offset, append_time, log_start))
                add(b"\x01" + _compact_string(message) + _NO_TAGGED_FIELDS)
        add(_NO_TAGGED_FIELDS)
    add(_FLEXIBLE_END)
    return b"".join(parts)


encode_produce_response_body = encode_produce_response_body_python
"""encode_produce_response_body_python, in C when codec/_native.c is built and on (it writes
the same bytes, and leaves partitions with an error message to the Python encoder)."""


# --- the request -------------------------------------------------------------------------

_ACKS_TIMEOUT_BYTE = struct.Struct(">hiB")
_ACKS_TIMEOUT_COUNT = struct.Struct(">hii")
_INDEX_SIZE = struct.Struct(">ii")
_INDEX_TWO_BYTES = struct.Struct(">iBB")
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
_unpack_acks_timeout_byte = _ACKS_TIMEOUT_BYTE.unpack_from
_unpack_acks_timeout_count = _ACKS_TIMEOUT_COUNT.unpack_from
_unpack_index_size = _INDEX_SIZE.unpack_from
_unpack_index_two_bytes = _INDEX_TWO_BYTES.unpack_from
# The views are built with tuple.__new__: a NamedTuple's own constructor is a Python
# function, and one is built per partition per request.
_new = tuple.__new__


class PartitionProduceData(NamedTuple):
    """One partition's records, a zero-copy slice of the request frame (None if null)."""

    # kio's name for the field, though it hides tuple.index.
    index: int  # type: ignore[assignment]
    records: memoryview | None


class TopicProduceData(NamedTuple):
    """A topic and its partitions: by name before v13, by id (`name` None) from v13."""

    name: str | None
    topic_id: uuid.UUID | None
    partition_data: tuple[PartitionProduceData, ...]


class ProduceRequestView(NamedTuple):
    """A decoded ProduceRequest (v3 to 13), with the attribute names of kio's entity.

    `timeout_ms` is kio's `timeout` as an integer, not a timedelta. A v13 topic id of all
    zeros is the zero UUID here, where kio reads None.
    """

    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: tuple[TopicProduceData, ...]


Decoded = tuple[ProduceRequestView, int]


def decode_produce_request(
    frame: bytes | bytearray | memoryview, offset: int, version: int
) -> Decoded:
    """Decode the ProduceRequest payload of `version` that starts at `offset` of `frame`.

    Returns the request and the number of bytes it took (bytes after it are left alone,
    as Kafka leaves them). Unknown tagged fields are skipped, as Kafka skips them. Raises
    UndecodableRequest for a payload that ends early, holds a length or count the frame
    cannot hold, a negative length, null where the schema has no null, a string that is
    not UTF-8 or a varint over 5 bytes.
    """
    return produce_request_decoder(version)(frame, offset)


def produce_request_decoder(
    version: int,
) -> Callable[[bytes | bytearray | memoryview, int], Decoded]:
    """decode_produce_request for one version: `decoder(frame, offset)`; in C when
    codec/_native.c is built and on (it decodes what the Python decoders decode, and leaves
    anything else to them, so errors are theirs)."""
    if _native is not None and FIRST_VERSION <= version <= LAST_VERSION:
        return partial(_native.decode_produce, version)
    return python_produce_request_decoder(version)


def python_produce_request_decoder(
    version: int,
) -> Callable[[bytes | bytearray | memoryview, int], Decoded]:
    """produce_request_decoder in pure Python."""
    if FIRST_VERSION <= version < FIRST_FLEXIBLE_VERSION:
        return partial(_decode_legacy, version)
    if FIRST_FLEXIBLE_VERSION <= version <= LAST_VERSION:
        return partial(_decode_flexible, version)

    def refuse(frame: bytes | bytearray | memoryview, offset: int) -> Decoded:
        raise UndecodableRequest(
            f"Produce v{version} body does not decode: "
            f"the fast decoder reads v{FIRST_VERSION}-v{LAST_VERSION}"
        )

    return refuse


def _decode_legacy(version: int, frame: bytes | bytearray | memoryview, offset: int) -> Decoded:
    # Fixed-size reads past the end raise struct.error, caught below; every length is
    # checked against the bytes left before it is used, every count before its loop.
    # Records are slices of a memoryview: zero-copy.
    view = frame if frame.__class__ is memoryview else memoryview(frame)
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
                partitions.append(_new(PartitionProduceData, (index, records)))
            topics.append(_new(TopicProduceData, (name, None, tuple(partitions))))
    except struct.error:
        raise _error(version, "the frame ends inside a fixed-size field", pos, offset) from None
    except UnicodeDecodeError:
        raise _error(version, "a string is not UTF-8", pos, offset) from None
    return (
        _new(ProduceRequestView, (transactional_id, acks, timeout_ms, tuple(topics))),
        pos - offset,
    )


def _decode_flexible(version: int, frame: bytes | bytearray | memoryview, offset: int) -> Decoded:
    # As in _decode_legacy, and reading a byte past the end raises IndexError. Varints of
    # one byte (counts, short strings, empty tag sections) and records lengths of two are
    # read inline, several fields at once where the common shape allows; longer varints by
    # _uvarint_rest, and any count that does not fit one byte by _compact_count.
    view = frame if frame.__class__ is memoryview else memoryview(frame)
    end = len(view)
    by_id = version >= FIRST_TOPIC_ID_VERSION
    topic_min = _TOPIC_ID_TOPIC_MIN if by_id else _FLEXIBLE_TOPIC_MIN
    pos = offset
    try:
        size = view[pos]
        pos += 1
        transactional_id = None
        if size:
            if size > _VARINT_LAST_BYTE:
                size, pos = _uvarint_rest(view, pos, size, version, offset)
            size -= 1  # compact: length + 1, 0 for null
            _check_size(size, end - pos, version, "transactional id", pos, offset)
            transactional_id = str(view[pos : pos + size], "utf-8")
            pos += size
        acks, timeout_ms, topic_count = _unpack_acks_timeout_byte(view, pos)
        pos += _ACKS_TIMEOUT_BYTE.size
        topic_count -= 1  # compact: count + 1, 0 for null
        # A count of one byte that fits is taken inline; anything else, read again in full.
        if not 0 <= topic_count < _VARINT_LAST_BYTE or topic_count * topic_min > end - pos:
            topic_count, pos = _compact_count(
                view, pos - 1, end, topic_min, version, "topic", offset
            )
        topics = []
        for _ in range(topic_count):
            name = None
            topic_id = None
            if by_id:
                if end - pos < _UUID_BYTES:
                    raise _error(version, "the frame ends inside a topic id", pos, offset)
                topic_id = topic_id_of(bytes(view[pos : pos + _UUID_BYTES]))
                pos += _UUID_BYTES
            else:
                size = view[pos]
                pos += 1
                if size > _VARINT_LAST_BYTE:
                    size, pos = _uvarint_rest(view, pos, size, version, offset)
                if not size:
                    raise _error(version, "null topic name (not nullable)", pos - 1, offset)
                size -= 1
                if size > end - pos:
                    _check_size(size, end - pos, version, "topic name", pos, offset)
                name = str(view[pos : pos + size], "utf-8")
                pos += size
            count = view[pos] - 1
            pos += 1
            if not 0 <= count < _VARINT_LAST_BYTE or count * _FLEXIBLE_PARTITION_MIN > end - pos:
                count, pos = _compact_count(
                    view, pos - 1, end, _FLEXIBLE_PARTITION_MIN, version, "partition", offset
                )
            partitions = []
            for _ in range(count):
                # A partition takes at least 6 bytes (index, length, tags): read 6 at once.
                index, size, second = _unpack_index_two_bytes(view, pos)
                pos += 5
                if size > _VARINT_LAST_BYTE:
                    if second > _VARINT_LAST_BYTE:
                        size, pos = _uvarint_rest(view, pos, size, version, offset)
                    else:
                        # Records of 127 bytes to 16 KiB: a two-byte length.
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
                partitions.append(_new(PartitionProduceData, (index, records)))
            if view[pos]:
                pos = _skip_tagged_fields(view, pos, end, version, offset)
            else:
                pos += 1
            topics.append(_new(TopicProduceData, (name, topic_id, tuple(partitions))))
        if view[pos]:
            pos = _skip_tagged_fields(view, pos, end, version, offset)
        else:
            pos += 1
    except (IndexError, struct.error):
        raise _error(version, "the frame ends inside a field", pos, offset) from None
    except UnicodeDecodeError:
        raise _error(version, "a string is not UTF-8", pos, offset) from None
    return (
        _new(ProduceRequestView, (transactional_id, acks, timeout_ms, tuple(topics))),
        pos - offset,
    )


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


_TOPIC_IDS: dict[bytes, uuid.UUID] = {}
_MAX_TOPIC_IDS = 4096


def topic_id_of(raw: bytes) -> uuid.UUID:
    """The UUID of a v13 request's 16 topic-id bytes, made once per topic: every Produce
    request of a Java 4 client names its topics by id, and uuid.UUID() costs a microsecond."""
    topic_id = _TOPIC_IDS.get(raw)
    if topic_id is None:
        if len(_TOPIC_IDS) >= _MAX_TOPIC_IDS:  # ids from a fuzzer: keep the memory bounded
            _TOPIC_IDS.clear()
        topic_id = _TOPIC_IDS[raw] = uuid.UUID(bytes=raw)
    return topic_id


def _decode_in_python(version: int, frame: bytes | bytearray | memoryview, offset: int) -> Decoded:
    return python_produce_request_decoder(version)(frame, offset)


_native = native.load()
if _native is not None:
    _native.setup_produce(
        ProduceRequestView,
        TopicProduceData,
        PartitionProduceData,
        topic_id_of,
        _decode_in_python,
        encode_produce_response_body_python,
    )
    encode_produce_response_body = _native.encode_produce_response
