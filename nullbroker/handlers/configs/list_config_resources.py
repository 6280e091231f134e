"""ListConfigResources (KIP-1142; v0 was ListClientMetricsResources): the resources that have
configs, of the types asked (all of them for none), as Kafka 4.4 lists them: groups with
configs set, client-metrics subscriptions (KIP-714: --client-metrics' own among them, as
nullbroker-default), each broker's loggers, each broker, every topic (the internal ones too).
v0 lists client-metrics resources only.

Kafka lists the types in that order whatever order they are asked in, and the topics and
subscriptions in the order of its hash maps of them: by their names' Java hash codes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...java_hashing import java_string_hash
from ..common import NO_THROTTLE, counted
from .resources import (
    BROKER_LOGGER_RESOURCE,
    BROKER_RESOURCE,
    CLIENT_METRICS_RESOURCE,
    GROUP_RESOURCE,
    TOPIC_RESOURCE,
)

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.LIST_CONFIG_RESOURCES

LISTED_TYPES = (
    GROUP_RESOURCE,
    CLIENT_METRICS_RESOURCE,
    BROKER_LOGGER_RESOURCE,
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
)
"""The types Kafka 4.4 lists, in the order it lists them."""


def handle(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    types = response_module(ApiKey.LIST_CONFIG_RESOURCES, version)
    asked = set(getattr(request.body, "resource_types", (CLIENT_METRICS_RESOURCE,)))
    if asked - set(LISTED_TYPES):
        # As Kafka 4.4 answers a type it does not know.
        return make(
            types.ListConfigResourcesResponse,
            throttle_time=NO_THROTTLE,
            error_code=counted(broker, ErrorCode.unsupported_version),
            config_resources=(),
        )
    wanted = [kind for kind in LISTED_TYPES if not asked or kind in asked]
    return make(
        types.ListConfigResourcesResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        config_resources=tuple(
            make(types.ConfigResource, resource_name=name, resource_type=kind)
            for kind in wanted
            for name in _names(broker, kind)
        ),
    )


def _names(broker: Broker, kind: int) -> list[str]:
    if kind == GROUP_RESOURCE:
        configured = [group for group, set_ in broker.group_configs.by_group.items() if set_]
        return sorted(configured, key=java_string_hash)
    if kind in (BROKER_LOGGER_RESOURCE, BROKER_RESOURCE):
        return [str(node) for node in broker.cluster.nodes]
    if kind == TOPIC_RESOURCE:
        return sorted(broker.topics.names(), key=java_string_hash)
    from ...state.client_metrics import subscription_names

    return subscription_names(broker.client_metrics)
