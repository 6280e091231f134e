"""JoinGroup: a member joins a classic group, and waits for the join phase to end (the
coordinator's Reply, awaited by the connection) unless it is answered at once."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...state.groups.model import JoinResult
from ...state.groups.replies import Reply
from ..common import NO_THROTTLE, client_host, coordinated_elsewhere, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


# JoinGroup v4+ requires a known member id (KIP-394); v7+ has nullable protocol names;
# v9+ may tell a rejoining static leader to skip assigning.
FIRST_JOIN_REQUIRING_MEMBER_ID = 4
FIRST_JOIN_WITH_NULLABLE_PROTOCOL = 7
FIRST_JOIN_WITH_SKIP_ASSIGNMENT = 9


KEY = ApiKey.JOIN_GROUP


def handle(broker: Broker, request: Request, session: Session) -> Any:
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
    types = response_module(ApiKey.JOIN_GROUP, version)
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


def _ms(duration: datetime.timedelta) -> int:
    return int(duration / datetime.timedelta(milliseconds=1))
