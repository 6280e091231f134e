"""The nodes one broker process serves as a cluster (`--brokers N`): their ids and ports,
which node leads each partition, which coordinates each group, and leader epochs.

Every node shares the process's topics, groups and producers: the nodes are addresses with
rules, as Kafka's brokers look to a client. Partition `p` of topic `t` is led by node
`(crc32(t) + p) mod N`, so a producer spreads its batches over every node. A group or
transactional id is coordinated, as in Kafka, by the leader of the partition of
`__consumer_offsets` (or `__transaction_state`) that holds it: `abs(key.hashCode()) mod P`,
Java's hash, P that topic's partitions (50, Kafka's default). A request for a partition
sent to a node that does not lead it gets NOT_LEADER_OR_FOLLOWER, as Kafka answers, and the
client refreshes its metadata.

Faults (nullbroker.cluster.faults) change the rules: a node taken down leaves Metadata and its
partitions are led by the next live node; a moved partition is led by the node it was
moved to. Each change bumps the cluster's generation, which is every partition's leader
epoch, so clients see leadership move forward.

Leader epochs start at 0, a new topic's first epoch in Kafka. With one node (the default)
every rule gives node 0 and the epoch stays 0, as leadership never moves.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass, field

from ..java_hashing import java_string_hash
from ..settings import INTERNAL_TOPIC_PARTITIONS

NO_LEADER_EPOCH = -1
"""No epoch: what a client that knows none sends as its current_leader_epoch, and what an
answer that finds no offset names."""
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
_NONE: frozenset[int] = frozenset()
MAX_BROKERS = 64


@dataclass(slots=True)
class Cluster:
    """The nodes and their rules. `ports` are the advertised ports, filled in when the
    listeners are open."""

    size: int = 1
    ports: dict[int, int] = field(default_factory=dict)
    hosts: dict[int, str] = field(default_factory=dict)
    """Each node's host, where a node map gives them; otherwise clients are told the host
    they reached."""
    internal_partitions: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(
            (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC), INTERNAL_TOPIC_PARTITIONS
        )
    )
    """Partitions of each internal topic, whose leaders coordinate groups and transactions."""
    generation: int = 0
    """Changes of leadership so far (faults): the leader epoch of every partition."""
    _leaders: dict[str, tuple[int, ...]] = field(default_factory=dict, repr=False)
    _followed: dict[tuple[str, int], tuple[tuple[int, ...], frozenset[int]]] = field(
        default_factory=dict, repr=False
    )
    """Each (topic, node)'s partitions led elsewhere, with the leaders they came from."""
    """Each topic's leader by partition, made on first use: the hot path asks per batch."""
    _down: dict[int, float | None] = field(default_factory=dict, repr=False)
    """Nodes taken down, and the time.monotonic() they come back at (None: when cleared)."""
    _moved: dict[tuple[str, int], int] = field(default_factory=dict, repr=False)
    _withheld: dict[str, set[int]] = field(default_factory=dict, repr=False)
    """Partitions this process has come to lead whose state has yet to arrive from the
    process that led them (`--processes`): refused as led elsewhere until it does."""

    def __post_init__(self) -> None:
        if not 1 <= self.size <= MAX_BROKERS:
            raise ValueError(f"a cluster has from 1 to {MAX_BROKERS} brokers, not {self.size}")

    @property
    def nodes(self) -> range:
        return range(self.size)

    @property
    def live(self) -> list[int]:
        """The nodes that are up: those Metadata lists."""
        self._bring_back()
        return [node for node in self.nodes if node not in self._down]

    def is_down(self, node: int) -> bool:
        self._bring_back()
        return node in self._down

    def take_down(self, node: int, until: float | None) -> None:
        self._down[node] = until
        self._changed()

    def move(self, topic: str, partition: int, to: int) -> None:
        self._moved[topic, partition] = to
        self._changed()

    def bring_up(self, node: int) -> None:
        """Node `node` is back (a worker told so by its supervisor, which keeps the time)."""
        if node in self._down:
            del self._down[node]
            self._changed()

    def withhold(self, topic: str, partition: int) -> None:
        """Refuse requests for a partition until `release` (its state is on its way)."""
        self._withheld.setdefault(topic, set()).add(partition)
        self._forget_followed(topic)

    def withheld(self, topic: str, partition: int) -> bool:
        """Whether the partition's state is on its way to this process (`withhold`)."""
        return partition in self._withheld.get(topic, ())

    def release(self, topic: str, partition: int) -> None:
        withheld = self._withheld.get(topic)
        if withheld is not None:
            withheld.discard(partition)
            if not withheld:
                del self._withheld[topic]
        self._forget_followed(topic)

    def _forget_followed(self, topic: str) -> None:
        for key in [key for key in self._followed if key[0] == topic]:
            del self._followed[key]

    def restore(self) -> None:
        """Every node up, every partition led by its own node again."""
        if self._down or self._moved:
            self._down.clear()
            self._moved.clear()
            self._changed()

    def _changed(self) -> None:
        self.generation += 1
        self._leaders.clear()

    def _bring_back(self) -> None:
        if not self._down:
            return
        now = time.monotonic()
        back = [node for node, until in self._down.items() if until is not None and until <= now]
        for node in back:
            del self._down[node]
        if back:
            self._changed()

    @property
    def controller(self) -> int:
        """The controller id Metadata names, as Kafka's KRaft nodes name theirs."""
        return 0

    def leader(self, topic: str, partition: int) -> int:
        """The node that leads `partition` of `topic`."""
        if self.size == 1:
            return 0
        moved = self._moved.get((topic, partition))
        if moved is not None and moved not in self._down:
            return moved
        first = zlib.crc32(topic.encode()) + partition
        for step in range(self.size):
            node = (first + step) % self.size
            if node not in self._down:
                return node
        return 0  # node 0 never goes down

    def leaders(self, topic: str, partitions: int) -> tuple[int, ...]:
        """Each partition's leader, for a topic of `partitions` partitions."""
        self._bring_back()
        known = self._leaders.get(topic)
        if known is None or len(known) != partitions:
            known = self._leaders[topic] = tuple(
                self.leader(topic, index) for index in range(partitions)
            )
        return known

    def followed(self, node: int, topic: str, partitions: int) -> frozenset[int]:
        """The partitions of a topic of `partitions` partitions that `node` does not lead:
        those Produce, Fetch and ListOffsets refuse there. Asked once per topic of a
        request, so a partition costs one set lookup; none on one node."""
        if self.size == 1:
            return _NONE
        leaders = self.leaders(topic, partitions)  # brings nodes back first
        key = (topic, node)
        known = self._followed.get(key)
        if known is None or known[0] is not leaders:
            withheld = self._withheld.get(topic, ())
            known = self._followed[key] = (
                leaders,
                frozenset(
                    index
                    for index, leader in enumerate(leaders)
                    if leader != node or index in withheld
                ),
            )
        return known[1]

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The partition's leader epoch: 0 on one node (its leader never moves); on a
        cluster, how often leadership has changed."""
        return 0 if self.size == 1 else self.generation

    def coordinator(self, key: str, topic: str = OFFSETS_TOPIC) -> int:
        """The node that coordinates group id `key` (transactional id, with
        `TRANSACTION_STATE_TOPIC`): the leader of the partition of that internal topic
        that holds the key, as Kafka picks it; the next live node while it is down."""
        if self.size == 1:
            return 0
        self._bring_back()
        return self.leader(topic, internal_partition_for(key, self.internal_partitions[topic]))

    def node_named(self, name: str, default: int) -> int | None:
        """The node a broker config resource names: "" (the cluster's default) is
        `default`; None for a name that is no node of this cluster."""
        if name == "":
            return default
        if name.isdigit() and int(name) < self.size:
            return int(name)
        return None

    def no_such_node(self, name: str) -> str:
        """What a broker config resource naming no node of this cluster is told."""
        if self.size == 1:
            return f"this is broker 0, not {name!r}"
        return f"no broker {name!r}: this cluster's brokers are 0 to {self.size - 1}"

    def port(self, node: int, default: int) -> int:
        """The port clients reach `node` at (`default` before the listeners are open)."""
        return self.ports.get(node, default)


def internal_partition_for(key: str, partitions: int) -> int:
    """The partition of an internal topic that holds group or transactional id `key`:
    Kafka's Utils.abs(key.hashCode()) % partitions (Utils.abs(Integer.MIN_VALUE) is 0)."""
    hashed = java_string_hash(key)
    return (0 if hashed == -(1 << 31) else abs(hashed)) % partitions
