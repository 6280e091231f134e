"""KIP-890's check of a transactional Produce where another process coordinates the
transaction (`--processes`): before the first batch of a transaction goes into a partition,
its leader asks the coordinator whether the partition is in the transaction (transactions v2,
Produce v12+: adds it), as Kafka's partition leader does with AddPartitionsToTxn. A producer
with a transaction already open in the partition at the batch's epoch was asked for when it
began: its later batches go in without a question, so a transaction costs one round trip per
partition, as in Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from codec import InvalidRecordBatch, Request, read_batch_header

from ..common import led_elsewhere
from ..transactions.coordination import ask_coordinator

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session

Asked = dict[tuple[int, int], list[tuple[str, int]]]
"""The partitions to ask the coordinator about, by the producer's id and epoch."""

RETRIABLE = frozenset(
    (
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.concurrent_transactions,
    )
)
"""The coordinator's answers a producer should retry after: Kafka's leader turns them into
NOT_ENOUGH_REPLICAS, which every producer retries."""


def unverified(broker: Broker, request: Request, session: Session) -> Asked:
    """The partitions this node leads whose transactional batch in the request opens the
    producer's transaction there (none open at the batch's epoch)."""
    asked: Asked = {}
    for topic_data in request.body.topic_data:
        name = getattr(topic_data, "name", None)
        topic = (
            broker.topics.get(name)
            if name is not None
            else broker.topics.by_id(topic_data.topic_id)
        )
        if topic is None or topic.internal:
            continue
        followed = led_elsewhere(broker, session.node_id, topic)
        for partition_data in topic_data.partition_data:
            index = partition_data.index
            if index in followed or not 0 <= index < len(topic.partitions):
                continue
            try:
                batch = (
                    read_batch_header(partition_data.records) if partition_data.records else None
                )
            except InvalidRecordBatch:
                continue  # refused by the append, which says why
            if batch is None or not batch.is_transactional:
                continue
            transactions = topic.partitions[index].transactions
            opened = transactions.open.get(batch.producer_id) if transactions else None
            if opened is not None and opened[1][-1].epoch == batch.producer_epoch:
                continue
            producer = (batch.producer_id, batch.producer_epoch)
            asked.setdefault(producer, []).append((topic.name, index))
    return asked


async def verdicts(
    broker: Broker, request: Request, asked: Asked, add: bool
) -> dict[tuple[str, int], ErrorCode]:
    """The coordinator's word on each asked partition, as Produce answers it (with `add`,
    transactions v2, it adds them)."""
    transactional_id = request.body.transactional_id
    found: dict[tuple[str, int], ErrorCode] = {}
    for (producer_id, epoch), partitions in asked.items():
        answers = await ask_coordinator(
            broker, transactional_id, producer_id, epoch, partitions, add
        )
        for partition in partitions:
            error = (
                ErrorCode.not_enough_replicas
                if answers is None
                else answers.get(partition, ErrorCode.unknown_server_error)
            )
            if error is ErrorCode.producer_fenced:  # as verify_produce answers it
                error = ErrorCode.invalid_producer_epoch
            elif error in RETRIABLE:
                error = ErrorCode.not_enough_replicas
            found[partition] = error
    return found
