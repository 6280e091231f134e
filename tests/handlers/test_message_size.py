"""The largest record batch a topic takes: its max.message.bytes, else the broker's
message.max.bytes, compared with the batch's whole size (its 12-byte log overhead included)
as Kafka 4.1's UnifiedLog compares them. A batch over it is answered MESSAGE_TOO_LARGE with
base offset -1, log start offset -1 and no message, and nothing is appended (what Kafka
4.1.1 answered when asked the same). With acks=0 the connection is closed instead, as Kafka
closes it."""

from __future__ import annotations

import datetime
import subprocess
from typing import Any

import pytest
import trio
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode

from codec import ApiKey
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.broker import Broker
from nullbroker.handlers.log.produce import RefusedWithoutAcks
from nullbroker.settings import Config
from perf.java_perf import BIN
from perf.kafka_broker import KafkaBroker
from tests.state.test_topic_configs import create_topics_fields
from tests.support.kafka_tools import TOOL_TIMEOUT, requires_kafka_tools, run_tool
from tests.support.kafka_wire import FrameStream
from tests.support.kio_calls import SESSION, call, dispatch_of, record_batch, request_frame, types

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
SET, DELETE = 0, 1
DEFAULT_LIMIT = 1048588
SMALL = {"max.message.bytes": "2000"}
TIMEOUT = 30.0


def batch_of(size: int) -> bytes:
    """A one-record batch of exactly `size` bytes."""
    overhead = len(record_batch(1, value=b""))
    for extra in range(8):  # the record's varint lengths grow with the value
        batch = record_batch(1, value=b"x" * (size - overhead - extra))
        if len(batch) == size:
            return batch
    raise AssertionError(f"no one-record batch of {size} bytes")


def produce_fields(batches: dict[str, bytes], version: int = 9, acks: int = -1) -> dict[str, Any]:
    """A Produce request's fields: one batch to partition 0 of each topic."""
    t = types(ApiKey.PRODUCE, version)
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout": datetime.timedelta(seconds=5),
        "topic_data": tuple(
            t.TopicProduceData(
                name=topic, partition_data=(t.PartitionProduceData(index=0, records=batch),)
            )
            for topic, batch in batches.items()
        ),
    }


def produce(broker: Broker, topic: str, batch: bytes, version: int = 9) -> Any:
    response = call(broker, ApiKey.PRODUCE, version, **produce_fields({topic: batch}, version))
    return response.responses[0].partition_responses[0]


def alter(broker: Broker, kind: int, name: str, key: str, operation: int, value: str | None) -> Any:
    t = types(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1)
    config = t.AlterableConfig(name=key, config_operation=operation, value=value)
    resource = t.AlterConfigsResource(resource_type=kind, resource_name=name, configs=(config,))
    response = call(
        broker, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, resources=(resource,), validate_only=False
    )
    assert response.responses[0].error_code is ErrorCode.none
    return response


def create_topic(broker: Broker, name: str, configs: dict[str, str]) -> None:
    response = call(
        broker, ApiKey.CREATE_TOPICS, 7, **create_topics_fields([(name, dict(configs))], False)
    )
    assert response.topics[0].error_code is ErrorCode.none


@pytest.fixture(params=["lane", "python"])
def broker(request: pytest.FixtureRequest) -> Broker:
    """A broker with the Produce lane (when built), and one whose Python path answers all."""
    made = Broker(Config())
    if request.param == "python":
        dispatch_of(made).produce_lane = None
    create_topic(made, "small", SMALL)
    return made


@pytest.mark.parametrize("version", [3, 7, 8, 9, 12])
def test_a_batch_over_the_topics_max_message_bytes_is_refused_and_not_appended(
    broker: Broker, version: int
) -> None:
    accepted = produce(broker, "small", batch_of(2000), version)
    assert accepted.error_code is ErrorCode.none
    assert accepted.base_offset == 0
    refused = produce(broker, "small", batch_of(2001), version)
    assert refused.error_code is ErrorCode.message_too_large
    assert refused.base_offset == -1
    if version >= 5:
        assert refused.log_start_offset == -1
    if version >= 8:
        assert refused.error_message is None
        assert refused.record_errors == ()
    partition = broker.topics.get("small").partitions[0]
    assert partition.log_end_offset == 1
    assert (partition.produced.records, partition.produced.bytes) == (1, 2000)
    assert broker.stats.errors == {"message_too_large": 1}


def test_a_topic_without_its_own_limit_has_the_brokers_message_max_bytes(broker: Broker) -> None:
    broker.topics.get_or_auto_create("plain")
    assert produce(broker, "plain", batch_of(DEFAULT_LIMIT)).error_code is ErrorCode.none
    too_large = produce(broker, "plain", batch_of(DEFAULT_LIMIT + 1))
    assert too_large.error_code is ErrorCode.message_too_large
    alter(broker, BROKER_RESOURCE, "", "message.max.bytes", SET, "3000")  # every broker
    assert produce(broker, "plain", batch_of(3001)).error_code is ErrorCode.message_too_large
    assert produce(broker, "plain", batch_of(3000)).error_code is ErrorCode.none
    broker.topics.get_or_auto_create("later")  # created after: the same limit
    assert produce(broker, "later", batch_of(3001)).error_code is ErrorCode.message_too_large
    alter(broker, BROKER_RESOURCE, "0", "message.max.bytes", SET, "5000")  # this broker
    assert produce(broker, "plain", batch_of(5000)).error_code is ErrorCode.none
    small = produce(broker, "small", batch_of(2001))  # its own max.message.bytes wins
    assert small.error_code is ErrorCode.message_too_large


