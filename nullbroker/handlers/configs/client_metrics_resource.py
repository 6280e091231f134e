"""Client-metrics config resources (ConfigResource type 16, KIP-714): the subscriptions
`kafka-client-metrics --alter/--describe/--delete` (or `kafka-configs --entity-type
client-metrics`) set, read and remove, held as broker.client_metrics' subscriptions
(nullbroker.state.client_metrics), --client-metrics' own among them as nullbroker-default.

As Kafka 4.4.0 answers for them (read from a running one): every config described, those set
with source CLIENT_METRICS_CONFIG, the others at their default; IncrementalAlterConfigs sets
and deletes (APPEND and SUBTRACT are refused, as Kafka's controller refuses them for these
configs), a resource left without configs is removed; AlterConfigs replaces the set."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from ...state.client_metrics import (
    CONFIG_DEFAULTS,
    INTERVAL,
    MATCH,
    METRICS,
    ConfigRefused,
    configs_of,
    configure,
    subscription_of,
)
from ...state.kafka_configs import ConfigEntry, ConfigSource, ConfigType
from ..common import Refusal

if TYPE_CHECKING:
    from ...broker import Broker

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
LIST_OPERATIONS = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
TYPES = {INTERVAL: ConfigType.INT, MATCH: ConfigType.LIST, METRICS: ConfigType.LIST}
DOCUMENTATION = {
    INTERVAL: "Metrics push interval in milliseconds",
    MATCH: "Client match criteria",
    METRICS: "Telemetry metric name prefix list",
}
"""Kafka's own text for each config (ClientMetricsConfigs' ConfigDef)."""

Apply = Callable[[], None]


def entries(broker: Broker, name: str) -> list[ConfigEntry]:
    """DescribeConfigs' entries of a subscription, by name: those set, the others at their
    default (without synonyms); a name never set is described with every default."""
    if not name:
        raise Refusal(
            ErrorCode.invalid_request, "Client metrics subscription name must not be empty"
        )
    set_here = configs_of(broker.client_metrics, name)
    found = []
    for key, default in sorted(CONFIG_DEFAULTS.items()):
        if key in set_here:
            found.append(
                ConfigEntry(
                    key,
                    set_here[key],
                    TYPES[key],
                    ConfigSource.CLIENT_METRICS_CONFIG,
                    documentation=DOCUMENTATION[key],
                )
            )
        else:
            found.append(
                ConfigEntry(key, default, TYPES[key], documentation=DOCUMENTATION[key], synonyms=())
            )
    return found


def incremental_alteration(broker: Broker, resource: Any) -> Apply:
    """IncrementalAlterConfigs on a subscription: its configs set or deleted, checked whole
    once altered; what applies them (Refusal, in Kafka's words, where it refuses)."""
    name = resource.resource_name
    times_named = Counter(config.name for config in resource.configs)
    if any(count > 1 for count in times_named.values()):
        raise Refusal(ErrorCode.invalid_request, "Error due to duplicate config keys")
    altered = configs_of(broker.client_metrics, name)
    for config in resource.configs:
        operation = config.config_operation
        if operation == DELETE:
            altered.pop(config.name, None)
            continue
        if config.value is None:
            raise Refusal(
                ErrorCode.invalid_request, f"Null value not supported for : {config.name}"
            )
        if operation in LIST_OPERATIONS:
            raise Refusal(
                ErrorCode.invalid_config,
                f"Can't {LIST_OPERATIONS[operation]} to key {config.name} because its type is "
                "not LIST.",
            )
        if operation != SET:  # Kafka's controller fails on it, and says nothing more
            raise Refusal(ErrorCode.unknown_server_error, None)
        altered[config.name] = config.value
    return _checked(broker, name, altered)


def replacement(broker: Broker, resource: Any) -> Apply:
    """AlterConfigs on a subscription: its configs replaced by those given."""
    given = {}
    for config in resource.configs:
        if config.value is None:
            raise Refusal(
                ErrorCode.invalid_request, f"Null value not supported for : {config.name}"
            )
        given[config.name] = config.value
    return _checked(broker, resource.resource_name, given)


def _checked(broker: Broker, name: str, configs: Mapping[str, str]) -> Apply:
    try:
        subscription_of(name, configs)
    except ConfigRefused as refused:
        raise Refusal(refused.error, str(refused)) from None
    return lambda: configure(broker.client_metrics, name, configs)
