"""The options of the pykafka source and sink, parsed and checked as Spark's Kafka connector
checks them. Every error names the option it is about (see errors.option_error).

Spark hands a data source its options in a case-insensitive map with lower-cased keys, so
they are looked up lower-cased here and named in messages as the user spells them in docs.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .errors import PyKafkaOptionError, option_error

EARLIEST = -2
LATEST = -1
KAFKA_PREFIX = "kafka."
BOOTSTRAP = "kafka.bootstrap.servers"
SUBSCRIPTIONS = ("subscribe", "subscribePattern", "assign")
DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark's default: spark.network.timeout
# The consumer's prefetch queue and its refill delay, unless the query sets
# kafka.queued.min.messages or kafka.fetch.queue.backoff.ms.
QUEUED_RECORDS = 10_000
FETCH_QUEUE_BACKOFF_MS = 10

PartitionKey = tuple[str, int]

# Client settings the source decides itself, as Spark's connector refuses them.
_SOURCE_OWNED_CLIENT_SETTINGS = {
    "auto.offset.reset": "use 'startingOffsets' to say where a query starts",
    "enable.auto.commit": "the source never commits offsets; streaming queries keep theirs "
    "in the checkpoint",
}
# Spark Kafka options this source does not implement: refused rather than silently ignored.
_UNSUPPORTED = (
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestampStrategy",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "maxRecordsPerPartition",
)


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    """The options with lower-cased keys, whether Spark's case-insensitive map or a dict."""
    return {key.lower(): value for key, value in options.items()}


@dataclass(frozen=True)
class Subscription:
    """Which partitions a query reads: `subscribe` (topic list), `subscribePattern` (regex
    found anywhere in a topic name, as Spark's Kafka connector matches it: `^clicks$` for a
    whole name) or `assign` (fixed partitions)."""

    option: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[PartitionKey, ...] = ()

    def partitions(self, partition_counts: Mapping[str, int]) -> list[PartitionKey]:
        """The partitions subscribed to, given the partition count of every topic that exists
        (`assign` reads what it names, whether the metadata lists it or not)."""
        if self.option == "assign":
            return sorted(self.assigned)
        if self.option == "subscribe":
            topics = [topic for topic in self.topics if topic in partition_counts]
        else:
            assert self.pattern is not None
            regex = re.compile(self.pattern)
            topics = [topic for topic in partition_counts if regex.search(topic)]
        return sorted((topic, p) for topic in set(topics) for p in range(partition_counts[topic]))


@dataclass(frozen=True)
class OffsetBound:
    """A start or end of what to read: `every` partition at EARLIEST or LATEST, or one offset
    per partition from JSON (-2 for earliest, -1 for latest, as in Spark)."""

    option: str
    every: int | None = None
    specific: Mapping[PartitionKey, int] = field(default_factory=dict)

    def for_partitions(self, partitions: Iterable[PartitionKey]) -> dict[PartitionKey, int]:
        """Each partition's offset or EARLIEST/LATEST. Per-partition JSON must name exactly
        the partitions subscribed to, as Spark requires."""
        wanted = sorted(partitions)
        if self.every is not None:
            return dict.fromkeys(wanted, self.every)
        if set(self.specific) != set(wanted):
            missing = sorted(set(wanted) - set(self.specific))
            extra = sorted(set(self.specific) - set(wanted))
            raise option_error(
                self.option,
                "must give an offset for every subscribed partition (-2 earliest, -1 latest); "
                f"missing: {_names(missing) or 'none'}; not subscribed: {_names(extra) or 'none'}",
            )
        return {key: self.specific[key] for key in wanted}

    def allows(self, sentinel: int) -> bool:
        """Whether this bound asks for `sentinel` (EARLIEST or LATEST) anywhere."""
        return self.every == sentinel or sentinel in self.specific.values()


