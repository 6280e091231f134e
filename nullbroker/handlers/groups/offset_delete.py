"""OffsetDelete: committed offsets removed from a group, except those of topics its members
subscribe to. Unknown topics and partitions are answered beside the group's answer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..common import NO_THROTTLE, coordinated_elsewhere, counted
from .offset_commit import has_partition

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.OFFSET_DELETE


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.OFFSET_DELETE, request.header.api_version)
    body = request.body
    unknown: dict[str, list[tuple[int, ErrorCode]]] = {}
    known: list[tuple[str, list[int]]] = []
    for asked in body.topics:
        topic = broker.topics.get(asked.name)
        indexes = [partition.partition_index for partition in asked.partitions]
        if topic is None:
            unknown[asked.name] = [(i, ErrorCode.unknown_topic_or_partition) for i in indexes]
            continue
        valid = [i for i in indexes if has_partition(topic, i)]
        missing = [(i, ErrorCode.unknown_topic_or_partition) for i in indexes if i not in valid]
        if missing:
            unknown[asked.name] = missing
        known.append((asked.name, valid))
    results: list[tuple[str, list[tuple[int, ErrorCode]]]] = []
    if coordinated_elsewhere(broker, session, body.group_id):
        error = ErrorCode.not_coordinator
    else:
        error, results = broker.groups.delete_offsets(body.group_id, known)
    if error is not ErrorCode.none:
        return make(
            types.OffsetDeleteResponse,
            error_code=counted(broker, error),
            throttle_time=NO_THROTTLE,
            topics=(),
        )
    answered = dict(results)
    for name, answers in unknown.items():
        answered[name] = [*answered.get(name, []), *answers]
    return make(
        types.OffsetDeleteResponse,
        error_code=ErrorCode.none,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            make(
                types.OffsetDeleteResponseTopic,
                name=name,
                partitions=tuple(
                    make(
                        types.OffsetDeleteResponsePartition,
                        partition_index=index,
                        error_code=counted(broker, partition_error),
                    )
                    for index, partition_error in answers
                ),
            )
            for name, answers in answered.items()
        ),
    )
