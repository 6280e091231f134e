"""CreateTopics: topics made, checked in Kafka's order (the name, whether it is taken, the
configs, partitions and replicas), and from v5 their configs reported."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...state.broker_configs import topic_entries
from ...state.kafka_configs import invalid_topic_configs_reason
from ...topic_names import invalid_name_reason
from ..common import NO_THROTTLE, Refusal, counted
from ..configs.resources import node_layers
from .partition_budget import check_partition_budget

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


DEFAULT = -1


KEY = ApiKey.CREATE_TOPICS


def handle(broker: Broker, request: Request, session: Session) -> Any:
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
            check_partition_budget(new_partitions)
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
