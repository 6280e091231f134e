"""ShareFetch: a share group member's fetch, in its share session: the acknowledgements it
brings applied, then records acquired for it from each partition of the session, with
the AcquiredRecords that say which offsets of the batches are its own.

At epoch 0 the request opens the member's session; the next requests count the epoch on,
adding partitions and forgetting others; epoch -1 closes it after its acknowledgements
and fetches nothing. With nothing to acquire the request is held, as Fetch is at the log
end, until a log grows, a lock runs out or `max_wait` passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import trio
from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.framing import Buffer
from codec.share_fetch_response import (
    NodeEndpoint,
    ShareFetchTopic,
    SharePartitionAnswer,
    share_fetch_response_parts,
)

from ...clock import now_ms
from ...state.share.partition import Acquired
from ...state.share.sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSession
from ..common import counted, led_elsewhere
from .acknowledgements import (
    acknowledge,
    close_session,
    continued_session,
    member_group,
    tie_to_connection,
)
from .partitions import read_batches, readable_end, reads_committed, share_partition

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session
    from ...state.share.groups import ShareGroup

RECORD_LIMIT = 1
"""ShareAcquireMode record_limit (KIP-1206): never more records than MaxRecords. The
default, batch_optimized (0), may round up to whole batches; here both stop at MaxRecords."""
NO_LIMIT = 2**31 - 1
FIRST_RENEW_VERSION = 2


KEY = ApiKey.SHARE_FETCH


def handle(broker: Broker, request: Request, session: Session) -> Any:
    """The response as buffers (codec.share_fetch_response), or, when nothing can be
    acquired yet and the request may wait, a coroutine that waits for records first: only
    a held request goes through trio, as for Fetch."""
    version = request.header.api_version
    body = request.body
    group_id, member_id, epoch = body.group_id or "", body.member_id or "", body.share_session_epoch
    lock_ms = broker.share_groups.configs.limits(group_id).lock_ms
    group = member_group(broker, group_id, member_id)
    if isinstance(group, ErrorCode):
        # As Kafka 4.4.0: a fetch in a group that does not exist is answered without an
        # error, each partition with UNKNOWN_SERVER_ERROR (its share partition cannot be
        # initialized).
        failed: Refused = {
            (topic.topic_id, partition.partition_index): (ErrorCode.unknown_server_error, LEADER)
            for topic in body.topics
            for partition in topic.partitions
        }
        return _response(broker, version, lock_ms, topics=_told({}, {}, failed))
    sessions = broker.share_groups.sessions
    found = (
        sessions.open(session.node_id, group_id, member_id)
        if epoch == INITIAL_EPOCH
        else continued_session(broker, session.node_id, group_id, member_id, epoch)
    )
    if isinstance(found, ErrorCode):
        return _response(broker, version, lock_ms, found)
    share_session = found
    if epoch == INITIAL_EPOCH:
        tie_to_connection(broker, share_session, session)
    if epoch == INITIAL_EPOCH and _acknowledges(body):
        sessions.close(share_session)
        return _response(
            broker,
            version,
            lock_ms,
            ErrorCode.invalid_request,
            "Acknowledgements sent with share session epoch 0.",
        )
    acknowledged = _acknowledge_all(broker, group, member_id, body)
    if epoch == FINAL_EPOCH:
        close_session(broker, group, share_session)
        return _response(broker, version, lock_ms, topics=_told(acknowledged, {}, {}))
    _update(broker, share_session, body)
    sessions.advance(share_session)
    renewing = version >= FIRST_RENEW_VERSION and body.is_renew_ack
    acquired: Acquisitions = {}
    if not renewing:
        acquired = _acquire(broker, group, member_id, share_session, body)
        if not acquired and body.max_wait.total_seconds() > 0:
            return _answer_held(
                broker, version, lock_ms, session, body, group, member_id, share_session,
                acknowledged,
            )  # fmt: skip
    return _answer(broker, version, lock_ms, session, body, acknowledged, acquired)


Acquisitions = dict[tuple[Any, int], tuple[Sequence[Buffer], list[Acquired]]]
"""The records acquired from each partition, by (topic id, partition): the batches that
hold them and the runs of offsets acquired."""


async def _answer_held(
    broker: Broker,
    version: int,
    lock_ms: int,
    session: Session,
    body: Any,
    group: ShareGroup,
    member_id: str,
    share_session: ShareSession,
    acknowledged: dict[tuple[Any, int], ErrorCode],
) -> list[Buffer]:
    """The answer once records are acquired, or `max_wait` has passed with none."""
    acquired = await _held(broker, group, member_id, share_session, body)
    return _answer(broker, version, lock_ms, session, body, acknowledged, acquired)


def _answer(
    broker: Broker,
    version: int,
    lock_ms: int,
    session: Session,
    body: Any,
    acknowledged: dict[tuple[Any, int], ErrorCode],
    acquired: Acquisitions,
) -> list[Buffer]:
    """The answer to a request served: its partitions acknowledged, acquired or refused."""
    refused = _refused(broker, session.node_id, body)
    return _response(
        broker,
        version,
        lock_ms,
        topics=_told(acknowledged, acquired, refused),
        endpoints=_endpoints(broker, session, refused),
    )


def _response(
    broker: Broker,
    version: int,
    lock_ms: int,
    error: ErrorCode = ErrorCode.none,
    message: str | None = None,
    topics: Sequence[ShareFetchTopic] = (),
    endpoints: Sequence[NodeEndpoint] = (),
) -> list[Buffer]:
    return share_fetch_response_parts(
        version,
        topics,
        error_code=counted(broker, error),
        error_message=message,
        # As Kafka: a request refused whole tells no lock duration.
        lock_ms=lock_ms if error is ErrorCode.none else 0,
        node_endpoints=endpoints,
    )


Refused = dict[tuple[Any, int], tuple[ErrorCode, tuple[int, int]]]
"""The partitions a ShareFetch named that this node does not serve, by (topic id,
partition): the error and the current leader (node, epoch) it tells."""
NO_LEADER = (-1, -1)
LEADER = (0, 0)
"""What Kafka 4.4.0 tells as the current leader of a partition it answers (its defaults)."""


def _refused(broker: Broker, node: int, body: Any) -> Refused:
    """UNKNOWN_TOPIC_ID for a topic id no topic has; NOT_LEADER_OR_FOLLOWER, with the
    leader, for a partition another node leads (the client asks it instead)."""
    refused: Refused = {}
    for asked in body.topics:
        topic = broker.topics.by_id(asked.topic_id)
        followed = led_elsewhere(broker, node, topic)
        for partition in asked.partitions:
            key = (asked.topic_id, partition.partition_index)
            if topic is None:
                refused[key] = (ErrorCode.unknown_topic_id, NO_LEADER)
            elif partition.partition_index in followed:
                cluster, index = broker.cluster, partition.partition_index
                leader = cluster.leader(topic.name, index)
                epoch = cluster.leader_epoch(topic.name, index)
                refused[key] = (ErrorCode.not_leader_or_follower, (leader, epoch))
    return refused


def _endpoints(broker: Broker, session: Session, refused: Refused) -> list[tuple[int, str, int]]:
    """The endpoints of the leaders the refusals name (KIP-951), as Metadata tells them."""
    cluster = broker.cluster
    leaders = sorted({leader for _, (leader, _) in refused.values() if leader >= 0})
    return [
        (node, endpoint.host, endpoint.port)
        for node in leaders
        if not cluster.is_down(node)
        for endpoint in (session.node(cluster, node),)
    ]


def _acknowledges(body: Any) -> bool:
    return any(
        partition.acknowledgement_batches for topic in body.topics for partition in topic.partitions
    )


def _acknowledge_all(
    broker: Broker, group: ShareGroup, member_id: str, body: Any
) -> dict[tuple[Any, int], ErrorCode]:
    """Each partition's acknowledgement error, for the partitions that brought some."""
    errors = {}
    for topic in body.topics:
        for partition in topic.partitions:
            if partition.acknowledgement_batches:
                errors[(topic.topic_id, partition.partition_index)] = acknowledge(
                    broker,
                    group,
                    member_id,
                    topic.topic_id,
                    partition.partition_index,
                    partition.acknowledgement_batches,
                )
    return errors


