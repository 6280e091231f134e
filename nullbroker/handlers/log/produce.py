"""Produce: the write side, into the null sink (the common request's shape is answered whole
in C first: nullbroker.handlers.produce_lane)."""

from __future__ import annotations

import datetime
import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import (
    ApiKey,
    InvalidRecordBatch,
    ProtocolError,
    Request,
    encode_response_body,
    read_batch_header,
)
from codec.entities import make, response_module
from codec.produce import (
    PartitionResult,
    TopicResults,
    encode_produce_response_body,
    with_throttle,
)

from ...state import null_sink
from ...state.topics import Topic, is_internal
from ...stats import count_client_records
from ...topic_names import invalid_name_reason
from ..common import coordinated_here, counted, led_elsewhere

if TYPE_CHECKING:
    from .produce_verification import Asked

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


FIRST_ADDING_PRODUCE_VERSION = 12
"""Produce v12+ in a transaction is transactions v2 (KIP-890): it adds its partitions."""
FIRST_LEADER_HINT_VERSION = 10
"""From v10 Kafka tells a producer the leader of a partition it refused as led elsewhere
(KIP-951)."""
FIRST_ABORTABLE_PRODUCE_VERSION = 11
"""Produce v11+ knows TRANSACTION_ABORTABLE (KIP-890); older ones INVALID_TXN_STATE."""
NOT_ADDED = "Partition was not added to the transaction"


KEY = ApiKey.PRODUCE


def handle(broker: Broker, request: Request, session: Session) -> Any:
    """Append each partition's batch to the null sink; answer with the hand-written
    response encoder (codec.produce), the per-request hot path. A transactional batch whose
    coordinator another process serves waits for its word first (KIP-890)."""
    transactional_id = request.body.transactional_id
    if transactional_id is not None and not coordinated_here(broker, transactional_id):
        from .produce_verification import unverified  # transactions on several processes only

        asked = unverified(broker, request, session)
        if asked:
            return _appended_once_verified(broker, request, session, asked)
        return _append(broker, request, session, {})
    return _append(broker, request, session, None)


async def _appended_once_verified(
    broker: Broker, request: Request, session: Session, asked: Asked
) -> bytes | None:
    from .produce_verification import verdicts

    version = request.header.api_version
    add = version >= FIRST_ADDING_PRODUCE_VERSION
    found = await verdicts(broker, request, asked, add)
    refusals = {partition: _refusal(error, version) for partition, error in found.items()}
    return _append(broker, request, session, refusals)


