"""ConsumerGroupHeartbeat: the new consumer group protocol (KIP-848), a member's join,
heartbeat and leave in one request, answered with its assignment. The groups themselves
are nullbroker.state.groups.consumer'."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...state.groups.consumer import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    Heartbeat,
    HeartbeatError,
)
from ..common import (
    NO_THROTTLE,
    client_host,
    coordinated_elsewhere,
    counted,
)
from .consumer_assignment import listed_by_topic_id

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.CONSUMER_GROUP_HEARTBEAT


def handle(broker: Broker, request: Request, session: Session) -> Any:
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
    streams = broker.groups.streams_groups
    if streams is not None and body.group_id in streams.groups:
        return refused(
            ErrorCode.group_id_not_found, f"Group {body.group_id} is not a consumer group."
        )
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
        else make(types.Assignment, topic_partitions=listed_by_topic_id(broker, types, assignment)),
    )