def _update(broker: Broker, share_session: ShareSession, body: Any) -> None:
    """The session's partitions after this request: those it names added, its forgotten
    ones dropped. Unknown topic ids are kept by id, answered UNKNOWN_TOPIC_ID."""
    partitions = share_session.partitions
    for topic in body.topics:
        for partition in topic.partitions:
            partitions.setdefault((topic.topic_id, partition.partition_index), None)
    for forgotten in body.forgotten_topics_data:
        for index in forgotten.partitions:
            partitions.pop((forgotten.topic_id, index), None)


def _acquire(
    broker: Broker, group: ShareGroup, member_id: str, share_session: ShareSession, body: Any
) -> Acquisitions:
    """Records acquired for the member from each partition of its session, within the
    request's MaxRecords and MaxBytes; the partitions with none are left out."""
    now = trio.current_time()
    limits = broker.share_groups.configs.limits(group.group_id)
    committed_only = reads_committed(broker, group.group_id)
    left = getattr(body, "max_records", 0) or NO_LIMIT
    budget = body.max_bytes
    acquired = {}
    moment = now_ms()
    for topic_id, index in share_session.partitions:
        if left <= 0 or budget <= 0:
            break
        topic = broker.topics.by_id(topic_id)
        if topic is None or not 0 <= index < len(topic.partitions):
            continue
        if index in led_elsewhere(broker, share_session.node_id, topic):
            continue
        partition = topic.partitions[index]
        topic.advance(moment)
        shared = share_partition(broker, group, topic, partition)
        shared.expire(now, limits)
        log_start = partition.log_start_offset
        if partition.retained is not None:
            log_start = max(log_start, partition.retained.first_offset(log_start))
        offset = shared.next_offset(log_start)
        end = readable_end(partition, committed_only)
        if offset >= end:
            continue
        # Read no further than MaxRecords past the first offset to acquire: the records
        # beyond could not be acquired by this request.
        batches, covered = read_batches(topic, partition, offset, min(end, offset + left), budget)
        covered = min(covered, end)
        if committed_only and partition.transactions is not None:
            # As Kafka: a read_committed group never gets an aborted transaction's records.
            for first, stop in partition.transactions.aborted_spans(offset, covered):
                shared.archive(first, stop)
        runs = shared.acquire(offset, covered, left, member_id, now, limits)
        if not runs:
            continue
        size = sum(len(part) for part in batches)
        count = sum(run.last - run.first + 1 for run in runs)
        acquired[(topic_id, index)] = (batches, runs)
        partition.fetched.records += count
        partition.fetched.bytes += size
        left -= count
        budget -= size
    return acquired


