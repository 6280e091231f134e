"""Configuration entries as DescribeConfigs and CreateTopics report them, Kafka 4.4's topic
configs, and values parsed and checked as Kafka 4.4 parses and checks them (the broker's
configs: nullbroker.state.broker_configs).

nullbroker enforces one of them, the largest record batch a topic takes (max.message.bytes,
else the broker's message.max.bytes); the rest govern storage, and nothing is retained. Admin
tools and clients read them all, so they carry Apache Kafka 4.4's defaults, and a value Kafka
refuses is refused here with Kafka's message.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, NamedTuple


class ConfigType(IntEnum):
    """DescribeConfigs v3+ config types (org.apache.kafka.clients.admin.ConfigEntry)."""

    UNKNOWN = 0
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
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class Synonym(NamedTuple):
    """One of the settings a config's value may come from, as DescribeConfigs lists them
    (include_synonyms): the one in force first."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    type: ConfigType
    source: ConfigSource = ConfigSource.DEFAULT_CONFIG
    read_only: bool = False
    sensitive: bool = False
    documentation: str | None = None
    synonyms: tuple[Synonym, ...] | None = None
    """None: the entry's own name, value and source, alone."""

    def listed_synonyms(self) -> tuple[Synonym, ...]:
        if self.synonyms is None:
            return (Synonym(self.name, self.value, self.source),)
        return self.synonyms


class InvalidConfig(Exception):
    """A config value Kafka refuses, with Kafka's message for it."""


class Why(NamedTuple):
    """A validator's refusal: Kafka's reason, and the value as its message shows it when
    that is not the parsed value (a list's wrong item, or the list as Java prints it)."""

    reason: str
    shown: str | None = None


Check = Callable[[Any], Why | None]
"""A validator of a parsed config value, as Kafka's ConfigDef.Validator."""


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """One of Kafka 4.4's topic configs (LogConfig's ConfigDef): its type, default and
    validator."""

    name: str
    type: ConfigType
    default: str
    check: Check | None = None
    internal: bool = False
    """Accepted, as Kafka accepts it, but not reported (defineInternal)."""

    def parsed(self, value: str) -> Any:
        """The value as Kafka's ConfigDef parses and validates it; raises InvalidConfig
        with Kafka's message."""
        return parse_value(self.name, self.type, value, self.check)


def at_least(low: float) -> Check:
    """ConfigDef.Range.atLeast."""
    return lambda value: Why(f"Value must be at least {low}") if value < low else None


def between(low: float, high: float) -> Check:
    """ConfigDef.Range.between: a NaN passes, as Java's comparisons let it."""

    def check(value: float) -> Why | None:
        if value < low:
            return Why(f"Value must be at least {low}")
        if value > high:
            return Why(f"Value must be no more than {high}")
        return None

    return check


def one_of(*choices: str) -> Check:
    """ConfigDef.ValidString.in, or for a LIST config ValidList.in (each item checked)."""
    reason = f"String must be one of: {', '.join(choices)}"

    def check(value: str | list[str]) -> Why | None:
        items = value if isinstance(value, list) else [value]
        wrong = next((item for item in items if item not in choices), None)
        return None if wrong is None else Why(reason, wrong)

    return check


_GZIP_LEVELS = range(1, 10)
GZIP_DEFAULT_LEVEL = -1


def gzip_level(value: int) -> Why | None:
    if value in _GZIP_LEVELS or value == GZIP_DEFAULT_LEVEL:
        return None
    return Why("Value must be between 1 and 9 or equal to -1")


_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


def _throttled_replicas(name: str) -> Check:
    """ThrottledReplicaListValidator: '*' or partition:broker pairs."""

    def check(value: list[str]) -> Why | None:
        if all(_REPLICA.fullmatch(item.strip()) for item in value) or "".join(value) == "*":
            return None
        return Why(
            f"{name} must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
            f"[{', '.join(value)}]",
        )

    return check


_LONG_MAX = str(2**63 - 1)
_COMPRESSION_TYPES = one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPES = one_of("CreateTime", "LogAppendTime")
DEFAULT_MAX_MESSAGE_BYTES = 1048588
"""Kafka's message.max.bytes and max.message.bytes default: 1 MiB and a batch's 12-byte log
overhead."""
LEADER_THROTTLED = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED = "follower.replication.throttled.replicas"

