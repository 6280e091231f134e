"""DeleteGroups: groups removed, with their committed offsets, as the coordinator allows.
Each node answers for the groups it coordinates, NOT_COORDINATOR for the others, as Kafka's
brokers do. v3 (Kafka 4.4) gives each error a message, as Kafka words it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, request_module, response_module

from ..common import NO_THROTTLE, coordinated_elsewhere, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.DELETE_GROUPS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    types = response_module(KEY, version)
    asked = list(request.body.groups_names)
    if session.inter_broker:  # a share group's coordinator deleted it: its partitions go
        results = [(group_id, _drop_share_partitions(broker, group_id)) for group_id in asked]
        return _response(broker, types, results)
    shares = [group_id for group_id in asked if broker.groups.share_group(group_id) is not None]
    results = _deleted(broker, session, asked)
    deleted = [
        group_id for group_id, error in results if group_id in shares and error is ErrorCode.none
    ]
    nodes = broker.nodes_elsewhere() if deleted else []
    if nodes:
        return _share_partitions_dropped(broker, types, version, results, deleted, nodes)
    return _response(broker, types, results)


def _response(broker: Broker, types: Any, results: list[tuple[str, ErrorCode]]) -> Any:
    return make(
        types.DeleteGroupsResponse,
        throttle_time=NO_THROTTLE,
        results=tuple(
            make(types.DeletableGroupResult, group_id=group_id, error_code=counted(broker, error))
            for group_id, error in results
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


def _drop_share_partitions(broker: Broker, group_id: str) -> ErrorCode:
    """Forget the share partitions this process leads of a share group another process
    coordinated and has deleted."""
    dropped = broker.share_groups.drop_held(group_id)
    return ErrorCode.none if dropped else ErrorCode.group_id_not_found


async def _share_partitions_dropped(
    broker: Broker,
    types: Any,
    version: int,
    results: list[tuple[str, ErrorCode]],
    deleted: list[str],
    nodes: list[int],
) -> Any:
    """The answer once every other process has forgotten the deleted share groups' share
    partitions it leads (Kafka's group coordinator deletes their state with the share
    coordinator before it answers)."""
    request = make(request_module(KEY, version).DeleteGroupsRequest, groups_names=tuple(deleted))
    await broker.ask_nodes(dict.fromkeys(nodes, request))
    return _response(broker, types, results)
