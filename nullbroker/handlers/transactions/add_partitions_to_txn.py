"""AddPartitionsToTxn: partitions added to a transaction before it writes to them, or, for
a broker's verify_only (v4+, KIP-890), checked to be in it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...state.transactions import TransactionError
from ..common import NO_THROTTLE, counted
from .coordination import known_to_version, wrong_coordinator

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


FIRST_BATCHED_ADD_PARTITIONS_VERSION = 4
"""AddPartitionsToTxn v4+ (KIP-890) carries a list of transactions; brokers send it."""


KEY = ApiKey.ADD_PARTITIONS_TO_TXN


def handle(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    types = response_module(ApiKey.ADD_PARTITIONS_TO_TXN, version)
    body = request.body
    if version < FIRST_BATCHED_ADD_PARTITIONS_VERSION:
        # One transaction, from its producer, in fields named for these versions.
        transaction = SimpleNamespace(
            transactional_id=body.v3_and_below_transactional_id,
            producer_id=body.v3_and_below_producer_id,
            producer_epoch=body.v3_and_below_producer_epoch,
            topics=body.v3_and_below_topics,
        )
        return make(
            types.AddPartitionsToTxnResponse,
            throttle_time=NO_THROTTLE,
            results_by_topic_v3_and_below=_add_partitions(
                broker, session, transaction, version, types.AddPartitionsToTxnTopicResult
            ),
        )
    return make(
        types.AddPartitionsToTxnResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        results_by_transaction=tuple(
            make(
                types.AddPartitionsToTxnResult,
                transactional_id=transaction.transactional_id,
                topic_results=_add_partitions(
                    broker, session, transaction, version, types.AddPartitionsToTxnTopicResult
                ),
            )
            for transaction in body.transactions
        ),
    )


def _add_partitions(
    broker: Broker, session: Session, asked: Any, version: int, topic_result: type[Any]
) -> tuple[Any, ...]:
    """One transaction's partitions added (or, verify_only, checked): a result per topic,
    an error per partition."""
    types = response_module(ApiKey.ADD_PARTITIONS_TO_TXN, version)
    wanted = [(topic.name, index) for topic in asked.topics for index in topic.partitions]
    errors: dict[tuple[str, int], ErrorCode] = {}
    unknown = [
        (name, index)
        for name, index in wanted
        if (topic := broker.topics.get(name)) is None or not 0 <= index < len(topic.partitions)
    ]
    refused = wrong_coordinator(broker, session, asked.transactional_id)
    if refused is None and unknown:
        # As Kafka: nothing is added; the unknown partitions say why, the rest wait.
        refused = ErrorCode.operation_not_attempted
        errors = dict.fromkeys(unknown, ErrorCode.unknown_topic_or_partition)
    transactions = broker.transactions
    if refused is None:
        try:
            if getattr(asked, "verify_only", False):
                errors = transactions.has_partitions(
                    asked.transactional_id, asked.producer_id, asked.producer_epoch, wanted
                )
            else:
                transactions.add_partitions(
                    asked.transactional_id, asked.producer_id, asked.producer_epoch, wanted
                )
                refused = ErrorCode.none
        except TransactionError as error:
            refused = known_to_version(error.code, version)
    results = []
    for topic in asked.topics:
        partitions = tuple(
            make(
                types.AddPartitionsToTxnPartitionResult,
                partition_index=index,
                partition_error_code=counted(
                    broker, errors.get((topic.name, index), refused or ErrorCode.none)
                ),
            )
            for index in topic.partitions
        )
        results.append(make(topic_result, name=topic.name, results_by_partition=partitions))
    return tuple(results)
