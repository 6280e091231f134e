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
_TOPIC_TYPES = {entry.name: entry.type for entry in TOPIC_DEFAULTS}


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
        if name not in _TOPIC_TYPES
    )
    return entries


def broker_entries(config: Config, node_id: int) -> list[ConfigEntry]:
    """The broker's configuration, from nullbroker's own settings where they apply."""
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
