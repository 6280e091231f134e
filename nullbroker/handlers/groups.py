"""Coordinator look-ups: this node coordinates every group and transaction."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import Request
from codec.entities import make, response_module

from .common import NO_THROTTLE

if TYPE_CHECKING:
    from ..broker import Broker, Session

FIND_COORDINATOR = 10


def handle_find_coordinator(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    types = response_module(FIND_COORDINATOR, version)
    node = {
        "node_id": broker.node_id,
        "host": session.advertised.host,
        "port": session.advertised.port,
        "error_code": ErrorCode.none,
        "error_message": None,
    }
    if hasattr(types, "Coordinator"):  # v4+: a batch of keys
        return make(
            types.FindCoordinatorResponse,
            throttle_time=NO_THROTTLE,
            coordinators=tuple(
                make(types.Coordinator, key=key, **node) for key in request.body.coordinator_keys
            ),
        )
    return make(types.FindCoordinatorResponse, throttle_time=NO_THROTTLE, **node)


HANDLERS = {FIND_COORDINATOR: handle_find_coordinator}
