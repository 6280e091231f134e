"""The null sink: checks a partition's record batch, counts it, gives it offsets, drops it.

Per batch it reads the 61-byte header and nothing else: record counts come from the
header, compressed records are never inflated, the bytes are never stored.
"""

from __future__ import annotations

from typing import NamedTuple

from kio.schema.errors import ErrorCode

from codec import InvalidRecordBatch, crc_matches, read_batch_header

from .producers import ProducerRegistry, SequenceVerdict
from .topics import Partition


class AppendResult(NamedTuple):
    """One partition's outcome. A NamedTuple: built once per batch, on the hot path, where
    a frozen dataclass's __init__ costs several times more."""

    error: ErrorCode
    base_offset: int = -1
    message: str | None = None
    log_append_time: int = -1
    """-1, as Kafka answers a batch of a CreateTime topic; a duplicate's is the timestamp
    recorded for the batch it repeats."""
    records: int = 0
    """The records appended (none for a duplicate or a refusal)."""


NO_SEQUENCE = -1
TOO_LARGE = AppendResult(ErrorCode.message_too_large)
OUT_OF_ORDER = AppendResult(ErrorCode.out_of_order_sequence_number)
FENCED = AppendResult(ErrorCode.invalid_producer_epoch)
REFUSED_AT_APPEND = frozenset({OUT_OF_ORDER.error, FENCED.error})
"""What the log refuses as it appends, not before: Kafka's answer then carries the
partition's log start offset, as it does for a batch taken."""


def append(
    topic: str,
    partition: Partition,
    records: bytes | memoryview | None,
    producers: ProducerRegistry,
    verify_crc: bool,
    max_bytes: int,
    transactions_v2: bool = False,
    leader_epoch: int = 0,
) -> AppendResult:
    """Accept one partition's records from a Produce request, or say why not.

    Like Kafka for Produce v3+, exactly one RecordBatch v2 per partition is accepted, of at
    most `max_bytes` (the topic's max.message.bytes). `transactions_v2`: the request is
    Produce v12+ with a transactional id, whose transactional batches Kafka verifies more
    strictly (a producer's first on a partition at sequence 0).
    """
    if not records:
        return AppendResult(ErrorCode.invalid_record, message="no record batch in the request")
    try:
        batch = read_batch_header(records)
    except InvalidRecordBatch as error:
        code = ErrorCode.invalid_record if "magic" in str(error) else ErrorCode.corrupt_message
        return AppendResult(code, message=str(error))
    size = len(records)  # a NamedTuple field costs more to read than a local
    if batch.length != size:
        return AppendResult(
            ErrorCode.invalid_record,
            message="Produce requests v3+ may carry exactly one record batch per partition",
        )
    if size > max_bytes:
        # As Kafka's UnifiedLog compares a batch's whole size (its log overhead included)
        # with max.message.bytes before its CRC, and answers without a message.
        return TOO_LARGE
    if batch.record_count <= 0 or batch.last_offset_delta != batch.record_count - 1:
        return AppendResult(
            ErrorCode.invalid_record,
            message=f"record batch says {batch.record_count} records but its last offset "
            f"delta is {batch.last_offset_delta}",
        )
    if batch.is_control:
        return AppendResult(
            ErrorCode.invalid_record, message="clients may not produce control batches"
        )
    if verify_crc and not crc_matches(records, batch):
        return AppendResult(
            ErrorCode.corrupt_message, message="record batch CRC-32C does not match its bytes"
        )

    idempotent = batch.producer_id >= 0 and batch.base_sequence != NO_SEQUENCE
    if idempotent:
        check = producers.check(
            batch.producer_id,
            batch.producer_epoch,
            topic,
            partition.index,
            batch.base_sequence,
            batch.last_sequence,
            first_must_be_zero=transactions_v2 and batch.is_transactional,
        )
        duplicate = check.duplicate
        if duplicate is not None:
            # As Kafka's UnifiedLog answers a retry of a batch it has: the first append's
            # offset, and the timestamp it recorded as the log append time (whatever the
            # topic's timestamp type).
            return AppendResult(
                ErrorCode.none, duplicate.base_offset, log_append_time=duplicate.timestamp
            )
        # Without a message, as Kafka answers them (its message is in its own log).
        if check.verdict is SequenceVerdict.OUT_OF_ORDER:
            return OUT_OF_ORDER
        if check.verdict is SequenceVerdict.FENCED:
            return FENCED

    base_offset = partition.log_end_offset
    partition.log_end_offset = base_offset + batch.record_count
    if partition.retained is not None:  # --retain: kept for Fetch, as received
        start = partition.retained.append(base_offset, batch.record_count, records, leader_epoch)
        partition.log_start_offset = max(partition.log_start_offset, start)
    if batch.is_transactional:  # its records count once its transaction ends
        partition.transactions_written().wrote(
            batch.producer_id, batch.producer_epoch, base_offset, batch.record_count
        )
    produced = partition.produced
    produced.records += batch.record_count
    produced.bytes += size
    produced.batches += 1
    if idempotent:
        producers.record(
            batch.producer_id,
            batch.producer_epoch,
            topic,
            partition.index,
            batch.base_sequence,
            batch.last_sequence,
            base_offset,
            batch.max_timestamp,
        )
    return AppendResult(ErrorCode.none, base_offset, None, -1, batch.record_count)
