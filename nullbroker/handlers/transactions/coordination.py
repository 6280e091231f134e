"""What the transaction coordinator's APIs share: the node that coordinates a transactional
id (or a group id), a refusal as the request's version knows it, and KIP-890's question to a
coordinator another process serves. The state they change is nullbroker.state.transactions'."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kio.schema.add_partitions_to_txn.v5 import request as add_request
from kio.schema.errors import ErrorCode

from codec.entities import make

from ...cluster.nodes import TRANSACTION_STATE_TOPIC
from ...state.transactions import TransactionError
from ..common import by_topic, coordinated_elsewhere

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


FIRST_PRODUCER_FENCED_VERSION = 2
"""Before these versions (KIP-588), clients know a fenced producer as INVALID_PRODUCER_EPOCH."""


def wrong_coordinator(
    broker: Broker, session: Session, key: str, internal: str = TRANSACTION_STATE_TOPIC
) -> ErrorCode | None:
    """NOT_COORDINATOR when another node coordinates the transactional id (or, with
    `internal` OFFSETS_TOPIC, the group id), as for groups."""
    if coordinated_elsewhere(broker, session, key, internal):
        return ErrorCode.not_coordinator
    return None


def coordinated_change(
    broker: Broker,
    session: Session,
    key: str,
    body: Any,
    version: int,
    change: Callable[..., object],
    *arguments: Any,
    internal: str = TRANSACTION_STATE_TOPIC,
) -> ErrorCode:
    """A transactional request's error: NOT_COORDINATOR on the wrong node (`key` decides
    the node), else what `change` (a call on the transaction coordinator, given the body's
    transactional id, producer id and epoch, then `arguments`) refused it with, else none."""
    refused = wrong_coordinator(broker, session, key, internal)
    if refused is not None:
        return refused
    try:
        change(body.transactional_id, body.producer_id, body.producer_epoch, *arguments)
    except TransactionError as error:
        return known_to_version(error.code, version)
    return ErrorCode.none


def known_to_version(error: ErrorCode, version: int) -> ErrorCode:
    if error is ErrorCode.producer_fenced and version < FIRST_PRODUCER_FENCED_VERSION:
        return ErrorCode.invalid_producer_epoch
    return error


async def ask_coordinator(
    broker: Broker,
    transactional_id: str,
    producer_id: int,
    epoch: int,
    partitions: list[tuple[str, int]],
    add: bool,
) -> dict[tuple[str, int], ErrorCode] | None:
    """Ask the transaction's coordinator, served by another process, whether the producer's
    transaction holds `partitions` (with `add`, transactions v2, add them), as a Kafka
    partition leader or group coordinator asks it (KIP-890: AddPartitionsToTxn v5, verify
    only unless adding): each partition's answer, or None if none came."""
    topics = by_topic(partitions)
    request = make(
        add_request.AddPartitionsToTxnRequest,
        transactions=(
            make(
                add_request.AddPartitionsToTxnTransaction,
                transactional_id=transactional_id,
                producer_id=producer_id,
                producer_epoch=epoch,
                verify_only=not add,
                topics=tuple(
                    make(add_request.AddPartitionsToTxnTopic, name=name, partitions=tuple(indexes))
                    for name, indexes in topics.items()
                ),
            ),
        ),
    )
    node = broker.cluster.coordinator(transactional_id, TRANSACTION_STATE_TOPIC)
    response = await broker.ask_node(node, request)
    if response is None:
        return None
    if response.error_code is not ErrorCode.none:
        return dict.fromkeys(partitions, response.error_code)
    return {
        (topic.name, partition.partition_index): partition.partition_error_code
        for result in response.results_by_transaction
        for topic in result.topic_results
        for partition in topic.results_by_partition
    }
