"""Consumer groups: FindCoordinator, the classic group protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup), committed offsets (OffsetCommit, OffsetFetch, OffsetDelete) and group
administration (DescribeGroups, ListGroups, DeleteGroups).

This node coordinates every group. The state machine lives in nullbroker.state.groups; these
handlers translate between it and each version's kio entities. JoinGroup and SyncGroup may
wait (for the join phase, for the leader's assignment): they then return a coroutine that
the connection awaits.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import Request
from codec.entities import has_field, make, response_module

from ..cluster.nodes import NO_LEADER_EPOCH, OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from ..state.groups.listing import DescribedGroup
from ..state.groups.model import MAX_OFFSET_METADATA_BYTES, NO_OFFSET, JoinResult, SyncResult
from ..state.groups.offsets import CommittedOffset
from ..state.groups.replies import Reply
from ..state.topics import Topic
from .common import (
    GROUP_OPERATIONS,
    NO_THROTTLE,
    authorized_operations,
    client_host,
    coordinated_elsewhere,
    counted,
)

if TYPE_CHECKING:
    from ..broker import Broker, Session

OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
GROUP_KEY = 0
TRANSACTION_KEY = 1
SHARE_KEY = 2
FIRST_FIND_COORDINATOR_BATCH = 4
# Kafka's text of INVALID_REQUEST (Errors.INVALID_REQUEST), where it has no other.
INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library or "
    "the message was sent to an incompatible broker. See the broker logs for more details."
)
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DELETE_GROUPS = 42
OFFSET_DELETE = 47

# JoinGroup v4+ requires a known member id (KIP-394); v7+ has nullable protocol names;
# v9+ may tell a rejoining static leader to skip assigning.
FIRST_JOIN_REQUIRING_MEMBER_ID = 4
FIRST_JOIN_WITH_NULLABLE_PROTOCOL = 7
FIRST_JOIN_WITH_SKIP_ASSIGNMENT = 9
# SyncGroup v5+ must name the protocol type and name (KIP-559).
FIRST_SYNC_REQUIRING_PROTOCOL = 5
# DescribeGroups v6+ says GROUP_ID_NOT_FOUND for an unknown group, older ones "Dead".
FIRST_DESCRIBE_WITH_GROUP_ID_NOT_FOUND = 6


def handle_find_coordinator(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    types = response_module(FIND_COORDINATOR, version)
    key_type = getattr(request.body, "key_type", GROUP_KEY)
    refusal = _refused_key_type(key_type)
    internal = internal_topic_for(request.body)
    if refusal is None:
        # Kafka makes the internal topic on the first FindCoordinator that needs it (and
        # answers COORDINATOR_NOT_AVAILABLE until it exists); here it is made at once.
        broker.topics.internal(internal)

    def coordinator(key: str) -> dict[str, Any]:
        if refusal is not None:
            return {
                "node_id": -1,
                "host": "",
                "port": -1,
                "error_code": counted(broker, ErrorCode.invalid_request),
                "error_message": refusal,
            }
        node = broker.cluster.coordinator(key, internal)
        address = session.node(broker.cluster, node)
        return {
            "node_id": node,
            "host": address.host,
            "port": address.port,
            "error_code": ErrorCode.none,
            # Kafka's wording of no error: "" in a v4+ coordinator, the error's name before.
            "error_message": "" if version >= FIRST_FIND_COORDINATOR_BATCH else "NONE",
        }

    if version >= FIRST_FIND_COORDINATOR_BATCH:
        return make(
            types.FindCoordinatorResponse,
            throttle_time=NO_THROTTLE,
            coordinators=tuple(
                make(types.Coordinator, key=key, **coordinator(key))
                for key in request.body.coordinator_keys
            ),
        )
    return make(
        types.FindCoordinatorResponse, throttle_time=NO_THROTTLE, **coordinator(request.body.key)
    )


def _refused_key_type(key_type: int) -> str | None:
    """The message of Kafka's INVALID_REQUEST for a key type it does not serve (None for
    one it does): a share group's ("" — Kafka 4.1 without share groups enabled, as
    nullbroker, which has none) or a key type it does not know (the error's own text)."""
    if key_type in (GROUP_KEY, TRANSACTION_KEY):
        return None
    return "" if key_type == SHARE_KEY else INVALID_REQUEST_MESSAGE


def internal_topic_for(find_coordinator: Any) -> str:
    """The internal topic whose partition leaders coordinate what a FindCoordinator request
    asks for: transactional ids, or groups."""
    if getattr(find_coordinator, "key_type", GROUP_KEY) == TRANSACTION_KEY:
        return TRANSACTION_STATE_TOPIC
    return OFFSETS_TOPIC


def _ms(duration: datetime.timedelta) -> int:
    return int(duration / datetime.timedelta(milliseconds=1))


# JoinGroup, SyncGroup, Heartbeat, LeaveGroup.


def handle_join_group(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    body = request.body
    if coordinated_elsewhere(broker, session, body.group_id):
        return _join_response(
            broker, version, JoinResult(ErrorCode.not_coordinator, body.member_id)
        )
    reply = broker.groups.join(
        body.group_id,
        body.member_id,
        getattr(body, "group_instance_id", None),
        body.protocol_type,
        [(protocol.name, protocol.metadata) for protocol in body.protocols],
        _ms(body.session_timeout),
        # v0 has no rebalance timeout: Kafka takes the session timeout for it.
        _ms(getattr(body, "rebalance_timeout", body.session_timeout)),
        request.header.client_id or "",
        client_host(session),
        require_known_member_id=version >= FIRST_JOIN_REQUIRING_MEMBER_ID,
        supports_skip_assignment=version >= FIRST_JOIN_WITH_SKIP_ASSIGNMENT,
    )
    if reply.ready:
        return _join_response(broker, version, reply.value)
    return _join_later(broker, version, reply)


async def _join_later(broker: Broker, version: int, reply: Reply[JoinResult]) -> Any:
    return _join_response(broker, version, await reply.wait())


def _join_response(broker: Broker, version: int, result: JoinResult) -> Any:
    types = response_module(JOIN_GROUP, version)
    protocol_name = result.protocol_name
    if version < FIRST_JOIN_WITH_NULLABLE_PROTOCOL and protocol_name is None:
        protocol_name = ""
    return make(
        types.JoinGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=counted(broker, result.error),
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=tuple(
            make(
                types.JoinGroupResponseMember,
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                metadata=member.metadata,
            )
            for member in result.members
        ),
    )


def handle_sync_group(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    body = request.body
    if version >= FIRST_SYNC_REQUIRING_PROTOCOL and (
        body.protocol_type is None or body.protocol_name is None
    ):
        # Kafka's KafkaApis refuses it so before asking any coordinator about the member.
        return _sync_response(broker, version, SyncResult(ErrorCode.inconsistent_group_protocol))
    if coordinated_elsewhere(broker, session, body.group_id):
        return _sync_response(broker, version, SyncResult(ErrorCode.not_coordinator))
    reply = broker.groups.sync(
        body.group_id,
        body.generation_id,
        body.member_id,
        getattr(body, "group_instance_id", None),
        getattr(body, "protocol_type", None),
        getattr(body, "protocol_name", None),
        [(assignment.member_id, assignment.assignment) for assignment in body.assignments],
    )
    if reply.ready:
        return _sync_response(broker, version, reply.value)
    return _sync_later(broker, version, reply)


async def _sync_later(broker: Broker, version: int, reply: Reply[SyncResult]) -> Any:
    return _sync_response(broker, version, await reply.wait())


def _sync_response(broker: Broker, version: int, result: SyncResult) -> Any:
    return make(
        response_module(SYNC_GROUP, version).SyncGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=counted(broker, result.error),
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


def handle_heartbeat(broker: Broker, request: Request, session: Session) -> Any:
    body = request.body
    if coordinated_elsewhere(broker, session, body.group_id):
        error = ErrorCode.not_coordinator
    else:
        error = broker.groups.heartbeat(
            body.group_id,
            body.generation_id,
            body.member_id,
            getattr(body, "group_instance_id", None),
        )
    return make(
        response_module(HEARTBEAT, request.header.api_version).HeartbeatResponse,
        throttle_time=NO_THROTTLE,
        error_code=counted(broker, error),
    )


def handle_leave_group(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(LEAVE_GROUP, request.header.api_version)
    body = request.body
    if coordinated_elsewhere(broker, session, body.group_id):
        return make(
            types.LeaveGroupResponse,
            throttle_time=NO_THROTTLE,
            error_code=counted(broker, ErrorCode.not_coordinator),
            members=(),
        )
    if not hasattr(body, "members"):
        # v0-2: one member by id; its error is the response's error.
        error, answers = broker.groups.leave(body.group_id, [(body.member_id, None)])
        if error is ErrorCode.none:
            error = answers[0].error
        return make(
            types.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=counted(broker, error)
        )
    error, answers = broker.groups.leave(
        body.group_id, [(member.member_id, member.group_instance_id) for member in body.members]
    )
    return make(
        types.LeaveGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=counted(broker, error),
        members=tuple(
            make(
                types.MemberResponse,
                member_id=answer.member_id,
                group_instance_id=answer.group_instance_id,
                error_code=counted(broker, answer.error),
            )
            for answer in answers
        ),
    )


# OffsetCommit, OffsetFetch, OffsetDelete.


def _requested_topic(broker: Broker, asked: Any) -> tuple[Topic | None, ErrorCode]:
    """The topic an offsets request names (by name, or by id from OffsetCommit and
    OffsetFetch v10), and the error for it when it does not exist."""
    name = getattr(asked, "name", None)
    if name is not None:
        return broker.topics.get(name), ErrorCode.unknown_topic_or_partition
    return broker.topics.by_id(asked.topic_id), ErrorCode.unknown_topic_id


def _has_partition(topic: Topic, index: int) -> bool:
    return 0 <= index < len(topic.partitions)


def handle_offset_commit(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    types = response_module(OFFSET_COMMIT, version)
    body = request.body
    resolved = [(asked, *_requested_topic(broker, asked)) for asked in body.topics]
    # As Kafka: unknown topics and partitions are answered without asking the coordinator,
    # so a request with nothing valid in it creates no group.
    group_error, group = ErrorCode.none, None
    if coordinated_elsewhere(broker, session, body.group_id):
        group_error = ErrorCode.not_coordinator
    elif any(
        topic is not None and _has_partition(topic, partition.partition_index)
        for asked, topic, _ in resolved
        for partition in asked.partitions
    ):
        group_error, group = broker.groups.validate_commit(
            body.group_id,
            body.generation_id_or_member_epoch,
            body.member_id,
            getattr(body, "group_instance_id", None),
            version,
        )
    topics = []
    for asked, topic, missing in resolved:
        partitions = []
        for partition in asked.partitions:
            index = partition.partition_index
            metadata = partition.committed_metadata or ""
            if topic is None:
                error = missing
            elif not _has_partition(topic, index):
                error = ErrorCode.unknown_topic_or_partition
            elif group is None:
                error = group_error
            elif len(metadata) > MAX_OFFSET_METADATA_BYTES:
                error = ErrorCode.offset_metadata_too_large
            else:
                broker.groups.commit(
                    group,
                    topic.name,
                    index,
                    CommittedOffset(
                        partition.committed_offset,
                        getattr(partition, "committed_leader_epoch", NO_LEADER_EPOCH),
                        metadata,
                    ),
                )
                error = ErrorCode.none
            partitions.append(
                make(
                    types.OffsetCommitResponsePartition,
                    partition_index=index,
                    error_code=counted(broker, error),
                )
            )
        topics.append(
            make(
                types.OffsetCommitResponseTopic,
                name=getattr(asked, "name", None),
                topic_id=getattr(asked, "topic_id", None),
                partitions=tuple(partitions),
            )
        )
    return make(types.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


def handle_offset_fetch(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    types = response_module(OFFSET_FETCH, version)
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
    if "transactions" not in vars(broker):
        return set()  # no transactional producer yet: nothing staged
    return broker.transactions.staged_offsets(group_id)


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


def handle_offset_delete(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(OFFSET_DELETE, request.header.api_version)
    body = request.body
    unknown: dict[str, list[tuple[int, ErrorCode]]] = {}
    known: list[tuple[str, list[int]]] = []
    for asked in body.topics:
        topic = broker.topics.get(asked.name)
        indexes = [partition.partition_index for partition in asked.partitions]
        if topic is None:
            unknown[asked.name] = [(i, ErrorCode.unknown_topic_or_partition) for i in indexes]
            continue
        valid = [i for i in indexes if _has_partition(topic, i)]
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


# DescribeGroups, ListGroups, DeleteGroups.


def handle_describe_groups(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    types = response_module(DESCRIBE_GROUPS, version)
    body = request.body
    operations = authorized_operations(
        getattr(body, "include_authorized_operations", False), GROUP_OPERATIONS
    )
    return make(
        types.DescribeGroupsResponse,
        throttle_time=NO_THROTTLE,
        groups=tuple(
            _described(
                broker,
                types,
                version,
                DescribedGroup(group_id, ErrorCode.not_coordinator, "")
                if coordinated_elsewhere(broker, session, group_id)
                else broker.groups.describe(group_id),
                operations,
            )
            for group_id in body.groups
        ),
    )


def _described(
    broker: Broker, types: Any, version: int, group: DescribedGroup, operations: int
) -> Any:
    error, message = group.error, group.message
    if error is ErrorCode.group_id_not_found and version < FIRST_DESCRIBE_WITH_GROUP_ID_NOT_FOUND:
        error, message = ErrorCode.none, None
    return make(
        types.DescribedGroup,
        error_code=counted(broker, error),
        error_message=message,
        group_id=group.group_id,
        group_state=group.state,
        protocol_type=group.protocol_type,
        protocol_data=group.protocol_data,
        members=tuple(
            make(
                types.DescribedGroupMember,
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                member_metadata=member.metadata,
                member_assignment=member.assignment,
            )
            for member in group.members
        ),
        # Kafka tells the operations of a group it found (or, before v6, of one it describes as
        # Dead), not of one it refuses.
        authorized_operations=operations
        if error is ErrorCode.none
        else authorized_operations(False, operations),
    )


def handle_list_groups(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(LIST_GROUPS, request.header.api_version)
    body = request.body
    listed = [
        group
        for group in broker.groups.list_groups(
            getattr(body, "states_filter", ()), getattr(body, "types_filter", ())
        )
        # Each node lists the groups it coordinates, as Kafka's brokers do: the admin
        # client asks every node and puts the lists together.
        if not coordinated_elsewhere(broker, session, group.group_id)
    ]
    return make(
        types.ListGroupsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        groups=tuple(
            make(
                types.ListedGroup,
                group_id=group.group_id,
                protocol_type=group.protocol_type,
                group_state=group.state,
                group_type=group.group_type,
            )
            for group in listed
        ),
    )


def handle_delete_groups(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(DELETE_GROUPS, request.header.api_version)
    return make(
        types.DeleteGroupsResponse,
        throttle_time=NO_THROTTLE,
        results=tuple(
            make(types.DeletableGroupResult, group_id=group_id, error_code=counted(broker, error))
            for group_id, error in _deleted(broker, session, request.body.groups_names)
        ),
    )


def _deleted(
    broker: Broker, session: Session, group_ids: Iterable[str]
) -> list[tuple[str, ErrorCode]]:
    """Each group's DeleteGroups result, in the order asked: NOT_COORDINATOR for a group
    another node coordinates."""
    asked = list(group_ids)
    here = [group_id for group_id in asked if not coordinated_elsewhere(broker, session, group_id)]
    deleted = iter(broker.groups.delete_groups(here))
    return [
        next(deleted) if group_id in here else (group_id, ErrorCode.not_coordinator)
        for group_id in asked
    ]


HANDLERS = {
    OFFSET_COMMIT: handle_offset_commit,
    OFFSET_FETCH: handle_offset_fetch,
    FIND_COORDINATOR: handle_find_coordinator,
    JOIN_GROUP: handle_join_group,
    HEARTBEAT: handle_heartbeat,
    LEAVE_GROUP: handle_leave_group,
    SYNC_GROUP: handle_sync_group,
    DESCRIBE_GROUPS: handle_describe_groups,
    LIST_GROUPS: handle_list_groups,
    DELETE_GROUPS: handle_delete_groups,
    OFFSET_DELETE: handle_offset_delete,
}
