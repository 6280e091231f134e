"""DeleteRecords: each partition's log start advanced; offsets below it are gone for
consumers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...clock import now_ms
from ..common import NO_THROTTLE, counted
from .asked_partitions import NOT_FOUND, current_topic, partition_at

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


HIGH_WATERMARK = -1


KEY = ApiKey.DELETE_RECORDS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    """Advance each partition's log start; offsets below it are gone for consumers."""
    types = response_module(ApiKey.DELETE_RECORDS, request.header.api_version)
    now = now_ms()
    topics = []
    for wanted in request.body.topics:
        topic = current_topic(broker, wanted.name, now)
        partitions = []
        for asked in wanted.partitions:
            partition = partition_at(topic, asked.partition_index)
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
