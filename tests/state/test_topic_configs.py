"""Topic configs checked as Kafka 4.1 checks them, on CreateTopics and
IncrementalAlterConfigs: unknown names, values that do not parse, values out of range, enums,
settings that conflict; each refused with INVALID_CONFIG and Kafka's own words (the messages
below are what Kafka 4.1.1 answered), and the same requests asked of a real Kafka."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
import trio
from kio.schema.errors import ErrorCode

from codec import ApiKey
from nullbroker.broker import Broker
from nullbroker.settings import Config
from perf.kafka_broker import KafkaBroker
from tests.support.kafka_wire import FrameStream
from tests.support.kio_calls import call, types

TOPIC_RESOURCE = 2
SET, DELETE, APPEND = 0, 1, 2

REFUSED: list[tuple[dict[str, str], str]] = [
    ({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
    (
        {"retention.ms": "not-a-number"},
        "Invalid value not-a-number for configuration retention.ms: Not a number of type LONG",
    ),
    (
        {"retention.ms": "-5"},
        "Invalid value -5 for configuration retention.ms: Value must be at least -1",
    ),
    (
        {"retention.ms": "1_000"},
        "Invalid value 1_000 for configuration retention.ms: Not a number of type LONG",
    ),
    (
        {"max.message.bytes": "-1"},
        "Invalid value -1 for configuration max.message.bytes: Value must be at least 0",
    ),
    (
        {"max.message.bytes": "2147483648"},
        "Invalid value 2147483648 for configuration max.message.bytes: Not a number of type INT",
    ),
    (
        {"segment.bytes": "100"},
        "Invalid value 100 for configuration segment.bytes: Value must be at least 1048576",
    ),
    (
        {"cleanup.policy": "compact,foo"},
        "Invalid value foo for configuration cleanup.policy: "
        "String must be one of: compact, delete",
    ),
    (
        {"compression.type": "GZIP"},
        "Invalid value GZIP for configuration compression.type: String must be one of: "
        "uncompressed, zstd, lz4, snappy, gzip, producer",
    ),
    (
        {"message.timestamp.type": "foo"},
        "Invalid value foo for configuration message.timestamp.type: String must be one of: "
        "CreateTime, LogAppendTime",
    ),
    (
        {"min.cleanable.dirty.ratio": "2"},
        "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: "
        "Value must be no more than 1",
    ),
    (
        {"min.cleanable.dirty.ratio": "abc"},
        "Invalid value abc for configuration min.cleanable.dirty.ratio: "
        "Not a number of type DOUBLE",
    ),
    (
        {"preallocate": "maybe"},
        "Invalid value maybe for configuration preallocate: "
        "Expected value to be either true or false",
    ),
    (
        {"compression.gzip.level": "99"},
        "Invalid value 99 for configuration compression.gzip.level: Value must be between 1 and 9 "
        "or equal to -1",
    ),
    (
        {"compression.zstd.level": "99"},
        "Invalid value 99 for configuration compression.zstd.level: Value must be no more than 22",
    ),
    (
        {"leader.replication.throttled.replicas": "foo"},
        "Invalid value [foo] for configuration leader.replication.throttled.replicas: "
        "leader.replication.throttled.replicas must be the literal '*' or a list of replicas in "
        "the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...",
    ),
    (
        {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
        "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)",
    ),
    (
        {"remote.storage.enable": "true"},
        "Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
        "with remote log storage.",
    ),
    # Every name first, then the values in the order Kafka defines them.
    ({"retention.ms": "abc", "no.such": "1"}, "Unknown topic config name: no.such"),
    (
        {"max.message.bytes": "abc", "retention.ms": "abc"},
        "Invalid value abc for configuration retention.ms: Not a number of type LONG",
    ),
    (
        {"retention.ms": "abc", "segment.bytes": "abc"},
        "Invalid value abc for configuration segment.bytes: Not a number of type INT",
    ),
]
ACCEPTED: list[dict[str, str]] = [
    {"retention.ms": "-1"},
    {"retention.ms": " 1000 "},
    {"retention.ms": "+5"},
    {"max.message.bytes": "0"},
    {"cleanup.policy": "compact, delete"},
    {"cleanup.policy": ""},
    {"compression.type": " gzip "},
    {"min.cleanable.dirty.ratio": "1e-1"},
    {"preallocate": "TRUE"},
    {"leader.replication.throttled.replicas": "0:1,1:1"},
    {"internal.segment.bytes": "100"},
]


def create_topics_fields(
    topics: list[tuple[str, dict[str, str | None]]], validate_only: bool
) -> dict[str, Any]:
    """A CreateTopics v7 request's fields: each topic of one partition, one replica."""
    t = types(ApiKey.CREATE_TOPICS, 7)
    return {
        "topics": tuple(
            t.CreatableTopic(
                name=name,
                num_partitions=1,
                replication_factor=1,
                assignments=(),
                configs=tuple(t.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()),
            )
            for name, configs in topics
        ),
        "timeout": datetime.timedelta(seconds=10),
        "validate_only": validate_only,
    }


def create(broker: Broker, configs: dict[str, str | None], validate_only: bool = False) -> Any:
    fields = create_topics_fields([("t", configs)], validate_only)
    (result,) = call(broker, ApiKey.CREATE_TOPICS, 7, **fields).topics
    return result


