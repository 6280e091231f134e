"""SyncGroup: the leader brings the generation's assignment, the other members wait for it (the
coordinator's Reply, awaited by the connection) unless it is there already."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...state.groups.model import SyncResult
from ...state.groups.replies import Reply
from ..common import NO_THROTTLE, coordinated_elsewhere, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


# SyncGroup v5+ must name the protocol type and name (KIP-559).
FIRST_SYNC_REQUIRING_PROTOCOL = 5


KEY = ApiKey.SYNC_GROUP


def handle(broker: Broker, request: Request, session: Session) -> Any:
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
        response_module(ApiKey.SYNC_GROUP, version).SyncGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=counted(broker, result.error),
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
