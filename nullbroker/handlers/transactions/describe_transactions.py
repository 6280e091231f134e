"""DescribeTransactions: what `kafka-transactions describe` shows, each id's producer, state
and partitions."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...state.transactions import TxnState
from ..common import NO_THROTTLE, counted
from .coordination import wrong_coordinator

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.DESCRIBE_TRANSACTIONS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    """What `kafka-transactions describe` shows: each id's producer, state and partitions."""
    types = response_module(ApiKey.DESCRIBE_TRANSACTIONS, request.header.api_version)
    states = []
    for transactional_id in request.body.transactional_ids:
        transaction = broker.transactions.transactions.get(transactional_id)
        error = wrong_coordinator(broker, session, transactional_id)
        if error is None and transaction is None:
            error = ErrorCode.transactional_id_not_found
        # A refused id's fields are the schema's defaults, as Kafka leaves them.
        fields: dict[str, Any] = {
            "transaction_state": "", "transaction_timeout": datetime.timedelta(0),
            "transaction_start_time": _datetime(0), "producer_id": 0, "producer_epoch": 0,
            "topics": (),
        }  # fmt: skip
        if error is None and transaction is not None:
            error = ErrorCode.none
            by_topic: dict[str, list[int]] = {}
            for topic, index in sorted(transaction.partitions):
                by_topic.setdefault(topic, []).append(index)
            fields = {
                "transaction_state": transaction.state.value,
                "transaction_timeout": datetime.timedelta(milliseconds=transaction.timeout_ms),
                "transaction_start_time": _datetime(transaction.started_ms),
                "producer_id": transaction.producer_id,
                "producer_epoch": transaction.epoch,
                "topics": tuple(
                    make(types.TopicData, topic=topic, partitions=tuple(indexes))
                    for topic, indexes in by_topic.items()
                )
                if transaction.state is TxnState.ONGOING
                else (),
            }
        states.append(
            make(
                types.TransactionState,
                error_code=counted(broker, error),
                transactional_id=transactional_id,
                **fields,
            )
        )
    return make(
        types.DescribeTransactionsResponse,
        throttle_time=NO_THROTTLE,
        transaction_states=tuple(states),
    )


def _datetime(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
