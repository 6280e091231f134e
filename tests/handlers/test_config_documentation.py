"""DescribeConfigs with include_documentation: Kafka's own text for each config (null when not
asked, as Kafka answers), from the table scripts/kafka_config_docs.py makes from Kafka's
answer; and that table is what Apache Kafka 4.1.1 answers today."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from nullbroker.broker import Broker
from nullbroker.kafka_reference import config_documentation
from nullbroker.settings import Config
from perf.kafka_broker import KafkaBroker
from tests.handlers.test_handlers import produce
from tests.support.kio_calls import call, record_batch, types

DESCRIBE_CONFIGS, TOPIC_RESOURCE, BROKER_RESOURCE = 32, 2, 4
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "kafka_config_docs.py"


def config_entries(
    broker: Broker, resource_type: int, name: str, documentation: bool = False
) -> dict[str, Any]:
    """DescribeConfigs v4 of one resource: its entries by config name."""
    t = types(DESCRIBE_CONFIGS, 4)
    resource = t.DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=None
    )
    response = call(
        broker, DESCRIBE_CONFIGS, 4,
        resources=(resource,), include_synonyms=False, include_documentation=documentation,
    )  # fmt: skip
    (result,) = response.results
    assert result.error_code.value == 0, result.error_message
    return {entry.name: entry for entry in result.configs}


def described(broker: Broker, resource_type: int, name: str, documentation: bool) -> dict[str, Any]:
    entries = config_entries(broker, resource_type, name, documentation)
    return {name: entry.documentation for name, entry in entries.items()}


@pytest.mark.parametrize(("resource_type", "name"), [(TOPIC_RESOURCE, "t"), (BROKER_RESOURCE, "0")])
def test_documentation_is_kafkas_text_when_asked_and_null_otherwise(
    resource_type: int, name: str
) -> None:
    broker = Broker(Config())
    produce(broker, "t", 0, record_batch(1))
    texts = described(broker, resource_type, name, documentation=True)
    table = (
        config_documentation.TOPIC
        if resource_type == TOPIC_RESOURCE
        else config_documentation.BROKER
    )
    assert texts == {config: table.get(config) for config in texts}
    assert all(texts[config] for config in texts if config in table)
    assert set(described(broker, resource_type, name, documentation=False).values()) == {None}


def test_a_topic_config_reads_as_kafka_words_it() -> None:
    broker = Broker(Config())
    produce(broker, "t", 0, record_batch(1))
    texts = described(broker, TOPIC_RESOURCE, "t", documentation=True)
    assert texts["compression.type"] == (
        "Specify the final compression type for a given topic. This configuration accepts the "
        "standard compression codecs ('gzip', 'snappy', 'lz4', 'zstd'). It additionally accepts "
        "'uncompressed' which is equivalent to no compression; and 'producer' which means "
        "retain the original compression codec set by the producer."
    )


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kafka_config_docs", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SET_BY_THE_FIXTURE = frozenset({"log.initial.task.delay.ms"})
"""Internal broker configs Kafka lists only where they are set, as perf.kafka_broker sets
them (a Kafka started without them, as the table's was, does not list them)."""


def test_the_table_is_what_kafka_answers(kafka: KafkaBroker) -> None:
    topics, brokers = generator().kafka_documentation(kafka.bootstrap)
    assert topics == config_documentation.TOPIC
    listed = {name: text for name, text in brokers.items() if name not in SET_BY_THE_FIXTURE}
    assert listed == config_documentation.BROKER
