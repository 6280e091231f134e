"""What ShareFetch and the offsets' APIs share: a group's share partition of a topic
partition, started where the group's `share.auto.offset.reset` says when first read, and
the record batches a ShareFetch hands out from it."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec.entities import make
from codec.framing import Buffer

from ...clock import now_ms
from ...state.share.configs import BY_DURATION, EARLIEST, READ_COMMITTED, by_duration_ms
from ...state.share.partition import SharePartition
from ..common import NO_THROTTLE, counted
from ..log.fetch import transactional_records
from ..log.list_offsets import lookup

if TYPE_CHECKING:
    from ...broker import Broker
    from ...state.share.groups import ShareGroup
    from ...state.topics import Partition, Topic

UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."
"""Kafka's words for UNKNOWN_TOPIC_OR_PARTITION (Errors.UNKNOWN_TOPIC_OR_PARTITION)."""

_BATCH_HEAD = struct.Struct(">qi")
"""A record batch's base offset and length (of what follows the length)."""
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23
_LOG_OVERHEAD = 12


def offsets_answer(
    broker: Broker, response: type, error: ErrorCode, message: str | None = None,
    topics: tuple[Any, ...] = (),
) -> Any:  # fmt: skip
    """AlterShareGroupOffsets' or DeleteShareGroupOffsets' answer (`response`, the kio type):
    an error for the whole request, or each topic's."""
    return make(
        response,
        throttle_time=NO_THROTTLE,
        error_code=counted(broker, error),
        error_message=message,
        responses=topics,
    )


NOT_EMPTY_MESSAGE = "The group is not empty."
"""Kafka's words for altering or deleting the offsets of a share group with members."""


def share_partition(
    broker: Broker, group: ShareGroup, topic: Topic, partition: Partition
) -> SharePartition:
    """The group's share partition of `partition`, made at the start its configs say when
    the group first reads it (or its offsets are altered)."""
    key = (topic.name, partition.index)
    found = group.partitions.get(key)
    if found is None:
        start = initial_offset(broker, group.group_id, topic, partition)
        counters = broker.stats.share_counters(group.group_id, topic.name, partition.index)
        found = group.partitions[key] = SharePartition(start, counters)
    return found


def initial_offset(broker: Broker, group_id: str, topic: Topic, partition: Partition) -> int:
    """Where a share partition starts (share.auto.offset.reset): the log end (latest, the
    default), its start (earliest), or the first record of the last duration
    (by_duration:PnDTnHnMn.nS; the log end if there is none that recent)."""
    reset = broker.share_groups.configs.value(group_id, "share.auto.offset.reset") or ""
    topic.advance(now_ms())
    if reset == EARLIEST:
        return partition.log_start_offset
    end = readable_end(partition, reads_committed(broker, group_id))
    if reset.startswith(BY_DURATION):
        since = now_ms() - by_duration_ms(reset)
        offset = lookup(topic, partition, since, False, 0)[0]
        return end if offset < 0 else offset
    return end


def reads_committed(broker: Broker, group_id: str) -> bool:
    """Whether the group's share.isolation.level is read_committed."""
    level = broker.share_groups.configs.value(group_id, "share.isolation.level")
    return level == READ_COMMITTED


def readable_end(partition: Partition, committed_only: bool) -> int:
    """The end a share group reads to: the last stable offset for one that reads
    committed records only, else the log end."""
    end = partition.log_end_offset
    if committed_only and partition.transactions is not None:
        return partition.transactions.last_stable_offset(end)
    return end


def read_batches(
    topic: Topic, partition: Partition, offset: int, end: int, limit: int
) -> tuple[Sequence[Buffer], int]:
    """Whole record batches from the one holding `offset`, none from `end` on, within
    `limit` bytes (the first even if larger, as Fetch sends it), as Fetch reads them; and
    one past the last offset they hold."""
    parts: Sequence[Buffer]
    if partition.retained is not None:
        parts, _, _ = partition.retained.read(offset, limit, True, end)
    elif partition.transactions is None:
        parts, _, _ = topic.records.read(
            offset, end, limit, True, topic.created_ms, partition.index
        )
    else:
        parts, _, _ = transactional_records(
            topic, partition.index, offset, end, limit, True, partition.transactions
        )
    return parts, covered_end(parts, offset)


def covered_end(parts: Sequence[Buffer], offset: int) -> int:
    """One past the last offset of the batches in `parts` (each batch one buffer, or its
    header and records in two), `offset` if there are none."""
    end = offset
    remaining = 0
    for part in parts:
        if remaining == 0:  # a batch starts here: its header is in this part
            base, length = _BATCH_HEAD.unpack_from(part, 0)
            (delta,) = _LAST_OFFSET_DELTA.unpack_from(part, _LAST_OFFSET_DELTA_AT)
            end = base + delta + 1
            remaining = _LOG_OVERHEAD + length
        remaining -= len(part)
    return end
