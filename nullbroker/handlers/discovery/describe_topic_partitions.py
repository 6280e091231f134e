"""DescribeTopicPartitions: Metadata's partitions, paged (the Admin client's describeTopics,
Kafka 3.9+)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..common import NO_THROTTLE, TOPIC_OPERATIONS, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.DESCRIBE_TOPIC_PARTITIONS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    """The Admin client's describeTopics (Kafka 3.9+): Metadata's partitions, paged.

    Topics come in name order from the cursor on, at most `response_partition_limit`
    partitions in all; `next_cursor` says where the next page starts.
    """
    types = response_module(ApiKey.DESCRIBE_TOPIC_PARTITIONS, request.header.api_version)
    body = request.body
    names = sorted({wanted.name for wanted in body.topics})
    cursor = body.cursor
    if cursor is not None:
        names = [name for name in names if name >= cursor.topic_name]
    budget = body.response_partition_limit
    topics = []
    next_cursor = None
    for name in names:
        topic = broker.topics.get(name)
        if topic is None:
            topics.append(
                make(
                    types.DescribeTopicPartitionsResponseTopic,
                    error_code=counted(broker, ErrorCode.unknown_topic_or_partition),
                    name=name,
                    topic_id=UUID(int=0),
                    partitions=(),
                    topic_authorized_operations=TOPIC_OPERATIONS,
                )
            )
            continue
        first = cursor.partition_index if cursor is not None and cursor.topic_name == name else 0
        indexes = range(first, len(topic.partitions))
        if len(indexes) > budget:
            next_cursor = make(types.Cursor, topic_name=name, partition_index=first + budget)
            indexes = indexes[:budget]
        budget -= len(indexes)
        leaders = broker.cluster.leaders(name, len(topic.partitions))
        topics.append(
            make(
                types.DescribeTopicPartitionsResponseTopic,
                error_code=ErrorCode.none,
                name=name,
                topic_id=topic.id,
                is_internal=topic.internal,
                partitions=tuple(
                    make(
                        types.DescribeTopicPartitionsResponsePartition,
                        error_code=ErrorCode.none,
                        partition_index=index,
                        leader_id=leaders[index],
                        leader_epoch=broker.cluster.leader_epoch(name, index),
                        replica_nodes=(leaders[index],),
                        isr_nodes=(leaders[index],),
                        # As Kafka sends them: nullable in the schema, but the Java admin
                        # client calls .stream() on both (null: NullPointerException).
                        eligible_leader_replicas=(),
                        last_known_elr=(),
                        offline_replicas=(),
                    )
                    for index in indexes
                ),
                topic_authorized_operations=TOPIC_OPERATIONS,
            )
        )
        if next_cursor is not None or budget == 0:
            if next_cursor is None and name != names[-1]:
                next_cursor = make(
                    types.Cursor, topic_name=names[names.index(name) + 1], partition_index=0
                )
            break
    return make(
        types.DescribeTopicPartitionsResponse,
        throttle_time=NO_THROTTLE,
        topics=tuple(topics),
        next_cursor=next_cursor,
    )
