"""AlterShareGroupOffsets: set where a share group without members starts reading each
partition (`kafka-share-groups --reset-offsets`): its share partition starts again there,
with nothing in flight, as Kafka's share coordinator initializes it. Partitions other
processes lead are reset by their leaders, asked by the group's coordinator (share.leaders)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, request_module, response_module

from ...state.share.groups import ShareGroup
from ..common import by_topic, coordinated_elsewhere, counted
from .partitions import NOT_EMPTY_MESSAGE, UNKNOWN_TOPIC_MESSAGE, offsets_answer, share_partition

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.ALTER_SHARE_GROUP_OFFSETS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    types = response_module(KEY, version)
    body = request.body
    group_id = body.group_id

    answer = partial(offsets_answer, broker, types.AlterShareGroupOffsetsResponse)

    share_groups = broker.share_groups
    if session.inter_broker:  # the coordinator has checked the group
        _reset(broker, share_groups.partitions_holder(group_id), body.topics)
        return answer(ErrorCode.none, topics=_told(broker, types, body.topics, {}))
    if coordinated_elsewhere(broker, session, group_id):
        return answer(ErrorCode.not_coordinator)
    if not group_id:
        return answer(ErrorCode.invalid_group_id, "The group id is empty.")
    if broker.groups.find(group_id) is not None:
        return answer(ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.")
    group = share_groups.get(group_id)
    if group is not None and group.members:
        return answer(ErrorCode.non_empty_group, NOT_EMPTY_MESSAGE)
    if group is None:
        group = share_groups.groups[group_id] = ShareGroup(group_id)
    elsewhere = _reset(broker, group, body.topics)
    if not elsewhere:
        return answer(ErrorCode.none, topics=_told(broker, types, body.topics, {}))
    return _reset_by_leaders(broker, types, version, body, elsewhere, answer)


def _reset(broker: Broker, group: ShareGroup, asked: Any) -> list[tuple[str, int]]:
    """Reset the asked share partitions this process leads; those other processes lead."""
    elsewhere = []
    for topic_asked in asked:
        topic = broker.topics.get(topic_asked.topic_name)
        if topic is None:
            continue
        for partition in topic_asked.partitions:
            index = partition.partition_index
            if not 0 <= index < len(topic.partitions):
                continue
            if broker.leads_here(topic.name, index):
                share_partition(broker, group, topic, topic.partitions[index]).reset(
                    partition.start_offset
                )
            else:
                elsewhere.append((topic.name, index))
    return elsewhere


def _told(
    broker: Broker, types: Any, asked: Any, errors: dict[tuple[str, int], ErrorCode]
) -> tuple[Any, ...]:
    """Each asked partition's result: UNKNOWN_TOPIC_OR_PARTITION where it does not exist,
    else its leader's (`errors`, for those another process leads), else none."""
    told = []
    for topic_asked in asked:
        topic = broker.topics.get(topic_asked.topic_name)
        partitions = []
        for partition in topic_asked.partitions:
            index = partition.partition_index
            error = ErrorCode.none
            if topic is None or not 0 <= index < len(topic.partitions):
                error = ErrorCode.unknown_topic_or_partition
            else:
                error = errors.get((topic.name, index), ErrorCode.none)
            partitions.append(
                make(
                    types.AlterShareGroupOffsetsResponsePartition,
                    partition_index=index,
                    error_code=counted(broker, error),
                    error_message=_message(error),
                )
            )
        told.append(
            make(
                types.AlterShareGroupOffsetsResponseTopic,
                topic_name=topic_asked.topic_name,
                topic_id=topic.id if topic is not None else None,
                partitions=tuple(partitions),
            )
        )
    return tuple(told)


def _message(error: ErrorCode) -> str | None:
    if error is ErrorCode.none:
        return None
    if error is ErrorCode.unknown_topic_or_partition:
        return UNKNOWN_TOPIC_MESSAGE
    return "The partition's leader did not answer."


async def _reset_by_leaders(
    broker: Broker,
    types: Any,
    version: int,
    body: Any,
    elsewhere: list[tuple[str, int]],
    answer: Any,
) -> Any:
    """The answer once the leaders other processes serve have reset their partitions."""
    from .leaders import by_leader

    request_types = request_module(KEY, version)
    starts = {
        (topic.topic_name, partition.partition_index): partition.start_offset
        for topic in body.topics
        for partition in topic.partitions
    }
    requests = {}
    for node, partitions in by_leader(broker, elsewhere).items():
        requests[node] = make(
            request_types.AlterShareGroupOffsetsRequest,
            group_id=body.group_id,
            topics=tuple(
                make(
                    request_types.AlterShareGroupOffsetsRequestTopic,
                    topic_name=name,
                    partitions=tuple(
                        make(
                            request_types.AlterShareGroupOffsetsRequestPartition,
                            partition_index=index,
                            start_offset=starts[(name, index)],
                        )
                        for index in indexes
                    ),
                )
                for name, indexes in by_topic(partitions).items()
            ),
        )
    replies = await broker.ask_nodes(requests)
    errors: dict[tuple[str, int], ErrorCode] = {}
    for node, reply in replies.items():
        for topic in requests[node].topics:
            for partition in topic.partitions:
                key = (topic.topic_name, partition.partition_index)
                errors[key] = ErrorCode.unknown_server_error
        if reply is None:
            continue
        for topic in reply.responses:
            for partition in topic.partitions:
                errors[(topic.topic_name, partition.partition_index)] = partition.error_code
    return answer(ErrorCode.none, topics=_told(broker, types, body.topics, errors))
