"""AlterConfigs, the legacy whole-set form that older admin libraries still send
(kafka-python's `alter_configs`, for one): each resource's overrides replaced by the set
given, those it does not name removed, as Kafka 4.4 does it, checked as
IncrementalAlterConfigs checks what it makes. Kafka words a few refusals otherwise here,
and nullbroker words them as it does."""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..common import NO_THROTTLE, Refusal, counted
from .incremental_alter_configs import current_overrides, message_max_bytes
from .resources import BROKER_RESOURCE, GROUP_RESOURCE, TOPIC_RESOURCE

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
    body = request.body
    named = Counter((resource.resource_type, resource.resource_name) for resource in body.resources)
    responses = []
    for resource in body.resources:
        error, message = ErrorCode.none, None
        try:
            if named[(resource.resource_type, resource.resource_name)] > 1:
                raise Refusal(
                    ErrorCode.invalid_request,
                    f"resource {resource.resource_name!r} is named more than once in the request",
                )
            current, check = _replaced(broker, resource, session.node_id)
            replacement = _replacement(resource)
            check(replacement)
            if not body.validate_only:
                current.clear()
                current.update(replacement)
                broker.topics.configs_changed(message_max_bytes(broker))
        except Refusal as refusal:
            error, message = refusal.error, refusal.message
            if message is not None:
                message = _SCALA_SET.sub(r"[\1]", message)
        responses.append(
            make(
                types.AlterConfigsResourceResponse,
                error_code=counted(broker, error),
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return make(types.AlterConfigsResponse, throttle_time=NO_THROTTLE, responses=tuple(responses))


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
