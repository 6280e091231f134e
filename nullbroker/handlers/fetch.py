"""Fetch: synthetic records for every offset that exists, held at the log end.

Every topic serves records: a declared source topic its configured ones, a produced topic
records of the configured size for each offset it was given. Batches are rendered from a
template per shape (codec.batch_template), so serving costs copies, not encoding; the
response is written around them (codec.fetch_response), so they are copied once more only,
into the response frame.

At the log end a Fetch is held until `min_bytes` are available or `max_wait` passes, as
Kafka does, so idle consumers do not spin the broker. Fetch sessions (KIP-227) are not
kept: every response carries session id 0, and clients then send full fetch requests.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio
from kio.schema.errors import ErrorCode

from codec import Request
from codec.control_batch import as_transactional, control_batch
from codec.fetch_response import (
    EMPTY_ABORTED,
    FetchPartition,
    FetchTopic,
    fetch_response_parts,
    with_throttle,
)
from codec.framing import Buffer

from ..clock import now_ms
from ..cluster.nodes import NO_LEADER_EPOCH
from ..state.topics import Partition, Topic
from .common import counted, epoch_error, led_elsewhere

if TYPE_CHECKING:
    from ..broker import Broker, Session
    from ..state.transactions import PartitionTransactions

FETCH = 1
FIRST_TOPIC_ID_VERSION = 13
READ_COMMITTED = 1  # the isolation level
OPENING_EPOCH = 0
"""The session epoch of a full Fetch that asks for a fetch session (KIP-227)."""
ZERO_TOPIC_ID = uuid.UUID(int=0)
"""kio reads the zero topic id as None; a request built in-process may hold it."""
NO_LIMIT = 2**31 - 1
NO_RECORDS: tuple[Buffer, ...] = ()


@dataclass(slots=True)
class _Wanted:
    """One requested partition, resolved against the broker's topics."""

    asked: Any
    topic: Topic | None
    partition: Partition | None
    missing: ErrorCode


@dataclass(slots=True)
class _WantedTopic:
    asked: Any
    partitions: list[_Wanted]


@dataclass(slots=True)
class _Answer:
    """A response built from the log as it is now, and what it would account for."""

    body: Any
    bytes: int = 0
    served: list[tuple[Partition, int, int]] = field(default_factory=list)
    errors: list[ErrorCode] = field(default_factory=list)
    readable: int = 0
    """Partitions of topics and indexes that exist: those the request waits on."""
    read_error: bool = False
    """Whether reading one of them failed (offset out of range, not the leader, a fault)."""


def handle_fetch(broker: Broker, request: Request, session: Session) -> Any:
    body = request.body
    version = request.header.api_version
    if _zero_id_in_new_session(version, body):
        # As Kafka 4.1 answers it: its fetch session cache fails on a topic named by the
        # zero id (a sessionless Fetch of it gets UNKNOWN_TOPIC_ID on the partition).
        counted(broker, ErrorCode.unknown_server_error)
        return fetch_response_parts(version, (), error_code=ErrorCode.unknown_server_error)
    # An error fault answers every partition with its code, serving nothing.
    injected = broker.faults.error("Fetch", session.node_id) if broker.faults.active else None
    wanted = _resolve(broker, body, session.node_id, injected)
    answer = _build(version, body, wanted)
    if _enough(answer, body) or body.max_wait.total_seconds() <= 0:
        return _account(broker, answer, session.node_id)
    deadline_ms = now_ms() + body.max_wait.total_seconds() * 1000
    return _held(broker, request, wanted, deadline_ms, session.node_id)


def _zero_id_in_new_session(version: int, body: Any) -> bool:
    """Whether a Fetch asking for a session (epoch 0) names a topic by the zero id."""
    return (
        version >= FIRST_TOPIC_ID_VERSION
        and body.session_epoch == OPENING_EPOCH
        and any(topic.topic_id in (None, ZERO_TOPIC_ID) for topic in body.topics)
    )


# Partitions Kafka sets aside before reading (KafkaApis.handleFetchRequest): answered with
# their error when the response goes, while the request waits on the others.
SET_ASIDE = frozenset({ErrorCode.unknown_topic_id, ErrorCode.unknown_topic_or_partition})