# In Kafka's order of definition (LogConfig), which is the order it checks values in: of two
# bad values, the one defined first is reported.
TOPIC_CONFIGS: dict[str, TopicConfig] = {
    config.name: config
    for config in (
        TopicConfig("segment.bytes", ConfigType.INT, "1073741824", at_least(1024 * 1024)),
        TopicConfig("segment.ms", ConfigType.LONG, "604800000", at_least(1)),
        TopicConfig("segment.jitter.ms", ConfigType.LONG, "0", at_least(0)),
        TopicConfig("segment.index.bytes", ConfigType.INT, "10485760", at_least(4)),
        TopicConfig("flush.messages", ConfigType.LONG, _LONG_MAX, at_least(1)),
        TopicConfig("flush.ms", ConfigType.LONG, _LONG_MAX, at_least(0)),
        TopicConfig("retention.bytes", ConfigType.LONG, "-1"),
        TopicConfig("retention.ms", ConfigType.LONG, "604800000", at_least(-1)),
        TopicConfig(
            "max.message.bytes", ConfigType.INT, str(DEFAULT_MAX_MESSAGE_BYTES), at_least(0)
        ),
        TopicConfig(
            "max.decompressed.message.bytes", ConfigType.INT, "2147483639", between(1, 2147483639)
        ),
        TopicConfig("index.interval.bytes", ConfigType.INT, "4096", at_least(0)),
        TopicConfig("delete.retention.ms", ConfigType.LONG, "86400000", at_least(0)),
        TopicConfig("min.compaction.lag.ms", ConfigType.LONG, "0", at_least(0)),
        TopicConfig("max.compaction.lag.ms", ConfigType.LONG, _LONG_MAX, at_least(1)),
        TopicConfig("file.delete.delay.ms", ConfigType.LONG, "60000", at_least(0)),
        TopicConfig("min.cleanable.dirty.ratio", ConfigType.DOUBLE, "0.5", between(0, 1)),
        TopicConfig("cleanup.policy", ConfigType.LIST, "delete", one_of("compact", "delete")),
        TopicConfig("unclean.leader.election.enable", ConfigType.BOOLEAN, "false"),
        TopicConfig("min.insync.replicas", ConfigType.INT, "1", at_least(1)),
        TopicConfig("compression.type", ConfigType.STRING, "producer", _COMPRESSION_TYPES),
        TopicConfig("compression.gzip.level", ConfigType.INT, "-1", gzip_level),
        TopicConfig("compression.lz4.level", ConfigType.INT, "9", between(1, 17)),
        TopicConfig("compression.zstd.level", ConfigType.INT, "3", between(-131072, 22)),
        TopicConfig("preallocate", ConfigType.BOOLEAN, "false"),
        TopicConfig("message.timestamp.type", ConfigType.STRING, "CreateTime", _TIMESTAMP_TYPES),
        TopicConfig("message.timestamp.before.max.ms", ConfigType.LONG, _LONG_MAX, at_least(0)),
        TopicConfig("message.timestamp.after.max.ms", ConfigType.LONG, "3600000", at_least(0)),
        TopicConfig(LEADER_THROTTLED, ConfigType.LIST, "", _throttled_replicas(LEADER_THROTTLED)),
        TopicConfig(
            FOLLOWER_THROTTLED, ConfigType.LIST, "", _throttled_replicas(FOLLOWER_THROTTLED)
        ),
        TopicConfig("remote.storage.enable", ConfigType.BOOLEAN, "false"),
        TopicConfig("local.retention.ms", ConfigType.LONG, "-2", at_least(-2)),
        TopicConfig("local.retention.bytes", ConfigType.LONG, "-2", at_least(-2)),
        TopicConfig("remote.log.copy.disable", ConfigType.BOOLEAN, "false"),
        TopicConfig("remote.copy.lag.ms", ConfigType.LONG, "0", at_least(-1)),
        TopicConfig("remote.copy.lag.bytes", ConfigType.LONG, "-1", at_least(-1)),
        TopicConfig("remote.log.delete.on.disable", ConfigType.BOOLEAN, "false"),
        TopicConfig("errors.deadletterqueue.group.enable", ConfigType.BOOLEAN, "false"),
        TopicConfig("internal.segment.bytes", ConfigType.INT, "", internal=True),
    )
}
TOPIC_TYPES = {name: config.type for name, config in TOPIC_CONFIGS.items()}
TOPIC_DEFAULT_VALUES = {name: config.default for name, config in TOPIC_CONFIGS.items()}

FORMATTED_CLUSTER_CONFIGS = {"min.insync.replicas": "1"}
"""What `kafka-storage format` sets for every broker of a new KRaft cluster (a dynamic
cluster default, DYNAMIC_DEFAULT_BROKER_CONFIG): a real Kafka 4.1 cluster reports it so."""

