"""Topic administration: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs."""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..state.broker_configs import topic_entries
from ..state.kafka_configs import ConfigEntry, invalid_topic_configs_reason
from ..topic_names import invalid_name_reason
from .alter_configs import node_layers
from .common import NO_THROTTLE, Refusal, counted

if TYPE_CHECKING:
    from ..broker import Broker, Session


DEFAULT = -1
# Kafka's controller refuses more new partitions than this in one request.
MAX_PARTITIONS_PER_REQUEST = 10_000
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
BROKER_LOGGER_RESOURCE = 8


def handle_create_topics(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.CREATE_TOPICS, request.header.api_version)
    body = request.body
    times_named = Counter(topic.name for topic in body.topics)
    new_partitions = 0
    results = []
    for wanted in body.topics:
        topic_id = None
        partitions = DEFAULT
        replication = DEFAULT
        # CreateTopics v5+ reports a topic's configuration: none (not null) if it failed.
        reports_configs = hasattr(types, "CreatableTopicConfigs")
        configs: tuple[Any, ...] | None = () if reports_configs else None
        try:
            if times_named[wanted.name] > 1:
                raise Refusal(
                    ErrorCode.invalid_request,
                    f"topic {wanted.name!r} is named more than once in the request",
                )
            # In Kafka's order: the name, whether it is taken, the configs, then partitions
            # and replicas.
            reason = invalid_name_reason(wanted.name)
            if reason:
                raise Refusal(ErrorCode.invalid_topic_exception, reason)
            if broker.topics.get(wanted.name) is not None:
                raise Refusal(
                    ErrorCode.topic_already_exists, f"topic {wanted.name!r} already exists"
                )
            overrides = _checked_configs(wanted.configs)
            partitions = _partition_count(broker, wanted)
            new_partitions += partitions
            _check_partition_budget(new_partitions)
            _check_replication(wanted)
            if not body.validate_only:
                topic_id = broker.topics.create(wanted.name, partitions, overrides).id
            replication = 1
            configs = (
                None
                if not reports_configs
                else tuple(
                    make(
                        types.CreatableTopicConfigs,
                        name=entry.name,
                        value=entry.value,
                        read_only=entry.read_only,
                        config_source=entry.source,
                        is_sensitive=False,
                    )
                    for entry in topic_entries(overrides, node_layers(broker, session.node_id))
                )
            )
            error, message = ErrorCode.none, None
        except Refusal as refusal:
            error, message = refusal.error, refusal.message
            partitions = DEFAULT
        results.append(
            make(
                types.CreatableTopicResult,
                name=wanted.name,
                topic_id=topic_id,
                error_code=counted(broker, error),
                error_message=message,
                num_partitions=partitions,
                replication_factor=replication,
                configs=configs,
            )
        )
    return make(types.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=tuple(results))


def _checked_configs(configs: Any) -> dict[str, str]:
    """A new topic's configs, refused as Kafka 4.1 refuses them (null values, unknown names,
    values that do not parse or are out of range, settings that conflict)."""
    nulls = [config.name for config in configs if config.value is None]
    if nulls:
        raise Refusal(
            ErrorCode.invalid_config,
            f"Null value not supported for topic configs: {','.join(nulls)}",
        )
    overrides = {config.name: config.value for config in configs}
    reason = invalid_topic_configs_reason(overrides)
    if reason is not None:
        raise Refusal(ErrorCode.invalid_config, reason)
    return overrides


def _partition_count(broker: Broker, wanted: Any) -> int:
    if wanted.assignments:
        if wanted.num_partitions != DEFAULT or wanted.replication_factor != DEFAULT:
            raise Refusal(
                ErrorCode.invalid_request,
                "give either replica assignments or partitions and replication factor",
            )
        return len(wanted.assignments)
    if wanted.num_partitions == DEFAULT:
        return broker.config.partitions
    if wanted.num_partitions < 1:
        raise Refusal(
            ErrorCode.invalid_partitions,
            f"number of partitions must be at least 1, not {wanted.num_partitions}",
        )
    return int(wanted.num_partitions)


def _check_partition_budget(new_partitions: int) -> None:
    if new_partitions > MAX_PARTITIONS_PER_REQUEST:
        raise Refusal(
            ErrorCode.policy_violation,
            f"excessively large number of partitions per request: {new_partitions} "
            f"(at most {MAX_PARTITIONS_PER_REQUEST})",
        )


def _check_replication(wanted: Any) -> None:
    factor = wanted.replication_factor
    if factor in (DEFAULT, 1) or wanted.assignments:
        return
    if factor < 1:
        raise Refusal(
            ErrorCode.invalid_replication_factor,
            f"replication factor must be at least 1, not {factor}",
        )
    raise Refusal(
        ErrorCode.invalid_replication_factor,
        f"replication factor {factor} cannot be reached: nullbroker is a single broker",
    )


def handle_delete_topics(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.DELETE_TOPICS, request.header.api_version)
    body = request.body
    if hasattr(body, "topics"):  # v6+: by name or by id
        wanted = [(state.name, state.topic_id) for state in body.topics]
    else:
        wanted = [(name, None) for name in body.topic_names]
    results = []
    for name, topic_id in wanted:
        if name is not None:
            topic = broker.topics.get(name)
            missing = ErrorCode.unknown_topic_or_partition
        else:
            topic = broker.topics.by_id(topic_id) if topic_id is not None else None
            missing = ErrorCode.unknown_topic_id
        if topic is None:
            error, message = missing, f"topic {name or topic_id} does not exist"
        else:
            broker.topics.delete(topic)
            broker.producers.forget_topic(topic.name)
            name, topic_id = topic.name, topic.id
            error, message = ErrorCode.none, None
        results.append(
            make(
                types.DeletableTopicResult,
                name=name,
                topic_id=topic_id,
                error_code=counted(broker, error),
                error_message=message,
            )
        )
    return make(types.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=tuple(results))


def handle_create_partitions(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.CREATE_PARTITIONS, request.header.api_version)
    body = request.body
    results = []
    new_partitions = 0
    for wanted in body.topics:
        topic = broker.topics.get(wanted.name)
        try:
            if topic is None:
                # Kafka 4.1.1 says no more than the error code here.
                raise Refusal(ErrorCode.unknown_topic_or_partition, None)
            if wanted.count <= len(topic.partitions):
                raise Refusal(
                    ErrorCode.invalid_partitions,
                    f"topic {wanted.name!r} has {len(topic.partitions)} partitions; "
                    f"the new count must be higher, not {wanted.count}",
                )
            new_partitions += wanted.count - len(topic.partitions)
            _check_partition_budget(new_partitions)
            if not body.validate_only:
                topic.add_partitions(wanted.count)
            error, message = ErrorCode.none, None
        except Refusal as refusal:
            error, message = refusal.error, refusal.message
        results.append(
            make(
                types.CreatePartitionsTopicResult,
                name=wanted.name,
                error_code=counted(broker, error),
                error_message=message,
            )
        )
    return make(types.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=tuple(results))


def handle_describe_configs(broker: Broker, request: Request, session: Session) -> Any:
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
    """Kafka's own text for a config (the table nullbroker.state.config_documentation, made from
    Kafka's answer, imported at the first request that asks); None where it has none."""
    if entry.documentation is not None:
        return entry.documentation
    from ..state import config_documentation

    table = (
        config_documentation.TOPIC
        if resource_type == TOPIC_RESOURCE
        else config_documentation.BROKER
    )
    return table.get(entry.name)


HANDLERS = {
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
    ApiKey.DESCRIBE_CONFIGS: handle_describe_configs,
}
