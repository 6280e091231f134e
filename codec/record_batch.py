"""A zero-copy view of a RecordBatch v2 header. It never decompresses the records."""

from __future__ import annotations

import struct
from typing import NamedTuple

from . import native
from .crc import crc32c
from .errors import InvalidRecordBatch

# Offsets into a RecordBatch v2, as ../shared/PROTOCOL.md lists them.
BATCH_LENGTH_OFFSET = 8
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
HEADER_BYTES = 61
# batchLength counts the bytes after itself.
LOG_OVERHEAD = 12

_LENGTH = struct.Struct(">i")
# The whole header: baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes,
# lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence,
# recordCount: bytes 0 to 61.
_HEADER = struct.Struct(">qiibIhiqqqhii")
_new_header = tuple.__new__
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_LEADER_EPOCH_OFFSET = 12

COMPRESSION_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")


class RecordBatchHeader(NamedTuple):
    """The header fields of one RecordBatch v2, read from its first 61 bytes.

    A NamedTuple: one is read per batch produced, where a frozen dataclass's __init__
    cost as much as the rest of the null sink's work on the batch.
    """

    base_offset: int
    length: int
    """Bytes of the whole batch on the wire, its offset and length fields included."""
    partition_leader_epoch: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def compression(self) -> str:
        code = self.attributes & 0x07
        return COMPRESSION_NAMES[code] if code < len(COMPRESSION_NAMES) else f"unknown({code})"

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & 0x10)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & 0x20)

    @property
    def last_sequence(self) -> int:
        """The sequence number of the batch's last record, wrapping like Kafka's."""
        return (self.base_sequence + self.last_offset_delta) % (2**31)


def read_batch_header_python(
    data: bytes | bytearray | memoryview, offset: int = 0
) -> RecordBatchHeader:
    """Read the header of the batch starting at `offset`.

    Raises InvalidRecordBatch for a batch that is not magic v2, is shorter than its header,
    or claims more bytes than `data` holds.
    """
    available = len(data) - offset
    if available < HEADER_BYTES:
        raise InvalidRecordBatch(
            f"record batch of {available} bytes is shorter than the {HEADER_BYTES}-byte header"
        )
    magic = data[offset + MAGIC_OFFSET]
    if magic != 2:
        raise InvalidRecordBatch(f"record batch has magic {magic}; only magic v2 is accepted")
    (batch_length,) = _LENGTH.unpack_from(data, offset + BATCH_LENGTH_OFFSET)
    length = batch_length + LOG_OVERHEAD
    if length < HEADER_BYTES or length > available:
        raise InvalidRecordBatch(
            f"record batch length field says {length} bytes but {available} are present"
        )
    # base offset, length, then the fields after the length but the magic: one struct.
    fields = _HEADER.unpack_from(data, offset)
    return _new_header(RecordBatchHeader, (fields[0], length, fields[2], *fields[4:]))


def rebased(
    batch: bytes | bytearray | memoryview, base_offset: int, leader_epoch: int | None = None
) -> bytearray:
    """A copy of a batch with its base offset set, and its partition leader epoch when
    given (as Kafka stamps the leader's on a batch it appends): still valid, since the
    CRC-32C covers neither."""
    copy = bytearray(batch)
    _BASE_OFFSET.pack_into(copy, 0, base_offset)
    if leader_epoch is not None:
        _LEADER_EPOCH.pack_into(copy, _LEADER_EPOCH_OFFSET, leader_epoch)
    return copy


read_batch_header = read_batch_header_python
"""Read the header of the batch starting at `offset` (see read_batch_header_python): in C
when codec/_native.c is built and on, which reads what the Python reader reads and leaves
anything else to it, so errors are the Python reader's."""
_native = native.load()
if _native is not None:
    _native.setup_header(RecordBatchHeader, read_batch_header_python)
    read_batch_header = _native.read_batch_header


def crc_matches(
    data: bytes | bytearray | memoryview, header: RecordBatchHeader, offset: int = 0
) -> bool:
    """Whether the batch's CRC-32C (attributes to the end) matches its bytes."""
    view = memoryview(data)[offset + ATTRIBUTES_OFFSET : offset + header.length]
    return crc32c(view) == header.crc


