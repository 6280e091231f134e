"""ListOffsets: where each partition's log starts and ends, and the offset of a time."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...clock import now_ms
from ...cluster.nodes import NO_LEADER_EPOCH
from ...state.retained import Found, RetainedBatches
from ...state.topics import Partition, Topic
from ..common import NO_THROTTLE, counted, led_elsewhere
from .asked_partitions import NOT_FOUND, current_topic, leadership_error, partition_at

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
EARLIEST_PENDING_UPLOAD = -5
LATEST_TIERED = -6
NO_TIMESTAMP = -1
READ_COMMITTED = 1  # the isolation level


KEY = ApiKey.LIST_OFFSETS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.LIST_OFFSETS, request.header.api_version)
    now = now_ms()
    committed_only = getattr(request.body, "isolation_level", 0) == READ_COMMITTED
    topics = []
    for wanted in request.body.topics:
        topic = current_topic(broker, wanted.name, now)
        followed = led_elsewhere(broker, session.node_id, topic)
        partitions = []
        for asked in wanted.partitions:
            partition = partition_at(topic, asked.partition_index)
            epoch = broker.cluster.leader_epoch(wanted.name, asked.partition_index)
            offset, timestamp = NOT_FOUND, NO_TIMESTAMP
            if topic is None or partition is None:
                error = ErrorCode.unknown_topic_or_partition
            else:
                current = getattr(asked, "current_leader_epoch", NO_LEADER_EPOCH)
                error = leadership_error(partition, followed, current, epoch)
                if error is ErrorCode.none:
                    offset, timestamp, epoch = lookup(
                        topic, partition, asked.timestamp, committed_only, epoch
                    )
            partitions.append(
                make(
                    types.ListOffsetsPartitionResponse,
                    partition_index=asked.partition_index,
                    error_code=counted(broker, error),
                    timestamp=timestamp,
                    offset=offset,
                    # As Kafka: an answer that finds no offset names no epoch.
                    leader_epoch=NO_LEADER_EPOCH if offset == NOT_FOUND else epoch,
                )
            )
        topics.append(
            make(types.ListOffsetsTopicResponse, name=wanted.name, partitions=tuple(partitions))
        )
    return make(types.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


def lookup(
    topic: Topic, partition: Partition, timestamp: int, committed_only: bool, epoch: int
) -> Found:
    """(offset, timestamp, leader epoch) for a ListOffsets timestamp or sentinel, as Kafka's
    Partition.fetchOffsetForTimestamp answers: latest is the last stable offset for a
    read_committed client, the log end for others; a record found by time (or the max
    timestamp) at or past that is not found (-1, -1, no epoch).
    """
    start, end = partition.log_start_offset, partition.log_end_offset
    fetchable = end
    if committed_only and partition.transactions is not None:
        fetchable = partition.transactions.last_stable_offset(end)
    if timestamp == LATEST:
        return fetchable, NO_TIMESTAMP, epoch
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return start, NO_TIMESTAMP, epoch
    if timestamp in (EARLIEST_PENDING_UPLOAD, LATEST_TIERED):
        return _NOT_FOUND  # no tiered storage here
    if partition.retained is not None:
        found = _search_retained(partition.retained, timestamp, start)
    else:
        found = _search_synthetic(topic, timestamp, start, end, epoch)
    if found is None or found[0] >= fetchable:
        return _NOT_FOUND
    return found


_NOT_FOUND: Found = (NOT_FOUND, NO_TIMESTAMP, NO_LEADER_EPOCH)


def _search_retained(retained: RetainedBatches, timestamp: int, start: int) -> Found | None:
    """With --retain: the produced timestamps, as Kafka searches them (the batches held
    are the whole log from its start)."""
    if timestamp == MAX_TIMESTAMP:
        return retained.max_timestamp()
    return retained.offset_for_timestamp(timestamp, start)


def _search_synthetic(
    topic: Topic, timestamp: int, start: int, end: int, epoch: int
) -> Found | None:
    """Without --retain: the timestamps of the synthetic records Fetch serves, so a search
    by time finds the record a consumer would see there (the produced ones are gone)."""
    shape = topic.records
    if timestamp == MAX_TIMESTAMP:
        if end == start:
            return None
        return end - 1, shape.timestamp_ms(topic.created_ms, end - 1), epoch
    offset = shape.offset_for_timestamp(topic.created_ms, timestamp, start, end)
    if offset == end:
        return None
    return offset, shape.timestamp_ms(topic.created_ms, offset), epoch
