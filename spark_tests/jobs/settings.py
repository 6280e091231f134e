"""What every baseline job is asked to do: how many rows of what size over how many
partitions, through which connector."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from nullbroker.sources.synthetic import RecordShape, key_pattern, value_pattern

FORMATS = ("pykafka", "kafka", "memory", "range")
TWINS = {"pykafka": "memory", "kafka": "range"}
"""Each Kafka format's no-network twin, for the protocol-overhead ratio: memrows plans and
hands Spark Arrow batches as pykafka does, range builds the rows in the JVM as Spark's
connector does."""
NO_NETWORK = frozenset(TWINS.values())
# Keys of the rows the jobs read and write: the decimal index, zero-padded, as nullbroker's
# source topics make them with key-size=8.
KEY_SIZE = 8


@dataclass(frozen=True)
class TopicShape:
    """A topic of `partitions` partitions holding `records` records each."""

    name: str
    partitions: int
    records: int
    size: int
    key_size: int = KEY_SIZE

    def source_flag(self) -> str:
        """The `nullbroker serve --source` value declaring this topic."""
        return (
            f"{self.name}:partitions={self.partitions},records={self.records},"
            f"size={self.size},key-size={self.key_size}"
        )


@dataclass(frozen=True)
class JobSettings:
    """`records` rows in all (split evenly over `partitions`) with values of `record_size`
    bytes, through `format` (Kafka formats read and write at `bootstrap`)."""

    records: int
    record_size: int
    partitions: int
    format: str = "pykafka"
    bootstrap: str | None = None
    # Client settings passed to the Kafka formats as `kafka.NAME` options.
    kafka_options: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {self.format!r}")
        if self.records < 1 or self.partitions < 1 or self.record_size < 1:
            raise ValueError("records, record size and partitions must be positive")
        if self.records % self.partitions:
            raise ValueError(
                f"records ({self.records}) must split evenly over {self.partitions} partitions"
            )

    @property
    def networked(self) -> bool:
        """Whether the rows go through a broker (pykafka, kafka) or not (memory, range)."""
        return self.format not in NO_NETWORK

    @property
    def per_partition(self) -> int:
        return self.records // self.partitions

    def topic(self, name: str) -> TopicShape:
        return TopicShape(name, self.partitions, self.per_partition, self.record_size)


@cache
def record_cycle(size: int, key_size: int) -> tuple[tuple[bytes | None, bytes], ...]:
    """Keys and values of the indices 0 … batch_records-1 of nullbroker's record layout: the
    records of a source topic (TopicShape.source_flag) repeat them, offset after offset, so
    memrows makes them and a Kafka is sent them for the same rows."""
    cycle = RecordShape(size=size, key_size=key_size).batch_records
    return tuple(
        (key_pattern(index, key_size), value_pattern(index, size)) for index in range(cycle)
    )
