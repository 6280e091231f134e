"""The partition a log request names (ListOffsets, OffsetForLeaderEpoch, DeleteRecords),
found and checked as those requests find and check it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from ...state.topics import Partition, Topic
from ..common import epoch_error

if TYPE_CHECKING:
    from ...broker import Broker


NOT_FOUND = -1


def partition_at(topic: Topic | None, index: int) -> Partition | None:
    if topic is None or not 0 <= index < len(topic.partitions):
        return None
    return topic.partitions[index]


def current_topic(broker: Broker, name: str, now: int) -> Topic | None:
    """The named topic with its log end brought up to `now` (a growing source moves)."""
    topic = broker.topics.get(name)
    if topic is not None:
        topic.advance(now)
    return topic


def leadership_error(
    partition: Partition, followed: frozenset[int], current: int, epoch: int
) -> ErrorCode:
    """Kafka's checks of a partition before it is read (Partition.localLogWithEpochOrThrow):
    the client's current leader epoch (if it names one), then whether this node leads it."""
    error = epoch_error(current, epoch)
    if error is ErrorCode.none and partition.index in followed:
        return ErrorCode.not_leader_or_follower
    return error
