"""A worker's part in a cluster spread over processes (`--processes`): every process sees
the same changes to the cluster, in the same order.

Each worker serves some of the cluster's nodes and holds the partitions they lead, with no
state shared on a request's path. What every worker must agree on is the set of topics (their
partitions, ids and configs), the broker configs and the faults in force. A request that would
change them (CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs, a Metadata
request that creates a topic) is not handled where it arrived: its frame goes to the
supervisor (nullbroker.workers.processes), which sends it to every worker in one order. Each worker
handles it against the same state and so ends in the same state (topic ids are derived from
names); the worker the client reached answers with its own result, once the supervisor has
heard from every worker, so that the change has reached every process before the client
hears of it. Faults arrive the same way, as SPECs.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import socket
import struct
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import astuple, dataclass, field
from functools import partial
from itertools import count
from typing import TYPE_CHECKING, Any

import trio
from kio.schema.create_topics.v7 import request as create_request

from codec import ApiKey, Request, decode_request, encode_request
from codec.entities import make

from ..broker import Broker
from ..cluster.fault_specs import FaultSpecError
from ..cluster.nodes import TRANSACTION_STATE_TOPIC
from ..dispatch import Answer, Dispatch
from ..handlers import IMPORTED_ON_FIRST_USE, SERVED_KEYS
from ..handlers.groups.find_coordinator import internal_topic_for
from ..sessions import Endpoint, Session
from ..settings import Config
from ..state.producers import FIRST_PRODUCER_ID, PartitionSequences, ProducerRegistry
from ..state.topics import Topic
from ..stats import BrokerStats, peak_rss_bytes, rss_bytes
from .channel import ControlChannel
from .inter_broker import InterBroker
from .transaction_markers import deliver_markers

if TYPE_CHECKING:
    from ..state.groups.coordinator import GroupHandoff
    from ..state.share.partition import HandedOver
    from ..state.streams.topology import TopicInfo
    from ..state.transactions import Marker, PartitionTransactions, Transaction

log = logging.getLogger("nullbroker")

CHANGING_KEYS = frozenset(
    map(
        int,  # every request's key is looked up here: plain ints are found faster
        (
            ApiKey.METADATA,
            ApiKey.FIND_COORDINATOR,
            ApiKey.CREATE_TOPICS,
            ApiKey.DELETE_TOPICS,
            ApiKey.CREATE_PARTITIONS,
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            ApiKey.ALTER_CONFIGS,
            ApiKey.ALTER_CLIENT_QUOTAS,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        ),
    )
)
"""The requests that may change the cluster: Metadata and FindCoordinator when they create a
topic (changes_cluster), the others always."""

ANSWERED_WHERE_ASKED = frozenset(
    map(
        int,
        (
            ApiKey.API_VERSIONS,
            ApiKey.DESCRIBE_CLUSTER,
            ApiKey.DESCRIBE_TOPIC_PARTITIONS,
            ApiKey.PRODUCE,
            ApiKey.INIT_PRODUCER_ID,
            ApiKey.FETCH,
            ApiKey.LIST_OFFSETS,
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            ApiKey.DELETE_RECORDS,
            ApiKey.DESCRIBE_CONFIGS,
            ApiKey.LIST_CONFIG_RESOURCES,
            ApiKey.DESCRIBE_CLIENT_QUOTAS,
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
            ApiKey.OFFSET_COMMIT,
            ApiKey.OFFSET_FETCH,
            ApiKey.OFFSET_DELETE,
            ApiKey.JOIN_GROUP,
            ApiKey.SYNC_GROUP,
            ApiKey.HEARTBEAT,
            ApiKey.LEAVE_GROUP,
            ApiKey.DESCRIBE_GROUPS,
            ApiKey.LIST_GROUPS,
            ApiKey.DELETE_GROUPS,
            ApiKey.CONSUMER_GROUP_HEARTBEAT,
            ApiKey.CONSUMER_GROUP_DESCRIBE,
            *IMPORTED_ON_FIRST_USE["streams"],
            *IMPORTED_ON_FIRST_USE["share"],
            *IMPORTED_ON_FIRST_USE["transactions"],
            ApiKey.SASL_HANDSHAKE,
            ApiKey.SASL_AUTHENTICATE,
            *IMPORTED_ON_FIRST_USE["access"],
            # Kafka keeps client instances per broker; a client pushes to one it picked.
            *IMPORTED_ON_FIRST_USE["telemetry"],
        ),
    )
)
"""The requests the worker a client reached answers alone: from the partitions, groups and
transactional ids it leads or coordinates (which move with their state when leadership
moves), from what every worker holds alike, or about the client's own connection. A
transaction's coordinator and its partitions' leaders ask each other what Kafka's brokers ask
(AddPartitionsToTxn, WriteTxnMarkers: workers.inter_broker), never on a request's common
path."""

SINGLE_PROCESS_KEYS: frozenset[int] = frozenset()
"""The requests only a broker of one process serves, not advertised by a cluster's workers:
none now (share groups, the last, are split between their coordinator and the partitions'
leaders, as Kafka splits them).

