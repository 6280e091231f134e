"""The transaction coordinator's APIs: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and
TxnOffsetCommit (InitProducerId with a transactional id is produce.py's). The state they
change is nullbroker.state.transactions'."""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..cluster.nodes import NO_LEADER_EPOCH, OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from ..state.groups.offsets import CommittedOffset
from ..state.transactions import TransactionError, TxnState
from .common import NO_THROTTLE, coordinated_elsewhere, counted, led_elsewhere

if TYPE_CHECKING:
    from ..broker import Broker, Session
    from ..state.topics import Partition

UNKNOWN_PARTITION_MESSAGE = "This server does not host this topic-partition."
"""Kafka's message for UNKNOWN_TOPIC_OR_PARTITION, which DescribeProducers sends with it for a
topic it does not know."""
FIRST_BATCHED_ADD_PARTITIONS_VERSION = 4
"""AddPartitionsToTxn v4+ (KIP-890) carries a list of transactions; brokers send it."""
FIRST_PRODUCER_FENCED_VERSION = 2
"""Before these versions (KIP-588), clients know a fenced producer as INVALID_PRODUCER_EPOCH."""
FIRST_BUMPING_END_TXN_VERSION = 5
"""EndTxn v5+ is transactions v2 (KIP-890): every end bumps the producer's epoch."""
FIRST_ADDING_TXN_OFFSET_COMMIT_VERSION = 5
"""TxnOffsetCommit v5+ is transactions v2: it adds its group to the transaction itself."""
FIRST_ABORTABLE_TXN_OFFSET_COMMIT_VERSION = 4
"""TxnOffsetCommit v4+ knows TRANSACTION_ABORTABLE (KIP-890); older ones INVALID_TXN_STATE."""


def _refused(
    broker: Broker, session: Session, key: str, internal: str = TRANSACTION_STATE_TOPIC
) -> ErrorCode | None:
    """NOT_COORDINATOR when another node coordinates the transactional id (or, with
    `internal` OFFSETS_TOPIC, the group id), as for groups."""
    if coordinated_elsewhere(broker, session, key, internal):
        return ErrorCode.not_coordinator
    return None