def test_altering_max_message_bytes_takes_effect_at_once(broker: Broker) -> None:
    alter(broker, TOPIC_RESOURCE, "small", "max.message.bytes", SET, "3000")
    assert produce(broker, "small", batch_of(3000)).error_code is ErrorCode.none
    assert produce(broker, "small", batch_of(3001)).error_code is ErrorCode.message_too_large
    alter(broker, TOPIC_RESOURCE, "small", "max.message.bytes", SET, "100")
    assert produce(broker, "small", batch_of(101)).error_code is ErrorCode.message_too_large
    alter(broker, TOPIC_RESOURCE, "small", "max.message.bytes", DELETE, None)
    assert produce(broker, "small", batch_of(100_000)).error_code is ErrorCode.none


@pytest.mark.clients
def test_confluent_kafka_is_told_msg_size_too_large_by_the_broker(
    nullbroker_factory: StartBroker,
) -> None:
    process = nullbroker_factory()
    admin = AdminClient({"bootstrap.servers": process.bootstrap})
    created = admin.create_topics([NewTopic("small", 1, config={"max.message.bytes": "51200"})])
    created["small"].result(TIMEOUT)
    del admin
    # librdkafka refuses a message over its own message.max.bytes before sending it: raised
    # high, so that the broker decides.
    producer = Producer(
        {"bootstrap.servers": process.bootstrap, "message.max.bytes": 20_000_000, "linger.ms": 0}
    )
    errors: list[KafkaError | None] = []
    producer.produce("small", b"x" * (10 * 1024 * 1024), on_delivery=lambda e, m: errors.append(e))
    producer.produce("small", b"y" * 1000, on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(TIMEOUT) == 0
    assert errors[0] is not None
    assert errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert errors[1] is None
    del producer
    summary = process.stop()
    assert summary["errors"] == {"message_too_large": 1}


def test_an_acks_0_request_refused_closes_the_connection_as_kafka_does(broker: Broker) -> None:
    broker.topics.get_or_auto_create("plain")
    fields = produce_fields({"plain": batch_of(100), "small": batch_of(2001)}, acks=0)
    frame = request_frame(ApiKey.PRODUCE, 9, types(ApiKey.PRODUCE, 9).ProduceRequest(**fields))
    with pytest.raises(RefusedWithoutAcks, match="message_too_large"):
        dispatch_of(broker).answer(frame, SESSION)
    assert broker.topics.get("plain").partitions[0].log_end_offset == 1  # appended all the same
    assert broker.topics.get("small").partitions[0].log_end_offset == 0
    fields = produce_fields({"small": batch_of(2000)}, acks=0)
    taken = request_frame(ApiKey.PRODUCE, 9, types(ApiKey.PRODUCE, 9).ProduceRequest(**fields))
    assert dispatch_of(broker).answer(taken, SESSION) is None


async def closes_after_acks_0_refused(bootstrap: str, topic: str) -> bool:
    """Whether the broker at `bootstrap` closes the connection after a Produce with acks=0
    of a batch over `topic`'s max.message.bytes (created here, of 2000 bytes)."""
    host, port = bootstrap.rsplit(":", 1)
    stream = FrameStream(await trio.open_tcp_stream(host, int(port)))
    try:
        created = await stream.request(
            types(ApiKey.CREATE_TOPICS, 7).CreateTopicsRequest(
                **create_topics_fields([(topic, dict(SMALL))], False)
            )
        )
        assert created.topics[0].error_code is ErrorCode.none
        fields = produce_fields({topic: batch_of(2001)}, acks=0)
        await stream.send_request(types(ApiKey.PRODUCE, 9).ProduceRequest(**fields))
        return await stream.is_closed_by_peer()
    finally:
        await stream.aclose()


async def test_kafka_and_nullbroker_both_close_after_acks_0_refused(
    kafka: KafkaBroker, nullbroker_factory: StartBroker
) -> None:
    assert await closes_after_acks_0_refused(kafka.bootstrap, "message-size-acks-0")
    process = nullbroker_factory()
    assert await closes_after_acks_0_refused(process.bootstrap, "small")
    summary = process.stop()
    assert summary["connections_closed_on_error"] == {"RefusedWithoutAcks": 1}


@pytest.mark.clients
@requires_kafka_tools
def test_kafkas_console_producer_is_told_the_record_is_too_large(
    nullbroker_factory: StartBroker,
) -> None:
    process = nullbroker_factory()
    server = ("--bootstrap-server", process.bootstrap)
    run_tool(
        "kafka-topics",
        *server,
        "--create",
        "--topic",
        "small",
        "--config",
        "max.message.bytes=2000",
    )
    # One record a batch: the Java producer splits a batch of several that the broker finds
    # too large and sends its parts again, however large the topic's limit (KAFKA-8350).
    produced = subprocess.run(
        [
            str(BIN / "kafka-console-producer"),
            *server,
            "--topic",
            "small",
            "--producer-property",
            "max.request.size=20000000",  # the client's own limit, high: the broker decides
        ],
        input="x" * 3000 + "\n",
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT,
    )
    assert "RecordTooLargeException" in produced.stderr
    summary = process.stop()
    assert summary["errors"] == {"message_too_large": 1}
