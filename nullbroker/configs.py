"""Topic and broker configuration entries, as DescribeConfigs and CreateTopics report them.

nullbroker enforces none of these (nothing is retained), but admin tools and clients read
them, so they carry Apache Kafka 4.x's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import Config


class ConfigType(IntEnum):
    """DescribeConfigs v3+ config types (org.apache.kafka.clients.admin.ConfigEntry)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    type: ConfigType
    source: ConfigSource = ConfigSource.DEFAULT_CONFIG
    read_only: bool = False
    documentation: str | None = None


TOPIC_DEFAULTS: tuple[ConfigEntry, ...] = tuple(
    ConfigEntry(name, value, kind)
    for name, value, kind in (
        ("cleanup.policy", "delete", ConfigType.LIST),
        ("compression.type", "producer", ConfigType.STRING),
        ("delete.retention.ms", "86400000", ConfigType.LONG),
        ("file.delete.delay.ms", "60000", ConfigType.LONG),
        ("flush.messages", "9223372036854775807", ConfigType.LONG),
        ("flush.ms", "9223372036854775807", ConfigType.LONG),
        ("index.interval.bytes", "4096", ConfigType.INT),
        ("max.compaction.lag.ms", "9223372036854775807", ConfigType.LONG),
        ("max.message.bytes", "1048588", ConfigType.INT),
        ("message.timestamp.after.max.ms", "3600000", ConfigType.LONG),
        ("message.timestamp.before.max.ms", "9223372036854775807", ConfigType.LONG),
        ("message.timestamp.type", "CreateTime", ConfigType.STRING),
        ("min.cleanable.dirty.ratio", "0.5", ConfigType.DOUBLE),
        ("min.compaction.lag.ms", "0", ConfigType.LONG),
        ("min.insync.replicas", "1", ConfigType.INT),
        ("preallocate", "false", ConfigType.BOOLEAN),
        ("retention.bytes", "-1", ConfigType.LONG),
        ("retention.ms", "604800000", ConfigType.LONG),
        ("segment.bytes", "1073741824", ConfigType.INT),
        ("segment.index.bytes", "10485760", ConfigType.INT),
        ("segment.jitter.ms", "0", ConfigType.LONG),
        ("segment.ms", "604800000", ConfigType.LONG),
        ("unclean.leader.election.enable", "false", ConfigType.BOOLEAN),
    )
)
TOPIC_TYPES = {entry.name: entry.type for entry in TOPIC_DEFAULTS}

# Values Kafka accepts for the topic configs that are enumerations.
_CHOICES = {
    "cleanup.policy": {"delete", "compact"},
    "compression.type": {"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"},
    "message.timestamp.type": {"CreateTime", "LogAppendTime"},
}
_INTEGER_RANGES = {
    ConfigType.SHORT: (-(2**15), 2**15 - 1),
    ConfigType.INT: (-(2**31), 2**31 - 1),
    ConfigType.LONG: (-(2**63), 2**63 - 1),
}


def invalid_value_reason(name: str, kind: ConfigType, value: str) -> str | None:
    """Why `value` cannot be config `name` of type `kind`, as Kafka's ConfigDef would refuse
    it; None if it can."""
    if kind in _INTEGER_RANGES:
        low, high = _INTEGER_RANGES[kind]
        try:
            number = int(value.strip())
        except ValueError:
            return (
                f"Invalid value {value} for configuration {name}: Not a number of type {kind.name}"
            )
        if not low <= number <= high:
            return f"Invalid value {value} for configuration {name}: out of range for {kind.name}"
    elif kind is ConfigType.BOOLEAN:
        if value.strip().lower() not in ("true", "false"):
            return (
                f"Invalid value {value} for configuration {name}: "
                "Expected value to be either true or false"
            )
    elif kind is ConfigType.DOUBLE:
        try:
            float(value)
        except ValueError:
            return f"Invalid value {value} for configuration {name}: Not a number of type DOUBLE"
    choices = _CHOICES.get(name)
    if choices is not None:
        items = [item.strip() for item in value.split(",")] if kind is ConfigType.LIST else [value]
        wrong = [item for item in items if item not in choices]
        if wrong:
            return (
                f"Invalid value {value} for configuration {name}: "
                f"String must be one of: {', '.join(sorted(choices))}"
            )
    return None


def topic_entries(overrides: dict[str, str]) -> list[ConfigEntry]:
    """A topic's configuration: the defaults, with the topic's own settings over them."""
    entries = [
        ConfigEntry(
            entry.name,
            overrides[entry.name],
            entry.type,
            ConfigSource.DYNAMIC_TOPIC_CONFIG,
        )
        if entry.name in overrides
        else entry
        for entry in TOPIC_DEFAULTS
    ]
    entries.extend(
        ConfigEntry(name, value, ConfigType.STRING, ConfigSource.DYNAMIC_TOPIC_CONFIG)
        for name, value in sorted(overrides.items())
        if name not in TOPIC_TYPES
    )
    return entries


def broker_entries(
    config: Config,
    node_id: int,
    cluster_defaults: dict[str, str] | None = None,
    dynamic: dict[str, str] | None = None,
) -> list[ConfigEntry]:
    """The broker's configuration, from nullbroker's own settings where they apply, with
    what IncrementalAlterConfigs set over them: for every broker (`cluster_defaults`,
    resource name "") and for this one (`dynamic`)."""
    layers = (
        (cluster_defaults or {}, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (dynamic or {}, ConfigSource.DYNAMIC_BROKER_CONFIG),
    )
    entries = []
    for entry in static_broker_entries(config, node_id):
        for overrides, source in layers:
            if entry.name in overrides:
                entry = ConfigEntry(entry.name, overrides[entry.name], entry.type, source)
        entries.append(entry)
    return entries


def static_broker_entries(config: Config, node_id: int) -> list[ConfigEntry]:
    """The broker's configuration before anything was altered."""
    static = ConfigSource.STATIC_BROKER_CONFIG
    return [
        ConfigEntry("node.id", str(node_id), ConfigType.INT, static, read_only=True),
        ConfigEntry("broker.id", str(node_id), ConfigType.INT, static, read_only=True),
        ConfigEntry("num.partitions", str(config.partitions), ConfigType.INT, static),
        ConfigEntry(
            "auto.create.topics.enable",
            str(config.auto_create).lower(),
            ConfigType.BOOLEAN,
            static,
            read_only=True,
        ),
        ConfigEntry(
            "socket.request.max.bytes",
            str(config.max_frame_bytes),
            ConfigType.INT,
            static,
            read_only=True,
        ),
        ConfigEntry("default.replication.factor", "1", ConfigType.INT, static, read_only=True),
        ConfigEntry("offsets.topic.replication.factor", "1", ConfigType.SHORT, static),
        ConfigEntry("transaction.state.log.replication.factor", "1", ConfigType.SHORT, static),
        ConfigEntry("min.insync.replicas", "1", ConfigType.INT),
        ConfigEntry("message.max.bytes", "1048588", ConfigType.INT),
        ConfigEntry("log.retention.hours", "168", ConfigType.INT, read_only=True),
        ConfigEntry("log.segment.bytes", "1073741824", ConfigType.INT),
        ConfigEntry("compression.type", "producer", ConfigType.STRING),
        ConfigEntry("log.message.timestamp.type", "CreateTime", ConfigType.STRING),
        ConfigEntry("group.initial.rebalance.delay.ms", "3000", ConfigType.INT, read_only=True),
        ConfigEntry("process.roles", "broker,controller", ConfigType.LIST, static, read_only=True),
    ]
