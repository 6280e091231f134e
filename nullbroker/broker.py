"""The broker's state and request dispatch, free of IO: one object the connections share."""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cached_property
from types import CoroutineType
from typing import TYPE_CHECKING, Any

import trio

from codec import (
    API_VERSIONS_KEY,
    ApiRange,
    Request,
    RequestHeader,
    decode_request,
    encode_api_versions_fallback,
    encode_response,
    encode_response_parts,
    peek_header,
)
from codec.control_batch import control_batch
from codec.framing import Buffer

from . import produce_lane
from .cluster import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, Cluster, internal_partition_for
from .config import Config
from .configs import FORMATTED_CLUSTER_CONFIGS
from .faults import Faults
from .fetch_sessions import FetchSessionCache
from .idle import IdleConnections
from .log_limit import RepeatLimitedLog
from .producers import ProducerRegistry
from .read_budget import ReadBudget
from .source import now_ms
from .stats import ApiStats, BrokerStats
from .topics import PartitionCountersFor, TopicRegistry

if TYPE_CHECKING:
    from .consumer_groups import ConsumerGroups
    from .groups import CommittedOffset, GroupCoordinator
    from .sasl import SaslSession
    from .transactions import Marker, TransactionCoordinator

log = logging.getLogger("nullbroker")

NODE_ID = 0
PRODUCE_KEY = 0
_KEY_VERSION = struct.Struct(">hh")


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int


@dataclass(slots=True)
class Session:
    """What a handler may need to know about the connection a request came on."""

    peer: str
    """The client's address, HOST:PORT."""
    advertised: Endpoint
    """The address clients are told to reach this node at (Metadata, FindCoordinator)."""
    node_id: int = 0
    """The node of the cluster the client connected to (nullbroker.cluster)."""
    ports: dict[int, int] | None = None
    """Each node's port on the listener this client came in on (None: the cluster's)."""
    sasl: SaslSession | None = None
    """On a SASL listener, the connection's authentication; None elsewhere."""

    def node(self, cluster: Cluster, node_id: int) -> Endpoint:
        """Where this client is told to reach `node_id`: the host it reached us at, on the
        listener it came in on."""
        if node_id == self.node_id and not cluster.hosts:
            return self.advertised
        host = cluster.hosts.get(node_id, self.advertised.host)
        ports = self.ports if self.ports is not None else cluster.ports
        return Endpoint(host, ports.get(node_id, self.advertised.port))

    @property
    def host(self) -> str:
        """The client's host, without its port: repeated warnings are summarised by it."""
        return self.peer.rpartition(":")[0] or self.peer


class LogGrowth:
    """Where Fetch requests held at a log end wait for it to grow.

    Every Produce request notifies it, so notifying with no one waiting must cost next to
    nothing: `waiting` is a plain int, which the Produce lane (C) reads before it calls
    `notify`, where trio.Event needed a statistics object and a new Event per wake-up.
    """

    __slots__ = ("_waiters", "waiting")

    def __init__(self) -> None:
        self._waiters = trio.lowlevel.ParkingLot()
        self.waiting = 0
        """Requests parked here, or woken and not yet resumed."""

    async def wait(self) -> None:
        self.waiting += 1
        try:
            await self._waiters.park()
        finally:
            self.waiting -= 1

    def notify(self) -> None:
        if self.waiting:
            self._waiters.unpark_all()


Handler = Callable[["Broker", Request, Session], Any]
"""A request handler: returns a kio response entity, pre-encoded body bytes, None for no
response (Produce with acks=0), or an awaitable of one of these for a request that waits."""

Answer = bytes | list[Buffer] | None | Awaitable[bytes | list[Buffer] | None]
"""A response frame (one byte string, or buffers to send one after the other), none, or
an awaitable of either."""


