"""OffsetFetch: a group's committed offsets, one group (v0-7) or a batch (v8+); with
require_stable (KIP-447), not those an open transaction has staged."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import has_field, make, response_module

from ...cluster.nodes import NO_LEADER_EPOCH
from ...state.groups.model import NO_OFFSET
from ...state.groups.offsets import CommittedOffset
from ..common import NO_THROTTLE, coordinated_elsewhere, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.OFFSET_FETCH


def handle(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    types = response_module(ApiKey.OFFSET_FETCH, version)
    body = request.body
    if hasattr(body, "groups"):  # v8+: a batch of groups
        groups = []
        for asked in body.groups:
            error, topics = _fetched_offsets(
                broker,
                session,
                types,
                asked.group_id,
                asked.topics,
                getattr(asked, "member_id", None),
                getattr(asked, "member_epoch", -1),
                body.require_stable,
            )
            groups.append(
                make(
                    types.OffsetFetchResponseGroup,
                    group_id=asked.group_id,
                    topics=topics,
                    error_code=counted(broker, error),
                )
            )
        return make(types.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))
    require_stable = getattr(body, "require_stable", False)
    error, topics = _fetched_offsets(
        broker, session, types, body.group_id, body.topics, require_stable=require_stable
    )
    if error is not ErrorCode.none and not has_field(types.OffsetFetchResponse, "error_code"):
        # v1 has no group-level error: every partition asked for carries it.
        topics = tuple(
            make(
                types.OffsetFetchResponseTopic,
                name=asked.name,
                partitions=tuple(
                    _fetched_partition(types, index, None, error)
                    for index in asked.partition_indexes
                ),
            )
            for asked in body.topics
        )
    return make(
        types.OffsetFetchResponse,
        throttle_time=NO_THROTTLE,
        topics=topics,
        error_code=counted(broker, error),
    )


def _fetched_offsets(
    broker: Broker,
    session: Session,
    types: Any,
    group_id: str,
    asked_topics: Iterable[Any] | None,
    member_id: str | None = None,
    member_epoch: int = -1,
    require_stable: bool = False,
) -> tuple[ErrorCode, tuple[Any, ...]]:
    """One group's committed offsets, for the topics asked (all of them for null);
    -1 where nothing is committed. A member (OffsetFetch v9+) reads at its epoch. With
    `require_stable` (KIP-447), a partition whose offset an open transaction has staged is
    UNSTABLE_OFFSET_COMMIT until it ends: the consumer asks again, and an exactly-once
    pipeline does not read its input twice."""
    if not group_id:
        return ErrorCode.invalid_group_id, ()
    if coordinated_elsewhere(broker, session, group_id):
        return ErrorCode.not_coordinator, ()
    error = broker.groups.validate_offset_fetch(group_id, member_id, member_epoch)
    if error is not ErrorCode.none:
        return error, ()
    committed = broker.groups.committed(group_id) or {}
    unstable = _staged_in_transactions(broker, group_id) if require_stable else set()
    topic_type = getattr(types, "OffsetFetchResponseTopics", None) or types.OffsetFetchResponseTopic
    if asked_topics is None:
        return ErrorCode.none, _all_committed(broker, types, topic_type, committed, unstable)
    topics = []
    for asked in asked_topics:
        error = ErrorCode.none
        name = getattr(asked, "name", None)
        if name is None:  # v10 names topics by id
            topic = broker.topics.by_id(asked.topic_id)
            if topic is None:
                error = counted(broker, ErrorCode.unknown_topic_id)
            else:
                name = topic.name
        partitions = committed.get(name, {}) if name is not None else {}
        topics.append(
            make(
                topic_type,
                name=name,
                topic_id=getattr(asked, "topic_id", None),
                partitions=tuple(
                    _fetched_partition(types, index, partitions.get(index), error)
                    if (name, index) not in unstable
                    else _fetched_partition(types, index, None, ErrorCode.unstable_offset_commit)
                    for index in asked.partition_indexes
                ),
            )
        )
    return ErrorCode.none, tuple(topics)


def _staged_in_transactions(broker: Broker, group_id: str) -> set[tuple[str, int]]:
    return broker.groups.transaction_offsets.staged(group_id)


def _all_committed(
    broker: Broker,
    types: Any,
    topic_type: Any,
    committed: dict[str, dict[int, CommittedOffset]],
    unstable: set[tuple[str, int]],
) -> tuple[Any, ...]:
    by_id = has_field(topic_type, "topic_id")
    topics = []
    for name in sorted(committed):
        topic = broker.topics.get(name)
        if topic is None and by_id:
            continue  # a deleted topic has no id to name it by
        partitions = committed[name]
        topics.append(
            make(
                topic_type,
                name=name,
                topic_id=topic.id if topic is not None else None,
                partitions=tuple(
                    _fetched_partition(types, index, partitions[index], ErrorCode.none)
                    if (name, index) not in unstable
                    else _fetched_partition(types, index, None, ErrorCode.unstable_offset_commit)
                    for index in sorted(partitions)
                ),
            )
        )
    return tuple(topics)


def _fetched_partition(
    types: Any, index: int, committed: CommittedOffset | None, error: ErrorCode
) -> Any:
    partition_type = (
        getattr(types, "OffsetFetchResponsePartitions", None) or types.OffsetFetchResponsePartition
    )
    return make(
        partition_type,
        partition_index=index,
        committed_offset=committed.offset if committed else NO_OFFSET,
        committed_leader_epoch=committed.leader_epoch if committed else NO_LEADER_EPOCH,
        metadata=committed.metadata if committed else "",
        error_code=error,
    )
