"""ListOffsets: where each partition's log starts and ends."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import Request
from codec.entities import make, response_module

from ..topics import Partition
from .common import NO_THROTTLE, counted

if TYPE_CHECKING:
    from ..broker import Broker, Session

LIST_OFFSETS = 2

LATEST = -1
EARLIEST = -2
EARLIEST_LOCAL = -4
NO_TIMESTAMP = -1
NOT_FOUND = -1
NO_LEADER_EPOCH = -1


def handle_list_offsets(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(LIST_OFFSETS, request.header.api_version)
    topics = []
    for wanted in request.body.topics:
        topic = broker.topics.get(wanted.name)
        partitions = []
        for asked in wanted.partitions:
            if topic is None or not 0 <= asked.partition_index < len(topic.partitions):
                error, offset = ErrorCode.unknown_topic_or_partition, NOT_FOUND
            else:
                error = ErrorCode.none
                offset = _offset_for(topic.partitions[asked.partition_index], asked.timestamp)
            partitions.append(
                make(
                    types.ListOffsetsPartitionResponse,
                    partition_index=asked.partition_index,
                    error_code=counted(broker, error),
                    timestamp=NO_TIMESTAMP,
                    offset=offset,
                    leader_epoch=NO_LEADER_EPOCH,
                )
            )
        topics.append(
            make(types.ListOffsetsTopicResponse, name=wanted.name, partitions=tuple(partitions))
        )
    return make(types.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


def _offset_for(partition: Partition, timestamp: int) -> int:
    """The offset for a ListOffsets timestamp or sentinel.

    The null sink keeps no record timestamps, so a search by timestamp (or for the max
    timestamp, -3) finds nothing, which Kafka answers with offset -1.
    """
    if timestamp == LATEST:
        return partition.log_end_offset
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return partition.log_start_offset
    return NOT_FOUND


HANDLERS = {LIST_OFFSETS: handle_list_offsets}
