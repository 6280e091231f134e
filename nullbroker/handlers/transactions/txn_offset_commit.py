"""TxnOffsetCommit: offsets staged with a transaction, committed to the group when it
commits. v6 (Kafka 4.4) names topics by id; an id no topic has is UNKNOWN_TOPIC_ID for its
partitions, and the others are staged."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...cluster.nodes import NO_LEADER_EPOCH, OFFSETS_TOPIC
from ...state.groups.offsets import CommittedOffset
from ...state.transactions import TransactionError
from ..common import NO_THROTTLE, counted
from .coordination import coordinated_change

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


FIRST_ADDING_TXN_OFFSET_COMMIT_VERSION = 5
"""TxnOffsetCommit v5+ is transactions v2: it adds its group to the transaction itself."""
FIRST_ABORTABLE_TXN_OFFSET_COMMIT_VERSION = 4
"""TxnOffsetCommit v4+ knows TRANSACTION_ABORTABLE (KIP-890); older ones INVALID_TXN_STATE."""


KEY = ApiKey.TXN_OFFSET_COMMIT


def handle(broker: Broker, request: Request, session: Session) -> Any:
    """Offsets committed with the transaction: staged by the transaction coordinator, and
    committed to the group when the transaction commits. The group's coordinator answers
    (the group id decides the node, as for OffsetCommit)."""
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
        # The group's coordinator answers: the group id decides the node.
        error = coordinated_change(
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
        partitions=offsets.keys(),
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
