"""Client telemetry (KIP-714): the subscriptions that say which metrics clients push and how
often, and each client instance's place in the exchange, as Kafka 4.4.0's broker keeps them
(ClientMetricsManager and ClientMetricsInstance, read from its jars).

A client asks GetTelemetrySubscriptions for its instance id and subscription, then pushes
(PushTelemetry) once an interval. The broker refuses a push too soon, one for a subscription
that changed since, an unknown compression type or a payload over `telemetry.max.bytes`, in
Kafka's order and with Kafka's errors; `ClientMetrics.get_subscription` and `.push` return them.
Sans-IO: the handlers decode the requests and the payload; time is given in milliseconds."""

from __future__ import annotations

import base64
import re
import secrets
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from codec.crc import crc32c

from ..java_hashing import java_hash_order, java_int
from .kafka_configs import ConfigType, InvalidConfig, parse_value

DEFAULT_INTERVAL_MS = 300_000
"""The push interval of a client no subscription matches (ClientMetricsConfigs'
interval.ms default)."""
TELEMETRY_MAX_BYTES = 1 << 20
"""Kafka's `telemetry.max.bytes` default: the largest compressed payload a push may carry."""
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)
"""zstd, lz4, gzip, snappy: the order Kafka offers them in (a client takes the first it has)."""
COMPRESSION_TYPES = frozenset(range(5))
"""none, gzip, snappy, lz4, zstd: the ids a push may name."""
MAX_INSTANCES = 16_384
"""Kafka's cache of client instances: the least recently seen goes first beyond it."""
MIN_EXPIRY_MS = 60_000
"""An instance is forgotten after max(this, 3 times its push interval) without a request."""
ALL_METRICS = "*"
MATCH_KEYS = frozenset(
    (
        "client_instance_id",
        "client_id",
        "client_software_name",
        "client_software_version",
        "client_source_address",
        "client_source_port",
    )
)
"""What a subscription's `match` may select on, each `key=regex` (the whole value)."""
RESERVED_IDS = frozenset((uuid.UUID(int=0), uuid.UUID(int=1)))
"""Kafka's Uuid.ZERO_UUID and ONE_UUID: never an instance's id."""


@dataclass(frozen=True, slots=True)
class Subscription:
    """One client-metrics resource: metric name prefixes (`*`: every metric), the push
    interval, and the clients it is for (every client, with no `match`)."""

    name: str
    metrics: tuple[str, ...] = ()
    interval_ms: int = DEFAULT_INTERVAL_MS
    match: tuple[tuple[str, str], ...] = ()
    """(key, regex) pairs, each key one of MATCH_KEYS."""
    configs: tuple[tuple[str, str], ...] = ()
    """The client-metrics configs that made it (subscription_of), by name, as Kafka describes
    them; none for one made otherwise (--client-metrics'), whose configs are its fields."""

    def set_configs(self) -> dict[str, str]:
        """Its configs as DescribeConfigs reports them set: those given, or its fields."""
        if self.configs:
            return dict(self.configs)
        found = {METRICS: ",".join(self.metrics), INTERVAL: str(self.interval_ms)}
        if self.match:
            found[MATCH] = ",".join(f"{key}={pattern}" for key, pattern in self.match)
        return found

    def matches(self, client: dict[str, str]) -> bool:
        return all(
            re.fullmatch(pattern, client.get(key, "")) is not None for key, pattern in self.match
        )


@dataclass(slots=True)
class ClientInstance:
    """A client instance as the broker follows it (Kafka's ClientMetricsInstance)."""

    instance_id: uuid.UUID
    subscription_id: int
    metrics: tuple[str, ...]
    interval_ms: int
    subscription_version: int
    client: dict[str, str] = field(default_factory=dict)
    last_get_ms: int = 0
    last_push_ms: int = 0
    last_error: ErrorCode = ErrorCode.none
    terminating: bool = False
    seen_ms: int = 0
    tied: bool = False
    """Tied to the connection whose request made it: Kafka forgets the instance when
    that connection closes."""

    @property
    def expiry_ms(self) -> int:
        return max(MIN_EXPIRY_MS, 3 * self.interval_ms)


def java_uuid_hash(instance_id: uuid.UUID) -> int:
    """Kafka's Uuid.hashCode(): the halves of its bits XORed, folded to a signed int."""
    bits = (instance_id.int >> 64) ^ (instance_id.int & ((1 << 64) - 1))
    return java_int((bits >> 32) ^ bits)