Every API the broker serves is in one of CHANGING_KEYS, ANSWERED_WHERE_ASKED and
SINGLE_PROCESS_KEYS (tests/tools/test_adding_an_api.py): a new one is placed by whoever adds
it, and until then a worker does not serve it."""
_KEY = struct.Struct(">h")
UNANSWERED = -1
"""The request id of a change a worker replicates without waiting for it (an internal topic
it has made itself): no reply is waited for under it."""


def changes_cluster(broker: Broker, request: Request) -> bool:
    """Whether handling `request` changes what every worker must know."""
    body = request.body
    if request.header.api_key == ApiKey.FIND_COORDINATOR:  # the first makes an internal topic
        return broker.topics.get(internal_topic_for(body)) is None
    if request.header.api_key != ApiKey.METADATA:
        return not getattr(body, "validate_only", False)
    # A Metadata request creates the topics it names that do not exist, if it may.
    if not broker.topics.auto_create or not getattr(body, "allow_auto_topic_creation", True):
        return False
    topics = body.topics
    return bool(topics) and any(
        wanted.name is not None and broker.topics.get(wanted.name) is None for wanted in topics
    )


class ReplicatingBroker(Broker):
    """A Broker in worker `worker` of `workers`: what it holds moves between workers when
    leadership changes (the supervisor orders the changes: ReplicatingDispatch)."""

    controlled = True

    def __init__(self, config: Config, *, worker: int, owners: dict[int, int]) -> None:
        super().__init__(config)
        self.worker = worker
        self.owners = owners
        """The worker that serves each node, by node id."""
        # Worker ids are below the node count (each serves a node at least): stepping ids
        # by it keeps every worker's apart.
        self.producers = ProducerRegistry(FIRST_PRODUCER_ID + worker, config.brokers)
        self.topics.produce_auto_creates = False
        self.inter_broker = InterBroker(worker)
        """Its requests to other workers' nodes (transactions), and its answers to theirs."""

    def _worker_of(self, node: int) -> int:
        return self.owners[node]

    def _create_internal_topic(self, name: str, partitions: int, info: TopicInfo) -> None:
        """A streams group's internal topic, made here at once (its coordinator answers the
        heartbeat that needs it) and on every other worker through the supervisor, as a
        CreateTopics request is (this worker finds it made, and answers no one)."""
        super()._create_internal_topic(name, partitions, info)
        frame = encode_request(
            make(
                create_request.CreateTopicsRequest,
                topics=(
                    make(
                        create_request.CreatableTopic,
                        name=name,
                        num_partitions=partitions,
                        replication_factor=-1,
                        assignments=(),
                        configs=tuple(
                            make(create_request.CreatableTopicConfig, name=key, value=value)
                            for key, value in info.configs
                        ),
                    ),
                ),
                timeout=datetime.timedelta(seconds=30),
                validate_only=False,
            ),
            0,
            f"nullbroker-worker-{self.worker}",
        )
        session = (f"worker-{self.worker}:0", ("", 0), self._a_node_served_here())
        channel = self.inter_broker.channel
        assert channel is not None, "a worker serves only once its channel is open"
        self.in_background(partial(channel.send, "replicate", UNANSWERED, frame, session))

    def _a_node_served_here(self) -> int:
        return min(node for node, worker in self.owners.items() if worker == self.worker)

    def serves_node(self, node: int) -> bool:
        return self.owners.get(node) == self.worker

    def leads_here(self, topic: str, index: int) -> bool:
        cluster = self.cluster
        return self.serves_node(cluster.leader(topic, index)) and not cluster.withheld(topic, index)

    async def ask_node(self, node: int, body: Any) -> Any:
        return await self.inter_broker.ask(node, body)

    def nodes_elsewhere(self) -> list[int]:
        first: dict[int, int] = {}
        for node, worker in sorted(self.owners.items()):
            if worker != self.worker:
                first.setdefault(worker, node)
        return list(first.values())

    def write_markers_elsewhere(
        self, partitions: list[tuple[str, int]], marker: Marker, written_ms: int
    ) -> Awaitable[None]:
        return deliver_markers(self, partitions, marker, written_ms)

    def change_leadership(self, change: Callable[[], None]) -> list[tuple[Any, ...]]:
        """Apply a change to the cluster's rules (a fault, or its end), then give away what
        this worker no longer leads or coordinates: the handoffs to send, (worker,
        partitions, groups). Partitions this worker has come to lead are refused until
        their state arrives (`take_handoff`); every worker reckons the same moves, so each
        knows what to send and what to wait for."""
        cluster = self.cluster
        topics = list(self.topics)
        before = [cluster.leaders(topic.name, len(topic.partitions)) for topic in topics]
        coordinators = {group: cluster.coordinator(group) for group in self.groups.group_ids()}
        transactional_ids = self._transactional_ids()
        transaction_coordinators = {
            transactional_id: cluster.coordinator(transactional_id, TRANSACTION_STATE_TOPIC)
            for transactional_id in transactional_ids
        }
        change()
        partitions: dict[int, list[PartitionState]] = {}
        groups: dict[int, dict[str, GroupHandoff]] = {}
        transactions: dict[int, list[str]] = {}
        for topic, leaders in zip(topics, before, strict=True):
            after = cluster.leaders(topic.name, len(leaders))
            for index, (old, new) in enumerate(zip(leaders, after, strict=True)):
                giver, taker = self._worker_of(old), self._worker_of(new)
                if giver == self.worker and taker != self.worker:
                    partitions.setdefault(taker, []).append(self._give_partition(topic, index))
                elif taker == self.worker and giver != self.worker:
                    cluster.withhold(topic.name, index)
        for group, old in coordinators.items():
            taker = self._worker_of(cluster.coordinator(group))
            if taker != self._worker_of(old):
                groups.setdefault(taker, {})[group] = self.groups.hand_over(group)
        for transactional_id, old in transaction_coordinators.items():
            node = cluster.coordinator(transactional_id, TRANSACTION_STATE_TOPIC)
            if self._worker_of(node) != self._worker_of(old):
                transactions.setdefault(self._worker_of(node), []).append(transactional_id)
        return [
            (
                taker,
                partitions.get(taker, []),
                groups.get(taker, {}),
                self.transactions.hand_over(transactions[taker]) if taker in transactions else {},
            )
            for taker in sorted({*partitions, *groups, *transactions})
        ]

    def _transactional_ids(self) -> list[str]:
        if "transactions" not in self.__dict__:
            return []  # no transactional producer has come here
        return list(self.transactions.transactions)

    def _give_partition(self, topic: Topic, index: int) -> PartitionState:
        partition = topic.partitions[index]
        return PartitionState(
            topic.name,
            index,
            partition.log_start_offset,
            partition.log_end_offset,
            None if partition.retained is None else partition.retained.take(),
            self.producers.take_partition(topic.name, index),
            partition.transactions,
            self._give_share_partitions(topic.name, index),
        )

    def _give_share_partitions(self, topic: str, index: int) -> dict[str, HandedOver]:
        """Each share group's share partition of the partition, by group id."""
        if "share_groups" not in self.__dict__:
            return {}  # no share group has come here
        given = {}
        for group in self.share_groups.groups.values():
            held = group.partitions.pop((topic, index), None)
            if held is not None:
                given[group.group_id] = held.hand_over()
        return given

    def take_handoff(
        self,
        partitions: list[PartitionState],
        groups: dict[str, GroupHandoff],
        transactions: dict[str, Transaction],
    ) -> None:
        """Lead the partitions and coordinate the groups and transactional ids another
        worker gave up to this one."""
        for state in partitions:
            topic = self.topics.get(state.topic)
            if topic is not None and state.index < len(topic.partitions):
                partition = topic.partitions[state.index]
                partition.log_start_offset = state.log_start_offset
                partition.log_end_offset = state.log_end_offset
                if state.retained is not None and partition.retained is not None:
                    partition.retained.put(state.retained)
                self.producers.put_partition(state.topic, state.index, state.sequences)
                partition.transactions = state.transactions
                if state.share:
                    self._take_share_partitions(state)
            self.cluster.release(state.topic, state.index)
        if any(handoff[2] is not None for handoff in groups.values()):
            self.groups.share_groups = self.share_groups  # made on the first share group
        for group, handoff in groups.items():
            self.groups.take_over(group, handoff)
        if transactions:
            self.transactions.take_over(transactions)

    def _take_share_partitions(self, state: PartitionState) -> None:
        from ..state.share.partition import SharePartition

        for group_id, given in state.share.items():
            counters = self.stats.share_counters(group_id, state.topic, state.index)
            held = self.share_groups.partitions_holder(group_id)
            held.partitions[(state.topic, state.index)] = SharePartition.taken_over(given, counters)

    def accounts(self, *, reset: bool = False) -> tuple[BrokerStats, int, int]:
        """This worker's accounts, RSS and peak RSS, for the cluster's reports; with `reset`,
        the accounts as they stood, the counts zeroed before anything else is counted."""
        stats = self.current_accounts()
        return stats.reset_counts() if reset else stats, rss_bytes(), peak_rss_bytes()


