"""AlterConfigs, the legacy whole-set form that older admin libraries still send
(kafka-python's `alter_configs`, for one): each resource's overrides replaced by the set
given, those it does not name removed, as Kafka 4.4 does it, checked as
IncrementalAlterConfigs checks what it makes. Kafka words a few refusals otherwise here,
and nullbroker words them as it does."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..common import NO_THROTTLE, Refusal
from . import client_metrics_resource
from .incremental_alter_configs import Apply, alteration_responses, current_overrides, replacing
from .resources import BROKER_RESOURCE, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE, TOPIC_RESOURCE

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.ALTER_CONFIGS

CLUSTER_MIN_INSYNC = "Cluster-level min.insync.replicas cannot be removed while ELR is enabled."
"""Kafka 4.4 finalizes eligible leader replicas, and then refuses a replacement of every
broker's configs that drops the min.insync.replicas its cluster was formatted with."""
_SCALA_SET = re.compile(r"\b(?:Hash)?Set\((.*)\)$")
"""IncrementalAlterConfigs lists refused names as Scala prints a set, AlterConfigs as Java
prints a list: "Set(log.dirs)" there is "[log.dirs]" here."""


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.ALTER_CONFIGS, request.header.api_version)

    def alteration(resource: Any) -> Apply:
        if resource.resource_type == CLIENT_METRICS_RESOURCE:
            return client_metrics_resource.replacement(broker, resource)
        current, check = _replaced(broker, resource, session.node_id)
        replacement = _replacement(resource)
        check(replacement)
        return replacing(current, replacement)

    return make(
        types.AlterConfigsResponse,
        throttle_time=NO_THROTTLE,
        responses=alteration_responses(broker, request.body, types, alteration, _java_lists),
    )


def _java_lists(message: str | None) -> str | None:
    return None if message is None else _SCALA_SET.sub(r"[\1]", message)


def _replaced(broker: Broker, resource: Any, node_id: int) -> tuple[dict[str, str], Any]:
    """The overrides the resource has now and the check of their replacement."""
    kind, name = resource.resource_type, resource.resource_name
    if kind not in (TOPIC_RESOURCE, BROKER_RESOURCE, GROUP_RESOURCE):
        raise Refusal(ErrorCode.invalid_request, f"Unknown resource type {kind}")
    if kind == TOPIC_RESOURCE and broker.topics.get(name) is None:
        raise Refusal(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
    current, _, _, check = current_overrides(broker, resource, node_id)
    if kind == BROKER_RESOURCE and not name:
        every_broker_check = check

        def check(replacement: dict[str, str]) -> None:
            if "min.insync.replicas" not in replacement:
                raise Refusal(ErrorCode.invalid_config, CLUSTER_MIN_INSYNC)
            every_broker_check(replacement)

    return current, check


def _replacement(resource: Any) -> dict[str, str]:
    """The configs given, by name; a null value refused in Kafka's words."""
    replacement = {}
    for config in resource.configs:
        if config.value is None:
            raise Refusal(
                ErrorCode.invalid_request, f"Null value not supported for : {config.name}"
            )
        replacement[config.name] = config.value
    return replacement
