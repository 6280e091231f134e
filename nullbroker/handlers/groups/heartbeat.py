"""Heartbeat: a classic group's member says it is alive, and learns of a rebalance."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..common import NO_THROTTLE, coordinated_elsewhere, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.HEARTBEAT


def handle(broker: Broker, request: Request, session: Session) -> Any:
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
        response_module(ApiKey.HEARTBEAT, request.header.api_version).HeartbeatResponse,
        throttle_time=NO_THROTTLE,
        error_code=counted(broker, error),
    )