class ReplicatingDispatch(Dispatch):
    """The dispatch of a worker of several processes: a request that changes the cluster goes
    to the supervisor, which has every worker apply it in one order; the rest are answered
    here as a lone broker answers them."""

    def __init__(self, broker: ReplicatingBroker) -> None:
        # Not SINGLE_PROCESS_KEYS, nor a key none of the cluster's sets names yet.
        served_here = CHANGING_KEYS | ANSWERED_WHERE_ASKED
        super().__init__(broker, [key for key in SERVED_KEYS if key in served_here])
        self.broker: ReplicatingBroker = broker
        self.channel: ControlChannel | None = None
        self._replies: dict[int, tuple[trio.Event, list[Any]]] = {}
        self._request_ids = count()

    def answer(self, frame: memoryview | bytes, session: Session) -> Answer:
        if len(frame) >= 2 and _KEY.unpack_from(frame)[0] in CHANGING_KEYS:
            started = time.perf_counter_ns()
            request = decode_request(frame, self.broker.served)
            if changes_cluster(self.broker, request):
                self.broker.stats.node_requests[session.node_id] += 1
                return self.answer_later(request, self._replicate(bytes(frame), session), started)
        return super().answer(frame, session)

    async def _replicate(self, frame: bytes, session: Session) -> Any:
        """Send the request to the supervisor; its body once every worker has applied it."""
        assert self.channel is not None, "a worker serves only once its channel is open"
        request_id = next(self._request_ids)
        applied = trio.Event()
        reply: list[Any] = []
        self._replies[request_id] = (applied, reply)
        try:
            await self.channel.send("replicate", request_id, frame, _session_fields(session))
            await applied.wait()
        finally:
            del self._replies[request_id]
        return reply[0]

    def apply(self, frame: bytes, session_fields: tuple[Any, ...], request_id: int | None) -> None:
        """Handle a request the supervisor sent to every worker; `request_id` is set when it
        came to this worker, whose answer it then is."""
        request = decode_request(frame, self.broker.served)
        session = Session(session_fields[0], Endpoint(*session_fields[1]), session_fields[2])
        handler = self.handlers[request.header.api_key]
        mine = request_id is not None and request_id in self._replies
        with contextlib.nullcontext() if mine else self._counting_nothing():
            body = handler(self.broker, request, session)
        if mine:
            assert request_id is not None
            self._replies[request_id][1].append(body)

    def replicated(self, request_id: int) -> None:
        """Every worker has applied this worker's request `request_id`: answer it."""
        waiting = self._replies.get(request_id)
        if waiting is not None:
            waiting[0].set()

    @contextlib.contextmanager
    def _counting_nothing(self) -> Iterator[None]:
        # The worker the client reached counts the request's errors; the others apply it
        # without counting, so that the cluster's accounts count it once.
        broker = self.broker
        counted = broker.stats
        broker.stats = BrokerStats()
        try:
            yield
        finally:
            broker.stats = counted

    async def follow_supervisor(self, channel: ControlChannel, stop: Callable[[], None]) -> None:
        """Apply what the supervisor sends until it goes away; then stop serving."""
        while (message := await channel.receive()) is not None:
            kind = message[0]
            if kind == "apply":
                _, sequence, frame, session_fields, origin, request_id = message
                self.apply(
                    frame, session_fields, request_id if origin == self.broker.worker else None
                )
                await channel.send("applied", sequence)
            elif kind == "replicated":
                self.replicated(message[1])
            elif kind in ("fault", "clear_faults", "node_up"):
                for handoff in self.broker.change_leadership(partial(self._apply_fault, *message)):
                    await channel.send("handoff", *handoff)
            elif kind == "handoff":
                self.broker.take_handoff(message[1], message[2], message[3])
            elif kind == "asked":
                _, origin, ask_id, node, frame = message
                self.broker.in_background(
                    partial(self.broker.inter_broker.answer, self, origin, ask_id, node, frame)
                )
            elif kind == "answered":
                self.broker.inter_broker.answered(message[1], message[2])
            elif kind == "stats":
                await channel.send("stats", message[1], *self.broker.accounts())
            elif kind == "reset":
                await channel.send("stats", message[1], *self.broker.accounts(reset=True))
            elif kind == "owners":
                self.broker.owners.update(message[1])
            elif kind == "stop":
                break
        else:
            log.info("worker %d: the supervisor has gone; shutting down", self.broker.worker)
        stop()

    def _apply_fault(self, kind: str, *detail: Any) -> None:
        if kind == "fault":
            try:
                self.broker.faults.add(detail[0], controlled=True)
            except FaultSpecError as error:  # checked by the supervisor: only a race
                log.warning("worker %d could not apply a fault: %s", self.broker.worker, error)
        elif kind == "clear_faults":
            self.broker.faults.clear()
        else:
            self.broker.faults.bring_up(detail[0])


