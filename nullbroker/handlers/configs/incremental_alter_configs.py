"""IncrementalAlterConfigs: topic, broker and group configs set, deleted, appended to,
subtracted from; client-metrics subscriptions (KIP-714) set and deleted
(handlers/configs/client_metrics_resource).

What `kafka-configs --alter` sends. nullbroker retains nothing, so altered configs change
what DescribeConfigs reports (and what CreateTopics v5+ echoes), and the one limit it
enforces: a topic's max.message.bytes, or the broker's message.max.bytes. They are checked
as Kafka checks them, so a script that Kafka would refuse is refused here too.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...state.broker_configs import (
    BROKER_CONFIGS,
    Refused,
    check_alteration,
    default_value,
)
from ...state.kafka_configs import (
    DEFAULT_MAX_MESSAGE_BYTES,
    TOPIC_DEFAULT_VALUES,
    TOPIC_TYPES,
    ConfigType,
    invalid_topic_configs_reason,
)
from ...state.share.configs import GROUP_CONFIGS, InvalidGroupConfig
from ..common import NO_THROTTLE, Refusal, counted
from . import client_metrics_resource
from .resources import BROKER_RESOURCE, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE, TOPIC_RESOURCE

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ...broker import Broker
    from ...sessions import Session


SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


OPERATION_NAMES = {SET: "set", DELETE: "delete", APPEND: "append", SUBTRACT: "subtract"}


KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.INCREMENTAL_ALTER_CONFIGS, request.header.api_version)

    def alteration(resource: Any) -> Apply:
        if resource.resource_type == CLIENT_METRICS_RESOURCE:
            return client_metrics_resource.incremental_alteration(broker, resource)
        current, types_of, defaults, check = current_overrides(broker, resource, session.node_id)
        altered = _altered(current, types_of, defaults, resource.configs)
        check(altered)
        return replacing(current, altered)

    return make(
        types.IncrementalAlterConfigsResponse,
        throttle_time=NO_THROTTLE,
        responses=alteration_responses(broker, request.body, types, alteration),
    )


Apply = Callable[[], None]
Alteration = Callable[[Any], Apply]
"""A resource of the request, to what applies its alteration, checked (raises Refusal)."""


def replacing(current: dict[str, str], altered: dict[str, str]) -> Apply:
    """What makes a resource's overrides now (`current`, altered in place) `altered`."""

    def apply() -> None:
        current.clear()
        current.update(altered)

    return apply


