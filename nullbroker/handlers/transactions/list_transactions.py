"""ListTransactions: what `kafka-transactions list` shows, the transactional ids this node
coordinates, filtered."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..common import NO_THROTTLE, counted
from .coordination import wrong_coordinator

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KAFKA_TXN_STATES = frozenset(
    {
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
        "Dead", "PrepareEpochFence",
    }
)  # fmt: skip
"""Every state of a transactional id in Kafka 4.1 (its TransactionState), by name: a filter
naming one is known, though nullbroker's transactions pass through only some of them."""


KEY = ApiKey.LIST_TRANSACTIONS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    """What `kafka-transactions list` shows: the ids this node coordinates, filtered by
    state, producer id, (v1) how long their transaction has been open and (v2) a regular
    expression the whole id matches."""
    types = response_module(ApiKey.LIST_TRANSACTIONS, request.header.api_version)
    body = request.body
    try:
        pattern = re.compile(getattr(body, "transactional_id_pattern", None) or "")
    except re.error:
        return make(
            types.ListTransactionsResponse,
            throttle_time=NO_THROTTLE,
            error_code=counted(broker, ErrorCode.invalid_regular_expression),
            unknown_state_filters=(),
            transaction_states=(),
        )
    states = set(body.state_filters)
    producers = set(body.producer_id_filters)
    duration_ms = getattr(body, "duration_filter", -1)
    now_ms = int(time.time() * 1000)
    listed = [
        make(
            types.TransactionState,
            transactional_id=transaction.transactional_id,
            producer_id=transaction.producer_id,
            transaction_state=transaction.state.value,
        )
        for transaction in broker.transactions.transactions.values()
        if wrong_coordinator(broker, session, transaction.transactional_id) is None
        and (not pattern.pattern or pattern.fullmatch(transaction.transactional_id))
        and (not states or transaction.state.value in states)
        and (not producers or transaction.producer_id in producers)
        # Open longer than the filter, as Kafka counts it: from the last transaction's start,
        # and an id that never began one (-1) as open since the epoch.
        and (duration_ms < 0 or now_ms - transaction.started_ms > duration_ms)
    ]
    return make(
        types.ListTransactionsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        # In the order asked, each once, as Kafka lists them; its names, in their case.
        unknown_state_filters=tuple(
            dict.fromkeys(state for state in body.state_filters if state not in KAFKA_TXN_STATES)
        ),
        transaction_states=tuple(listed),
    )
