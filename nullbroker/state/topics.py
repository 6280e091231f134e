"""The topic registry: names, ids, partitions and each partition's offsets and counters."""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..clock import now_ms as current_ms
from ..cluster.nodes import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from ..sources.synthetic import RecordShape, SourceSpec, compressor
from ..stats import FetchCounters, PartitionCounters
from ..topic_names import invalid_name_reason
from .kafka_configs import DEFAULT_MAX_MESSAGE_BYTES, max_message_bytes
from .retained import RetainedBatches

if TYPE_CHECKING:
    from .transactions import PartitionTransactions

# Topic ids are derived from the name, so a topic keeps its id across broker restarts and
# test runs; a topic re-created after deletion gets a new one, as in Kafka.
_ID_NAMESPACE = uuid.UUID("6f1c2b8e-5a57-4c0e-9b5e-6e756c6c6b72")

INTERNAL_TOPIC_CONFIGS: dict[str, dict[str, str]] = {
    # As Kafka 4.1.1 creates them (its group and transaction coordinators), and
    # DescribeConfigs reports them as the topic's own. min.insync.replicas: Kafka's default
    # transaction.state.log.min.isr is 2, which a one-replica Kafka (and nullbroker is one)
    # cannot meet, so the reference runs with 1.
    OFFSETS_TOPIC: {
        "cleanup.policy": "compact",
        "compression.type": "producer",
        "segment.bytes": "104857600",
    },
    TRANSACTION_STATE_TOPIC: {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "min.insync.replicas": "1",
        "segment.bytes": "104857600",
        "unclean.leader.election.enable": "false",
    },
}
"""Kafka's internal topics: made when first needed (FindCoordinator, or a Metadata request
that may create topics), reported with is_internal, refused to producers, and served to
consumers as empty logs (nullbroker keeps commits and transactions in memory, as state,
not as records)."""


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPIC_CONFIGS


@dataclass(slots=True)
class Partition:
    """One partition's log: its offsets and what was written to it."""

    index: int
    produced: PartitionCounters
    """What producers wrote here; outlives the topic, so deleting it miscounts nothing."""
    fetched: FetchCounters
    """What consumers were served from here; outlives the topic likewise."""
    log_start_offset: int = 0
    log_end_offset: int = 0
    retained: RetainedBatches | None = None
    """The newest produced batches, kept for Fetch (--retain); None: synthetic records."""
    transactions: PartitionTransactions | None = None
    """The transactions written here, for Fetch; None until the first one."""

    def transactions_written(self) -> PartitionTransactions:
        """`transactions`, made by the partition's first transactional write or marker (and
        nullbroker.state.transactions imported by the broker's first)."""
        if self.transactions is None:
            from .transactions import PartitionTransactions

            self.transactions = PartitionTransactions()
        return self.transactions


@dataclass(frozen=True, slots=True)
class PartitionCountersFor:
    """Where a new partition finds its counters: the broker's accounts, by topic name."""

    produced: Callable[[str, int], PartitionCounters]
    fetched: Callable[[str, int], FetchCounters]


@dataclass(slots=True)
class Topic:
    name: str
    id: uuid.UUID
    counters_for: PartitionCountersFor
    records: RecordShape
    """How the synthetic records that Fetch serves from this topic look."""
    created_ms: int
    source: SourceSpec | None = None
    """Set for a declared source topic: its records exist without being produced."""
    partitions: list[Partition] = field(default_factory=list)
    configs: dict[str, str] = field(default_factory=dict)
    retain: int = 0
    """Bytes of produced batches each partition keeps for Fetch (--retain); 0: none."""
    internal: bool = False
    """One of Kafka's internal topics: read-only to clients, and its log is always empty."""
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """The largest record batch Produce appends here (bytes, its 12-byte log overhead
    included): `configs`' max.message.bytes, else the broker's message.max.bytes. An int
    kept in step with both (TopicRegistry.configs_changed), since Produce reads it per batch
    in Python and in C."""

    def add_partitions(self, total: int) -> None:
        """Grow to `total` partitions; new ones start at offset 0 (a bounded source topic's
        hold its records from the start)."""
        initial_end = (
            self.source.records
            if self.source is not None and self.source.rate is None and self.source.records
            else 0
        )
        for i in range(len(self.partitions), total):
            if self.internal:  # no user data: kept out of the broker's accounts
                produced, fetched = PartitionCounters(), FetchCounters()
            else:
                produced = self.counters_for.produced(self.name, i)
                fetched = self.counters_for.fetched(self.name, i)
            partition = Partition(i, produced, fetched, log_end_offset=initial_end)
            if self.retain and self.source is None and not self.internal:
                partition.retained = RetainedBatches(self.retain, produced)
            self.partitions.append(partition)
        self.configs_changed()

    def configs_changed(self) -> None:
        """Compact the retained partitions while cleanup.policy says compact (alone or with
        delete), as Kafka's cleaner would (nullbroker.state.compaction); keep no more of
        each than the topic's retention.bytes, where it sets less than --retain."""
        policy = self.configs.get("cleanup.policy", "delete")
        compacts = "compact" in (part.strip() for part in policy.split(","))
        capacity = self.retained_bytes()
        for partition in self.partitions:
            if partition.retained is not None:
                name = f"{self.name}-{partition.index}" if compacts else None
                partition.retained.compact(name)
                partition.retained.capacity = capacity

    def retained_bytes(self) -> int:
        """What each partition keeps for Fetch: --retain, or the topic's retention.bytes
        (Kafka's limit per partition) where it is set and smaller. A compacted topic is
        cleaned to fit it, where Kafka lets a compact-only topic grow past it: a test sets it
        on a changelog to see a store restored from a cleaned log."""
        try:
            limit = int(self.configs.get("retention.bytes", "-1"))
        except ValueError:
            limit = -1
        return min(self.retain, limit) if limit > 0 else self.retain

    def advance(self, now_ms: int) -> None:
        """Bring a growing source topic's log end up to `now_ms`: `rate` records/s per
        partition since the topic was created, capped by `records`."""
        source = self.source
        if source is None or source.rate is None:
            return
        end = math.floor(max(0, now_ms - self.created_ms) * source.rate / 1000)
        if source.records is not None:
            end = min(end, source.records)
        for partition in self.partitions:
            if end > partition.log_end_offset:
                partition.log_end_offset = end