class Broker:
    """Topics, producers, accounts and the handler table, shared by every connection."""

    controlled = False
    """Set for a worker of several processes: its controller counts the cluster's changes
    (nodes down, moves) and keeps the faults' time (nullbroker.replication)."""

    def __init__(self, config: Config) -> None:
        from .handlers import HANDLERS, served_ranges

        self.config = config
        self.node_id = NODE_ID
        internal_partitions = {
            OFFSETS_TOPIC: config.offsets_topic_partitions,
            TRANSACTION_STATE_TOPIC: config.transaction_state_partitions,
        }
        self.cluster = Cluster(config.brokers, internal_partitions=internal_partitions)
        """The nodes this process serves, and which leads what."""
        self.cluster_id = config.cluster_id
        self.stats = BrokerStats()
        self.warnings = RepeatLimitedLog(log)
        """Where connections log what goes wrong with them, a line per kind and peer."""
        self.topics = TopicRegistry(
            PartitionCountersFor(self.stats.partition_counters, self.stats.fetch_counters),
            config.partitions,
            config.auto_create,
            config.produced_record_size,
            config.retain,
            internal_partitions,
        )
        started_ms = now_ms()
        for source in config.sources:
            self.topics.create(source.name, source=source, now_ms=started_ms)
        self.producers = ProducerRegistry()
        self._group_services: trio.Nursery | None = None
        """Where the group coordinator's timers run, once it is made (serve_groups_in)."""
        self.broker_configs: dict[str, dict[str, str]] = {"": dict(FORMATTED_CLUSTER_CONFIGS)}
        """Broker configs set by IncrementalAlterConfigs, by resource name: "" for every
        broker (cluster defaults, from those a KRaft cluster is formatted with), the node id
        for this one. Reported, not enforced."""
        self.faults = Faults(self.cluster, counts=self.stats.faults)
        """Latency, errors, nodes down and leaders moved, on demand."""
        for spec in config.faults:
            self.faults.add(spec, controlled=self.controlled)
        self.sasl_users = config.read_users() if config.users else None
        """The --users file's users, for SASL listeners."""
        self.idle_connections = IdleConnections(config.idle_timeout_ms, self.stats, self.warnings)
        """Every open connection, closed after --idle-timeout-ms of silence."""
        self.read_budget = ReadBudget(config.max_buffered_bytes, self.stats)
        """What large requests being read may hold, over all connections."""
        self.max_request_bytes = min(config.max_frame_bytes, config.max_buffered_bytes)
        """A request announced larger closes its connection: it could never be read."""
        self.log_growth = LogGrowth()
        """Held Fetch requests wait on it until a log grows."""
        self.fetch_sessions: dict[int, FetchSessionCache] = {}
        """Each node's fetch sessions (KIP-227), made with its first Fetch."""
        self.handlers: dict[int, Handler] = HANDLERS
        self.served: dict[int, ApiRange] = served_ranges()
        self._api_versions = self.served[API_VERSIONS_KEY]
        self.produce_lane = produce_lane.for_broker(self)
        """The common Produce request answered whole in C, for the connections the host
        loop reads; None: the Python path answers every request."""

    # The coordinators are made by the first request that needs one: most brokers serve
    # no transactions, many no groups, and their modules cost memory for the broker's life.
    # A cached_property is in the instance's __dict__ once made: that is how the methods
    # below tell whether it has been.

    @cached_property
    def groups(self) -> GroupCoordinator:
        """Classic consumer groups, and the offsets committed to every group."""
        from .groups import GroupCoordinator

        groups = GroupCoordinator(self.stats, self.config.group_initial_rebalance_delay_ms)
        if "consumer_groups" in self.__dict__:
            groups.consumer_groups = self.consumer_groups
        if self._group_services is not None:
            groups.start_in(self._group_services)
        return groups

    @cached_property
    def consumer_groups(self) -> ConsumerGroups:
        """Consumer groups of the new protocol (KIP-848), beside the classic ones."""
        from .consumer_groups import ConsumerGroups

        consumer_groups = ConsumerGroups(
            self._partition_count,
            self.topics.names,
            heartbeat_interval_ms=self.config.group_consumer_heartbeat_interval_ms,
            session_timeout_ms=self.config.group_consumer_session_timeout_ms,
        )
        self.groups.consumer_groups = consumer_groups
        return consumer_groups

    @cached_property
    def transactions(self) -> TransactionCoordinator:
        """Transactional ids, their producers and their transactions."""
        from .transactions import TransactionCoordinator

        partitions = self.config.offsets_topic_partitions
        return TransactionCoordinator(
            self.producers,
            self._write_marker,
            self._commit_transaction_offsets,
            self._ended,
            lambda group: internal_partition_for(group, partitions),
        )

    def serve_groups_in(self, nursery: trio.Nursery | None) -> None:
        """Run the group coordinator's timers in `nursery`: now if it is made, else when
        the first group request makes it. None once the broker stops: a coordinator made
        then stays unloaded, and answers NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE as
        a stopped one does."""
        self._group_services = nursery
        if nursery is not None and "groups" in self.__dict__:
            self.groups.start_in(nursery)

    def expire_transactions(self) -> int:
        """Abort the transactions open past their timeout; how many there were."""
        if "transactions" not in self.__dict__:
            return 0  # no transactional producer yet
        return self.transactions.expire()

    def _partition_count(self, name: str) -> int | None:
        topic = self.topics.get(name)
        return None if topic is None else len(topic.partitions)

    def _write_marker(self, topic_name: str, index: int, marker: Marker, written_ms: int) -> bool:
        """A transaction's commit or abort marker, at the partition's log end, written at
        `written_ms` (the control batch's timestamp, and the producer's last timestamp)."""
        topic = self.topics.get(topic_name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return False  # deleted since the transaction wrote to it
        if topic.internal:
            return False  # __consumer_offsets: its log stays empty (commits are state)
        partition = topic.partitions[index]
        offset = partition.log_end_offset
        partition.log_end_offset = offset + 1
        records = partition.transactions_written().end(offset, marker)
        self.stats.transactional_records["committed" if marker.commit else "aborted"] += records
        if partition.retained is not None:  # --retain: served back as Kafka would
            epoch = self.cluster.leader_epoch(topic_name, index)
            batch = control_batch(
                offset,
                marker.producer_id,
                marker.epoch,
                marker.commit,
                written_ms,
                leader_epoch=epoch,
            )
            start = partition.retained.append(offset, 1, batch, epoch)
            partition.log_start_offset = max(partition.log_start_offset, start)
        self.log_grew()
        return True

    def _commit_transaction_offsets(
        self, group_id: str, offsets: dict[tuple[str, int], CommittedOffset]
    ) -> None:
        self.groups.commit_transaction_offsets(group_id, offsets)

    def _ended(self, committed: bool) -> None:
        self.stats.transactions["committed" if committed else "aborted"] += 1

    def log_grew(self) -> None:
        """Wake the Fetch requests held at a log end."""
        self.log_growth.notify()

    def answer(self, frame: memoryview | bytes, session: Session) -> Answer:
        """The size-prefixed response frame to one request frame, or None (acks=0), or,
        for a request that waits (a Fetch held at the log end, a JoinGroup), an awaitable
        of either.

        Raises codec.ProtocolError for a request that must close the connection. The
        latency accounted is the broker's whole cost: decode, handle (and wait), encode.
        """
        started = time.perf_counter_ns()
        key, version = _KEY_VERSION.unpack_from(frame) if len(frame) >= 4 else (-1, -1)
        if session.sasl is not None:
            session.sasl.admit(key)  # raises NotAuthenticated: the connection closes
        if key == PRODUCE_KEY and self.produce_lane is not None:
            response = self.produce_lane.answer(frame, session.node_id)
            if response is not None:  # answered whole in C, and accounted
                return response
        self.stats.node_requests[session.node_id] += 1
        if key == API_VERSIONS_KEY and version > self._api_versions.max_version:
            peeked = peek_header(frame)
            self.stats.error("unsupported_version")
            response = encode_api_versions_fallback(peeked.correlation_id, self._api_versions)
            self._account(peeked.api_name, started)
            return response
        request = decode_request(frame, self.served)
        header = request.header
        body = self.handlers[header.api_key](self, request, session)
        if self.faults.active:
            delay = self.faults.latency_s(header.api_name, session.node_id)
            if delay:
                return self._answer_after(delay, request, body, started)
        if type(body) is CoroutineType:  # every handler that waits is an async def
            return self._answer_later(request, body, started)
        self._account(header.api_name, started)
        return None if body is None else _frame(header, body)

    async def _answer_after(
        self, seconds: float, request: Request, body: Any, started: int
    ) -> bytes | list[Buffer] | None:
        """The answer, `seconds` late (a latency fault), accounted as a held request.

        An answer already made is wrapped only after the delay, and a held handler's
        coroutine is closed if the delay is cancelled (the client left): either left
        unawaited, Python warns "coroutine was never awaited" when it is collected."""
        try:
            await trio.sleep(seconds)
        except BaseException:
            if type(body) is CoroutineType:
                body.close()
            raise
        pending = body if type(body) is CoroutineType else _ready(body)
        return await self._answer_later(request, pending, started)

    async def _answer_later(
        self, request: Request, pending: Awaitable[Any], started: int
    ) -> bytes | list[Buffer] | None:
        # The broker's own time is before the hold and after it; the hold itself (the
        # wait, and rebuilding the answer when woken) is accounted apart, so a Fetch held
        # for 500 ms does not read as a 500 ms request.
        held_from = time.perf_counter_ns()
        body = await pending
        held_until = time.perf_counter_ns()
        frame = None if body is None else _frame(request.header, body)
        api = self._account(request.header.api_name, started, held_until - held_from)
        api.held.observe(held_until - held_from)
        return frame

    def _account(self, api_name: str, started: int, held_ns: int = 0) -> ApiStats:
        api = self.stats.api(api_name)
        api.requests += 1
        api.latency.observe(time.perf_counter_ns() - started - held_ns)
        return api


async def _ready(body: Any) -> Any:
    return body


def _frame(header: RequestHeader, body: Any) -> bytes | list[Buffer]:
    """The response frame: one byte string, or, for a body of buffers (a Fetch response
    around its record batches), buffers the connection writes with writev, uncopied."""
    if type(body) is list:
        return encode_response_parts(header, body)
    return encode_response(header, body)