def _enough(answer: _Answer, body: Any) -> bool:
    """Whether to answer now, as Kafka's ReplicaManager.fetchMessages decides: enough
    bytes, or a partition whose read failed; or nothing to wait on, such as a Fetch for
    no partition at all (a Java consumer closing its fetch session: held, every close()
    would take fetch.max.wait.ms). A partition of a deleted topic is set aside, so a
    consumer still asking for it waits as long as it asked (franz-go's TestIssue434)."""
    return answer.bytes >= max(body.min_bytes, 1) or answer.read_error or not answer.readable


async def _held(
    broker: Broker, request: Request, wanted: list[_WantedTopic], deadline_ms: float, node: int
) -> Any:
    """Wait until a produce or a growing source brings data, or the deadline; then answer."""
    body = request.body
    while True:
        remaining_ms = deadline_ms - now_ms()
        if remaining_ms > 0:
            growth_ms = _next_growth_ms(wanted)
            wait_ms = remaining_ms if growth_ms is None else min(remaining_ms, growth_ms)
            with trio.move_on_after(wait_ms / 1000):
                await broker.log_growth.wait()
        answer = _build(request.header.api_version, body, wanted)
        if _enough(answer, body) or now_ms() >= deadline_ms:
            return _account(broker, answer, node)


def _next_growth_ms(wanted: list[_WantedTopic]) -> float | None:
    """Milliseconds until a growing source topic among `wanted` gains its next record."""
    soonest = None
    for wanted_topic in wanted:
        for fetch in wanted_topic.partitions:
            topic, partition = fetch.topic, fetch.partition
            if topic is None or partition is None or topic.source is None:
                continue
            source = topic.source
            if source.rate is None or (
                source.records is not None and partition.log_end_offset >= source.records
            ):
                continue
            next_at = topic.created_ms + (partition.log_end_offset + 1) * 1000 / source.rate
            wait = max(1.0, next_at - now_ms())
            soonest = wait if soonest is None else min(soonest, wait)
    return soonest


def _resolve(
    broker: Broker, body: Any, node: int, injected: ErrorCode | None = None
) -> list[_WantedTopic]:
    resolved = []
    for asked_topic in body.topics:
        name = getattr(asked_topic, "topic", None)
        if name is not None:
            topic = broker.topics.get(name)
            missing = ErrorCode.unknown_topic_or_partition
        else:
            topic = broker.topics.by_id(asked_topic.topic_id)
            missing = ErrorCode.unknown_topic_id
        followed = led_elsewhere(broker, node, topic)
        partitions = []
        for asked in asked_topic.partitions:
            partition = None
            error = missing if topic is None else ErrorCode.unknown_topic_or_partition
            exists = topic is not None and 0 <= asked.partition < len(topic.partitions)
            if injected is not None:
                error = injected
            elif exists and (fenced := _fenced(broker, topic, asked)) is not ErrorCode.none:
                error = fenced  # checked first, as Kafka's Partition does
            elif asked.partition in followed:  # the consumer refreshes its metadata
                error = ErrorCode.not_leader_or_follower
            elif exists:
                partition = topic.partitions[asked.partition]
            partitions.append(_Wanted(asked, topic, partition, error))
        resolved.append(_WantedTopic(asked_topic, partitions))
    return resolved


def _fenced(broker: Broker, topic: Topic, asked: Any) -> ErrorCode:
    """The error of a stale or unknown current_leader_epoch (Fetch v9+), if any."""
    current_epoch = getattr(asked, "current_leader_epoch", NO_LEADER_EPOCH)
    if current_epoch == NO_LEADER_EPOCH:
        return ErrorCode.none
    return epoch_error(current_epoch, broker.cluster.leader_epoch(topic.name, asked.partition))