def subscription_id(metrics: tuple[str, ...], interval_ms: int, instance_id: uuid.UUID) -> int:
    """Kafka's subscription id: the CRC-32C of the metrics set as Java prints a HashSet of them
    (`[a, b]`, in its bucket order) followed by the interval, XOR the instance id's hash."""
    printed = "[" + ", ".join(java_hash_order(metrics)) + "]" + str(interval_ms)
    return java_int(crc32c(printed.encode()) ^ java_uuid_hash(instance_id))


def kafka_uuid_text(instance_id: uuid.UUID) -> str:
    """An id as Kafka writes it (Uuid.toString: URL-safe base64, unpadded), the form a
    subscription's client_instance_id pattern is matched against."""
    return base64.urlsafe_b64encode(instance_id.bytes).decode().rstrip("=")


DEFAULT_SUBSCRIPTION = "nullbroker-default"
"""The name of --client-metrics' subscription, as a client-metrics config resource's."""
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 3_600_000
"""interval.ms's bounds, as Kafka's ClientMetricsConfigs checks them."""


class SubscriptionError(ValueError):
    """A subscription Kafka would refuse: the message says why."""


def parse_match(text: str) -> tuple[tuple[str, str], ...]:
    """`key=regex,...` into (key, regex) pairs, as Kafka's ClientMetricsConfigs parses a
    subscription's `match`: each entry exactly one `=`, a known key, a regex that compiles."""
    pairs = []
    for entry in filter(None, (part.strip() for part in text.split(","))):
        parts = entry.split("=")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise SubscriptionError(f"{entry!r} is not key=regex")
        key, pattern = parts[0].strip(), parts[1].strip()
        if key not in MATCH_KEYS:
            raise SubscriptionError(f"{key!r} is none of {', '.join(sorted(MATCH_KEYS))}")
        try:
            re.compile(pattern)
        except re.error as error:
            raise SubscriptionError(f"{pattern!r} is not a regex: {error}") from None
        pairs.append((key, pattern))
    return tuple(pairs)


def check_interval(interval_ms: int) -> int:
    if not MIN_INTERVAL_MS <= interval_ms <= MAX_INTERVAL_MS:
        raise SubscriptionError(
            f"must be from {MIN_INTERVAL_MS} to {MAX_INTERVAL_MS} ms, got {interval_ms}"
        )
    return interval_ms


def default_subscriptions(config: Any) -> tuple[Subscription, ...]:
    """--client-metrics' subscription (none when off): its prefixes, for the clients its
    match selects, at its interval. `config` is checked already (app.configuration)."""
    if not config.client_telemetry:
        return ()
    metrics = tuple(filter(None, (m.strip() for m in config.client_metrics.split(","))))
    return (
        Subscription(
            DEFAULT_SUBSCRIPTION,
            metrics,
            config.client_metrics_interval_ms,
            parse_match(config.client_metrics_match),
        ),
    )


