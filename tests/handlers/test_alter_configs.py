"""IncrementalAlterConfigs (what `kafka-configs --alter` sends): topic and broker configs
altered, checked as Kafka checks them, and reported back by DescribeConfigs."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.broker import Broker
from nullbroker.settings import Config
from tests.handlers.test_handlers import describe_configs
from tests.support.kio_calls import call, types

ALTER = 44
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
TIMEOUT = 30.0


def alter(
    broker: Broker,
    *resources: tuple[int, str, list[tuple[str, int, str | None]]],
    version: int = 1,
    validate_only: bool = False,
) -> list[Any]:
    t = types(ALTER, version)
    response = call(
        broker,
        ALTER,
        version,
        resources=tuple(
            t.AlterConfigsResource(
                resource_type=kind,
                resource_name=name,
                configs=tuple(
                    t.AlterableConfig(name=key, config_operation=op, value=value)
                    for key, op, value in configs
                ),
            )
            for kind, name, configs in resources
        ),
        validate_only=validate_only,
    )
    return list(response.responses)


def described(broker: Broker, kind: int, name: str) -> dict[str, tuple[str | None, int]]:
    result = describe_configs(broker, kind, name)
    return {entry.name: (entry.value, entry.config_source) for entry in result.configs}


@pytest.fixture
def broker() -> Broker:
    b = Broker(Config())
    b.topics.create("t")
    return b


def test_set_and_delete_a_topic_config_as_describe_configs_then_reports(broker: Broker) -> None:
    (result,) = alter(broker, (TOPIC, "t", [("retention.ms", SET, "1000")]))
    assert result.error_code is ErrorCode.none
    assert described(broker, TOPIC, "t")["retention.ms"] == ("1000", 1)  # DYNAMIC_TOPIC_CONFIG
    alter(broker, (TOPIC, "t", [("retention.ms", DELETE, None)]))
    assert described(broker, TOPIC, "t")["retention.ms"] == ("604800000", 5)  # DEFAULT_CONFIG


def test_append_and_subtract_work_on_list_configs_only(broker: Broker) -> None:
    alter(broker, (TOPIC, "t", [("cleanup.policy", SET, "delete")]))
    alter(broker, (TOPIC, "t", [("cleanup.policy", APPEND, "compact")]))
    assert described(broker, TOPIC, "t")["cleanup.policy"][0] == "delete,compact"
    alter(broker, (TOPIC, "t", [("cleanup.policy", SUBTRACT, "delete")]))
    assert described(broker, TOPIC, "t")["cleanup.policy"][0] == "compact"
    (refused,) = alter(broker, (TOPIC, "t", [("retention.ms", APPEND, "5")]))
    assert refused.error_code is ErrorCode.invalid_config
    assert "append is not allowed" in refused.error_message


def test_a_list_operation_on_a_config_not_set_starts_from_its_default(broker: Broker) -> None:
    # As Kafka 4.1.1: APPEND compact to cleanup.policy unset gives "delete,compact"; SUBTRACT
    # of a list's only item leaves it empty, which Kafka takes and describes as "".
    alter(broker, (TOPIC, "t", [("cleanup.policy", APPEND, "compact")]))
    assert described(broker, TOPIC, "t")["cleanup.policy"] == ("delete,compact", 1)
    alter(broker, (TOPIC, "t", [("cleanup.policy", SUBTRACT, "compact")]))
    assert described(broker, TOPIC, "t")["cleanup.policy"] == ("delete", 1)
    (emptied,) = alter(broker, (TOPIC, "t", [("cleanup.policy", SUBTRACT, "delete")]))
    assert emptied.error_code is ErrorCode.none
    assert described(broker, TOPIC, "t")["cleanup.policy"] == ("", 1)


@pytest.mark.parametrize(
    ("resource", "error", "says"),
    [
        (
            (TOPIC, "nope", [("retention.ms", SET, "1")]),
            ErrorCode.unknown_topic_or_partition,
            "nope",
        ),
        ((TOPIC, "t", [("retention.msec", SET, "1")]), ErrorCode.invalid_config, "retention.msec"),
        ((TOPIC, "t", [("retention.ms", SET, "soon")]), ErrorCode.invalid_config, "soon"),
        ((TOPIC, "t", [("preallocate", SET, "maybe")]), ErrorCode.invalid_config, "true or false"),
        ((TOPIC, "t", [("cleanup.policy", SET, "shred")]), ErrorCode.invalid_config, "one of"),
        (
            (TOPIC, "t", [("segment.bytes", SET, str(2**31))]),
            ErrorCode.invalid_config,
            "Not a number of type INT",  # as Kafka words an int out of range
        ),
        ((TOPIC, "t", [("retention.ms", SET, None)]), ErrorCode.invalid_request, "Null value"),
        (
            (TOPIC, "t", [("retention.ms", 9, "1")]),
            ErrorCode.invalid_request,
            "Unknown operations type 9",
        ),
        (
            (TOPIC, "t", [("retention.ms", SET, "1"), ("retention.ms", SET, "2")]),
            ErrorCode.invalid_request,
            "duplicate config keys",
        ),
        ((BROKER, "0", [("node.id", SET, "3")]), ErrorCode.invalid_request, "dynamically"),
        ((BROKER, "7", [("num.partitions", SET, "3")]), ErrorCode.invalid_request, "expected 0"),
        (
            (16, "x", [("a", SET, "1")]),
            ErrorCode.invalid_request,
            "client metrics configuration: a",
        ),
        ((64, "x", [("a", SET, "1")]), ErrorCode.invalid_request, "resource type 64"),
    ],
)
def test_what_kafka_refuses_is_refused_with_its_error_and_nothing_changes(
    broker: Broker, resource: Any, error: ErrorCode, says: str
) -> None:
    before = described(broker, TOPIC, "t")
    (result,) = alter(broker, resource)
    assert result.error_code is error
    assert says in result.error_message
    assert described(broker, TOPIC, "t") == before
    assert broker.stats.errors[error.name] == 1


def test_a_resource_named_twice_is_refused_both_times(broker: Broker) -> None:
    results = alter(
        broker,
        (TOPIC, "t", [("retention.ms", SET, "1")]),
        (TOPIC, "t", [("retention.ms", SET, "2")]),
    )
    assert [result.error_code for result in results] == [ErrorCode.invalid_request] * 2


def test_validate_only_checks_without_changing(broker: Broker) -> None:
    (result,) = alter(broker, (TOPIC, "t", [("retention.ms", SET, "1000")]), validate_only=True)
    assert result.error_code is ErrorCode.none
    assert described(broker, TOPIC, "t")["retention.ms"][1] == 5


def test_broker_configs_for_this_broker_and_for_every_broker(broker: Broker) -> None:
    alter(broker, (BROKER, "", [("message.max.bytes", SET, "2000000")]))
    assert described(broker, BROKER, "0")["message.max.bytes"] == ("2000000", 3)
    alter(broker, (BROKER, "0", [("message.max.bytes", SET, "3000000")]))
    assert described(broker, BROKER, "0")["message.max.bytes"] == ("3000000", 2)
    alter(broker, (BROKER, "0", [("message.max.bytes", DELETE, None)]))
    assert described(broker, BROKER, "0")["message.max.bytes"] == ("2000000", 3)


@pytest.mark.clients
def test_confluent_kafka_admin_alters_and_reads_back_a_topic_config(
    nullbroker_factory: StartBroker,
) -> None:
    process = nullbroker_factory()
    admin = AdminClient({"bootstrap.servers": process.bootstrap})
    created = admin.create_topics([NewTopic("cfg", 1)])
    created["cfg"].result(TIMEOUT)
    resource = ConfigResource(
        ResourceType.TOPIC,
        "cfg",
        incremental_configs=[
            ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT)
    (entries,) = (
        future.result(TIMEOUT)
        for future in admin.describe_configs([ConfigResource(ResourceType.TOPIC, "cfg")]).values()
    )
    assert entries["retention.ms"].value == "1000"
    assert entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    bad = ConfigResource(
        ResourceType.TOPIC,
        "cfg",
        incremental_configs=[
            ConfigEntry("retention.ms", "soon", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    (future,) = admin.incremental_alter_configs([bad]).values()
    with pytest.raises(Exception, match="soon"):
        future.result(TIMEOUT)
    del admin  # closed before the broker stops, so it does not retry a broker that left
    summary = process.stop()
    assert summary["requests"]["IncrementalAlterConfigs"] == 2
    assert summary["errors"] == {"invalid_config": 1}
