"""InitProducerId: the id and epoch an idempotent producer's batches carry, or, with a
transactional id, the transaction coordinator's (nullbroker.state.transactions)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...cluster.nodes import TRANSACTION_STATE_TOPIC
from ..common import NO_THROTTLE, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


FIRST_PRODUCER_FENCED_INIT_VERSION = 4
"""Before it (KIP-588), a fenced producer is told INVALID_PRODUCER_EPOCH."""
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


KEY = ApiKey.INIT_PRODUCER_ID


def handle(broker: Broker, request: Request, session: Session) -> Any:
    body = request.body
    version = request.header.api_version
    asked_id = getattr(body, "producer_id", -1)
    asked_epoch = getattr(body, "producer_epoch", -1)
    error = ErrorCode.none
    if (asked_id == NO_PRODUCER_ID) != (asked_epoch == NO_PRODUCER_EPOCH):
        # As Kafka: an id and epoch come together (KIP-360), or neither does.
        error, producer_id, epoch = ErrorCode.invalid_request, -1, -1
    elif body.transactional_id is None:
        producer_id, epoch = broker.producers.init_producer()
    elif broker.cluster.coordinator(body.transactional_id, TRANSACTION_STATE_TOPIC) != (
        session.node_id
    ):
        error, producer_id, epoch = ErrorCode.not_coordinator, -1, -1
    else:
        error, producer_id, epoch = broker.transactions.init(
            body.transactional_id,
            int(body.transaction_timeout.total_seconds() * 1000),
            asked_id,
            asked_epoch,
        )
        if error is ErrorCode.producer_fenced and version < FIRST_PRODUCER_FENCED_INIT_VERSION:
            error = ErrorCode.invalid_producer_epoch
    types = response_module(ApiKey.INIT_PRODUCER_ID, version)
    return make(
        types.InitProducerIdResponse,
        throttle_time=NO_THROTTLE,
        error_code=counted(broker, error),
        producer_id=producer_id,
        producer_epoch=epoch,
    )
