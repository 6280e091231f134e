"""DeleteGroups: groups removed, with their committed offsets, as the coordinator allows.
Each node answers for the groups it coordinates, NOT_COORDINATOR for the others, as Kafka's
brokers do. v3 (Kafka 4.4) gives each error a message, as Kafka words it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..common import NO_THROTTLE, coordinated_elsewhere, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.DELETE_GROUPS


def handle(broker: Broker, request: Request, session: Session) -> Any:
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