class ClientMetrics:
    """The subscriptions and the client instances of one broker (Kafka keeps them per broker:
    an instance id unknown here is taken as new)."""

    def __init__(
        self,
        subscriptions: tuple[Subscription, ...] = (),
        max_bytes: int = TELEMETRY_MAX_BYTES,
        max_instances: int = MAX_INSTANCES,
    ) -> None:
        self.subscriptions = {subscription.name: subscription for subscription in subscriptions}
        self.max_bytes = max_bytes
        self.max_instances = max_instances
        self.instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()
        self.version = 0
        """Moves with every change of the subscriptions: each instance is made again, with its
        new subscription, at its next request."""
        self.dropped = 0
        """Instances forgotten because the cache was full."""

    def subscribe(self, subscription: Subscription) -> None:
        self.subscriptions[subscription.name] = subscription
        self.version += 1

    def unsubscribe(self, name: str) -> None:
        if self.subscriptions.pop(name, None) is not None:
            self.version += 1

    def forget(self, instance: ClientInstance) -> None:
        """The connection that made `instance` closed: Kafka forgets it then (unless it was
        made again since, from another connection)."""
        if self.instances.get(instance.instance_id) is instance:
            del self.instances[instance.instance_id]

    # The two requests.

    def get_subscription(
        self, instance_id: uuid.UUID | None, client: dict[str, str], now_ms: int
    ) -> tuple[ErrorCode, ClientInstance | None]:
        """GetTelemetrySubscriptions: the error, and the instance to answer with (None with
        an error: Kafka's refusal carries no subscription)."""
        if instance_id is None or instance_id == uuid.UUID(int=0):
            instance_id = self._new_id()
        instance = self._instance(instance_id, client, now_ms)
        if now_ms - max(instance.last_get_ms, instance.last_push_ms) >= instance.interval_ms:
            instance.last_get_ms = now_ms
        elif instance.last_error not in (
            ErrorCode.unknown_subscription_id,
            ErrorCode.unsupported_compression_type,
        ):
            return ErrorCode.throttling_quota_exceeded, None
        instance.last_error = ErrorCode.none
        return ErrorCode.none, instance

    def push(
        self,
        instance_id: uuid.UUID | None,
        subscription: int,
        terminating: bool,
        compression_type: int,
        size: int,
        client: dict[str, str],
        now_ms: int,
    ) -> tuple[ErrorCode, ClientInstance | None]:
        """PushTelemetry's checks, in Kafka's order, of a payload of `size` bytes as sent:
        the error (none: the handler decodes the payload next), and the instance."""
        if instance_id is None or instance_id in RESERVED_IDS:
            return ErrorCode.invalid_request, None
        instance = self._instance(instance_id, client, now_ms)
        error = ErrorCode.none
        if instance.terminating:
            error = ErrorCode.invalid_request
        elif not self._push_due(instance, now_ms) and not terminating:
            error = ErrorCode.throttling_quota_exceeded
        elif subscription != instance.subscription_id:
            error = ErrorCode.unknown_subscription_id
        elif compression_type not in COMPRESSION_TYPES:
            error = ErrorCode.unsupported_compression_type
        elif size > self.max_bytes:
            error = ErrorCode.telemetry_too_large
        instance.last_error = error
        instance.terminating = terminating
        return error, instance

    @staticmethod
    def _push_due(instance: ClientInstance, now_ms: int) -> bool:
        """The first push after a Get, or one an interval after the last push (which it
        takes the place of)."""
        due = (
            instance.last_get_ms > instance.last_push_ms
            or now_ms - instance.last_push_ms >= instance.interval_ms
        )
        if due:
            instance.last_push_ms = now_ms
        return due

    # The instances.

    def _new_id(self) -> uuid.UUID:
        while True:
            made = uuid.UUID(bytes=secrets.token_bytes(16))
            if made not in RESERVED_IDS and made not in self.instances:
                return made

    def _instance(
        self, instance_id: uuid.UUID, client: dict[str, str], now_ms: int
    ) -> ClientInstance:
        """The instance of that id, made (again) when new, expired or made before the
        subscriptions last changed."""
        self._expire(now_ms)
        instance = self.instances.get(instance_id)
        if instance is None or instance.subscription_version < self.version:
            known = instance.client if instance is not None else client
            instance = self._made(
                instance_id, {**known, "client_instance_id": kafka_uuid_text(instance_id)}
            )
            self.instances[instance_id] = instance
            while len(self.instances) > self.max_instances:
                self.instances.popitem(last=False)
                self.dropped += 1
        self.instances.move_to_end(instance_id)
        instance.seen_ms = now_ms
        return instance

    def _made(self, instance_id: uuid.UUID, client: dict[str, str]) -> ClientInstance:
        """An instance with the subscriptions that match it: their metrics together (every
        metric if one asks for all), the least of their intervals."""
        metrics: list[str] = []
        interval = DEFAULT_INTERVAL_MS
        for name in java_hash_order(self.subscriptions):
            subscription = self.subscriptions[name]
            if subscription.matches(client):
                metrics += subscription.metrics
                interval = min(interval, subscription.interval_ms)
        # Kafka answers with its HashSet of them, in that set's order.
        wanted = (ALL_METRICS,) if ALL_METRICS in metrics else tuple(java_hash_order(metrics))
        return ClientInstance(
            instance_id,
            subscription_id(wanted, interval, instance_id),
            wanted,
            interval,
            self.version,
            client,
        )

    def _expire(self, now_ms: int) -> None:
        """Forget the instances that have outlived their expiry, in the order they were last
        seen, up to the first still alive (the rest at a later request)."""
        while self.instances:
            oldest = next(iter(self.instances.values()))
            if now_ms - oldest.seen_ms < oldest.expiry_ms:
                return
            del self.instances[oldest.instance_id]


