"""The new consumer group protocol's APIs (KIP-848): ConsumerGroupHeartbeat and
ConsumerGroupDescribe. The groups themselves are nullbroker.state.groups.consumer'."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..state.groups.consumer import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    UNIFORM,
    Assignment,
    ConsumerGroup,
    Heartbeat,
    HeartbeatError,
)
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


def handle_consumer_group_heartbeat(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    types = response_module(ApiKey.CONSUMER_GROUP_HEARTBEAT, version)
    body = request.body

    def refused(error: ErrorCode, message: str | None = None) -> Any:
        return make(
            types.ConsumerGroupHeartbeatResponse,
            throttle_time=NO_THROTTLE,
            error_code=counted(broker, error),
            error_message=message,
            member_id=None,
            member_epoch=0,  # Kafka's error response: the defaults
            heartbeat_interval=datetime.timedelta(0),
            assignment=None,
        )

    if coordinated_elsewhere(broker, session, body.group_id):
        return refused(ErrorCode.not_coordinator)
    if body.member_epoch == 0 and body.group_id not in broker.consumer_groups.groups:
        # A classic group of that id becomes a consumer group if it has no members (its
        # offsets kept); while it has, members of the new protocol are refused.
        offsets = broker.groups.take_if_empty(body.group_id)
        if offsets is None:
            return refused(
                ErrorCode.group_id_not_found, f"Group {body.group_id} is not a consumer group."
            )
        broker.consumer_groups.adopt(body.group_id, offsets)
    owned = None
    if body.topic_partitions is not None:
        owned = {}
        for listed in body.topic_partitions:
            topic = broker.topics.by_id(listed.topic_id)
            if topic is not None:
                owned[topic.name] = frozenset(listed.partitions)
    beat = Heartbeat(
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        instance_id=body.instance_id,
        rebalance_timeout_ms=int(body.rebalance_timeout.total_seconds() * 1000),
        subscribed=body.subscribed_topic_names,
        assignor=body.server_assignor,
        owned=owned,
        client_id=request.header.client_id or "",
        client_host=client_host(session),
        regex=getattr(body, "subscribed_topic_regex", None),
    )
    try:
        member, assignment = broker.consumer_groups.heartbeat(beat)
    except HeartbeatError as error:
        return refused(error.code, str(error))
    return make(
        types.ConsumerGroupHeartbeatResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        member_id=member.member_id,
        member_epoch=member.epoch,
        # A member that left is told no interval, as Kafka tells it.
        heartbeat_interval=datetime.timedelta(
            milliseconds=0
            if member.epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH)
            else broker.consumer_groups.heartbeat_interval_ms
        ),
        assignment=None
        if assignment is None
        else make(types.Assignment, topic_partitions=_by_id(broker, types, assignment)),
    )


def _by_id(
    broker: Broker, types: Any, assignment: Assignment, names: bool = False
) -> tuple[Any, ...]:
    """An assignment as the protocol lists it: by topic id (and name, to describe)."""
    listed = []
    for name, partitions in sorted(assignment.items()):
        topic = broker.topics.get(name)
        if topic is None:
            continue
        fields = {"topic_name": name} if names else {}
        listed.append(
            make(
                types.TopicPartitions,
                topic_id=topic.id,
                partitions=tuple(sorted(partitions)),
                **fields,
            )
        )
    return tuple(listed)


def handle_consumer_group_describe(broker: Broker, request: Request, session: Session) -> Any:
    """What `kafka-consumer-groups --describe` shows of a consumer group: its members,
    what each owns and what it is to own."""
    types = response_module(ApiKey.CONSUMER_GROUP_DESCRIBE, request.header.api_version)
    include_operations = request.body.include_authorized_operations
    described = []
    for group_id in request.body.group_ids:
        group = broker.groups.find(group_id)
        error, message = ErrorCode.none, None
        if coordinated_elsewhere(broker, session, group_id):
            error = ErrorCode.not_coordinator
        elif group is None:
            error, message = ErrorCode.group_id_not_found, f"Group {group_id} not found."
        elif not isinstance(group, ConsumerGroup):
            error = ErrorCode.group_id_not_found
            message = f"Group {group_id} is not a consumer group."
        found = group if isinstance(group, ConsumerGroup) and error is ErrorCode.none else None
        described.append(
            make(
                types.DescribedGroup,
                error_code=counted(broker, error),
                error_message=message,
                group_id=group_id,
                group_state=found.state if found is not None else "",
                group_epoch=found.epoch if found is not None else 0,
                assignment_epoch=found.assignment_epoch if found is not None else 0,
                assignor_name=UNIFORM if found is not None else "",
                members=_members(broker, types, found) if found is not None else (),
                # As Kafka: the operations of a group it found only.
                authorized_operations=authorized_operations(
                    include_operations and found is not None, GROUP_OPERATIONS
                ),
            )
        )
    return make(
        types.ConsumerGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(described)
    )


# ConsumerGroupDescribe v1's member type (KIP-1099): 0 a classic member, 1 a consumer one; every
# member of a nullbroker consumer group joined by ConsumerGroupHeartbeat.
CONSUMER_MEMBER = 1


def _members(broker: Broker, types: Any, group: ConsumerGroup) -> tuple[Any, ...]:
    return tuple(
        make(
            types.Member,
            member_id=member.member_id,
            instance_id=member.instance_id,
            rack_id=None,
            member_epoch=member.epoch,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=member.subscribed,
            subscribed_topic_regex=member.regex or "",  # Kafka's default: "" for none
            assignment=make(
                types.Assignment, topic_partitions=_by_id(broker, types, member.owned, True)
            ),
            target_assignment=make(
                types.Assignment,
                topic_partitions=_by_id(
                    broker, types, group.target.get(member.member_id, {}), True
                ),
            ),
            member_type=CONSUMER_MEMBER,
        )
        for member in group.members.values()
    )


HANDLERS = {
    ApiKey.CONSUMER_GROUP_HEARTBEAT: handle_consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: handle_consumer_group_describe,
}
