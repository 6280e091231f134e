"""Fetch: synthetic records for every offset that exists, held at the log end, in fetch
sessions as Kafka keeps them.

Every topic serves records: a declared source topic its configured ones, a produced topic
records of the configured size for each offset it was given. Batches are rendered from a
template per shape (codec.batch_template), so serving costs copies, not encoding; the
response is written around them (codec.fetch_response), so they are copied once more only,
into the response frame.

At the log end a Fetch is held until `min_bytes` are available or `max_wait` passes, as
Kafka does, so idle consumers do not spin the broker. Fetch sessions (KIP-227) are kept as
Kafka keeps them (nullbroker.state.fetch_sessions): a Fetch at session epoch 0 opens one,
and the consumer's incremental fetches then name only the partitions whose offsets moved
and are answered only for the partitions with records or news; what is enough to answer
a held incremental fetch is counted over all the session's partitions.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio
from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.control_batch import as_transactional, control_batch
from codec.fetch_response import (
    EMPTY_ABORTED,
    FetchPartition,
    FetchTopic,
    NodeEndpoint,
    fetch_response_parts,
    with_throttle,
)
from codec.framing import Buffer

from ...clock import now_ms
from ...cluster.nodes import NO_LEADER_EPOCH
from ...state.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    NO_SESSION,
    CachedPartition,
    FetchSession,
    FetchSessionCache,
    TopicKey,
    next_epoch,
)
from ...state.topics import Partition, Topic
from ...stats import count_client_records
from ..common import counted, epoch_error, led_elsewhere

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session
    from ...state.transactions import PartitionTransactions

FIRST_SESSION_VERSION = 7
FIRST_TOPIC_ID_VERSION = 13
FIRST_LEADER_HINT_VERSION = 16
"""Kafka tells a refused partition's current leader, and the leaders' endpoints, from v16."""
READ_COMMITTED = 1  # the isolation level
ZERO_TOPIC_ID = uuid.UUID(int=0)
"""kio reads the zero topic id as None; a request built in-process may hold it."""
NO_LIMIT = 2**31 - 1
NO_RECORDS: tuple[Buffer, ...] = ()

# Why a partition is not read, in the order Kafka lists such partitions after the read
# ones (KafkaApis.handleFetchRequest sets them aside: an unknown topic id first, then an
# unknown topic or partition).
READ = 0
UNKNOWN_ID = 1
UNKNOWN_PARTITION = 2

LEADER_HINTED = frozenset((ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch))
"""The errors whose partitions Kafka answers with their current leader (Fetch v16+)."""

# What a Fetch's session epoch makes of it (Kafka's FetchContext kinds).
SESSIONLESS = "sessionless"
FULL = "full"
INCREMENTAL = "incremental"


@dataclass(slots=True)
class _Wanted:
    """One requested partition (or a session's), resolved against the broker's topics."""

    asked: Any
    topic: Topic | None
    partition: Partition | None
    missing: ErrorCode
    set_aside: int = READ
    leader: tuple[int, int] | None = None
    """The partition's leader and epoch, where this node refused it as not its leader or
    for a stale epoch: what Fetch v16+ tells the client (KIP-951)."""


@dataclass(slots=True)
class _WantedTopic:
    key: TopicKey
    """The topic as the response names it: by name, or from v13 by id."""
    partitions: list[_Wanted]


_Run = tuple[TopicKey, list[FetchPartition], list[Any]]
"""A run of one topic's partitions in an answer: what each is told, and what was asked of
it (a session's CachedPartition in an incremental fetch)."""


@dataclass(slots=True)
class _Answer:
    """A response built from the log as it is now, and what it would account for."""

    runs: list[_Run] = field(default_factory=list)
    """The partitions answered, a topic's run at a time, in Kafka's order."""
    bytes: int = 0
    served: list[tuple[Partition, int, int]] = field(default_factory=list)
    errors: list[ErrorCode] = field(default_factory=list)
    readable: int = 0
    """Partitions of topics and indexes that exist: those the request waits on."""
    read_error: bool = False
    """Whether reading one of them failed (offset out of range, not the leader, a fault)."""
    leaders: set[int] = field(default_factory=set)
    """The leaders the answer names for partitions it refused (KIP-951, v16+)."""


@dataclass(slots=True)
class _Context:
    """How a Fetch is answered, from its session id and epoch (Kafka's FetchContext)."""

    kind: str
    cache: FetchSessionCache
    session: FetchSession | None = None
    """The incremental fetch's session."""
    epoch: int = 0
    """The epoch the session moved to for this fetch: answered only if it still has it."""


class _SessionError(Exception):
    """A Fetch answered with a top-level error and no partitions."""

    def __init__(self, error: ErrorCode, session_id: int = NO_SESSION) -> None:
        super().__init__(error.name)
        self.error = error
        self.session_id = session_id


KEY = ApiKey.FETCH


def handle(broker: Broker, request: Request, session: Session) -> Any:
    body = request.body
    version = request.header.api_version
    node = session.node_id
    try:
        context = _context(broker, version, body, node)
    except _SessionError as refused:
        counted(broker, refused.error)
        return fetch_response_parts(
            version, (), error_code=refused.error, session_id=refused.session_id
        )
    broker.stats.fetch_requests[context.kind] += 1
    # An error fault answers every partition with its code, serving nothing.
    injected = broker.faults.error("Fetch", node) if broker.faults.active else None
    asked: Sequence[tuple[TopicKey, Sequence[Any]]]
    if context.session is None:
        asked = _asked_topics(body, version)
    else:
        asked = _session_topics(context.session)
    wanted = _resolve(broker, asked, version >= FIRST_TOPIC_ID_VERSION, node, injected)
    answer = _build(body, wanted, version >= FIRST_LEADER_HINT_VERSION)
    if _enough(answer, body) or body.max_wait.total_seconds() <= 0:
        parts = _respond(version, body, answer, context, _endpoints(broker, session, answer))
        return _account(broker, parts, answer, node, request.header.client_id)
    deadline_ms = now_ms() + body.max_wait.total_seconds() * 1000
    return _held(broker, request, wanted, context, deadline_ms, session)


def _context(broker: Broker, version: int, body: Any, node: int) -> _Context:
    """The session a Fetch belongs to, opened, closed or moved on as Kafka's FetchManager
    does; _SessionError for a session that cannot serve it."""
    cache = _sessions(broker, node)
    session_id = getattr(body, "session_id", NO_SESSION)  # none before v7
    epoch = getattr(body, "session_epoch", FINAL_EPOCH)
    by_ids = version >= FIRST_TOPIC_ID_VERSION
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        cache.remove(session_id)  # a full Fetch closes the session it names
        if _zero_id_partitions_in_new_session(by_ids, epoch, body):
            # As Kafka 4.4 answers it (checked): its fetch session cache fails on a topic
            # named by the zero id with several partitions (with one, UNKNOWN_TOPIC_ID on
            # it, as a sessionless Fetch gets).
            raise _SessionError(ErrorCode.unknown_server_error, session_id)
        return _Context(FULL if epoch == INITIAL_EPOCH else SESSIONLESS, cache)
    fetch_session = cache.get(session_id)
    if fetch_session is None:
        raise _SessionError(ErrorCode.fetch_session_id_not_found)
    if fetch_session.epoch != epoch:
        raise _SessionError(ErrorCode.invalid_fetch_session_epoch)
    if fetch_session.by_ids != by_ids:
        raise _SessionError(ErrorCode.fetch_session_topic_id_error)
    if _zero_id_partitions_in_new_session(by_ids, INITIAL_EPOCH, body):
        # Kafka 4.1.1 failed alike, answering with the session's id and keeping its epoch.
        raise _SessionError(ErrorCode.unknown_server_error, session_id)
    _update(fetch_session, body, by_ids)
    if not fetch_session.partitions:  # nothing left to fetch: the session ends
        cache.remove(session_id)
        return _Context(SESSIONLESS, cache)
    cache.touch(fetch_session, now_ms())
    fetch_session.epoch = next_epoch(fetch_session.epoch)
    return _Context(INCREMENTAL, cache, fetch_session, fetch_session.epoch)


def _zero_id_partitions_in_new_session(by_ids: bool, epoch: int, body: Any) -> bool:
    """Whether a Fetch asking for a session (epoch 0) names several partitions of the zero
    topic id."""
    return (
        by_ids
        and epoch == INITIAL_EPOCH
        and sum(len(t.partitions) for t in body.topics if t.topic_id in (None, ZERO_TOPIC_ID)) > 1
    )


def _sessions(broker: Broker, node: int) -> FetchSessionCache:
    """The fetch sessions of `node`, made with its first Fetch."""
    cache = broker.fetch_sessions.get(node)
    if cache is None:
        cache = FetchSessionCache(broker.config.fetch_session_cache_slots, broker.stats)
        broker.fetch_sessions[node] = cache
    return cache


def _topic_key(topic: Any, by_ids: bool) -> TopicKey:
    return topic.topic_id if by_ids else topic.topic  # type: ignore[no-any-return]


def _update(fetch_session: FetchSession, body: Any, by_ids: bool) -> None:
    """An incremental Fetch's changes to its session: the partitions it names added or
    updated, then its forgotten ones removed (Kafka's FetchSession.update)."""
    partitions = fetch_session.partitions
    for asked_topic in body.topics:
        key = _topic_key(asked_topic, by_ids)
        for asked in asked_topic.partitions:
            cached = partitions.get((key, asked.partition))
            if cached is None:
                partitions[key, asked.partition] = CachedPartition.asked(asked)
                fetch_session.runs = None
            else:
                cached.ask(asked)
    for forgotten in body.forgotten_topics_data:
        key = _topic_key(forgotten, by_ids)
        for index in forgotten.partitions:
            if partitions.pop((key, index), None) is not None:
                fetch_session.runs = None


def _asked_topics(body: Any, version: int) -> list[tuple[TopicKey, Sequence[Any]]]:
    by_ids = version >= FIRST_TOPIC_ID_VERSION
    return [(_topic_key(topic, by_ids), topic.partitions) for topic in body.topics]


def _session_topics(fetch_session: FetchSession) -> list[tuple[TopicKey, list[Any]]]:
    """A session's partitions in its order, a topic's run of them at a time (a topic may
    come more than once: Kafka lists them so); kept until the session's partitions or
    their order change, so that an idle consumer's fetch does not group them again."""
    topics = fetch_session.runs
    if topics is None:
        topics = []
        last: object = _NO_TOPIC
        for (key, _), cached in fetch_session.partitions.items():
            if key != last:
                topics.append((key, []))
                last = key
            topics[-1][1].append(cached)
        fetch_session.runs = topics
    return topics


_NO_TOPIC = object()


def _enough(answer: _Answer, body: Any) -> bool:
    """Whether to answer now, as Kafka's ReplicaManager.fetchMessages decides: enough
    bytes, or a partition whose read failed; or nothing to wait on, such as a Fetch for
    no partition at all (a Java consumer closing its fetch session: held, every close()
    would take fetch.max.wait.ms). A partition of a deleted topic is set aside, so a
    consumer still asking for it waits as long as it asked (franz-go's TestIssue434)."""
    return answer.bytes >= max(body.min_bytes, 1) or answer.read_error or not answer.readable


async def _held(
    broker: Broker,
    request: Request,
    wanted: list[_WantedTopic],
    context: _Context,
    deadline_ms: float,
    session: Session,
) -> Any:
    """Wait until a produce or a growing source brings data, or the deadline; then answer.
    A client leaving meanwhile cancels this: its session stays as it was when the request
    came (as in Kafka, where it stays till evicted), and a full Fetch opens none."""
    body = request.body
    version = request.header.api_version
    node = session.node_id
    while True:
        remaining_ms = deadline_ms - now_ms()
        if remaining_ms > 0:
            growth_ms = _next_growth_ms(wanted)
            wait_ms = remaining_ms if growth_ms is None else min(remaining_ms, growth_ms)
            with trio.move_on_after(wait_ms / 1000):
                await broker.log_growth.wait()
        answer = _build(body, wanted, version >= FIRST_LEADER_HINT_VERSION)
        if _enough(answer, body) or now_ms() >= deadline_ms:
            endpoints = _endpoints(broker, session, answer)
            parts = _respond(version, body, answer, context, endpoints)
            return _account(broker, parts, answer, node, request.header.client_id)


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
    broker: Broker,
    asked_topics: Iterable[tuple[TopicKey, Sequence[Any]]],
    by_ids: bool,
    node: int,
    injected: ErrorCode | None = None,
) -> list[_WantedTopic]:
    resolved = []
    for key, asked_partitions in asked_topics:
        if by_ids:
            topic = broker.topics.by_id(key) if key is not None else None
            missing, set_aside = ErrorCode.unknown_topic_id, UNKNOWN_ID
        else:
            topic = broker.topics.get(key)  # type: ignore[arg-type]
            missing, set_aside = ErrorCode.unknown_topic_or_partition, UNKNOWN_PARTITION
        if topic is not None:
            missing, set_aside = ErrorCode.unknown_topic_or_partition, UNKNOWN_PARTITION
        followed = led_elsewhere(broker, node, topic)
        partitions = []
        for asked in asked_partitions:
            partition = None
            error = missing
            exists = topic is not None and 0 <= asked.partition < len(topic.partitions)
            aside = READ if exists else set_aside
            if injected is not None:
                error, aside = injected, READ
            elif exists and (fenced := _fenced(broker, topic, asked)) is not ErrorCode.none:
                error = fenced  # checked first, as Kafka's Partition does
            elif asked.partition in followed:  # the consumer refreshes its metadata
                error = ErrorCode.not_leader_or_follower
            elif exists:
                partition = topic.partitions[asked.partition]
            leader = None
            if topic is not None and error in LEADER_HINTED:
                cluster = broker.cluster
                index = asked.partition
                leader = (
                    cluster.leader(topic.name, index),
                    cluster.leader_epoch(topic.name, index),
                )
            partitions.append(_Wanted(asked, topic, partition, error, aside, leader))
        resolved.append(_WantedTopic(key, partitions))
    return resolved


def _fenced(broker: Broker, topic: Topic, asked: Any) -> ErrorCode:
    """The error of a stale or unknown current_leader_epoch (Fetch v9+), if any."""
    current_epoch = getattr(asked, "current_leader_epoch", NO_LEADER_EPOCH)
    if current_epoch == NO_LEADER_EPOCH:
        return ErrorCode.none
    return epoch_error(current_epoch, broker.cluster.leader_epoch(topic.name, asked.partition))


def _build(body: Any, wanted: list[_WantedTopic], hinted: bool) -> _Answer:
    """The answer as the log is now; with `hinted` (v16+), a partition refused as led
    elsewhere tells its leader."""
    now = now_ms()
    budget = getattr(body, "max_bytes", NO_LIMIT)
    answer = _Answer()
    set_aside: list[tuple[int, _Run]] = []
    committed_only = body.isolation_level == READ_COMMITTED
    for wanted_topic in wanted:
        key = wanted_topic.key
        told: list[FetchPartition] = []
        asked_of: list[Any] = []
        answer.runs.append((key, told, asked_of))
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
                        records, count, size = transactional_records(
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
                if fetch.set_aside:
                    aborted = EMPTY_ABORTED
                else:
                    answer.read_error = True
            # Records are never null: librdkafka rejects a flexible response with null records.
            leader = fetch.leader if hinted else None
            if leader is not None:
                answer.leaders.add(leader[0])
            data = FetchPartition(
                asked.partition, error, log_end, stable, log_start, records, aborted, size, leader
            )
            if fetch.set_aside:
                set_aside.append((fetch.set_aside, (key, [data], [asked])))
            else:
                told.append(data)
                asked_of.append(asked)
    if set_aside:
        set_aside.sort(key=_aside_order)
        answer.runs += [run for _, run in set_aside]
    return answer


def _aside_order(entry: tuple[int, _Run]) -> int:
    return entry[0]


def transactional_records(
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


def _endpoints(broker: Broker, session: Session, answer: _Answer) -> list[NodeEndpoint]:
    """The endpoints of the leaders the answer's partitions name (KIP-951), by node id, at
    the host and listener the client came in on, as Metadata tells them; every leader named
    counts, also one of a partition an incremental answer leaves out, as in Kafka."""
    if not answer.leaders:
        return []
    cluster = broker.cluster
    return [
        (node, endpoint.host, endpoint.port)
        for node in sorted(answer.leaders)
        if not cluster.is_down(node)
        for endpoint in (session.node(cluster, node),)
    ]


def _respond(
    version: int,
    body: Any,
    answer: _Answer,
    context: _Context,
    endpoints: Sequence[NodeEndpoint] = (),
) -> list[Buffer]:
    """The response, and what it changes of the fetch sessions: a full Fetch at epoch 0
    opens one holding what it answered; an incremental one lists only what must be told."""
    runs = answer.runs
    session_id = NO_SESSION
    if context.kind == FULL and version >= FIRST_SESSION_VERSION:
        session_id = context.cache.open(
            {
                (key, data.partition): CachedPartition.answered(asked, data)
                for key, told, asked_of in runs
                for data, asked in zip(told, asked_of, strict=True)
            },
            version >= FIRST_TOPIC_ID_VERSION,
            now_ms(),
        )
    elif context.session is not None:
        fetch_session = context.session
        session_id = fetch_session.id
        if fetch_session.epoch != context.epoch:
            # Another Fetch of the session came while this one was held: as Kafka, this
            # one is taken for a duplicate.
            return fetch_response_parts(
                version, (), error_code=ErrorCode.invalid_fetch_session_epoch, session_id=session_id
            )
        runs = _told(fetch_session, runs)
    return fetch_response_parts(
        version,
        _by_topic(runs),
        session_id=session_id,
        read_committed=body.isolation_level == READ_COMMITTED,
        node_endpoints=endpoints,
    )


def _told(fetch_session: FetchSession, runs: list[_Run]) -> list[_Run]:
    """What an incremental answer lists: the partitions with records or news (Kafka's
    IncrementalFetchContext); those with records move to the end of the session."""
    listed: list[_Run] = []
    cached_partitions = fetch_session.partitions
    for key, told, cached_of in runs:
        kept = []
        for data, cached in zip(told, cached_of, strict=True):
            size = data.size
            if cached.told(data.error_code, data.high_watermark, data.log_start_offset, size):
                kept.append(data)
                if size > 0:
                    index = (key, data.partition)
                    cached_partitions[index] = cached_partitions.pop(index)
                    fetch_session.runs = None
        if kept:
            listed.append((key, kept, []))
    return listed


def _by_topic(runs: list[_Run]) -> list[FetchTopic]:
    """The runs as topics, as Kafka's FetchResponse.of groups partitions: adjacent runs of
    one topic are one topic entry (a topic may still come more than once)."""
    topics: list[FetchTopic] = []
    last: object = _NO_TOPIC
    for key, told, _ in runs:
        if not told:  # a topic whose partitions were all set aside, or none asked
            continue
        if key == last:
            topics[-1] = (key, [*topics[-1][1], *told])
        else:
            topics.append((key, told))
            last = key
    return topics


def _account(
    broker: Broker, parts: list[Buffer], answer: _Answer, node: int, client_id: str | None
) -> list[Buffer]:
    """Count what the response serves, once, when it is sent (by partition, and for the
    client id); a throttle fault sets its throttle_time_ms from the bytes served."""
    if broker.faults.active:
        throttle_ms = broker.faults.throttle_ms("Fetch", node, answer.bytes)
        if throttle_ms:
            parts = with_throttle(parts, throttle_ms)
    served_records = 0
    for partition, records, served_bytes in answer.served:
        partition.fetched.records += records
        partition.fetched.bytes += served_bytes
        served_records += records
    if served_records:
        count_client_records(broker.stats.client_fetched, client_id, served_records)
    for error in answer.errors:
        counted(broker, error)
    return parts
