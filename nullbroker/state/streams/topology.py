"""A Streams application's topology as its members send it (KIP-1071), and what the broker
makes of it against the topics it has: how many tasks each subtopology has, the internal
topics (repartition and changelog) to create and with what, and what stops the group from
being assigned (a source topic missing, copartitioned topics whose partition counts differ).

Kafka's coordinator does the same in StreamsTopology, InternalTopicManager and
ConfiguredTopology: a subtopology has as many tasks as its widest source topic has
partitions; a repartition topic of no fixed size gets that of the subtopologies writing to
it (their tasks), a changelog topic that of its own subtopology; copartitioned source topics
must agree, and a repartition topic in a copartition group takes the group's size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

from ...java_hashing import java_hash_order

NOT_FIXED = 0
"""A topic size the member leaves to the broker (changelogs always: their subtopology's)."""


class Status(IntEnum):
    """StreamsGroupHeartbeat's status codes (StreamsGroupHeartbeatResponse.Status)."""

    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4
    ASSIGNMENT_DELAYED = 5


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """An internal topic as the topology describes it."""

    name: str
    partitions: int = NOT_FIXED
    replication_factor: int = 0
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[frozenset[str], ...] = ()
    """Source topics (by name, resolved from the request's indexes) that must have as many
    partitions as one another."""

    def sources(self) -> tuple[str, ...]:
        """Every topic its tasks read: source and repartition source topics."""
        return (*self.source_topics, *(topic.name for topic in self.repartition_source_topics))


@dataclass(frozen=True, slots=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]

    def internal_topics(self) -> dict[str, TopicInfo]:
        """Every repartition and changelog topic, by name."""
        topics: dict[str, TopicInfo] = {}
        for subtopology in self.subtopologies:
            for info in (*subtopology.repartition_source_topics, *subtopology.changelog_topics):
                topics[info.name] = info
        return topics


@dataclass(frozen=True, slots=True)
class StatusDetail:
    code: Status
    detail: str


@dataclass(slots=True)
class ConfiguredTopology:
    """The topology against the topics as they are: the task count of each subtopology
    (by id, in the topology's order), the internal topics to create (name: partitions,
    info), and the statuses that hold the group's assignment back (none: it is ready)."""

    tasks: dict[str, int] = field(default_factory=dict)
    internal_partitions: dict[str, int] = field(default_factory=dict)
    """Each internal topic's partition count as the topology makes it."""
    to_create: dict[str, tuple[int, TopicInfo]] = field(default_factory=dict)
    statuses: list[StatusDetail] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return not self.statuses and not self.to_create


def configure(topology: Topology, partitions_of: Callable[[str], int | None]) -> ConfiguredTopology:
    """What `topology` is against the topics `partitions_of` knows (a topic's partition
    count, None for no such topic)."""
    configured = ConfiguredTopology()
    missing = sorted(
        {
            topic
            for subtopology in topology.subtopologies
            for topic in subtopology.source_topics
            if partitions_of(topic) is None
        }
    )
    if missing:
        configured.statuses.append(
            StatusDetail(
                Status.MISSING_SOURCE_TOPICS, f"Source topics {summarize(missing)} are missing."
            )
        )
        return configured
    sizes = _repartition_sizes(topology, partitions_of)
    if sizes is None:
        configured.statuses.append(
            StatusDetail(
                Status.MISSING_SOURCE_TOPICS,
                "The sizes of the repartition topics could not be derived from the source topics.",
            )
        )
        return configured
    incorrect = _copartitioning_errors(topology, partitions_of, sizes)
    if incorrect:
        configured.statuses.append(
            StatusDetail(Status.INCORRECTLY_PARTITIONED_TOPICS, "; ".join(incorrect))
        )
        return configured

    def size(topic: str) -> int:
        return sizes.get(topic) or partitions_of(topic) or 0

    for subtopology in topology.subtopologies:
        configured.tasks[subtopology.subtopology_id] = max(
            (size(topic) for topic in subtopology.sources()), default=0
        )
    for subtopology in topology.subtopologies:
        for info in subtopology.repartition_source_topics:
            _expect(configured, info, sizes[info.name], partitions_of)
        for info in subtopology.changelog_topics:
            _expect(configured, info, configured.tasks[subtopology.subtopology_id], partitions_of)
    if configured.to_create:
        configured.statuses.append(
            StatusDetail(
                Status.MISSING_INTERNAL_TOPICS,
                f"Internal topics are missing: {summarize(java_hash_order(configured.to_create))}",
            )
        )
    return configured


def summarize(names: list[str]) -> str:
    """Topic names as Kafka's statuses list them: the first three, and how many more."""
    shown = ", ".join(names[:3])
    return shown if len(names) <= 3 else f"{shown} and {len(names) - 3} additional topics"


def _expect(
    configured: ConfiguredTopology,
    info: TopicInfo,
    wanted: int,
    partitions_of: Callable[[str], int | None],
) -> None:
    """An internal topic must exist with `wanted` partitions: to create if missing, an
    INCORRECTLY_PARTITIONED_TOPICS status if it has another count."""
    configured.internal_partitions[info.name] = wanted
    have = partitions_of(info.name)
    if have is None:
        configured.to_create[info.name] = (wanted, info)
    elif have != wanted:
        configured.statuses.append(
            StatusDetail(
                Status.INCORRECTLY_PARTITIONED_TOPICS,
                f"Existing topic {info.name} has different number of partitions: "
                f"expected {wanted}, found {have}",
            )
        )


def _repartition_sizes(
    topology: Topology, partitions_of: Callable[[str], int | None]
) -> dict[str, int] | None:
    """Each repartition topic's partition count: the member's when it fixed one, else the
    task count of the widest subtopology writing to it (derived until nothing changes, as
    a repartition topic may be written by a subtopology that itself reads one); None when
    one cannot be derived."""
    sizes = {
        info.name: info.partitions
        for subtopology in topology.subtopologies
        for info in subtopology.repartition_source_topics
        if info.partitions != NOT_FIXED
    }
    unsized = {
        info.name
        for subtopology in topology.subtopologies
        for info in subtopology.repartition_source_topics
        if info.partitions == NOT_FIXED
    }
    while unsized:
        progress = False
        for name in sorted(unsized):
            writers = [s for s in topology.subtopologies if name in s.repartition_sink_topics]
            widths = []
            for writer in writers:
                known = [sizes.get(topic) or partitions_of(topic) for topic in writer.sources()]
                if all(known):
                    widths.append(max((width or 0 for width in known), default=0))
            if writers and len(widths) == len(writers):
                sizes[name] = max(widths)
                unsized.discard(name)
                progress = True
        if not progress:
            return None
    # A repartition topic copartitioned with source topics takes their size.
    for subtopology in topology.subtopologies:
        repartition = {info.name for info in subtopology.repartition_source_topics}
        for group in subtopology.copartition_groups:
            fixed = [partitions_of(topic) for topic in group if topic not in repartition]
            if fixed and all(fixed):
                for name in group & repartition:
                    sizes[name] = max(count or 0 for count in fixed)
    return sizes


def _copartitioning_errors(
    topology: Topology, partitions_of: Callable[[str], int | None], sizes: dict[str, int]
) -> list[str]:
    errors = []
    for subtopology in topology.subtopologies:
        for group in subtopology.copartition_groups:
            counts = {topic: sizes.get(topic) or partitions_of(topic) for topic in sorted(group)}
            if len(set(counts.values())) > 1:
                listed = ", ".join(f"{topic}={count}" for topic, count in counts.items())
                errors.append(
                    f"Following topics do not have the same number of partitions: [{{{listed}}}]"
                )
    return errors
