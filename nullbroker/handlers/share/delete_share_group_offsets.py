"""DeleteShareGroupOffsets: forget a share group's share partitions of some topics (the
group must have no members): the next member to read one starts where
share.auto.offset.reset says. Other processes forget those they lead when the group's
coordinator asks them (share.leaders)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..common import coordinated_elsewhere, counted
from .partitions import NOT_EMPTY_MESSAGE, UNKNOWN_TOPIC_MESSAGE, offsets_answer

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session
    from ...state.share.groups import ShareGroup


KEY = ApiKey.DELETE_SHARE_GROUP_OFFSETS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(KEY, request.header.api_version)
    body = request.body
    group_id = body.group_id

    answer = partial(offsets_answer, broker, types.DeleteShareGroupOffsetsResponse)

    group = broker.share_groups.get(group_id) if group_id else None
    if session.inter_broker:  # the coordinator has checked the group
        if group is not None:
            _forget(group, body.topics)
        return answer(ErrorCode.none, topics=_told(broker, types, body.topics, set()))
    if coordinated_elsewhere(broker, session, group_id):
        return answer(ErrorCode.not_coordinator)
    if group is None:
        return answer(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
    if group.members:
        return answer(ErrorCode.non_empty_group, NOT_EMPTY_MESSAGE)
    _forget(group, body.topics)
    nodes = broker.nodes_elsewhere()
    if not nodes:
        return answer(ErrorCode.none, topics=_told(broker, types, body.topics, set()))
    return _forgotten_by_leaders(broker, types, request, nodes, answer)


def _forget(group: ShareGroup, asked: Any) -> None:
    names = {topic.topic_name for topic in asked}
    for key in [key for key in group.partitions if key[0] in names]:
        del group.partitions[key]


def _told(broker: Broker, types: Any, asked: Any, unanswered: set[str]) -> tuple[Any, ...]:
    """Each asked topic's result: UNKNOWN_TOPIC_OR_PARTITION where it does not exist, an
    error where a process that may lead its partitions did not answer (`unanswered`)."""
    told = []
    for topic_asked in asked:
        name = topic_asked.topic_name
        topic = broker.topics.get(name)
        error, message = ErrorCode.none, None
        if topic is None:
            error, message = ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC_MESSAGE
        elif name in unanswered:
            error = ErrorCode.unknown_server_error
            message = "A leader of the topic's partitions did not answer."
        told.append(
            make(
                types.DeleteShareGroupOffsetsResponseTopic,
                topic_name=name,
                topic_id=topic.id if topic is not None else None,
                error_code=counted(broker, error),
                error_message=message,
            )
        )
    return tuple(told)


async def _forgotten_by_leaders(
    broker: Broker, types: Any, request: Request, nodes: list[int], answer: Any
) -> Any:
    """The answer once every other process has forgotten the share partitions it leads."""
    replies = await broker.ask_nodes(dict.fromkeys(nodes, request.body))
    unanswered: set[str] = set()
    if any(reply is None for reply in replies.values()):
        unanswered = {topic.topic_name for topic in request.body.topics}
    return answer(ErrorCode.none, topics=_told(broker, types, request.body.topics, unanswered))