def _append(
    broker: Broker,
    request: Request,
    session: Session,
    verdicts: dict[tuple[str, int], null_sink.AppendResult | None] | None,
) -> bytes | None:
    """The Produce request's appends and answer. `verdicts`: None where this process
    coordinates the transactional id (or there is none), else the coordinator's word on each
    transactional batch's partition, as asked for it (none: it writes a transaction open
    there, already verified)."""
    body = request.body
    topic_results: list[TopicResults] = []
    # The leader and epoch of each partition refused as led elsewhere (KIP-951).
    hints: dict[tuple[object, int], tuple[int, int]] = {}
    # An error fault answers every partition with its code, appending nothing.
    injected = broker.faults.error("Produce", session.node_id) if broker.faults.active else None
    transactional_id = body.transactional_id
    appended = 0
    transactions_v2 = (
        transactional_id is not None and request.header.api_version >= FIRST_ADDING_PRODUCE_VERSION
    )
    for topic_data in body.topic_data:
        topic, error = _resolve_topic(broker, topic_data)
        followed = led_elsewhere(broker, session.node_id, topic)
        max_bytes = 0 if topic is None else topic.max_message_bytes  # once per topic
        results = []
        for partition_data in topic_data.partition_data:
            index = partition_data.index
            log_start = -1
            if injected is not None:
                result = null_sink.AppendResult(injected)
            elif index in followed:
                # As Kafka answers a batch sent to a follower: the producer refreshes
                # its metadata (or, v10+, takes the leader it is told) and sends it there.
                result = null_sink.AppendResult(ErrorCode.not_leader_or_follower)
                assert topic is not None
                hints[_topic_key(topic_data), index] = (
                    broker.cluster.leader(topic.name, index),
                    broker.cluster.leader_epoch(topic.name, index),
                )
            elif topic is not None and topic.source is not None:
                result = null_sink.AppendResult(
                    ErrorCode.policy_violation,
                    message=f"{topic.name} is a synthetic source topic: read-only",
                )
            elif topic is not None and 0 <= index < len(topic.partitions):
                partition = topic.partitions[index]
                refused = None
                if verdicts is not None:
                    refused = verdicts.get((topic.name, index))
                elif transactional_id is not None:
                    refused = _transaction_refusal(
                        broker,
                        request,
                        transactional_id,
                        transactions_v2,
                        topic.name,
                        partition_data,
                    )
                result = refused or null_sink.append(
                    topic.name,
                    partition,
                    partition_data.records,
                    broker.producers,
                    broker.config.verify_crc,
                    max_bytes,
                    transactions_v2,
                    broker.cluster.leader_epoch(topic.name, index),
                )
                appended += result.records
                # Taken, or refused by the sequence checks: the log start, as Kafka's
                # answer carries it; refused before (the transaction, the batch): -1.
                if not result.error or (
                    refused is None and result.error in null_sink.REFUSED_AT_APPEND
                ):
                    log_start = partition.log_start_offset
            else:
                result = null_sink.AppendResult(
                    error if topic is None else ErrorCode.unknown_topic_or_partition
                )
            results.append(
                PartitionResult(
                    index,
                    counted(broker, result.error),
                    result.base_offset,
                    log_start,
                    result.message,
                    result.log_append_time,
                )
            )
        topic_results.append((_topic_key(topic_data), results))
    if appended:
        count_client_records(broker.stats.client_records, request.header.client_id, appended)
    broker.log_grew()
    if body.acks == 0:
        _close_if_refused(topic_results)
        return None
    version = request.header.api_version
    throttle_ms = 0
    if broker.faults.active:
        received = sum(
            len(partition.records or b"")
            for topic in body.topic_data
            for partition in topic.partition_data
        )
        throttle_ms = broker.faults.throttle_ms("Produce", session.node_id, received)
    if hints and version >= FIRST_LEADER_HINT_VERSION:
        return _hinted(broker, session, version, topic_results, hints, throttle_ms)
    answer = encode_produce_response_body(version, topic_results)
    if throttle_ms:
        answer = with_throttle(answer, version, throttle_ms)
    return answer


def _topic_key(topic_data: Any) -> str | uuid.UUID | None:
    """The topic as the response names it: by name, or from v13 by id."""
    name = getattr(topic_data, "name", None)
    return topic_data.topic_id if name is None else name  # type: ignore[no-any-return]


def _hinted(
    broker: Broker,
    session: Session,
    version: int,
    topic_results: list[TopicResults],
    hints: dict[tuple[object, int], tuple[int, int]],
    throttle_ms: int,
) -> bytes:
    """The response with KIP-951's hints, as Kafka answers from v10: a partition refused
    as led elsewhere tells its leader and epoch, and the response the leaders' endpoints
    (those that are up, at the host and listener the client came in on). Written by kio:
    the path of a refusal on a cluster, not the hot one."""
    types = response_module(ApiKey.PRODUCE, version)
    cluster = broker.cluster
    leaders = sorted({leader for leader, _ in hints.values() if not cluster.is_down(leader)})
    body = make(
        types.ProduceResponse,
        throttle_time=datetime.timedelta(milliseconds=throttle_ms),
        responses=tuple(
            make(
                types.TopicProduceResponse,
                name=key,
                topic_id=key,
                partition_responses=tuple(
                    make(
                        types.PartitionProduceResponse,
                        index=result.partition,
                        error_code=ErrorCode(result.error_code),
                        base_offset=result.base_offset,
                        log_append_time=_append_time(result.log_append_time),
                        log_start_offset=result.log_start_offset,
                        record_errors=(),
                        error_message=result.error_message,
                        **_current_leader(types, hints.get((key, result.partition))),
                    )
                    for result in results
                ),
            )
            for key, results in topic_results
        ),
        node_endpoints=tuple(
            make(
                types.NodeEndpoint,
                node_id=node,
                host=session.node(cluster, node).host,
                port=session.node(cluster, node).port,
                rack=None,
            )
            for node in leaders
        ),
    )
    return encode_response_body(ApiKey.PRODUCE, version, body)


