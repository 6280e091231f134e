"""The broker's state, free of IO and of requests: what handlers read and change (topics,
producers, groups, transactions, faults, configs, accounts), one object every connection's
requests share. nullbroker.dispatch answers requests against it."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

import trio

from codec import ApiRange, Request
from codec.control_batch import control_batch

from .clock import now_ms
from .cluster.faults import Faults
from .cluster.nodes import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, Cluster, internal_partition_for
from .log_limit import RepeatLimitedLog
from .settings import Config
from .state.fetch_sessions import FetchSessionCache
from .state.kafka_configs import FORMATTED_CLUSTER_CONFIGS
from .state.producers import ProducerRegistry
from .state.topics import PartitionCountersFor, TopicRegistry
from .stats import BrokerStats

if TYPE_CHECKING:
    from .sessions import Session
    from .sessions.sasl import Users
    from .state.client_metrics import ClientMetrics
    from .state.client_quotas import ClientQuotas
    from .state.groups.consumer import ConsumerGroups
    from .state.groups.coordinator import GroupCoordinator
    from .state.pushed_metrics import PushedMetrics
    from .state.share.configs import GroupConfigs
    from .state.share.groups import ShareGroups
    from .state.streams.groups import StreamsGroups
    from .state.streams.topology import TopicInfo
    from .state.transactions import Marker, TransactionCoordinator

log = logging.getLogger("nullbroker")

NODE_ID = 0


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


Handler = Callable[["Broker", Request, "Session"], Any]
"""A request handler: returns a kio response entity, pre-encoded body bytes, None for no
response (Produce with acks=0), or an awaitable of one of these for a request that waits."""


class Broker:
    """Topics, producers, groups, transactions, faults and accounts, shared by every
    connection's requests."""

    controlled = False
    """Set for a worker of several processes: its supervisor counts the cluster's changes
    (nodes down, moves) and keeps the faults' time (nullbroker.workers.cluster_changes)."""

    def __init__(self, config: Config) -> None:
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
        self.transactions_made = trio.Event()
        """Set by the first transactional request, which makes the transaction coordinator:
        until then there are no transactions whose timeouts the server must check."""
        self.broker_configs: dict[str, dict[str, str]] = {"": dict(FORMATTED_CLUSTER_CONFIGS)}
        """Broker configs set by IncrementalAlterConfigs, by resource name: "" for every
        broker (cluster defaults, from those a KRaft cluster is formatted with), the node id
        for this one. Reported, not enforced."""
        self.warnings = RepeatLimitedLog(log)
        """Where what goes wrong with a peer is logged, a line per kind and peer, repeats
        summarised: the connection layer's (nullbroker.net.shared) and the handlers'."""
        self.faults = Faults(self.cluster, counts=self.stats.faults)
        """Latency, errors, nodes down and leaders moved, on demand."""
        for spec in config.faults:
            self.faults.add(spec, controlled=self.controlled)
        self.log_growth = LogGrowth()
        """Held Fetch requests wait on it until a log grows."""
        self.fetch_sessions: dict[int, FetchSessionCache] = {}
        """Each node's fetch sessions (KIP-227), made with its first Fetch."""
        self.served: dict[int, ApiRange] = {}
        """The version range of each API this broker answers: set by the dispatch that serves
        it (nullbroker.dispatch)."""
        self.advertised: tuple[ApiRange, ...] = ()
        """Those ApiVersions lists: the served ones but the client telemetry APIs with
        --client-metrics off, answered unlisted as Kafka answers them without a plugin."""

    # The coordinators are made by the first request that needs one: most brokers serve
    # no transactions, many no groups, and their modules cost memory for the broker's life.
    # A cached_property is in the instance's __dict__ once made: that is how the methods
    # below tell whether it has been.

    @cached_property
    def groups(self) -> GroupCoordinator:
        """Classic consumer groups, and the offsets committed to every group."""
        from .state.groups.coordinator import GroupCoordinator

        groups = GroupCoordinator(self.stats, self.config.group_initial_rebalance_delay_ms)
        if "consumer_groups" in self.__dict__:
            groups.consumer_groups = self.consumer_groups
        if "share_groups" in self.__dict__:
            groups.share_groups = self.share_groups
        if "streams_groups" in self.__dict__:
            groups.streams_groups = self.streams_groups
        if self._group_services is not None:
            groups.start_in(self._group_services)
        return groups

    @cached_property
    def consumer_groups(self) -> ConsumerGroups:
        """Consumer groups of the new protocol (KIP-848), beside the classic ones."""
        from .state.groups.consumer import ConsumerGroups

        consumer_groups = ConsumerGroups(
            self._partition_count,
            self.topics.names,
            heartbeat_interval_ms=self.config.group_consumer_heartbeat_interval_ms,
            session_timeout_ms=self.config.group_consumer_session_timeout_ms,
            assignment_interval_ms=partial(
                self.group_configs.int_value, name="consumer.assignment.interval.ms"
            ),
        )
        self.groups.consumer_groups = consumer_groups
        return consumer_groups

    @cached_property
    def sasl_users(self) -> Users:
        """The --users file's users (none without it): their PLAIN passwords and SCRAM
        credentials, which AlterUserScramCredentials alters."""
        from .sessions.sasl import Users, read_users

        if self.config.users:
            return read_users(self.config.users, self.config.named("users"))
        return Users.of({})

    @cached_property
    def client_quotas(self) -> ClientQuotas:
        """Quotas set on users, client ids and IP addresses (kept, never enforced)."""
        from .state.client_quotas import ClientQuotas

        return ClientQuotas()

    @cached_property
    def client_metrics(self) -> ClientMetrics:
        """Client telemetry (KIP-714): the subscriptions, --client-metrics' and those set
        as client-metrics configs, and each client instance's place in the exchange."""
        from .state.client_metrics import ClientMetrics, default_subscriptions

        return ClientMetrics(default_subscriptions(self.config), self.config.telemetry_max_bytes)

    @cached_property
    def pushed_metrics(self) -> PushedMetrics:
        """What client instances pushed (KIP-714): their metrics' latest values, bounded."""
        from .state.pushed_metrics import PushedMetrics

        return PushedMetrics(
            self.config.client_metrics_max_clients, self.config.client_metrics_max_series
        )

    @cached_property
    def group_configs(self) -> GroupConfigs:
        """Configs set on groups (the GROUP config resource), kept whether or not the group
        exists: a queue is configured before its consumers start."""
        from .state.share.configs import GroupConfigs

        return GroupConfigs(self.config)

    @cached_property
    def share_groups(self) -> ShareGroups:
        """Share groups (KIP-932, queues), beside the consumer groups."""
        from .state.share.groups import ShareGroups

        share_groups = ShareGroups(
            self._partition_count, self.stats, self.group_configs, trio.current_time
        )
        self.groups.share_groups = share_groups
        return share_groups

    @cached_property
    def streams_groups(self) -> StreamsGroups:
        """Streams groups (KIP-1071), beside the consumer and share groups."""
        from .state.streams.groups import StreamsGroups, streams_settings

        streams_groups = StreamsGroups(
            self._partition_count,
            self._create_internal_topic,
            partial(streams_settings, self.group_configs),
            trio.current_time,
        )
        self.groups.streams_groups = streams_groups
        return streams_groups

    def _create_internal_topic(self, name: str, partitions: int, info: TopicInfo) -> None:
        """A streams group's repartition or changelog topic, with the configs its topology
        gives it, as Kafka's coordinator has its controller create them."""
        self.topics.create(name, partitions, dict(info.configs))
        log.info("created internal topic %s (%d partitions) for a streams group", name, partitions)

    @cached_property
    def transactions(self) -> TransactionCoordinator:
        """Transactional ids, their producers and their transactions."""
        from .state.transactions import TransactionCoordinator

        partitions = self.config.offsets_topic_partitions
        self.transactions_made.set()
        return TransactionCoordinator(
            self.producers,
            self._write_markers,
            self._ended,
            lambda group: internal_partition_for(group, partitions),
            self.in_background,
        )

    def in_background(self, task: Callable[[], Awaitable[Any]]) -> None:
        """Run `task` beside the requests, where the coordinators' timers run; not once the
        broker has stopped."""
        if self._group_services is None:
            log.warning("the broker has stopped: %r is not run", task)
            return
        self._group_services.start_soon(task)

    # Where the partitions are: a lone broker leads them all, whichever node it presents;
    # a worker of several processes (workers.cluster_changes) only those of its nodes.

    def leads_here(self, topic: str, index: int) -> bool:
        """Whether this process leads the partition (and holds its state) now."""
        return True

    def serves_node(self, node: int) -> bool:
        """Whether this process serves the node (and so what it coordinates)."""
        return True

    async def ask_node(self, node: int, body: Any) -> Any:
        """A request to a node another process serves, as one broker sends another (KIP-890's
        AddPartitionsToTxn, WriteTxnMarkers): its response, or None if none came."""
        raise AssertionError(f"a lone broker serves every node, node {node} too")

    async def ask_nodes(self, requests: dict[int, Any]) -> dict[int, Any]:
        """Each node's response to its request, asked at once (`ask_node`); None for a node
        that gave none."""
        answers: dict[int, Any] = {}

        async def ask(node: int, request: Any) -> None:
            answers[node] = await self.ask_node(node, request)

        async with trio.open_nursery() as nursery:
            for node, request in requests.items():
                nursery.start_soon(ask, node, request)
        return answers

    def nodes_elsewhere(self) -> list[int]:
        """A node of each other process of the cluster, to ask what only they hold (a lone
        broker has none)."""
        return []

    def write_markers_elsewhere(
        self, partitions: list[tuple[str, int]], marker: Marker, written_ms: int
    ) -> Awaitable[None]:
        """Write a marker into partitions other processes lead (a lone broker has none)."""
        raise AssertionError(f"a lone broker leads every partition, not {partitions}")

    def _write_markers(
        self, partitions: list[tuple[str, int]], marker: Marker, written_ms: int
    ) -> Awaitable[None] | None:
        """A transaction's marker, into every partition it wrote: at once where this process
        leads them; None if that was all, else what writes the others when awaited."""
        elsewhere = []
        for topic, index in partitions:
            if self.leads_here(topic, index):
                self.write_marker(topic, index, marker, written_ms)
            else:
                elsewhere.append((topic, index))
        return self.write_markers_elsewhere(elsewhere, marker, written_ms) if elsewhere else None

    def write_marker(self, topic_name: str, index: int, marker: Marker, written_ms: int) -> None:
        """A transaction's commit or abort marker, at the partition's log end, written at
        `written_ms` (the control batch's timestamp, and the producer's last timestamp); in a
        partition of __consumer_offsets, the end of the offsets the transaction staged for
        its groups. Nothing for a partition deleted since the transaction wrote to it."""
        if topic_name == OFFSETS_TOPIC:  # its log stays empty: commits are state
            if "groups" in self.__dict__:  # else no group has offsets staged
                partitions = self.config.offsets_topic_partitions
                self.groups.end_transaction(
                    marker.producer_id,
                    lambda group: internal_partition_for(group, partitions) == index,
                    marker.commit,
                )
            return
        topic = self.topics.get(topic_name)
        if topic is None or topic.internal or not 0 <= index < len(topic.partitions):
            return
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
        self.producers.marker_written(
            marker.producer_id, marker.epoch, topic_name, index, written_ms
        )
        self.log_grew()

    def serve_groups_in(self, nursery: trio.Nursery | None) -> None:
        """Run the group coordinator's timers in `nursery`: now if it is made, else when
        the first group request makes it. None once the broker stops: a coordinator made
        then stays unloaded, and answers NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE as
        a stopped one does."""
        self._group_services = nursery
        if nursery is not None and "groups" in self.__dict__:
            self.groups.start_in(nursery)

    def current_accounts(self) -> BrokerStats:
        """The accounts, with what describes the broker now read into them: every consumer
        group's members and committed offsets, and every partition's log end (a growing
        source topic's brought up to now), from which the accounts give the groups' lag.
        Read when someone asks (a scrape, GET /accounts, the console line, the summary),
        never on a request's path."""
        stats = self.stats
        stats.group_snapshots = self.groups.snapshots() if "groups" in self.__dict__ else {}
        now = now_ms()
        ends: dict[tuple[str, int], int] = {}
        for topic in self.topics:
            if topic.internal:
                continue
            topic.advance(now)
            for partition in topic.partitions:
                ends[(topic.name, partition.index)] = partition.log_end_offset
        stats.log_end_offsets = ends
        if "pushed_metrics" in self.__dict__:
            pushed = self.pushed_metrics
            stats.pushed_clients = pushed.snapshots(now)
            stats.pushed_totals = pushed.totals()
        return stats

    def expire_transactions(self) -> int:
        """Abort the transactions open past their timeout; how many there were."""
        if "transactions" not in self.__dict__:
            return 0  # no transactional producer yet
        return self.transactions.expire()

    def _partition_count(self, name: str) -> int | None:
        topic = self.topics.get(name)
        return None if topic is None else len(topic.partitions)

    def _ended(self, committed: bool) -> None:
        self.stats.transactions["committed" if committed else "aborted"] += 1

    def log_grew(self) -> None:
        """Wake the Fetch requests held at a log end."""
        self.log_growth.notify()
