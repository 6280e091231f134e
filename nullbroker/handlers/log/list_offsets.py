"""ListOffsets, OffsetForLeaderEpoch and DeleteRecords: where each partition's log starts
and ends."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..clock import now_ms
from ..cluster.nodes import NO_LEADER_EPOCH
from ..state.retained import Found, RetainedBatches
from ..state.topics import Partition, Topic
from .common import NO_THROTTLE, counted, epoch_error, led_elsewhere

if TYPE_CHECKING:
    from ..broker import Broker, Session


LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
EARLIEST_PENDING_UPLOAD = -5
LATEST_TIERED = -6
NO_TIMESTAMP = -1
NOT_FOUND = -1
HIGH_WATERMARK = -1
READ_COMMITTED = 1  # the isolation level


def _partition(topic: Topic | None, index: int) -> Partition | None:
    if topic is None or not 0 <= index < len(topic.partitions):
        return None
    return topic.partitions[index]


def _current(broker: Broker, name: str, now: int) -> Topic | None:
    """The named topic with its log end brought up to `now` (a growing source moves)."""
    topic = broker.topics.get(name)
    if topic is not None:
        topic.advance(now)
    return topic


def handle_list_offsets(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.LIST_OFFSETS, request.header.api_version)
    now = now_ms()
    committed_only = getattr(request.body, "isolation_level", 0) == READ_COMMITTED
    topics = []
    for wanted in request.body.topics:
        topic = _current(broker, wanted.name, now)
        followed = led_elsewhere(broker, session.node_id, topic)
        partitions = []
        for asked in wanted.partitions:
            partition = _partition(topic, asked.partition_index)
            epoch = broker.cluster.leader_epoch(wanted.name, asked.partition_index)
            offset, timestamp = NOT_FOUND, NO_TIMESTAMP
            if topic is None or partition is None:
                error = ErrorCode.unknown_topic_or_partition
            else:
                current = getattr(asked, "current_leader_epoch", NO_LEADER_EPOCH)
                error = _leadership_error(partition, followed, current, epoch)
                if error is ErrorCode.none:
                    offset, timestamp, epoch = _lookup(
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


def _leadership_error(
    partition: Partition, followed: frozenset[int], current: int, epoch: int
) -> ErrorCode:
    """Kafka's checks of a partition before it is read (Partition.localLogWithEpochOrThrow):
    the client's current leader epoch (if it names one), then whether this node leads it."""
    error = epoch_error(current, epoch)
    if error is ErrorCode.none and partition.index in followed:
        return ErrorCode.not_leader_or_follower
    return error


def _lookup(
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


def handle_offset_for_leader_epoch(broker: Broker, request: Request, session: Session) -> Any:
    """Where each asked leader epoch ends, as Kafka's LeaderEpochFileCache.endOffsetFor
    answers it: the current epoch ends at the log end; an epoch after it, or none (-1), is
    not known (-1, -1, no error). A consumer asks after a leader change, to learn whether
    the log it read was truncated (its position beyond the end offset).

    Nothing is ever truncated here, so an earlier epoch is answered as ending at the log end
    too (Kafka: where the next epoch began, which no consumer position passes either)."""
    types = response_module(ApiKey.OFFSET_FOR_LEADER_EPOCH, request.header.api_version)
    now = now_ms()
    topics = []
    for wanted in request.body.topics:
        topic = _current(broker, wanted.topic, now)
        followed = led_elsewhere(broker, session.node_id, topic)
        partitions = []
        for asked in wanted.partitions:
            partition = _partition(topic, asked.partition)
            epoch = broker.cluster.leader_epoch(wanted.topic, asked.partition)
            end_epoch, end_offset = NO_LEADER_EPOCH, NOT_FOUND
            if partition is None:
                error = ErrorCode.unknown_topic_or_partition
            else:
                error = _leadership_error(partition, followed, asked.current_leader_epoch, epoch)
                if error is ErrorCode.none and 0 <= asked.leader_epoch <= epoch:
                    end_epoch, end_offset = asked.leader_epoch, partition.log_end_offset
            partitions.append(
                make(
                    types.EpochEndOffset,
                    error_code=counted(broker, error),
                    partition=asked.partition,
                    leader_epoch=end_epoch,
                    end_offset=end_offset,
                )
            )
        topics.append(
            make(types.OffsetForLeaderTopicResult, topic=wanted.topic, partitions=tuple(partitions))
        )
    return make(types.OffsetForLeaderEpochResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


def handle_delete_records(broker: Broker, request: Request, session: Session) -> Any:
    """Advance each partition's log start; offsets below it are gone for consumers."""
    types = response_module(ApiKey.DELETE_RECORDS, request.header.api_version)
    now = now_ms()
    topics = []
    for wanted in request.body.topics:
        topic = _current(broker, wanted.name, now)
        partitions = []
        for asked in wanted.partitions:
            partition = _partition(topic, asked.partition_index)
            low_watermark = NOT_FOUND
            if partition is None:
                error = ErrorCode.unknown_topic_or_partition
            else:
                target = (
                    partition.log_end_offset if asked.offset == HIGH_WATERMARK else asked.offset
                )
                if not 0 <= target <= partition.log_end_offset:
                    # As Kafka: a refused partition's low watermark is -1, not its log start.
                    error = ErrorCode.offset_out_of_range
                else:
                    error = ErrorCode.none
                    partition.log_start_offset = max(partition.log_start_offset, target)
                    if partition.retained is not None:
                        partition.retained.drop_below(partition.log_start_offset)
                    low_watermark = partition.log_start_offset
            partitions.append(
                make(
                    types.DeleteRecordsPartitionResult,
                    partition_index=asked.partition_index,
                    low_watermark=low_watermark,
                    error_code=counted(broker, error),
                )
            )
        topics.append(
            make(types.DeleteRecordsTopicResult, name=wanted.name, partitions=tuple(partitions))
        )
    return make(types.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


HANDLERS = {
    ApiKey.LIST_OFFSETS: handle_list_offsets,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: handle_offset_for_leader_epoch,
    ApiKey.DELETE_RECORDS: handle_delete_records,
}