def iter_batches(data: bytes | bytearray | memoryview) -> list[RecordBatchHeader]:
    """The headers of every batch in a records field, in order."""
    headers = []
    offset = 0
    while offset < len(data):
        header = read_batch_header(data, offset)
        headers.append(header)
        offset += header.length
    return headers


_BATCH_TIMESTAMPS = struct.Struct(">qq")
_BATCH_TIMESTAMPS_OFFSET = 27
_LOG_APPEND_TIME = 0x08


def batch_timestamps(batch: bytes | bytearray | memoryview) -> tuple[int, int]:
    """(base timestamp, max timestamp) of a RecordBatch v2, from its header."""
    base, maximum = _BATCH_TIMESTAMPS.unpack_from(batch, _BATCH_TIMESTAMPS_OFFSET)
    return base, maximum


def batch_leader_epoch(batch: bytes | bytearray | memoryview) -> int:
    """The partition leader epoch stamped on a batch (bytes 12-15)."""
    (epoch,) = _LEADER_EPOCH.unpack_from(batch, _LEADER_EPOCH_OFFSET)
    return epoch  # type: ignore[no-any-return]


def record_timestamps(
    records: bytes | bytearray | memoryview, count: int, base_timestamp: int
) -> list[tuple[int, int]]:
    """(offset delta, timestamp) of each record of a batch's uncompressed records: only the
    fields before the key are read (length, attributes, timestamp delta, offset delta)."""
    view = memoryview(records)
    found = []
    position = 0
    for _ in range(count):
        length, position = _varint(view, position)
        end = position + length
        position += 1  # attributes
        timestamp_delta, position = _varint(view, position)
        offset_delta, position = _varint(view, position)
        found.append((offset_delta, base_timestamp + timestamp_delta))
        position = end
    return found


class RecordSpan(NamedTuple):
    """Where one record of a batch's uncompressed records lies, and what compaction needs
    of it: its key, and whether it is a tombstone (a null value)."""

    start: int
    end: int
    offset_delta: int
    key: bytes | None
    tombstone: bool


def record_spans(records: bytes | bytearray | memoryview, count: int) -> list[RecordSpan]:
    """Each record of a batch's uncompressed records: its bytes' span, offset delta, key
    and whether its value is null."""
    view = memoryview(records)
    found = []
    position = 0
    for _ in range(count):
        start = position
        length, position = _varint(view, position)
        end = position + length
        position += 1  # attributes
        _, position = _varint(view, position)  # timestamp delta
        offset_delta, position = _varint(view, position)
        key_length, position = _varint(view, position)
        key = None
        if key_length >= 0:
            key = bytes(view[position : position + key_length])
            position += key_length
        value_length, position = _varint(view, position)
        found.append(RecordSpan(start, end, offset_delta, key, value_length < 0))
        position = end
    return found


def with_records(
    batch: bytes | bytearray | memoryview, records: bytes | bytearray, count: int
) -> bytearray:
    """A copy of a batch's header over other, uncompressed, records (`count` of them): its
    base offset, last offset delta, timestamps and producer fields kept, so each record's
    offset and timestamp (deltas from the header's) stay what they were; the length, count,
    compression and CRC-32C made anew. What a log cleaner writes of a batch it keeps part
    of."""
    rebuilt = bytearray(batch[:HEADER_BYTES]) + records
    _LENGTH.pack_into(rebuilt, BATCH_LENGTH_OFFSET, len(rebuilt) - LOG_OVERHEAD)
    attributes = struct.unpack_from(">h", rebuilt, ATTRIBUTES_OFFSET)[0] & ~0x07
    struct.pack_into(">h", rebuilt, ATTRIBUTES_OFFSET, attributes)
    struct.pack_into(">i", rebuilt, HEADER_BYTES - 4, count)
    struct.pack_into(">I", rebuilt, CRC_OFFSET, crc32c(memoryview(rebuilt)[ATTRIBUTES_OFFSET:]))
    return rebuilt


def _varint(view: memoryview, position: int) -> tuple[int, int]:
    """A zigzag varint (or varlong) at `position`, and the position after it."""
    shift = unsigned = 0
    while True:
        byte = view[position]
        position += 1
        unsigned |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (unsigned >> 1) ^ -(unsigned & 1), position
        shift += 7
