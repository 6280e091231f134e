"""ListGroups: the groups this node coordinates, of either protocol, filtered by state and
(v5+) type."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..common import NO_THROTTLE, coordinated_elsewhere

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.LIST_GROUPS


def handle(broker: Broker, request: Request, session: Session) -> Any:
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