class TopicRegistry:
    """Every topic the broker knows, by name and by id."""

    def __init__(
        self,
        counters_for: PartitionCountersFor,
        default_partitions: int = 1,
        auto_create: bool = True,
        produced_record_size: int = 100,
        retain: int = 0,
        internal_partitions: dict[str, int] | None = None,
    ) -> None:
        self.counters_for = counters_for
        self.default_partitions = default_partitions
        # Every produced topic serves records of one shape, so they share its templates.
        self.produced_records = RecordShape(size=produced_record_size)
        self.auto_create = auto_create
        self.produce_auto_creates = True
        """Whether a Produce request to an unknown topic creates it. A worker of several
        processes answers UNKNOWN_TOPIC_OR_PARTITION instead, as Kafka does, and the
        client's next Metadata request creates it in every process."""
        self.retain = retain
        self.internal_partitions = internal_partitions or {}
        """Partitions of each internal topic, by name (Kafka's offsets.topic.num.partitions
        and transaction.state.log.num.partitions)."""
        self.message_max_bytes = DEFAULT_MAX_MESSAGE_BYTES
        """The broker's message.max.bytes: the limit of a topic without max.message.bytes."""
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._by_id_bytes: dict[bytes, Topic] = {}
        """The same, by the id's 16 bytes: the Produce lane's key (it reads them from C)."""
        self._generation: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._by_name)

    def __iter__(self) -> Iterator[Topic]:
        return iter(list(self._by_name.values()))

    def names(self) -> list[str]:
        return list(self._by_name)

    def get(self, name: str) -> Topic | None:
        return self._by_name.get(name)

    def id_table(self) -> dict[bytes, Topic]:
        """The topics by the 16 bytes of their id, the registry's own dict: the Produce
        lane's (nullbroker/handlers/produce_lane.py) for requests that name topics by id (v13)."""
        return self._by_id_bytes

    def name_table(self) -> dict[str, Topic]:
        """The topics by name, the registry's own dict, not a copy: the Produce lane
        (nullbroker/handlers/produce_lane.py) looks topics up in it from C."""
        return self._by_name

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def create(
        self,
        name: str,
        partitions: int | None = None,
        configs: dict[str, str] | None = None,
        *,
        source: SourceSpec | None = None,
        now_ms: int | None = None,
    ) -> Topic:
        """Create a topic; the caller has checked that the name is legal and free."""
        generation = self._generation.get(name, 0)
        self._generation[name] = generation + 1
        seed = name if generation == 0 else f"{name}#{generation}"
        internal = is_internal(name)
        if internal:
            configs = {**INTERNAL_TOPIC_CONFIGS[name], **(configs or {})}
        records = self.produced_records
        if source is not None:
            records = RecordShape(
                size=source.size,
                key_size=source.key_size,
                headers=source.headers,
                compression=source.compression,
                rate=source.rate,
                compress=compressor(source.compression),
                payloads=source.payloads(),
                nexmark=source.nexmark_layout(),
            )
        topic = Topic(
            name,
            uuid.uuid5(_ID_NAMESPACE, seed),
            self.counters_for,
            records,
            created_ms=current_ms() if now_ms is None else now_ms,
            source=source,
            configs=dict(configs or {}),
            retain=self.retain,
            internal=internal,
        )
        topic.max_message_bytes = max_message_bytes(topic.configs, self.message_max_bytes)
        topic.add_partitions(
            partitions
            or (source.partitions if source else 0)
            or self.internal_partitions.get(name, 0)
            or self.default_partitions
        )
        self._by_name[name] = topic
        self._by_id[topic.id] = topic
        self._by_id_bytes[topic.id.bytes] = topic
        return topic

    def internal(self, name: str) -> Topic:
        """Internal topic `name`, made now if it does not exist yet (a client's first
        FindCoordinator for a group or a transactional id)."""
        topic = self._by_name.get(name)
        return self.create(name) if topic is None else topic

    def configs_changed(self, message_max_bytes: int) -> None:
        """Bring every topic's batch size limit in step with its configs and the broker's
        message.max.bytes, after either changed."""
        self.message_max_bytes = message_max_bytes
        for topic in self._by_name.values():
            topic.max_message_bytes = max_message_bytes(topic.configs, message_max_bytes)
            topic.configs_changed()

    def get_or_auto_create(self, name: str) -> Topic | None:
        """The topic, auto-created if allowed and the name is legal; None otherwise."""
        topic = self._by_name.get(name)
        if topic is None and self.auto_create and invalid_name_reason(name) is None:
            topic = self.create(name)
        return topic

    def delete(self, topic: Topic) -> None:
        del self._by_name[topic.name]
        del self._by_id[topic.id]
        del self._by_id_bytes[topic.id.bytes]
        for partition in topic.partitions:
            if partition.retained is not None:
                partition.retained.clear()
