"""Metadata: the cluster's nodes, each at the host the client reached us at, and the node
that leads each partition (nullbroker.cluster.nodes); the topics it names made, if they
may be."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import is_nullable, make, response_module

from ...state.topics import Topic, is_internal
from ...topic_names import invalid_name_reason
from ..common import (
    CLUSTER_OPERATIONS,
    NO_THROTTLE,
    TOPIC_OPERATIONS,
    authorized_operations,
    counted,
)

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.METADATA


def handle(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    types = response_module(ApiKey.METADATA, version)
    body = request.body
    include_topic_operations = getattr(body, "include_topic_authorized_operations", False)
    # Before v4 there is no flag, and a Metadata request may always create topics.
    allow_auto_create = getattr(body, "allow_auto_topic_creation", True)

    requested = body.topics
    if requested is None or (version == 0 and not requested):
        topics = [_topic(types, broker, topic, include_topic_operations) for topic in broker.topics]
    else:
        topics = [
            _requested_topic(types, broker, wanted, allow_auto_create, include_topic_operations)
            for wanted in requested
        ]

    cluster = broker.cluster
    return make(
        types.MetadataResponse,
        throttle_time=NO_THROTTLE,
        brokers=tuple(
            make(
                types.MetadataResponseBroker,
                node_id=node,
                host=session.node(cluster, node).host,
                port=session.node(cluster, node).port,
                rack=None,
            )
            for node in cluster.live
        ),
        cluster_id=broker.cluster_id,
        controller_id=cluster.controller,
        topics=tuple(topics),
        cluster_authorized_operations=authorized_operations(
            getattr(body, "include_cluster_authorized_operations", False), CLUSTER_OPERATIONS
        ),
        error_code=ErrorCode.none,
    )


def _requested_topic(
    types: Any, broker: Broker, wanted: Any, allow_auto_create: bool, include_operations: bool
) -> Any:
    name = wanted.name
    topic_id = getattr(wanted, "topic_id", None)
    if name is None:
        topic = broker.topics.by_id(topic_id) if topic_id is not None else None
        if topic is None:
            return _topic_error(types, broker, None, topic_id, ErrorCode.unknown_topic_id)
        return _topic(types, broker, topic, include_operations)
    # Kafka tells the operations of every topic asked by name, even one it refused (its
    # authorizer is asked about the name): only an unknown id has none.
    if invalid_name_reason(name) is not None:
        return _topic_error(
            types, broker, name, None, ErrorCode.invalid_topic_exception, include_operations
        )
    topic = broker.topics.get(name)
    if topic is None:
        # Kafka (KRaft) asks its controller to make the topic and answers at once that it
        # does not know it (the client asks again); so does nullbroker, having made it. That
        # answer is how a topic coming into being is told, not a refusal: not counted.
        made = allow_auto_create and broker.topics.get_or_auto_create(name) is not None
        return _topic_error(
            types,
            broker,
            name,
            None,
            ErrorCode.unknown_topic_or_partition,
            include_operations,
            counted_as_error=not made,
        )
    return _topic(types, broker, topic, include_operations)


def _topic(types: Any, broker: Broker, topic: Topic, include_operations: bool) -> Any:
    cluster = broker.cluster
    leaders = cluster.leaders(topic.name, len(topic.partitions))
    partition_type = types.MetadataResponsePartition
    return make(
        types.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.id,
        is_internal=topic.internal,
        partitions=tuple(
            make(
                partition_type,
                error_code=ErrorCode.none,
                partition_index=partition.index,
                leader_id=leaders[partition.index],
                leader_epoch=cluster.leader_epoch(topic.name, partition.index),
                replica_nodes=(leaders[partition.index],),
                isr_nodes=(leaders[partition.index],),
                offline_replicas=(),
            )
            for partition in topic.partitions
        ),
        topic_authorized_operations=authorized_operations(include_operations, TOPIC_OPERATIONS),
    )


def _topic_error(
    types: Any,
    broker: Broker,
    name: str | None,
    topic_id: Any,
    error: ErrorCode,
    include_operations: bool = False,
    counted_as_error: bool = True,
) -> Any:
    if name is None and not is_nullable(types.MetadataResponseTopic, "name"):
        name = ""  # asked by id from a version that cannot answer a topic without a name
    return make(
        types.MetadataResponseTopic,
        error_code=counted(broker, error) if counted_as_error else error,
        name=name,
        topic_id=topic_id or UUID(int=0),
        is_internal=name is not None and is_internal(name),  # as Kafka: by the name alone
        partitions=(),
        topic_authorized_operations=authorized_operations(include_operations, TOPIC_OPERATIONS),
    )