@dataclass(frozen=True, slots=True)
class PartitionState:
    """What a partition's leader holds, handed to the process that leads it next."""

    topic: str
    index: int
    log_start_offset: int
    log_end_offset: int
    retained: list[tuple[int, int, bytearray]] | None
    sequences: list[tuple[int, PartitionSequences]]
    transactions: PartitionTransactions | None
    share: dict[str, HandedOver]
    """Each share group's share partition, by group id."""


def _session_fields(session: Session) -> tuple[Any, ...]:
    return (session.peer, astuple(session.advertised), session.node_id)


@dataclass(slots=True)
class WorkerRole:
    """What the supervisor gives a worker process when it forks it."""

    worker: int
    owners: dict[int, int]
    """The worker that serves each node, by node id (a node map's other hosts' nodes are
    added when they join: the "owners" message)."""
    listeners: dict[int, list[socket.socket]]
    """The listening sockets of the nodes this worker serves, by node id (bound by the
    supervisor, so that every node's port is known before any worker starts)."""
    ports: dict[int, int]
    """Every node's port, as clients are told it, by node id."""
    hosts: dict[int, str]
    """Every node's host, from a node map; empty: the host each client reached."""
    channel: socket.socket
    """This worker's end of its control channel."""
    further: dict[str, dict[int, list[socket.socket]]] = field(default_factory=dict)
    """The listening sockets of this worker's nodes on each listener after the first
    (`--listeners`), by listener name, then node id."""
    listener_ports: dict[str, dict[int, int]] = field(default_factory=dict)
    """Every node's port on each listener, as clients are told it, by listener name."""
