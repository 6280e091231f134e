"""DeleteTopics: topics removed, by name or (v6+) by id."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..common import NO_THROTTLE, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.DELETE_TOPICS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.DELETE_TOPICS, request.header.api_version)
    body = request.body
    if hasattr(body, "topics"):  # v6+: by name or by id
        wanted = [(state.name, state.topic_id) for state in body.topics]
    else:
        wanted = [(name, None) for name in body.topic_names]
    results = []
    for name, topic_id in wanted:
        if name is not None:
            topic = broker.topics.get(name)
            missing = ErrorCode.unknown_topic_or_partition
        else:
            topic = broker.topics.by_id(topic_id) if topic_id is not None else None
            missing = ErrorCode.unknown_topic_id
        if topic is None:
            error, message = missing, f"topic {name or topic_id} does not exist"
        else:
            broker.topics.delete(topic)
            broker.producers.forget_topic(topic.name)
            name, topic_id = topic.name, topic.id
            error, message = ErrorCode.none, None
        results.append(
            make(
                types.DeletableTopicResult,
                name=name,
                topic_id=topic_id,
                error_code=counted(broker, error),
                error_message=message,
            )
        )
    return make(types.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))