def alteration_responses(
    broker: Broker,
    body: Any,
    types: Any,
    alteration: Alteration,
    worded: Callable[[str | None], str | None] = lambda message: message,
) -> tuple[Any, ...]:
    """Each resource of an IncrementalAlterConfigs or AlterConfigs request altered (unless
    validate_only), and its response: a refusal's error and message (`worded` as the API
    words it), a resource named twice refused."""
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
            apply = alteration(resource)
            if not body.validate_only:
                apply()
                broker.topics.configs_changed(message_max_bytes(broker))
        except Refusal as refusal:
            error, message = refusal.error, worded(refusal.message)
        responses.append(
            make(
                types.AlterConfigsResourceResponse,
                error_code=counted(broker, error),
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return tuple(responses)


def message_max_bytes(broker: Broker) -> int:
    """The broker's message.max.bytes, the batch size limit of topics without their own: as
    set for this broker (on a cluster of one), else for every broker, else Kafka's default.
    On a cluster of several nodes a topic has one limit, whichever node leads a partition,
    so only the setting for every broker counts there."""
    configs = broker.broker_configs
    for name in ("0", "") if broker.cluster.size == 1 else ("",):
        value = configs.get(name, {}).get("message.max.bytes")
        if value is not None:
            return int(value.strip())
    return DEFAULT_MAX_MESSAGE_BYTES


Check = Callable[[dict[str, str]], None]


def current_overrides(
    broker: Broker, resource: Any, node_id: int
) -> tuple[dict[str, str], Mapping[str, ConfigType], Mapping[str, str], Check]:
    """The overrides a resource has now (altered in place), the configs it may have, their
    defaults, and the check of its overrides once altered."""
    name = resource.resource_name
    if resource.resource_type == TOPIC_RESOURCE:
        topic = broker.topics.get(name)
        if topic is None:
            raise Refusal(ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist.")
        return topic.configs, TOPIC_TYPES, TOPIC_DEFAULT_VALUES, _check_topic_configs
    if resource.resource_type == BROKER_RESOURCE:
        if name:
            own_broker(name, node_id)
        asked = {config.name for config in resource.configs}
        return (
            broker.broker_configs.setdefault(name, {}),
            BROKER_TYPES,
            BROKER_DEFAULTS,
            _broker_check(every_broker=not name, elr="min.insync.replicas" in asked),
        )
    if resource.resource_type == GROUP_RESOURCE:
        return (
            broker.group_configs.overrides(name),
            GROUP_TYPES,
            GROUP_DEFAULTS,
            _group_check(broker),
        )
    raise Refusal(
        ErrorCode.invalid_request,
        f"resource type {resource.resource_type} cannot be altered here (topics: 2, "
        "brokers: 4, client metrics: 16, groups: 32)",
    )


def _group_check(broker: Broker) -> Check:
    def check(altered: dict[str, str]) -> None:
        try:
            broker.group_configs.check(altered)
        except InvalidGroupConfig as refused:
            raise Refusal(ErrorCode.invalid_config, str(refused)) from None

    return check


def own_broker(name: str, node_id: int) -> None:
    """A broker resource names the broker asked (or "", every broker), as Kafka requires:
    Refusal otherwise, in Kafka's words."""
    if not re.fullmatch(r"[+-]?[0-9]+", name):
        raise Refusal(ErrorCode.invalid_request, f"Node id must be an integer, but it is: {name}")
    if int(name) != node_id:
        raise Refusal(
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {node_id}, but received {name}",
        )


GROUP_TYPES = {name: ConfigType[known.type.upper()] for name, known in GROUP_CONFIGS.items()}
GROUP_DEFAULTS = {name: known.default for name, known in GROUP_CONFIGS.items() if known.default}
BROKER_TYPES = {name: ConfigType(kind) for name, (kind, _, _) in BROKER_CONFIGS.items()}
BROKER_DEFAULTS = {
    name: default for name in BROKER_CONFIGS if (default := default_value(name)) is not None
}


def _check_topic_configs(altered: dict[str, str]) -> None:
    """As Kafka checks a topic's configs once altered: all of them, names first."""
    reason = invalid_topic_configs_reason(altered)
    if reason is not None:
        raise Refusal(ErrorCode.invalid_config, reason)


def _broker_check(every_broker: bool, elr: bool) -> Check:
    """As Kafka checks a broker resource's configs once altered (the broker, then its
    controller, which refuses min.insync.replicas for one broker while ELR is on)."""

    def check(altered: dict[str, str]) -> None:
        try:
            check_alteration(altered.items(), every_broker, elr_on_own=elr)
        except Refused as refused:
            error = ErrorCode.invalid_config if refused.config else ErrorCode.invalid_request
            raise Refusal(error, str(refused)) from None

    return check


def _altered(
    current: dict[str, str],
    types_of: Mapping[str, ConfigType],
    defaults: Mapping[str, str],
    configs: Any,
) -> dict[str, str]:
    """The overrides after applying `configs` to `current`, or a refusal, as Kafka checks
    the operations (names and values are checked after, all together)."""
    times_named = Counter(config.name for config in configs)
    duplicated = sorted(name for name, count in times_named.items() if count > 1)
    if duplicated:
        raise Refusal(
            ErrorCode.invalid_request, f"Error due to duplicate config keys: {duplicated}"
        )
    altered = dict(current)
    for config in configs:
        name, operation, value = config.name, config.config_operation, config.value
        if operation not in OPERATION_NAMES:
            raise Refusal(ErrorCode.invalid_request, f"Unknown operations type {operation}")
        if operation == DELETE:  # Kafka deletes a name it does not know without a word
            altered.pop(name, None)
            continue
        if value is None:
            raise Refusal(ErrorCode.invalid_request, f"Null value not supported for : {name}")
        if operation in (APPEND, SUBTRACT):
            if types_of.get(name) is not ConfigType.LIST:
                raise Refusal(
                    ErrorCode.invalid_config,
                    f"Config value {OPERATION_NAMES[operation]} is not allowed for config "
                    f"key: {name}",
                )
            # Kafka appends to (and subtracts from) the default when nothing is set.
            value = _list_operation(altered.get(name, defaults.get(name)), operation, value)
        altered[name] = value
    return altered


def _list_operation(current: str | None, operation: int, value: str) -> str:
    items = [item for item in (current or "").split(",") if item]
    given = [item.strip() for item in value.split(",") if item.strip()]
    if operation == APPEND:
        items += [item for item in given if item not in items]
    else:
        items = [item for item in items if item not in given]
    return ",".join(items)