_INTEGER_RANGES = {
    ConfigType.SHORT: (-(2**15), 2**15 - 1),
    ConfigType.INT: (-(2**31), 2**31 - 1),
    ConfigType.LONG: (-(2**63), 2**63 - 1),
}
# What Java's Integer.parseInt / Long.parseLong and Double.parseDouble read (ASCII digits).
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_JAVA_DOUBLE = re.compile(
    r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)"
)
_LIST_SEPARATOR = re.compile(r"\s*,\s*")


def parse_value(name: str, kind: ConfigType, value: str, check: Check | None = None) -> Any:
    """`value` for config `name` of type `kind`, parsed and checked as Kafka's ConfigDef
    does it; raises InvalidConfig with Kafka's message ("Invalid value V for configuration
    N: why", V as Kafka prints it: as given when it does not parse, else as parsed)."""
    trimmed = value.strip()
    parsed: Any = trimmed
    if kind in _INTEGER_RANGES:
        low, high = _INTEGER_RANGES[kind]
        if not _JAVA_INTEGER.fullmatch(trimmed) or not low <= int(trimmed) <= high:
            raise _invalid(name, value, f"Not a number of type {kind.name}")
        parsed = int(trimmed)
    elif kind is ConfigType.DOUBLE:
        if not _JAVA_DOUBLE.fullmatch(trimmed):
            raise _invalid(name, value, "Not a number of type DOUBLE")
        parsed = float(trimmed.rstrip("fFdD").replace("Infinity", "inf"))
    elif kind is ConfigType.BOOLEAN:
        if trimmed.lower() not in ("true", "false"):
            raise _invalid(name, value, "Expected value to be either true or false")
        parsed = trimmed.lower() == "true"
    elif kind is ConfigType.LIST:
        parsed = _LIST_SEPARATOR.split(trimmed) if trimmed else []
    if check is not None:
        why = check(parsed)
        if why is not None:
            shown = java_text(parsed) if why.shown is None else why.shown
            raise _invalid(name, shown, why.reason)
    return parsed


def _invalid(name: str, shown: str, why: str) -> InvalidConfig:
    return InvalidConfig(f"Invalid value {shown} for configuration {name}: {why}")


def java_text(value: Any) -> str:
    """A parsed value as Java's toString prints it (Double: 2.0, 1.0E7, NaN)."""
    if isinstance(value, float):
        if value != value:
            return "NaN"
        if value in (float("inf"), float("-inf")):
            return "Infinity" if value > 0 else "-Infinity"
        if value == 0 or 1e-3 <= abs(value) < 1e7:
            return repr(value)
        mantissa, _, exponent = f"{value:.17e}".partition("e")
        return f"{float(mantissa)!r}E{int(exponent)}"
    return str(value)


def invalid_value_reason(
    name: str, kind: ConfigType, value: str, check: Check | None = None
) -> str | None:
    """Why `value` cannot be config `name` of type `kind`, as Kafka's ConfigDef would refuse
    it; None if it can."""
    try:
        parse_value(name, kind, value, check)
    except InvalidConfig as refused:
        return str(refused)
    return None


TIERED_STORAGE_OFF = (
    "Tiered Storage functionality is disabled in the broker. "
    "Topic cannot be configured with remote log storage."
)


def invalid_topic_configs_reason(overrides: dict[str, str]) -> str | None:
    """Why Kafka 4.1 refuses a topic with these overrides (LogConfig.validate: every name
    first, then each value in the order Kafka defines them, then the checks across values),
    or None. The values are not null (each API words a null its own way)."""
    for name in overrides:
        if name not in TOPIC_CONFIGS:
            return f"Unknown topic config name: {name}"
    parsed = {}
    try:
        for name, config in TOPIC_CONFIGS.items():
            if name in overrides:
                parsed[name] = config.parsed(overrides[name])
    except InvalidConfig as refused:
        return str(refused)
    min_lag = parsed.get("min.compaction.lag.ms", 0)
    max_lag = parsed.get("max.compaction.lag.ms", 2**63 - 1)
    if min_lag > max_lag:
        return (
            f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
            f"max.compaction.lag.ms ({max_lag})"
        )
    if parsed.get("remote.storage.enable"):  # nullbroker has no tiered storage to turn on
        return TIERED_STORAGE_OFF
    return None


def max_message_bytes(overrides: dict[str, str], broker_default: int) -> int:
    """The largest batch a topic takes (bytes, log overhead included): its max.message.bytes,
    else the broker's message.max.bytes. The overrides were validated."""
    value = overrides.get("max.message.bytes")
    return broker_default if value is None else int(value.strip())
