"""EndTxn: a transaction committed or aborted by the coordinator, which writes its markers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio
from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...state.transactions import TransactionError
from ..common import NO_THROTTLE, counted
from .coordination import known_to_version, wrong_coordinator

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


FIRST_BUMPING_END_TXN_VERSION = 5
"""EndTxn v5+ is transactions v2 (KIP-890): every end bumps the producer's epoch."""


KEY = ApiKey.END_TXN


def handle(broker: Broker, request: Request, session: Session) -> Any:
    """The end of a transaction; from v5 (transactions v2) the answer carries the producer's
    id and epoch after it, bumped, or -1 and -1 when refused, as Kafka's. Where other
    processes lead some of its partitions, answered once their markers are written."""
    version = request.header.api_version
    body = request.body
    bump = version >= FIRST_BUMPING_END_TXN_VERSION
    producer = (-1, -1)
    error = wrong_coordinator(broker, session, body.transactional_id)
    if error is None:
        try:
            producer = broker.transactions.end(
                body.transactional_id, body.producer_id, body.producer_epoch, body.committed, bump
            )
            error = ErrorCode.none
        except TransactionError as refused:
            error = known_to_version(refused.code, version)
    types = response_module(ApiKey.END_TXN, version)
    answer = make(
        types.EndTxnResponse,
        throttle_time=NO_THROTTLE,
        error_code=counted(broker, error),
        producer_id=producer[0],
        producer_epoch=producer[1],
    )
    if error is ErrorCode.none:
        written = broker.transactions.transactions[body.transactional_id].written
        if written is not None:
            return _once_written(written, answer)
    return answer


async def _once_written(written: trio.Event, answer: Any) -> Any:
    await written.wait()
    return answer