async def _held(
    broker: Broker, group: ShareGroup, member_id: str, share_session: ShareSession, body: Any
) -> Acquisitions:
    """Wait for records to acquire: until a log grows or a lock runs out (then try again),
    or `max_wait` passes (then answer with none)."""
    deadline = trio.current_time() + body.max_wait.total_seconds()
    while True:
        wake = deadline
        for shared in group.partitions.values():
            due = shared.next_deadline()
            if due is not None:
                wake = min(wake, due)
        with trio.move_on_at(wake):
            await broker.log_growth.wait()
        if group.coordinated_here and member_id not in group.members:
            return {}
        acquired = _acquire(broker, group, member_id, share_session, body)
        if acquired or trio.current_time() >= deadline:
            return acquired


def _told(
    acknowledged: dict[tuple[Any, int], ErrorCode],
    acquired: Acquisitions,
    refused: Refused,
) -> list[ShareFetchTopic]:
    """The response's topics: each partition acknowledged, with records, or refused, by
    topic id in the order first met."""
    by_topic: dict[Any, list[SharePartitionAnswer]] = {}
    for key in dict.fromkeys([*acknowledged, *acquired, *refused]):
        topic_id, index = key
        batches, runs = acquired.get(key, ((), []))
        error, leader = refused.get(key, (ErrorCode.none, LEADER))
        by_topic.setdefault(topic_id, []).append(
            SharePartitionAnswer(
                index,
                error.value,
                acknowledged.get(key, ErrorCode.none).value,
                leader,
                batches,
                [(run.first, run.last, run.delivery_count) for run in runs],
            )
        )
    return list(by_topic.items())