def _append_time(milliseconds: int) -> datetime.datetime | None:
    if milliseconds == -1:
        return None
    return datetime.datetime.fromtimestamp(milliseconds / 1000, tz=datetime.UTC)


def _current_leader(types: Any, leader: tuple[int, int] | None) -> dict[str, Any]:
    if leader is None:
        return {}
    return {
        "current_leader": make(types.LeaderIdAndEpoch, leader_id=leader[0], leader_epoch=leader[1])
    }


def _transaction_refusal(
    broker: Broker,
    request: Request,
    transactional_id: str,
    transactions_v2: bool,
    topic: str,
    partition_data: Any,
) -> null_sink.AppendResult | None:
    """Why a transactional batch may not go in (KIP-890: the coordinator is asked whether
    its partition is in the producer's transaction, and with `transactions_v2`, Produce
    v12+, adds it), or None."""
    records = partition_data.records
    try:
        batch = read_batch_header(records) if records else None
    except InvalidRecordBatch:
        return None  # null_sink.append says what is wrong with it
    if batch is None or not batch.is_transactional:
        return None
    error = broker.transactions.verify_produce(
        transactional_id,
        batch.producer_id,
        batch.producer_epoch,
        (topic, partition_data.index),
        add=transactions_v2,
    )
    return _refusal(error, request.header.api_version)


def _refusal(error: ErrorCode, version: int) -> null_sink.AppendResult | None:
    """The coordinator's answer about a transactional batch's partition, as Produce gives
    it: None to append."""
    if error is ErrorCode.none:
        return None
    if error is ErrorCode.transaction_abortable and version < FIRST_ABORTABLE_PRODUCE_VERSION:
        return null_sink.AppendResult(ErrorCode.invalid_txn_state, message=NOT_ADDED)
    return null_sink.AppendResult(error)


class RefusedWithoutAcks(ProtocolError):
    """A Produce request with acks=0 that a partition refused: Kafka closes the connection,
    the one way a producer that waits for no answer learns of it (it reconnects and
    refreshes its metadata)."""


def _close_if_refused(topic_results: list[TopicResults]) -> None:
    refused = sorted(
        {
            ErrorCode(result.error_code).name
            for _, results in topic_results
            for result in results
            if result.error_code
        }
    )
    if refused:
        raise RefusedWithoutAcks(
            f"a Produce request with acks=0 was refused ({', '.join(refused)}): closed, "
            "as Kafka closes it"
        )


def _resolve_topic(broker: Broker, topic_data: Any) -> tuple[Topic | None, ErrorCode]:
    """The topic a Produce request names (by name, or by id from v13), or the error."""
    name = getattr(topic_data, "name", None)
    if name is None:
        topic = broker.topics.by_id(topic_data.topic_id)
        if topic is not None and topic.internal:
            return None, ErrorCode.invalid_topic_exception
        return topic, ErrorCode.unknown_topic_id
    topic = broker.topics.get(name)
    if topic is not None and not topic.internal:  # the common case: a known topic
        return topic, ErrorCode.none
    # Kafka refuses an internal topic to producers whether it exists or not ("Cannot
    # append to internal topic"), and never makes one for them.
    if is_internal(name) or invalid_name_reason(name) is not None:
        return None, ErrorCode.invalid_topic_exception
    topics = broker.topics
    topic = topics.get_or_auto_create(name) if topics.produce_auto_creates else None
    return topic, ErrorCode.unknown_topic_or_partition
