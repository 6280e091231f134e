"""CreatePartitions: partitions added to existing topics, within the budget of a request."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..common import NO_THROTTLE, Refusal, counted
from .partition_budget import check_partition_budget

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.CREATE_PARTITIONS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.CREATE_PARTITIONS, request.header.api_version)
    body = request.body
    results = []
    new_partitions = 0
    for wanted in body.topics:
        topic = broker.topics.get(wanted.name)
        try:
            if topic is None:
                # Kafka 4.1.1 says no more than the error code here.
                raise Refusal(ErrorCode.unknown_topic_or_partition, None)
            if wanted.count <= len(topic.partitions):
                raise Refusal(
                    ErrorCode.invalid_partitions,
                    f"topic {wanted.name!r} has {len(topic.partitions)} partitions; "
                    f"the new count must be higher, not {wanted.count}",
                )
            new_partitions += wanted.count - len(topic.partitions)
            check_partition_budget(new_partitions)
            if not body.validate_only:
                topic.add_partitions(wanted.count)
            error, message = ErrorCode.none, None
        except Refusal as refusal:
            error, message = refusal.error, refusal.message
        results.append(
            make(
                types.CreatePartitionsTopicResult,
                name=wanted.name,
                error_code=counted(broker, error),
                error_message=message,
            )
        )
    return make(types.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=tuple(results))
