"""TxnOffsetCommit: offsets staged with the group's coordinator, committed to the group when
the transaction commits. v6 (Kafka 4.4) names topics by id; an id no topic has is
UNKNOWN_TOPIC_ID for its partitions, and the others are staged."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...cluster.nodes import NO_LEADER_EPOCH, OFFSETS_TOPIC, internal_partition_for
from ...state.groups.offsets import CommittedOffset
from ...state.groups.transaction_offsets import StagedOffsets
from ...state.transactions import TransactionError
from ..common import NO_THROTTLE, coordinated_here, counted
from .coordination import ask_coordinator, known_to_version, wrong_coordinator

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


FIRST_ADDING_TXN_OFFSET_COMMIT_VERSION = 5
"""TxnOffsetCommit v5+ is transactions v2: it adds its group to the transaction itself."""
FIRST_ABORTABLE_TXN_OFFSET_COMMIT_VERSION = 4
"""TxnOffsetCommit v4+ knows TRANSACTION_ABORTABLE (KIP-890); older ones INVALID_TXN_STATE."""


KEY = ApiKey.TXN_OFFSET_COMMIT


def handle(broker: Broker, request: Request, session: Session) -> Any:
    """Offsets committed with the transaction, as Kafka's group coordinator takes them: the
    group's coordinator answers (the group id decides the node, as for OffsetCommit), checks
    the member, asks the transaction's coordinator whether the transaction holds the group
    (v5+ adds it), and stages them until the transaction's marker commits or drops them."""
    version = request.header.api_version
    types = response_module(ApiKey.TXN_OFFSET_COMMIT, version)
    body = request.body
    names = [_topic_name(broker, topic) for topic in body.topics]
    wanted = {
        (name, partition.partition_index): CommittedOffset(
            partition.committed_offset,
            getattr(partition, "committed_leader_epoch", NO_LEADER_EPOCH),
            partition.committed_metadata or "",
        )
        for topic, name in zip(body.topics, names, strict=True)
        if name is not None
        for partition in topic.partitions
    }
    error = ErrorCode.none
    if wanted or not names:
        refused = wrong_coordinator(broker, session, body.group_id, OFFSETS_TOPIC)
        if refused is None:
            refused = _refused_by_group(broker, body, version, wanted)
        add = version >= FIRST_ADDING_TXN_OFFSET_COMMIT_VERSION
        if refused is not None:
            error = known_to_version(refused, version)
        elif not coordinated_here(broker, body.transactional_id):
            return _staged_once_asked(broker, types, body, version, names, wanted, add)
        else:
            try:
                broker.transactions.check_offsets(
                    body.transactional_id, body.producer_id, body.producer_epoch, body.group_id, add
                )
                broker.groups.transaction_offsets.stage(body.producer_id, body.group_id, wanted)
            except TransactionError as checked:
                error = known_to_version(checked.code, version)
    return _response(broker, types, body, version, names, error)


async def _staged_once_asked(
    broker: Broker,
    types: Any,
    body: Any,
    version: int,
    names: list[str | None],
    wanted: StagedOffsets,
    add: bool,
) -> Any:
    """TxnOffsetCommit where another process coordinates the transaction: staged once its
    coordinator says the transaction holds the group's partition (KIP-890)."""
    partition = (
        OFFSETS_TOPIC,
        internal_partition_for(body.group_id, broker.config.offsets_topic_partitions),
    )
    answers = await ask_coordinator(
        broker, body.transactional_id, body.producer_id, body.producer_epoch, [partition], add
    )
    error = (
        ErrorCode.coordinator_not_available
        if answers is None
        else answers.get(partition, ErrorCode.unknown_server_error)
    )
    if error is ErrorCode.none:
        broker.groups.transaction_offsets.stage(body.producer_id, body.group_id, wanted)
    return _response(broker, types, body, version, names, known_to_version(error, version))


def _response(
    broker: Broker, types: Any, body: Any, version: int, names: list[str | None], error: ErrorCode
) -> Any:
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
                name=name,
                topic_id=getattr(topic, "topic_id", None),
                partitions=tuple(
                    make(
                        types.TxnOffsetCommitResponsePartition,
                        partition_index=partition.partition_index,
                        error_code=counted(
                            broker, error if name is not None else ErrorCode.unknown_topic_id
                        ),
                    )
                    for partition in topic.partitions
                ),
            )
            for topic, name in zip(body.topics, names, strict=True)
        ),
    )


def _topic_name(broker: Broker, asked: Any) -> str | None:
    """The name of a topic asked for by name (v0-5), or by id (v6): None for an id no topic
    has."""
    name = getattr(asked, "name", None)
    if name is not None:
        return name
    topic = broker.topics.by_id(asked.topic_id)
    return topic.name if topic is not None else None


def _refused_by_group(
    broker: Broker, body: Any, version: int, offsets: StagedOffsets
) -> ErrorCode | None:
    """Whether the group takes the offsets, as Kafka's group coordinator checks them: the
    member (v3+ names it) and its generation or epoch, in a group of either protocol, as for
    an OffsetCommit."""
    error, _ = broker.groups.validate_commit(
        body.group_id,
        getattr(body, "generation_id", -1),
        getattr(body, "member_id", ""),
        getattr(body, "group_instance_id", None),
        version,
        transactional=True,
        partitions=offsets.keys(),
    )
    return None if error is ErrorCode.none else error