@dataclass(frozen=True)
class ReadOptions:
    """What a pykafka read (batch or streaming) was asked to do."""

    client_config: Mapping[str, str]
    subscription: Subscription
    starting: OffsetBound | None
    ending: OffsetBound | None
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int
    group_id: str

    def consumer_config(self, records_wanted: int) -> dict[str, object]:
        """A task's consumer for `records_wanted` records: assigned partitions only, never a
        group commit, and an error (not a silent reset) when an offset is out of range, so
        data loss can be reported."""
        return {
            # librdkafka fetches ahead until its queue holds queued.min.messages (100,000 by
            # default), and a task's range has no way to tell it where to stop: a smaller queue
            # keeps what it fetches past the range's end (parsed, then dropped) small.
            "queued.min.messages": max(1, min(records_wanted, QUEUED_RECORDS)),
            # Once its queue passes queued.min.messages or queued.max.messages.kbytes,
            # librdkafka waits this long before it fetches again (1 s by default): a task that
            # turns what it consumed into an Arrow batch drains the queue and then idles for
            # the rest of that second (librdkafka #2879). Measured on one 1 KiB partition:
            # 150,000 rows/s at the default, 330,000-500,000 at 1-100 ms.
            "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
            **self.client_config,
            "group.id": self.group_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
            "enable.partition.eof": False,
        }

    def batch_bounds(self) -> tuple[OffsetBound, OffsetBound]:
        """Start and end of a batch read: earliest to latest unless given; a start cannot be
        latest and an end cannot be earliest (Spark's rules)."""
        starting = self.starting or OffsetBound("startingOffsets", every=EARLIEST)
        ending = self.ending or OffsetBound("endingOffsets", every=LATEST)
        if starting.allows(LATEST):
            raise option_error("startingOffsets", "can't be latest (-1) for batch queries")
        if ending.allows(EARLIEST):
            raise option_error("endingOffsets", "can't be earliest (-2) for batch queries")
        return starting, ending

    def streaming_start(self) -> OffsetBound:
        """Where a new streaming query starts: latest unless given; no end allowed."""
        if self.ending is not None:
            raise option_error("endingOffsets", "is not valid for streaming queries")
        return self.starting or OffsetBound("startingOffsets", every=LATEST)


@dataclass(frozen=True)
class WriteOptions:
    """What a pykafka write (batch or streaming) was asked to do."""

    producer_config: Mapping[str, object]
    topic: str | None


def parse_read_options(options: Mapping[str, str]) -> ReadOptions:
    """Check and parse a read's options; raises PyKafkaOptionError naming the bad option."""
    lowered = lower_keys(options)
    for name in _UNSUPPORTED:
        if name.lower() in lowered:
            raise option_error(name, "is not supported by pykafka")
    client_config = _client_config(lowered)
    for setting, reason in _SOURCE_OWNED_CLIENT_SETTINGS.items():
        if setting in client_config:
            raise option_error(KAFKA_PREFIX + setting, f"is not supported: {reason}")
    group_id = client_config.pop("group.id", None)
    if group_id is None:
        prefix = lowered.get("groupidprefix", "spark-kafka-source")
        group_id = f"{prefix}-{uuid.uuid4()}"
    return ReadOptions(
        client_config=client_config,
        subscription=_subscription(lowered),
        starting=_offset_bound(lowered, "startingOffsets"),
        ending=_offset_bound(lowered, "endingOffsets"),
        max_offsets_per_trigger=_positive_int(lowered, "maxOffsetsPerTrigger"),
        min_partitions=_positive_int(lowered, "minPartitions"),
        fail_on_data_loss=_boolean(lowered, "failOnDataLoss", default=True),
        include_headers=_boolean(lowered, "includeHeaders", default=False),
        poll_timeout_ms=_positive_int(lowered, "kafkaConsumer.pollTimeoutMs")
        or DEFAULT_POLL_TIMEOUT_MS,
        group_id=group_id,
    )


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    """Check and parse a write's options. The producer hashes keys to partitions with murmur2
    and is idempotent, as Spark's Java producer is, unless the kafka.* options say otherwise."""
    lowered = lower_keys(options)
    client_config: dict[str, object] = dict(_client_config(lowered))
    client_config.setdefault("partitioner", "murmur2_random")
    # The Java producer turns idempotence on by default unless acks says otherwise.
    if str(client_config.get("acks", "all")).lower() in ("all", "-1"):
        client_config.setdefault("enable.idempotence", True)
    topic = lowered.get("topic")
    if topic is not None and not topic.strip():
        raise option_error("topic", "must not be empty")
    return WriteOptions(producer_config=client_config, topic=topic)