def alter(broker: Broker, configs: list[tuple[str, int, str | None]]) -> Any:
    t = types(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1)
    resource = t.AlterConfigsResource(
        resource_type=TOPIC_RESOURCE,
        resource_name="t",
        configs=tuple(
            t.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in configs
        ),
    )
    (result,) = call(
        broker, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, resources=(resource,), validate_only=False
    ).responses
    return result


@pytest.mark.parametrize("validate_only", [False, True])
@pytest.mark.parametrize(("configs", "message"), REFUSED)
def test_create_topics_refuses_what_kafka_refuses_in_its_words(
    configs: dict[str, str], message: str, validate_only: bool
) -> None:
    broker = Broker(Config())
    result = create(broker, dict(configs), validate_only)
    assert (result.error_code, result.error_message) == (ErrorCode.invalid_config, message)
    assert result.num_partitions == -1
    assert broker.topics.get("t") is None
    assert broker.stats.errors == {"invalid_config": 1}


@pytest.mark.parametrize("configs", ACCEPTED)
def test_create_topics_takes_what_kafka_takes(configs: dict[str, str]) -> None:
    broker = Broker(Config())
    result = create(broker, dict(configs))
    assert result.error_code is ErrorCode.none
    topic = broker.topics.get("t")
    assert topic is not None
    assert topic.configs == configs


def test_create_topics_names_every_null_config() -> None:
    result = create(Broker(Config()), {"retention.ms": None, "segment.ms": None})
    assert result.error_code is ErrorCode.invalid_config
    assert (
        result.error_message
        == "Null value not supported for topic configs: retention.ms,segment.ms"
    )


def test_configs_are_checked_after_the_name_and_before_the_partitions() -> None:
    broker = Broker(Config())
    broker.topics.create("taken")
    fields = create_topics_fields([("taken", {"retention.ms": "abc"})], validate_only=False)
    (taken,) = call(broker, ApiKey.CREATE_TOPICS, 7, **fields).topics
    assert taken.error_code is ErrorCode.topic_already_exists
    t = types(ApiKey.CREATE_TOPICS, 7)
    no_partitions = t.CreatableTopic(
        name="t",
        num_partitions=0,
        replication_factor=3,
        assignments=(),
        configs=(t.CreatableTopicConfig(name="retention.ms", value="abc"),),
    )
    (result,) = call(
        broker,
        ApiKey.CREATE_TOPICS,
        7,
        topics=(no_partitions,),
        timeout=datetime.timedelta(seconds=10),
        validate_only=False,
    ).topics
    assert result.error_code is ErrorCode.invalid_config


@pytest.mark.parametrize(("configs", "message"), REFUSED)
def test_incremental_alter_configs_refuses_what_kafka_refuses_in_its_words(
    configs: dict[str, str], message: str
) -> None:
    broker = Broker(Config())
    broker.topics.create("t")
    result = alter(broker, [(name, SET, value) for name, value in configs.items()])
    assert (result.error_code, result.error_message) == (ErrorCode.invalid_config, message)
    assert broker.topics.get("t").configs == {}


def test_incremental_alter_configs_checks_the_topics_configs_once_altered() -> None:
    broker = Broker(Config())
    broker.topics.create("t")
    assert alter(broker, [("max.compaction.lag.ms", SET, "5")]).error_code is ErrorCode.none
    conflict = alter(broker, [("min.compaction.lag.ms", SET, "10")])
    assert conflict.error_message == (
        "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"
    )
    appended = alter(broker, [("cleanup.policy", APPEND, "shred")])
    assert appended.error_message == (
        "Invalid value shred for configuration cleanup.policy: String must be one of: "
        "compact, delete"
    )
    # Kafka deletes a name it does not know without a word.
    assert alter(broker, [("no.such", DELETE, None)]).error_code is ErrorCode.none
    assert broker.topics.get("t").configs == {"max.compaction.lag.ms": "5"}


# --- the same requests, asked of Kafka 4.1 --------------------------------------------------


async def kafka_results(
    kafka: KafkaBroker, topics: list[tuple[str, dict[str, str | None]]]
) -> list[tuple[int, str | None]]:
    host, port = kafka.bootstrap.rsplit(":", 1)
    stream = FrameStream(await trio.open_tcp_stream(host, int(port)))
    try:
        request = types(ApiKey.CREATE_TOPICS, 7).CreateTopicsRequest(
            **create_topics_fields(topics, validate_only=True)
        )
        response = await stream.request(request)
    finally:
        await stream.aclose()
    return [(int(topic.error_code), topic.error_message) for topic in response.topics]


async def test_kafka_answers_create_topics_as_nullbroker_does(kafka: KafkaBroker) -> None:
    cases: list[dict[str, str | None]] = [dict(configs) for configs, _ in REFUSED]
    cases += [dict(configs) for configs in ACCEPTED]
    cases.append({"retention.ms": None, "segment.ms": None})
    topics = [(f"topic-configs-{index}", configs) for index, configs in enumerate(cases)]
    fields = create_topics_fields(topics, validate_only=True)
    ours = [
        (int(topic.error_code), topic.error_message)
        for topic in call(Broker(Config()), ApiKey.CREATE_TOPICS, 7, **fields).topics
    ]
    assert ours == await kafka_results(kafka, topics)
