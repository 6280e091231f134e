"""DescribeGroups, ListGroups and DeleteGroups: groups as the administration sees them. Each
node answers for the groups it coordinates, NOT_COORDINATOR for the others, as Kafka's
brokers do."""

from __future__ import annotations

from collections.abc import Iterable
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
    from ...broker import Broker, Session


# DescribeGroups v6+ says GROUP_ID_NOT_FOUND for an unknown group, older ones "Dead".
FIRST_DESCRIBE_WITH_GROUP_ID_NOT_FOUND = 6


def handle_describe_groups(broker: Broker, request: Request, session: Session) -> Any:
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


def handle_list_groups(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.LIST_GROUPS, request.header.api_version)
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
    types = response_module(ApiKey.DELETE_GROUPS, request.header.api_version)
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
    ApiKey.DESCRIBE_GROUPS: handle_describe_groups,
    ApiKey.LIST_GROUPS: handle_list_groups,
    ApiKey.DELETE_GROUPS: handle_delete_groups,
}
