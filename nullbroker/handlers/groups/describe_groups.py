"""DescribeGroups: classic groups as the administration sees them, their state, protocol
and members. Each node answers for the groups it coordinates, NOT_COORDINATOR for the
others, as Kafka's brokers do."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...state.groups.listing import DescribedGroup
from ..common import (
    GROUP_OPERATIONS,
    NO_THROTTLE,
    authorized_operations,
    coordinated_elsewhere,
    counted,
)

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


# DescribeGroups v6+ says GROUP_ID_NOT_FOUND for an unknown group, older ones "Dead".
FIRST_DESCRIBE_WITH_GROUP_ID_NOT_FOUND = 6


KEY = ApiKey.DESCRIBE_GROUPS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    types = response_module(ApiKey.DESCRIBE_GROUPS, version)
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