def _coordinated(
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
    refused = _refused(broker, session, key, internal)
    if refused is not None:
        return refused
    try:
        change(body.transactional_id, body.producer_id, body.producer_epoch, *arguments)
    except TransactionError as error:
        return _for_version(error.code, version)
    return ErrorCode.none


def _for_version(error: ErrorCode, version: int) -> ErrorCode:
    if error is ErrorCode.producer_fenced and version < FIRST_PRODUCER_FENCED_VERSION:
        return ErrorCode.invalid_producer_epoch
    return error


def handle_add_partitions_to_txn(broker: Broker, request: Request, session: Session) -> Any:
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
    refused = _refused(broker, session, asked.transactional_id)
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
            refused = _for_version(error.code, version)
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


def handle_add_offsets_to_txn(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    body = request.body
    error = _coordinated(
        broker, session, body.transactional_id, body, version,
        broker.transactions.add_offsets, body.group_id,
    )  # fmt: skip
    types = response_module(ApiKey.ADD_OFFSETS_TO_TXN, version)
    return make(
        types.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE, error_code=counted(broker, error)
    )


def handle_end_txn(broker: Broker, request: Request, session: Session) -> Any:
    """The end of a transaction; from v5 (transactions v2) the answer carries the producer's
    id and epoch after it, bumped, or -1 and -1 when refused, as Kafka's."""
    version = request.header.api_version
    body = request.body
    bump = version >= FIRST_BUMPING_END_TXN_VERSION
    producer = (-1, -1)
    error = _refused(broker, session, body.transactional_id)
    if error is None:
        try:
            producer = broker.transactions.end(
                body.transactional_id, body.producer_id, body.producer_epoch, body.committed, bump
            )
            error = ErrorCode.none
        except TransactionError as refused:
            error = _for_version(refused.code, version)
    types = response_module(ApiKey.END_TXN, version)
    return make(
        types.EndTxnResponse,
        throttle_time=NO_THROTTLE,
        error_code=counted(broker, error),
        producer_id=producer[0],
        producer_epoch=producer[1],
    )


def handle_txn_offset_commit(broker: Broker, request: Request, session: Session) -> Any:
    """Offsets committed with the transaction: staged by the transaction coordinator, and
    committed to the group when the transaction commits. The group's coordinator answers
    (the group id decides the node, as for OffsetCommit)."""
    version = request.header.api_version
    types = response_module(ApiKey.TXN_OFFSET_COMMIT, version)
    body = request.body
    wanted = {
        (topic.name, partition.partition_index): CommittedOffset(
            partition.committed_offset,
            getattr(partition, "committed_leader_epoch", NO_LEADER_EPOCH),
            partition.committed_metadata or "",
        )
        for topic in body.topics
        for partition in topic.partitions
    }
    # The group's coordinator answers: the group id decides the node.
    error = _coordinated(
        broker, session, body.group_id, body, version,
        _stage_offsets, broker, body, version, wanted, internal=OFFSETS_TOPIC,
    )  # fmt: skip
    if (
        error is ErrorCode.transaction_abortable
        and version < FIRST_ABORTABLE_TXN_OFFSET_COMMIT_VERSION
    ):
        error = ErrorCode.invalid_txn_state
    return make(
        types.TxnOffsetCommitResponse,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            make(
                types.TxnOffsetCommitResponseTopic,
                name=topic.name,
                partitions=tuple(
                    make(
                        types.TxnOffsetCommitResponsePartition,
                        partition_index=partition.partition_index,
                        error_code=counted(broker, error),
                    )
                    for partition in topic.partitions
                ),
            )
            for topic in body.topics
        ),
    )


def _stage_offsets(
    transactional_id: str,
    producer_id: int,
    epoch: int,
    broker: Broker,
    body: Any,
    version: int,
    offsets: dict[tuple[str, int], CommittedOffset],
) -> None:
    """Stage a TxnOffsetCommit's offsets if the group takes them, as Kafka's group
    coordinator does: it checks the member (v3+ names it) and its generation or epoch, in
    a group of either protocol, as for an OffsetCommit."""
    error, _ = broker.groups.validate_commit(
        body.group_id,
        getattr(body, "generation_id", -1),
        getattr(body, "member_id", ""),
        getattr(body, "group_instance_id", None),
        version,
        transactional=True,
    )
    if error is not ErrorCode.none:
        raise TransactionError(error)
    broker.transactions.stage_offsets(
        transactional_id,
        producer_id,
        epoch,
        body.group_id,
        offsets,
        add=version >= FIRST_ADDING_TXN_OFFSET_COMMIT_VERSION,
    )


def handle_describe_transactions(broker: Broker, request: Request, session: Session) -> Any:
    """What `kafka-transactions describe` shows: each id's producer, state and partitions."""
    types = response_module(ApiKey.DESCRIBE_TRANSACTIONS, request.header.api_version)
    states = []
    for transactional_id in request.body.transactional_ids:
        transaction = broker.transactions.transactions.get(transactional_id)
        error = _refused(broker, session, transactional_id)
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


KAFKA_TXN_STATES = frozenset(
    {
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
        "Dead", "PrepareEpochFence",
    }
)  # fmt: skip
"""Every state of a transactional id in Kafka 4.1 (its TransactionState), by name: a filter
naming one is known, though nullbroker's transactions pass through only some of them."""


def handle_list_transactions(broker: Broker, request: Request, session: Session) -> Any:
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
        if _refused(broker, session, transaction.transactional_id) is None
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


def handle_describe_producers(broker: Broker, request: Request, session: Session) -> Any:
    """What `kafka-transactions describe-producers` shows: each partition's idempotent and
    transactional producers, with the first offset of the transaction each has open."""
    types = response_module(ApiKey.DESCRIBE_PRODUCERS, request.header.api_version)
    topics = []
    for asked in request.body.topics:
        topic = broker.topics.get(asked.name)
        followed = led_elsewhere(broker, session.node_id, topic)
        partitions = []
        for index in asked.partition_indexes:
            active: tuple[Any, ...] = ()
            message = None
            if topic is None or not 0 <= index < len(topic.partitions):
                error = ErrorCode.unknown_topic_or_partition
                # As Kafka: a topic it does not know is told why; a partition past the
                # end of one it knows is not (its replica manager answers that).
                message = UNKNOWN_PARTITION_MESSAGE if topic is None else None
            elif index in followed:
                error = ErrorCode.not_leader_or_follower
            else:
                error = ErrorCode.none
                active = _producers_on(broker, types, topic.name, topic.partitions[index])
            partitions.append(
                make(
                    types.PartitionResponse,
                    partition_index=index,
                    error_code=counted(broker, error),
                    error_message=message,
                    active_producers=active,
                )
            )
        topics.append(make(types.TopicResponse, name=asked.name, partitions=tuple(partitions)))
    return make(types.DescribeProducersResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


def _producers_on(broker: Broker, types: Any, topic: str, partition: Partition) -> tuple[Any, ...]:
    opened = partition.transactions.open if partition.transactions is not None else {}
    return tuple(
        make(
            types.ProducerState,
            producer_id=producer_id,
            producer_epoch=state.epoch,
            last_sequence=state.last_sequence,
            last_timestamp=state.last_timestamp,
            coordinator_epoch=state.coordinator_epoch,
            current_txn_start_offset=opened[producer_id][0] if producer_id in opened else -1,
        )
        for producer_id, state in broker.producers.on_partition(topic, partition.index)
    )


HANDLERS = {
    ApiKey.DESCRIBE_PRODUCERS: handle_describe_producers,
    ApiKey.DESCRIBE_TRANSACTIONS: handle_describe_transactions,
    ApiKey.LIST_TRANSACTIONS: handle_list_transactions,
    ApiKey.ADD_PARTITIONS_TO_TXN: handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: handle_add_offsets_to_txn,
    ApiKey.END_TXN: handle_end_txn,
    ApiKey.TXN_OFFSET_COMMIT: handle_txn_offset_commit,
}
