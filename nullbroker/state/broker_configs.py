"""A broker's configs as Kafka 4.1 reports and alters them: every config Kafka has
(nullbroker.kafka_reference.broker_configs, made from Kafka's answer), in layers, the first
that sets a config in force: set for this broker (IncrementalAlterConfigs on its resource,
DYNAMIC_BROKER_CONFIG), for every broker (the resource "", DYNAMIC_DEFAULT_BROKER_CONFIG),
at start (nullbroker's settings, where a Kafka node has its server.properties:
STATIC_BROKER_CONFIG), else Kafka's default. DescribeConfigs lists them with their synonyms
as Kafka does, a topic's defaults come from them (a topic config's broker synonym), and an
alteration is checked as Kafka checks it, in its words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..kafka_reference.broker_configs import BROKER_CONFIGS
from ..net.listeners import listener_specs
from .kafka_configs import (
    TOPIC_CONFIGS,
    Check,
    ConfigEntry,
    ConfigSource,
    ConfigType,
    InvalidConfig,
    Synonym,
    at_least,
    between,
    gzip_level,
    java_text,
    one_of,
    parse_value,
)

if TYPE_CHECKING:
    from ..settings import Config

_LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)")
"""A config for one listener (`listener.name.<listener>.<config>`), Kafka's
ListenerConfigRegex."""
_LISTENER_MECHANISM_CONFIGS = (
    "sasl.jaas.config",
    "sasl.login.class",
    "sasl.login.callback.handler.class",
    "sasl.server.callback.handler.class",
)
"""Configs of one SASL mechanism on one listener (`listener.name.<l>.<mechanism>.<config>`)."""

_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
"""Broker configs that set one value in several units (Kafka's brokerConfigSynonyms), the one
in force first."""

SECURITY_CONFIGS = frozenset(
    {
        "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
        "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.type",
        "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
    }
)  # fmt: skip
"""Kafka's DynamicSecurityConfigs: altered only for one listener, by its prefix."""

PER_BROKER_CONFIGS = SECURITY_CONFIGS | frozenset(
    {
        "listeners", "listener.security.protocol.map", "principal.builder.class",
        "ssl.client.auth", "ssl.protocol", "ssl.provider", "ssl.enabled.protocols",
        "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
        "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation",
        "ssl.cipher.suites", "ssl.engine.factory.class", "sasl.mechanism.inter.broker.protocol",
        "sasl.enabled.mechanisms", "sasl.kerberos.principal.to.local.rules", "sasl.jaas.config",
        "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.min.time.before.relogin", "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.buffer.seconds",
    }
)  # fmt: skip
"""Kafka's PerBrokerConfigs: dynamic, but only for one broker (not the resource "")."""

CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset(
    {"max.connections", "max.connection.creation.rate", "num.network.threads"}
)
"""The listener configs that may be set for every broker (Kafka's ClusterLevelListenerConfigs)."""

_POSITIVE = at_least(1)
_NOT_NEGATIVE = at_least(0)
BROKER_CHECKS: dict[str, Check] = {
    **dict.fromkeys(
        (
            "remote.log.index.file.cache.total.size.bytes",
            "remote.log.manager.copier.thread.pool.size",
            "remote.log.manager.expiration.thread.pool.size", "remote.log.reader.threads",
            "remote.log.manager.copy.max.bytes.per.second",
            "remote.log.manager.fetch.max.bytes.per.second", "remote.fetch.max.wait.ms",
            "remote.list.offsets.request.timeout.ms", "num.io.threads", "background.threads",
            "num.network.threads", "log.cleaner.max.compaction.lag.ms",
            "log.flush.interval.messages", "num.recovery.threads.per.data.dir",
            "min.insync.replicas", "producer.id.expiration.ms", "num.partitions",
        ),
        _POSITIVE,
    ),
    **dict.fromkeys(
        (
            "message.max.bytes", "max.connections.per.ip", "max.connections",
            "max.connection.creation.rate", "log.cleaner.threads", "log.cleaner.io.buffer.size",
            "log.cleaner.backoff.ms", "log.cleaner.delete.retention.ms",
            "log.cleaner.min.compaction.lag.ms", "log.index.interval.bytes",
            "log.segment.delete.delay.ms", "log.message.timestamp.before.max.ms",
            "log.message.timestamp.after.max.ms",
        ),
        _NOT_NEGATIVE,
    ),
    "log.local.retention.ms": at_least(-2),
    "log.local.retention.bytes": at_least(-2),
    "compression.type": one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "compression.gzip.level": gzip_level,
    "compression.lz4.level": between(1, 17),
    "compression.zstd.level": between(-131072, 22),
    "log.cleaner.min.cleanable.ratio": between(0, 1),
    "log.segment.bytes": at_least(1024 * 1024),
    "log.cleanup.policy": one_of("compact", "delete"),
    "log.index.size.max.bytes": at_least(4),
    "log.message.timestamp.type": one_of("CreateTime", "LogAppendTime"),
    "ssl.client.auth": one_of("required", "requested", "none"),
}  # fmt: skip
"""The validators of Kafka's dynamic broker configs (KafkaConfig's ConfigDef), by name."""

ELR_MIN_INSYNC = "Broker-level min.insync.replicas cannot be altered while ELR is enabled."
"""Kafka 4.1 finalizes eligible leader replicas, and then refuses min.insync.replicas for one
broker (for every broker it takes it)."""

REPLICAS = "1"
"""nullbroker keeps one replica of everything, as a one-node Kafka must be told to."""


class Refused(Exception):
    """An alteration of broker configs Kafka refuses: INVALID_REQUEST unless `config` (then
    INVALID_CONFIG), with Kafka's message."""

    def __init__(self, message: str, *, config: bool = False) -> None:
        super().__init__(message)
        self.config = config


def base_name(name: str) -> str:
    """The config a listener's own config (`listener.name.l.ssl.keystore.location`) is of."""
    match = _LISTENER_CONFIG.fullmatch(name)
    if match is None:
        return name
    base = match.group(1)
    mechanisms = [config for config in _LISTENER_MECHANISM_CONFIGS if base.endswith(config)]
    return mechanisms[0] if mechanisms else base


def config_type(name: str) -> ConfigType:
    known = BROKER_CONFIGS.get(base_name(name))
    return ConfigType.UNKNOWN if known is None else ConfigType(known[0])


def is_sensitive(name: str) -> bool:
    """As Kafka's maybeSensitive: a password, or a config it does not know."""
    return config_type(name) in (ConfigType.PASSWORD, ConfigType.UNKNOWN)


def is_dynamic(name: str) -> bool:
    known = BROKER_CONFIGS.get(name)
    return known is not None and known[2]


def default_value(name: str) -> str | None:
    known = BROKER_CONFIGS.get(name)
    return None if known is None else known[1]


def synonym_names(name: str) -> tuple[str, ...]:
    """The configs that may set `name`'s value, the first in force first (Kafka's
    brokerConfigSynonyms): a listener's own config before the config it is of."""
    for group in _SYNONYM_GROUPS:
        if name in group:
            return group
    base = base_name(name)
    return (name, base) if base != name else (name,)


def as_kafka_text(name: str, value: str) -> str:
    """A value as Kafka writes it once parsed (ConfigDef.convertToString): a number without
    its spaces, a list joined by commas."""
    kind = config_type(name)
    if kind in (ConfigType.UNKNOWN, ConfigType.PASSWORD, ConfigType.CLASS):
        return value
    try:
        parsed = parse_value(name, kind, value)
    except InvalidConfig:
        return value
    if kind is ConfigType.LIST:
        return ",".join(parsed)
    if kind is ConfigType.BOOLEAN:
        return "true" if parsed else "false"
    return java_text(parsed)


@dataclass(frozen=True, slots=True)
class BrokerLayers:
    """One node's broker configs, layer by layer: set for it (`own`), for every broker
    (`every`), at start (`static`), and Kafka's defaults under them."""

    own: Mapping[str, str]
    every: Mapping[str, str]
    static: Mapping[str, str]

    def value(self, name: str) -> str | None:
        """The value in force, as set (None: none, or a default of none)."""
        for layer in (self.own, self.every, self.static):
            if name in layer:
                return layer[name]
        return default_value(name)

    def synonyms(self, name: str, per_broker: bool = True) -> list[Synonym]:
        """Every layer that sets `name` or a synonym of it, the one in force first, from
        `name` on (Kafka's configSynonyms); for the resource "", those set for every broker."""
        names = synonym_names(name)
        hidden = is_sensitive(name)
        found = [
            Synonym(synonym, None if hidden else layer[synonym], source)
            for layer, source in (
                (self.own, ConfigSource.DYNAMIC_BROKER_CONFIG),
                (self.every, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                (self.static, ConfigSource.STATIC_BROKER_CONFIG),
            )
            for synonym in names
            if synonym in layer
        ]
        found += [
            Synonym(synonym, None if hidden else default, ConfigSource.DEFAULT_CONFIG)
            for synonym in names
            if (default := default_value(synonym)) is not None
        ]
        while found and found[0].name != name:
            found.pop(0)
        if not per_broker:
            found = [s for s in found if s.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        return found

    def entries(self) -> list[ConfigEntry]:
        """DescribeConfigs of this node: every config Kafka knows, and every name set."""
        names = {*BROKER_CONFIGS, *self.static, *self.every, *self.own}
        return [self._entry(name, self.value(name), per_broker=True) for name in sorted(names)]

    def every_broker_entries(self) -> list[ConfigEntry]:
        """DescribeConfigs of the resource "": what is set for every broker."""
        return [
            self._entry(name, value, per_broker=False) for name, value in sorted(self.every.items())
        ]

    def _entry(self, name: str, value: str | None, per_broker: bool) -> ConfigEntry:
        synonyms = self.synonyms(name, per_broker)
        if is_sensitive(name):
            value = None
        elif value is not None and per_broker:
            value = as_kafka_text(name, value)
        return ConfigEntry(
            name,
            value,
            config_type(name),
            synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
            read_only=not is_dynamic(name),
            sensitive=is_sensitive(name),
            synonyms=tuple(synonyms),
        )


def static_broker_configs(config: Config, node_id: int) -> dict[str, str]:
    """What a node is started with, as a Kafka node's server.properties: what it is (its
    id, its roles, its listeners, one replica of everything, and no log folder but
    /dev/null), and the settings that are Kafka's configs where they were given or are not
    Kafka's defaults."""
    listeners = config.listeners or f"PLAINTEXT://{config.listen}"
    static = {
        "node.id": str(node_id),
        "broker.id": str(node_id),
        "process.roles": "broker,controller",
        "listeners": listeners,
        "log.dirs": "/dev/null",
        "offsets.topic.replication.factor": REPLICAS,
        "transaction.state.log.replication.factor": REPLICAS,
        "transaction.state.log.min.isr": REPLICAS,
        "share.coordinator.state.topic.replication.factor": REPLICAS,
        "share.coordinator.state.topic.min.isr": REPLICAS,
    }
    advertised = config.advertised_listeners or (
        f"PLAINTEXT://{config.advertise}" if config.advertise else None
    )
    if advertised is not None:
        static["advertised.listeners"] = advertised
    given = dict(config.origins)
    for setting, name, value in (
        ("partitions", "num.partitions", config.partitions),
        ("offsets_topic_partitions", "offsets.topic.num.partitions",
         config.offsets_topic_partitions),
        ("transaction_state_partitions", "transaction.state.log.num.partitions",
         config.transaction_state_partitions),
        ("group_initial_rebalance_delay_ms", "group.initial.rebalance.delay.ms",
         config.group_initial_rebalance_delay_ms),
        ("auto_create", "auto.create.topics.enable", str(config.auto_create).lower()),
        ("max_frame_bytes", "socket.request.max.bytes", config.max_frame_bytes),
        ("fetch_session_cache_slots", "max.incremental.fetch.session.cache.slots",
         config.fetch_session_cache_slots),
        ("group_consumer_session_timeout_ms", "group.consumer.session.timeout.ms",
         config.group_consumer_session_timeout_ms),
        ("group_consumer_heartbeat_interval_ms", "group.consumer.heartbeat.interval.ms",
         config.group_consumer_heartbeat_interval_ms),
        ("group_consumer_assignment_interval_ms", "group.consumer.assignment.interval.ms",
         config.group_consumer_assignment_interval_ms),
        ("group_share_heartbeat_interval_ms", "group.share.heartbeat.interval.ms",
         config.group_share_heartbeat_interval_ms),
        ("group_share_session_timeout_ms", "group.share.session.timeout.ms",
         config.group_share_session_timeout_ms),
        ("group_share_record_lock_duration_ms", "group.share.record.lock.duration.ms",
         config.group_share_record_lock_duration_ms),
        ("group_share_min_record_lock_duration_ms", "group.share.min.record.lock.duration.ms",
         config.group_share_min_record_lock_duration_ms),
        ("group_share_delivery_count_limit", "group.share.delivery.count.limit",
         config.group_share_delivery_count_limit),
        ("group_share_partition_max_record_locks", "group.share.partition.max.record.locks",
         config.group_share_partition_max_record_locks),
        ("telemetry_max_bytes", "telemetry.max.bytes", config.telemetry_max_bytes),
    ):  # fmt: skip
        if setting in given or str(value) != default_value(name):
            static[name] = str(value)
    if any(listener.sasl for listener in listener_specs(config)):
        static["sasl.enabled.mechanisms"] = config.sasl_mechanisms
    return static


def check_alteration(
    configs: Iterable[tuple[str, str]], every_broker: bool, elr_on_own: bool
) -> None:
    """As Kafka checks broker configs being set (to these values, for one broker or for
    every broker): only dynamic ones, security ones for one listener only, each value of
    its type and range, per-broker ones for one broker; raises Refused."""
    given = dict(configs)
    fixed = [name for name in given if name in BROKER_CONFIGS and not is_dynamic(name)]
    if fixed:
        raise Refused(f"Cannot update these configs dynamically: Set({', '.join(fixed)})")
    unprefixed = [name for name in given if name in SECURITY_CONFIGS]
    if unprefixed:
        raise Refused(
            "These security configs can be dynamically updated only per-listener using the "
            f"listener prefix: HashSet({', '.join(unprefixed)})"
        )
    for name, value in given.items():
        base = base_name(name)
        if base not in BROKER_CONFIGS:
            continue  # Kafka keeps a config it does not know, as given
        try:
            parse_value(base, config_type(base), value, BROKER_CHECKS.get(base))
        except InvalidConfig as refused:
            raise Refused(str(refused)) from None
    if every_broker:
        own = [
            name
            for name in given
            if name in PER_BROKER_CONFIGS
            or (
                _LISTENER_CONFIG.fullmatch(name) is not None
                and base_name(name) not in CLUSTER_LEVEL_LISTENER_CONFIGS
            )
        ]
        if own:
            raise Refused(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: Set({', '.join(own)})"
            )
    elif elr_on_own:
        raise Refused(ELR_MIN_INSYNC, config=True)


def topic_default(name: str, layers: BrokerLayers) -> tuple[str | None, tuple[Synonym, ...]]:
    """A topic config's value where the topic sets none, and where it comes from: its broker
    synonym (TOPIC_BROKER_SYNONYMS) as the node's layers set it, else the topic's default."""
    broker_name = TOPIC_BROKER_SYNONYMS.get(name)
    config = TOPIC_CONFIGS[name]
    if broker_name is None:
        return config.default, ()
    synonyms = tuple(layers.synonyms(broker_name))
    value = _derived(broker_name, layers)
    if value is None:
        return config.default, synonyms
    return as_topic_text(name, value), synonyms


def as_topic_text(name: str, value: str) -> str:
    """A broker value as the topic config it is the default of writes it."""
    config = TOPIC_CONFIGS[name]
    try:
        parsed = parse_value(name, config.type, value)
    except InvalidConfig:
        return value
    if config.type is ConfigType.LIST:
        return ",".join(parsed)
    if config.type is ConfigType.BOOLEAN:
        return "true" if parsed else "false"
    return java_text(parsed)


_UNITS_MS = {"ms": 1, "minutes": 60_000, "hours": 3_600_000}


def _derived(broker_name: str, layers: BrokerLayers) -> str | None:
    """The value of a broker config given in one of several units (log.retention.ms,
    .minutes, .hours), in milliseconds from the first of them set; others as set."""
    names = synonym_names(broker_name)
    if len(names) == 1:
        return layers.value(broker_name)
    if broker_name == "log.flush.interval.ms":
        return layers.value(broker_name) or layers.value("log.flush.scheduler.interval.ms")
    for synonym in names:
        value = layers.value(synonym)
        if value is not None:
            unit = synonym.rsplit(".", 1)[1]
            return str(int(value.strip()) * _UNITS_MS[unit])
    return None


TOPIC_BROKER_SYNONYMS: dict[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.type": "compression.type",
    "compression.zstd.level": "compression.zstd.level",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "local.retention.bytes": "log.local.retention.bytes",
    "local.retention.ms": "log.local.retention.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "max.decompressed.message.bytes": "max.decompressed.message.bytes",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "preallocate": "log.preallocate",
    "remote.copy.lag.bytes": "log.remote.copy.lag.bytes",
    "remote.copy.lag.ms": "log.remote.copy.lag.ms",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}
"""The broker config a topic config's default comes from (Kafka's ServerTopicConfigSynonyms);
the throttled replicas and the remote storage switches have none."""


def topic_entries(overrides: dict[str, str], layers: BrokerLayers) -> list[ConfigEntry]:
    """A topic's configuration: its own settings over the defaults the node gives it."""
    entries = []
    for name, config in sorted(TOPIC_CONFIGS.items()):
        if config.internal:
            continue
        value, synonyms = topic_default(name, layers)
        if name in overrides:
            value = overrides[name]
            synonyms = (Synonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG), *synonyms)
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        entries.append(ConfigEntry(name, value, config.type, source, synonyms=synonyms))
    entries.extend(
        ConfigEntry(name, value, ConfigType.STRING, ConfigSource.DYNAMIC_TOPIC_CONFIG)
        for name, value in sorted(overrides.items())
        if name not in TOPIC_CONFIGS
    )
    return entries
