"""The topic registry: names, ids, partitions and each partition's offsets and counters."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .stats import PartitionCounters

# Kafka's rule for topic names (kafka.common.internals.Topic).
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
MAX_NAME_LENGTH = 249

# Topic ids are derived from the name, so a topic keeps its id across broker restarts and
# test runs; a topic re-created after deletion gets a new one, as in Kafka.
_ID_NAMESPACE = uuid.UUID("6f1c2b8e-5a57-4c0e-9b5e-6e756c6c6b72")


def invalid_name_reason(name: str | None) -> str | None:
    """Why `name` is not a legal topic name, or None if it is."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name {name!r} is not allowed"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is longer than {MAX_NAME_LENGTH} characters"
    if not _LEGAL_NAME.fullmatch(name):
        return f"topic name {name!r} has characters outside [a-zA-Z0-9._-]"
    return None


@dataclass(slots=True)
class Partition:
    """One partition's log: its offsets and what was written to it."""

    index: int
    produced: PartitionCounters
    """What producers wrote here; outlives the topic, so deleting it miscounts nothing."""
    log_start_offset: int = 0
    log_end_offset: int = 0


CountersFor = Callable[[str, int], PartitionCounters]


@dataclass(slots=True)
class Topic:
    name: str
    id: uuid.UUID
    counters_for: CountersFor
    partitions: list[Partition] = field(default_factory=list)
    configs: dict[str, str] = field(default_factory=dict)

    def add_partitions(self, total: int) -> None:
        """Grow to `total` partitions; new ones start empty at offset 0."""
        self.partitions.extend(
            Partition(i, self.counters_for(self.name, i))
            for i in range(len(self.partitions), total)
        )


class TopicRegistry:
    """Every topic the broker knows, by name and by id."""

    def __init__(
        self, counters_for: CountersFor, default_partitions: int = 1, auto_create: bool = True
    ) -> None:
        self.counters_for = counters_for
        self.default_partitions = default_partitions
        self.auto_create = auto_create
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._generation: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._by_name)

    def __iter__(self) -> Iterator[Topic]:
        return iter(list(self._by_name.values()))

    def get(self, name: str) -> Topic | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def create(
        self, name: str, partitions: int | None = None, configs: dict[str, str] | None = None
    ) -> Topic:
        """Create a topic; the caller has checked that the name is legal and free."""
        generation = self._generation.get(name, 0)
        self._generation[name] = generation + 1
        seed = name if generation == 0 else f"{name}#{generation}"
        topic = Topic(
            name, uuid.uuid5(_ID_NAMESPACE, seed), self.counters_for, configs=dict(configs or {})
        )
        topic.add_partitions(partitions or self.default_partitions)
        self._by_name[name] = topic
        self._by_id[topic.id] = topic
        return topic

    def get_or_auto_create(self, name: str) -> Topic | None:
        """The topic, auto-created if allowed and the name is legal; None otherwise."""
        topic = self._by_name.get(name)
        if topic is None and self.auto_create and invalid_name_reason(name) is None:
            topic = self.create(name)
        return topic

    def delete(self, topic: Topic) -> None:
        del self._by_name[topic.name]
        del self._by_id[topic.id]
