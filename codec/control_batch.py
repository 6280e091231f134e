"""Transactions in record batches: the markers Kafka writes (a control batch of one control
record), and batches stamped as a transactional producer's.

The record's key is (version 0, type: 0 abort, 1 commit), its value (version 0, the
coordinator's epoch); the batch is transactional and a control batch (attributes 0x30),
carries the producer's id and epoch, and no sequence. Consumers never hand control records
to the application; a read_committed one learns from them where a transaction ended.
"""

from __future__ import annotations

import struct

from .crc import crc32c
from .framing import Buffer
from .record_batch import ATTRIBUTES_OFFSET, CRC_OFFSET, LOG_OVERHEAD

ABORT = 0
COMMIT = 1
_TRANSACTIONAL_CONTROL = 0x30
_NO_SEQUENCE = -1
_MAGIC = 2
_HEADER = struct.Struct(">qiibIhiqqqhii")
# One control record: its length (16, a zigzag varint), attributes, timestamp delta and
# offset delta (all 0), the 4-byte key, the 6-byte value, no headers.
_RECORD = struct.Struct(">bbbbbhhbhib")
_RECORD_BYTES = 16


def control_batch(
    base_offset: int,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    timestamp_ms: int,
    coordinator_epoch: int = 0,
    leader_epoch: int = 0,
) -> bytes:
    """The marker of a transaction that ended at `base_offset`: a whole RecordBatch v2,
    stamped with the partition's `leader_epoch` as Kafka's leader writes it."""
    record = _RECORD.pack(
        _RECORD_BYTES << 1, 0, 0, 0, 4 << 1, 0, COMMIT if commit else ABORT,
        6 << 1, 0, coordinator_epoch, 0,
    )  # fmt: skip
    length = _HEADER.size - LOG_OVERHEAD + len(record)
    header = _HEADER.pack(
        base_offset, length, leader_epoch, _MAGIC, 0, _TRANSACTIONAL_CONTROL, 0,
        timestamp_ms, timestamp_ms, producer_id, producer_epoch, _NO_SEQUENCE, 1,
    )  # fmt: skip
    batch = bytearray(header + record)
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    return bytes(batch)


_PRODUCER = struct.Struct(">qhi")  # producer id, epoch, base sequence: bytes 43 to 53
_PRODUCER_OFFSET = 43
_TRANSACTIONAL = 0x10


def as_transactional(
    header: bytearray, records: Buffer, producer_id: int, producer_epoch: int
) -> bytearray:
    """`header` (a batch header rendered from a template, records apart) stamped as the
    given transactional producer's batch, its CRC-32C taken again over the records: what a
    read_committed consumer checks against the aborted transactions of a Fetch response."""
    attributes = struct.unpack_from(">h", header, ATTRIBUTES_OFFSET)[0]
    struct.pack_into(">h", header, ATTRIBUTES_OFFSET, attributes | _TRANSACTIONAL)
    _PRODUCER.pack_into(header, _PRODUCER_OFFSET, producer_id, producer_epoch, 0)
    crc = crc32c(records, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    struct.pack_into(">I", header, CRC_OFFSET, crc)
    return header
