"""DescribeConfigs: a topic's, a broker's, a group's or a client-metrics subscription's
configs as Kafka reports them, with their sources, synonyms and (asked for) Kafka's
documentation of each."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...state.broker_configs import topic_entries
from ...state.kafka_configs import ConfigEntry
from ..common import NO_THROTTLE, Refusal, counted
from . import client_metrics_resource
from .resources import (
    BROKER_LOGGER_RESOURCE,
    BROKER_RESOURCE,
    CLIENT_METRICS_RESOURCE,
    GROUP_RESOURCE,
    TOPIC_RESOURCE,
    node_layers,
)

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.DESCRIBE_CONFIGS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.DESCRIBE_CONFIGS, request.header.api_version)
    body = request.body
    include_documentation = getattr(body, "include_documentation", False)
    include_synonyms = getattr(body, "include_synonyms", False)
    results = []
    for resource in body.resources:
        entries: list[ConfigEntry] = []
        error, message = ErrorCode.none, ""  # Kafka's result without an error: "", not null
        name = resource.resource_name
        if resource.resource_type == TOPIC_RESOURCE:
            topic = broker.topics.get(name)
            if topic is None:
                error = ErrorCode.unknown_topic_or_partition  # without a word, as Kafka 4.1.1
            else:
                entries = topic_entries(topic.configs, node_layers(broker, session.node_id))
        elif resource.resource_type == GROUP_RESOURCE:
            entries = broker.group_configs.entries(name)
        elif resource.resource_type == CLIENT_METRICS_RESOURCE:
            try:
                entries = client_metrics_resource.entries(broker, name)
            except Refusal as refusal:
                error, message = refusal.error, refusal.message
        elif resource.resource_type == BROKER_RESOURCE and not name:
            entries = node_layers(broker, session.node_id).every_broker_entries()
        elif resource.resource_type in (BROKER_RESOURCE, BROKER_LOGGER_RESOURCE):
            try:
                _own_node(name, session.node_id, resource.resource_type)
            except Refusal as refusal:
                error, message = refusal.error, refusal.message
            else:
                if resource.resource_type == BROKER_RESOURCE:
                    entries = node_layers(broker, session.node_id).entries()
        else:
            error = ErrorCode.invalid_request
            message = f"resource type {resource.resource_type} has no configuration here"
        keys = resource.configuration_keys
        if keys is not None:
            entries = [entry for entry in entries if entry.name in keys]
        results.append(
            make(
                types.DescribeConfigsResult,
                error_code=counted(broker, error),
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=tuple(
                    make(
                        types.DescribeConfigsResourceResult,
                        name=entry.name,
                        value=entry.value,
                        read_only=entry.read_only,
                        config_source=entry.source,
                        is_sensitive=entry.sensitive,
                        synonyms=tuple(
                            make(
                                types.DescribeConfigsSynonym,
                                name=synonym.name,
                                value=synonym.value,
                                source=synonym.source,
                            )
                            for synonym in entry.listed_synonyms()
                        )
                        if include_synonyms
                        else (),
                        config_type=entry.type,
                        documentation=_documentation(resource.resource_type, entry)
                        if include_documentation
                        else None,
                    )
                    for entry in entries
                ),
            )
        )
    return make(types.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=tuple(results))


def _own_node(name: str, node_id: int, resource_type: int) -> None:
    """A broker's resource is named by the broker asked, in Kafka's words otherwise (a
    broker logger's name may not be empty)."""
    if resource_type == BROKER_LOGGER_RESOURCE and not name:
        raise Refusal(ErrorCode.invalid_request, "Broker id must not be empty")
    if not re.fullmatch(r"[+-]?[0-9]+", name):
        raise Refusal(ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}")
    if int(name) != node_id:
        expected = str(node_id)
        if resource_type == BROKER_RESOURCE:
            expected += " or empty string"
        raise Refusal(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {expected}, but received {name}",
        )


def _documentation(resource_type: int, entry: ConfigEntry) -> str | None:
    """Kafka's own text for a config (the table nullbroker.kafka_reference.config_documentation,
    made from Kafka's answer, imported at the first request that asks); None where it has
    none."""
    if entry.documentation is not None:
        return entry.documentation
    from ...kafka_reference import config_documentation

    table = (
        config_documentation.TOPIC
        if resource_type == TOPIC_RESOURCE
        else config_documentation.BROKER
    )
    return table.get(entry.name)
