"""DescribeProducers: what `kafka-transactions describe-producers` shows, each partition's
idempotent and transactional producers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..common import NO_THROTTLE, counted, led_elsewhere

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session
    from ...state.topics import Partition


UNKNOWN_PARTITION_MESSAGE = "This server does not host this topic-partition."
"""Kafka's message for UNKNOWN_TOPIC_OR_PARTITION, which DescribeProducers sends with it for a
topic it does not know."""


KEY = ApiKey.DESCRIBE_PRODUCERS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    """What `kafka-transactions describe-producers` shows: each partition's idempotent and
    transactional producers, with the first offset of the transaction each has open."""
    types = response_module(ApiKey.DESCRIBE_PRODUCERS, request.header.api_version)
    topics = []
    for asked in request.body.topics:
        topic = broker.topics.get(asked.name)
        followed = led_elsewhere(broker, session.node_id, topic)
        partitions = []
        for index in asked.partition_indexes:
            active: tuple[Any, ...] = ()
            message = None
            if topic is None or not 0 <= index < len(topic.partitions):
                error = ErrorCode.unknown_topic_or_partition
                # As Kafka: a topic it does not know is told why; a partition past the
                # end of one it knows is not (its replica manager answers that).
                message = UNKNOWN_PARTITION_MESSAGE if topic is None else None
            elif index in followed:
                error = ErrorCode.not_leader_or_follower
            else:
                error = ErrorCode.none
                active = _producers_on(broker, types, topic.name, topic.partitions[index])
            partitions.append(
                make(
                    types.PartitionResponse,
                    partition_index=index,
                    error_code=counted(broker, error),
                    error_message=message,
                    active_producers=active,
                )
            )
        topics.append(make(types.TopicResponse, name=asked.name, partitions=tuple(partitions)))
    return make(types.DescribeProducersResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


def _producers_on(broker: Broker, types: Any, topic: str, partition: Partition) -> tuple[Any, ...]:
    opened = partition.transactions.open if partition.transactions is not None else {}
    return tuple(
        make(
            types.ProducerState,
            producer_id=producer_id,
            producer_epoch=state.epoch,
            last_sequence=state.last_sequence,
            last_timestamp=state.last_timestamp,
            coordinator_epoch=state.coordinator_epoch,
            current_txn_start_offset=opened[producer_id][0] if producer_id in opened else -1,
        )
        for producer_id, state in broker.producers.on_partition(topic, partition.index)
    )