def _build(version: int, body: Any, wanted: list[_WantedTopic]) -> _Answer:
    now = now_ms()
    budget = getattr(body, "max_bytes", NO_LIMIT)
    answer = _Answer(body=None)
    topics: list[FetchTopic] = []
    by_id = version >= FIRST_TOPIC_ID_VERSION
    committed_only = body.isolation_level == READ_COMMITTED
    for wanted_topic in wanted:
        partitions = []
        for fetch in wanted_topic.partitions:
            asked, topic, partition = fetch.asked, fetch.topic, fetch.partition
            error, log_start, log_end = fetch.missing, -1, -1
            records: Sequence[Buffer] = NO_RECORDS
            size = 0
            stable = -1
            aborted: Sequence[tuple[int, int]] = ()
            if topic is not None and partition is not None:
                answer.readable += 1
                topic.advance(now)
                log_start, log_end = partition.log_start_offset, partition.log_end_offset
                transactions = partition.transactions
                stable = log_end
                if transactions is not None:
                    stable = transactions.last_stable_offset(log_end)
                if log_start <= asked.fetch_offset <= log_end:
                    error = ErrorCode.none
                    limit = min(asked.partition_max_bytes, budget)
                    first = answer.bytes == 0
                    if partition.retained is not None:  # --retain: what was produced
                        # As Kafka: read_committed up to the last stable offset, the
                        # batches of aborted transactions listed for the consumer to drop.
                        records, count, size = partition.retained.read(
                            asked.fetch_offset, limit, first,
                            stable if committed_only else None,
                        )  # fmt: skip
                        if committed_only and transactions is not None:
                            aborted = transactions.aborted_between(asked.fetch_offset, stable)
                    elif transactions is None:
                        records, count, size = topic.records.read(
                            asked.fetch_offset, log_end, limit, first, topic.created_ms,
                            partition.index,
                        )  # fmt: skip
                    else:
                        # read_committed reads up to the last stable offset, and drops
                        # the aborted transactions' records itself.
                        upper = stable if committed_only else log_end
                        records, count, size = _transactional_records(
                            topic, partition.index, asked.fetch_offset, upper, limit, first,
                            transactions,
                        )  # fmt: skip
                        if committed_only:
                            aborted = transactions.aborted_between(asked.fetch_offset, upper)
                    if size:
                        answer.served.append((partition, count, size))
                        answer.bytes += size
                        budget -= size
                else:
                    error = ErrorCode.offset_out_of_range
            if error is not ErrorCode.none:
                answer.errors.append(error)
                # As Kafka: a partition in error tells no offsets, and one set aside before
                # reading an empty list of aborted transactions.
                log_end = stable = log_start = -1
                if error in SET_ASIDE:
                    aborted = EMPTY_ABORTED
                else:
                    answer.read_error = True
            # Records are never null: librdkafka rejects a flexible response with null records.
            partitions.append(
                FetchPartition(
                    asked.partition, error, log_end, stable, log_start, records, aborted, size
                )
            )
        asked_topic = wanted_topic.asked
        topics.append((asked_topic.topic_id if by_id else asked_topic.topic, partitions))
    # Encoded here, around the batches, so they are copied once: into the response frame.
    answer.body = fetch_response_parts(version, topics, read_committed=committed_only)
    return answer


def _transactional_records(
    topic: Topic,
    index: int,
    offset: int,
    end: int,
    limit: int,
    first: bool,
    transactions: PartitionTransactions,
) -> tuple[list[Buffer], int, int]:
    """`_records` for a partition that transactions wrote to: batches cut where a
    transaction's records begin and end, each transactional producer's records served as
    its batches (transactional, its id and epoch), and each marker as the control batch
    Kafka writes."""
    shape = topic.records
    whole = shape.batch_records
    parts: list[Buffer] = []
    size = count = 0
    for segment in transactions.segments(offset, end):
        base = segment.start
        while base < segment.end:
            marker = segment.marker
            if marker is not None:
                stop = base + 1
                timestamp = shape.timestamp_ms(topic.created_ms, base)
                batch: tuple[Buffer, ...] = (
                    control_batch(base, marker.producer_id, marker.epoch, marker.commit, timestamp),
                )
                served = 0  # control records are never handed to the application
            else:
                stop = min(shape.batch_base(base) + whole, segment.end)
                header, records = shape.batch_part(base, stop, topic.created_ms)
                if segment.producer is not None:
                    header = as_transactional(header, records, *segment.producer)
                batch = (header, records)
                served = stop - max(base, offset)
            batch_size = sum(len(part) for part in batch)
            if size + batch_size > limit and (parts or not first):
                return parts, count, size
            parts += batch
            size += batch_size
            count += served
            base = stop
    return parts, count, size


def _account(broker: Broker, answer: _Answer, node: int) -> Any:
    """Count what the response serves, once, when it is sent; a throttle fault sets its
    throttle_time_ms from the bytes served."""
    if broker.faults.active:
        throttle_ms = broker.faults.throttle_ms("Fetch", node, answer.bytes)
        if throttle_ms:
            answer.body = with_throttle(answer.body, throttle_ms)
    for partition, records, served_bytes in answer.served:
        partition.fetched.records += records
        partition.fetched.bytes += served_bytes
    for error in answer.errors:
        counted(broker, error)
    return answer.body


HANDLERS = {FETCH: handle_fetch}
