"""ShareGroupHeartbeat: a share group member's join, heartbeat and leave in one request,
answered with the partitions it reads (nullbroker.state.share.groups)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...state.groups.consumer import HeartbeatError
from ...state.share.groups import LEAVE_EPOCH, Heartbeat
from ..common import NO_THROTTLE, client_host, coordinated_elsewhere, counted
from ..groups.consumer_assignment import listed_by_topic_id

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.SHARE_GROUP_HEARTBEAT


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.SHARE_GROUP_HEARTBEAT, request.header.api_version)
    body = request.body

    def refused(error: ErrorCode, message: str | None = None) -> Any:
        return make(
            types.ShareGroupHeartbeatResponse,
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
    if body.group_id and broker.groups.find(body.group_id) is not None:
        return refused(ErrorCode.group_id_not_found, f"Group {body.group_id} is not a share group.")
    beat = Heartbeat(
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        rack_id=body.rack_id,
        subscribed=body.subscribed_topic_names,
        client_id=request.header.client_id or "",
        client_host=client_host(session),
    )
    share_groups = broker.share_groups
    try:
        member, assignment = share_groups.heartbeat(beat)
    except HeartbeatError as error:
        return refused(error.code, str(error) or None)
    return make(
        types.ShareGroupHeartbeatResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        member_id=member.member_id,
        member_epoch=member.epoch,
        # A member that left is told no interval, as Kafka tells it.
        heartbeat_interval=datetime.timedelta(
            milliseconds=0
            if member.epoch == LEAVE_EPOCH
            else share_groups.configs.heartbeat_interval_ms(body.group_id)
        ),
        assignment=None
        if assignment is None
        else make(types.Assignment, topic_partitions=listed_by_topic_id(broker, types, assignment)),
    )