def _client_config(lowered: Mapping[str, str]) -> dict[str, str]:
    servers = lowered.get(BOOTSTRAP, "").strip()
    if not servers:
        raise option_error(BOOTSTRAP, "is required (host:port of the Kafka brokers)")
    return {
        key.removeprefix(KAFKA_PREFIX): value
        for key, value in lowered.items()
        if key.startswith(KAFKA_PREFIX)
    }


def _subscription(lowered: Mapping[str, str]) -> Subscription:
    given = [name for name in SUBSCRIPTIONS if name.lower() in lowered]
    if not given:
        raise option_error("subscribe', 'subscribePattern' or 'assign", "is required")
    if len(given) > 1:
        named = ", ".join(f"'{name}'" for name in given)
        raise PyKafkaOptionError(f"pykafka: options {named} are exclusive: give only one")
    option = given[0]
    value = lowered[option.lower()]
    if option == "subscribe":
        topics = tuple(topic.strip() for topic in value.split(",") if topic.strip())
        if not topics:
            raise option_error(option, f"names no topic to subscribe to: {value!r}")
        return Subscription(option, topics=topics)
    if option == "subscribePattern":
        if not value.strip():
            raise option_error(option, "is an empty pattern")
        try:
            re.compile(value)
        except re.error as error:
            raise option_error(option, f"is not a valid regular expression: {error}") from None
        return Subscription(option, pattern=value)
    return Subscription(option, assigned=_assigned_partitions(value))


def _assigned_partitions(value: str) -> tuple[PartitionKey, ...]:
    problem = 'must be JSON like {"topic":[0,1]}'
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        raise option_error("assign", f"{problem}, not {value!r}") from None
    if not isinstance(parsed, dict) or not parsed:
        raise option_error("assign", f"{problem}, not {value!r}")
    assigned: set[PartitionKey] = set()
    for topic, partitions in parsed.items():
        if not isinstance(partitions, list) or not all(_is_partition(p) for p in partitions):
            raise option_error("assign", f"{problem}: topic {topic!r} has {partitions!r}")
        assigned.update((topic, p) for p in partitions)
    if not assigned:
        raise option_error("assign", f"{problem}: it names no partition")
    return tuple(sorted(assigned))


def _offset_bound(lowered: Mapping[str, str], option: str) -> OffsetBound | None:
    value = lowered.get(option.lower())
    if value is None:
        return None
    word = value.strip().lower()
    if word == "earliest":
        return OffsetBound(option, every=EARLIEST)
    if word == "latest":
        return OffsetBound(option, every=LATEST)
    problem = 'must be "earliest", "latest" or JSON like {"topic":{"0":23,"1":-2}}'
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        raise option_error(option, f"{problem}, not {value!r}") from None
    if not isinstance(parsed, dict) or not parsed:
        raise option_error(option, f"{problem}, not {value!r}")
    specific: dict[PartitionKey, int] = {}
    for topic, offsets in parsed.items():
        if not isinstance(offsets, dict):
            raise option_error(option, f"{problem}: topic {topic!r} has {offsets!r}")
        for partition, offset in offsets.items():
            if not partition.isdigit() or not isinstance(offset, int) or offset < EARLIEST:
                raise option_error(
                    option, f"{problem}: {topic!r} partition {partition!r} has {offset!r}"
                )
            specific[(topic, int(partition))] = offset
    return OffsetBound(option, specific=specific)


def _positive_int(lowered: Mapping[str, str], option: str) -> int | None:
    value = lowered.get(option.lower())
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise option_error(option, f"must be a positive integer, not {value!r}")
    return number


def _boolean(lowered: Mapping[str, str], option: str, *, default: bool) -> bool:
    value = lowered.get(option.lower())
    if value is None:
        return default
    word = value.strip().lower()
    if word not in ("true", "false"):
        raise option_error(option, f"must be 'true' or 'false', not {value!r}")
    return word == "true"


def _is_partition(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _names(partitions: Iterable[PartitionKey]) -> str:
    return ", ".join(f"{topic}-{partition}" for topic, partition in partitions)
