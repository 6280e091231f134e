"""DescribeShareGroupOffsets: each share partition's start offset (and, from v1, its lag),
for `kafka-share-groups --describe --offsets` and the admin client's
listShareGroupOffsets. Where other processes lead some of the group's partitions, their
leaders are asked (share.leaders)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, request_module, response_module

from ..common import NO_THROTTLE, by_topic, coordinated_elsewhere, counted
from .partitions import readable_end, reads_committed

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session
    from ...state.share.groups import ShareGroup

NO_OFFSET = -1
NO_LAG = -1


KEY = ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    types = response_module(KEY, version)

    def described(asked: Any) -> Any:
        group_id = asked.group_id
        error = ErrorCode.none
        if not session.inter_broker and coordinated_elsewhere(broker, session, group_id):
            error = ErrorCode.not_coordinator
        topics: tuple[Any, ...] = ()
        if error is ErrorCode.none:
            # As Kafka 4.4.0: a group that does not exist has no offsets, without an error.
            group = broker.share_groups.get(group_id) if group_id else None
            topics = _topics(broker, types, group, asked.topics)
        return make(
            types.DescribeShareGroupOffsetsResponseGroup,
            group_id=group_id,
            topics=topics,
            error_code=counted(broker, error),
            error_message=None,
        )

    groups = [described(asked) for asked in request.body.groups]
    if not session.inter_broker:
        asks = _asks(broker, version, request.body.groups, groups)
        if asks:
            return _with_leaders(broker, types, request.body.groups, groups, asks)
    return _response(types, groups)


def _response(types: Any, groups: list[Any]) -> Any:
    return make(
        types.DescribeShareGroupOffsetsResponse, throttle_time=NO_THROTTLE, groups=tuple(groups)
    )


def _topics(broker: Broker, types: Any, group: ShareGroup | None, asked: Any) -> tuple[Any, ...]:
    """The asked topics' partitions (every partition the group has read here, for none
    asked), as this process holds them."""
    committed_only = group is not None and reads_committed(broker, group.group_id)
    wanted: dict[str, list[int]] = {}
    if asked is None and group is not None:
        # Those this process leads: where the group's share partitions are kept.
        wanted = by_topic(key for key in sorted(group.partitions) if broker.leads_here(*key))
    elif asked is not None:
        for topic in asked:
            wanted.setdefault(topic.topic_name, []).extend(topic.partitions)
    told = []
    for name, indexes in wanted.items():
        topic = broker.topics.get(name)
        if topic is None:
            continue  # as Kafka: a topic that does not exist is left out
        partitions = []
        for index in indexes:
            shared = group.partitions.get((name, index)) if group is not None else None
            start, lag = NO_OFFSET, NO_LAG
            if group is not None and shared is not None and 0 <= index < len(topic.partitions):
                start = shared.start
                end = readable_end(topic.partitions[index], committed_only)
                lag = max(0, end - start - shared.done_in_flight())
            partitions.append(_partition(types, index, start, lag, ErrorCode.none))
        told.append(
            make(
                types.DescribeShareGroupOffsetsResponseTopic,
                topic_name=name,
                topic_id=topic.id,
                partitions=tuple(partitions),
            )
        )
    return tuple(told)


def _partition(
    types: Any, index: int, start: int, lag: int, error: ErrorCode, message: str | None = None
) -> Any:
    return make(
        types.DescribeShareGroupOffsetsResponsePartition,
        partition_index=index,
        start_offset=start,
        leader_epoch=0,
        lag=lag,
        error_code=error,
        error_message=message,
    )


# Where other processes lead partitions: one request per (group, leader node).

Ask = tuple[int, int, Any]
"""(the group's place in the answer, the node asked, the request)."""


def _asks(broker: Broker, version: int, asked_groups: Any, groups: list[Any]) -> list[Ask]:
    """What to ask the leaders other processes serve, for the groups coordinated here."""
    nodes_elsewhere = broker.nodes_elsewhere()
    if not nodes_elsewhere:
        return []
    from .leaders import by_leader

    request_types = request_module(KEY, version)
    asks = []
    for place, (asked, group) in enumerate(zip(asked_groups, groups, strict=True)):
        if group.error_code is not ErrorCode.none or not asked.group_id:
            continue
        if asked.topics is None:  # every partition: each other process says what it holds
            wanted: dict[int, Any] = dict.fromkeys(nodes_elsewhere)
        else:
            known = [
                (topic.topic_name, index)
                for topic in asked.topics
                if (found := broker.topics.get(topic.topic_name)) is not None
                for index in topic.partitions
                if 0 <= index < len(found.partitions)
            ]
            wanted = {
                node: _request_topics(request_types, partitions)
                for node, partitions in by_leader(broker, known).items()
            }
        for node, topics in wanted.items():
            request = make(
                request_types.DescribeShareGroupOffsetsRequest,
                groups=(
                    make(
                        request_types.DescribeShareGroupOffsetsRequestGroup,
                        group_id=asked.group_id,
                        topics=topics,
                    ),
                ),
            )
            asks.append((place, node, request))
    return asks


def _request_topics(request_types: Any, partitions: list[tuple[str, int]]) -> tuple[Any, ...]:
    return tuple(
        make(
            request_types.DescribeShareGroupOffsetsRequestTopic,
            topic_name=name,
            partitions=tuple(indexes),
        )
        for name, indexes in by_topic(partitions).items()
    )


async def _with_leaders(
    broker: Broker, types: Any, asked_groups: Any, groups: list[Any], asks: list[Ask]
) -> Any:
    """The answer once the leaders have given theirs: each group's asks at once."""
    by_group: dict[int, dict[int, Any]] = {}
    for place, node, request in asks:
        by_group.setdefault(place, {})[node] = request
    for place, requests in by_group.items():
        replies = await broker.ask_nodes(requests)
        every = asked_groups[place].topics is None
        groups[place] = _merged(broker, types, groups[place], requests, replies, every)
    return _response(types, groups)


def _merged(
    broker: Broker,
    types: Any,
    group: Any,
    requests: dict[int, Any],
    replies: dict[int, Any],
    every: bool,
) -> Any:
    """The group's answer with the leaders' partitions in place of this process's (with
    `every`, all the partitions each holds, in order)."""
    from .leaders import NO_ANSWER_MESSAGE

    partitions: dict[str, dict[int, Any]] = {}
    ids: dict[str, Any] = {}
    error, message = group.error_code, group.error_message
    for topic in group.topics:
        ids[topic.topic_name] = topic.topic_id
        partitions[topic.topic_name] = {p.partition_index: p for p in topic.partitions}
    for node, reply in replies.items():
        if reply is not None:
            for topic in reply.groups[0].topics:
                ids[topic.topic_name] = topic.topic_id
                held = partitions.setdefault(topic.topic_name, {})
                held.update((p.partition_index, p) for p in topic.partitions)
        elif every:  # what it holds is unknown: the whole group's answer is
            error = counted(broker, ErrorCode.unknown_server_error)
            message = f"Node {node} did not answer for the partitions it leads."
        else:
            for topic in requests[node].groups[0].topics:
                for index in topic.partitions:
                    partitions[topic.topic_name][index] = _partition(
                        types, index, NO_OFFSET, NO_LAG,
                        counted(broker, ErrorCode.unknown_server_error),
                        NO_ANSWER_MESSAGE.format(node=node),
                    )  # fmt: skip
    names = sorted(partitions) if every else list(partitions)
    return make(
        types.DescribeShareGroupOffsetsResponseGroup,
        group_id=group.group_id,
        topics=tuple(
            make(
                types.DescribeShareGroupOffsetsResponseTopic,
                topic_name=name,
                topic_id=ids[name],
                partitions=tuple(
                    partitions[name][index]
                    for index in (sorted(partitions[name]) if every else partitions[name])
                ),
            )
            for name in names
        ),
        error_code=error,
        error_message=message,
    )
