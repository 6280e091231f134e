"""OffsetForLeaderEpoch: where a leader epoch ends in each partition's log, which a consumer
asks after a leader change."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...clock import now_ms
from ...cluster.nodes import NO_LEADER_EPOCH
from ..common import NO_THROTTLE, counted, led_elsewhere
from .asked_partitions import NOT_FOUND, current_topic, leadership_error, partition_at

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH


def handle(broker: Broker, request: Request, session: Session) -> Any:
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
        topic = current_topic(broker, wanted.topic, now)
        followed = led_elsewhere(broker, session.node_id, topic)
        partitions = []
        for asked in wanted.partitions:
            partition = partition_at(topic, asked.partition)
            epoch = broker.cluster.leader_epoch(wanted.topic, asked.partition)
            end_epoch, end_offset = NO_LEADER_EPOCH, NOT_FOUND
            if partition is None:
                error = ErrorCode.unknown_topic_or_partition
            else:
                error = leadership_error(partition, followed, asked.current_leader_epoch, epoch)
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
