"""AddOffsetsToTxn: a group joined to a transaction, before TxnOffsetCommit stages its
offsets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..common import NO_THROTTLE, counted
from .coordination import coordinated_change

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.ADD_OFFSETS_TO_TXN


def handle(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    body = request.body
    error = coordinated_change(
        broker, session, body.transactional_id, body, version,
        broker.transactions.add_offsets, body.group_id,
    )  # fmt: skip
    types = response_module(ApiKey.ADD_OFFSETS_TO_TXN, version)
    return make(
        types.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE, error_code=counted(broker, error)
    )
