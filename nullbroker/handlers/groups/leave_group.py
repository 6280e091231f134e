"""LeaveGroup: members leave a classic group, one by id (v0-2) or several, static ones by
instance id (v3+)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..common import NO_THROTTLE, coordinated_elsewhere, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.LEAVE_GROUP


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.LEAVE_GROUP, request.header.api_version)
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