# Subscriptions as client-metrics config resources (ConfigResource type 16): what
# IncrementalAlterConfigs and AlterConfigs set (`kafka-client-metrics --alter`), DescribeConfigs
# reports and ListConfigResources lists, checked as Kafka 4.4.0's ClientMetricsConfigs checks
# them (the refusals and their words were read from a running Kafka 4.4.0's answers).

METRICS, INTERVAL, MATCH = "metrics", "interval.ms", "match"
CONFIG_DEFAULTS = {INTERVAL: str(DEFAULT_INTERVAL_MS), MATCH: "", METRICS: ""}
"""A subscription's configs, each with the value it has when not set."""
_LIST_SEPARATOR = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")
"""Java's `\\s*,\\s*`, which Kafka's ConfigDef splits a LIST value on."""


class ConfigRefused(ValueError):
    """Client-metrics configs Kafka refuses: its error and its words."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


def subscription_of(name: str, configs: Mapping[str, str]) -> Subscription:
    """The subscription a client-metrics resource's configs make, checked in Kafka's order:
    the name, unknown configs, each config's type (metrics, interval.ms, match, as its
    ConfigDef defines them), the interval's bounds, the match patterns."""
    if not name:
        raise ConfigRefused(ErrorCode.invalid_request, "Subscription name can't be empty")
    for key in configs:
        if key not in CONFIG_DEFAULTS:
            raise ConfigRefused(
                ErrorCode.invalid_request, f"Unknown client metrics configuration: {key}"
            )
    metrics = _listed(configs, METRICS)
    interval = _java_int(configs, INTERVAL)
    patterns = _listed(configs, MATCH)
    if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
        raise ConfigRefused(
            ErrorCode.invalid_request,
            f"Invalid value {interval} for interval.ms, interval must be between "
            f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)",
        )
    match: list[tuple[str, str]] = []
    for entry in patterns:
        try:
            match += parse_match(entry)
        except SubscriptionError:
            raise ConfigRefused(
                ErrorCode.invalid_config, f"Illegal client matching pattern: {entry}"
            ) from None
    shown = {METRICS: ",".join(metrics), INTERVAL: str(interval), MATCH: ",".join(patterns)}
    return Subscription(
        name,
        tuple(metrics),
        interval,
        tuple(match),
        tuple(sorted((key, shown[key]) for key in configs)),
    )


def _listed(configs: Mapping[str, str], key: str) -> list[str]:
    """A LIST config's entries, as Kafka's ConfigDef parses one (trimmed, split at commas,
    each once): an empty entry refused."""
    text = configs.get(key, "").strip()
    if not text:
        return []
    entries = _LIST_SEPARATOR.split(text)
    if "" in entries:
        raise ConfigRefused(
            ErrorCode.invalid_config, f"Configuration '{key}' values must not be empty."
        )
    return list(dict.fromkeys(entries))


def _java_int(configs: Mapping[str, str], key: str) -> int:
    """An INT config's value, as Kafka's ConfigDef parses one (kafka_configs.parse_value)."""
    try:
        return int(parse_value(key, ConfigType.INT, configs.get(key, CONFIG_DEFAULTS[key])))
    except InvalidConfig as error:
        raise ConfigRefused(ErrorCode.invalid_config, str(error)) from None


def configure(client_metrics: ClientMetrics, name: str, configs: Mapping[str, str]) -> None:
    """A client-metrics resource's configs as altered into its subscription: made (again)
    when they changed, removed when none is left (as Kafka deletes a resource without
    configs). Clients are given the change at their next request."""
    if not configs:
        client_metrics.unsubscribe(name)
        return
    made = subscription_of(name, configs)
    held = client_metrics.subscriptions.get(name)
    if held is None or held.set_configs() != made.set_configs():
        client_metrics.subscribe(made)


def configs_of(client_metrics: ClientMetrics, name: str) -> dict[str, str]:
    """The configs set on a client-metrics resource (none for a name never set)."""
    held = client_metrics.subscriptions.get(name)
    return {} if held is None else held.set_configs()


def subscription_names(client_metrics: ClientMetrics) -> list[str]:
    """The client-metrics resources, in the order Kafka lists them (a hash map's, by name)."""
    return java_hash_order(client_metrics.subscriptions)
