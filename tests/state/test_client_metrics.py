"""Client telemetry's state (KIP-714, nullbroker.state.client_metrics): subscription ids as
Kafka 4.4.0 computes them (values from a running Kafka 4.4.0 and from Java), and the order of
GetTelemetrySubscriptions' and PushTelemetry's refusals as its ClientMetricsManager gives them."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from nullbroker.state.client_metrics import (
    DEFAULT_INTERVAL_MS,
    DEFAULT_SUBSCRIPTION,
    ClientMetrics,
    ConfigRefused,
    Subscription,
    configs_of,
    configure,
    kafka_uuid_text,
    subscription_id,
    subscription_names,
    subscription_of,
)

JAVA_UUID = uuid.UUID(int=(0x0123456789ABCDEF << 64) | 0x1111111122222222)
PRODUCER = {"client_id": "perf-producer-1", "client_software_name": "apache-kafka-java"}
T0 = 1_800_000_000_000


@pytest.mark.parametrize(
    ("metrics", "interval_ms", "instance_id", "expected"),
    [
        # Kafka 4.4.0's answer to a first GetTelemetrySubscriptions, no subscription.
        ((), 300_000, uuid.UUID("9810b170-9601-4d2a-bf37-4ef2e360c42d"), -2038354597),
        # Computed with Java (CRC32C of the HashSet printed, XOR Uuid.hashCode()).
        ((), 300_000, JAVA_UUID, 1870454885),
        (("*",), 1000, JAVA_UUID, -1993340670),
        (
            ("org.apache.kafka.consumer.", "org.apache.kafka.producer."),
            1000,
            JAVA_UUID,
            -1629111034,
        ),
    ],
)
def test_subscription_ids_are_kafkas(
    metrics: tuple[str, ...], interval_ms: int, instance_id: uuid.UUID, expected: int
) -> None:
    assert subscription_id(metrics, interval_ms, instance_id) == expected


def test_a_client_no_subscription_matches_pushes_nothing_every_five_minutes() -> None:
    error, instance = ClientMetrics().get_subscription(None, PRODUCER, T0)
    assert error is ErrorCode.none and instance is not None
    assert instance.metrics == () and instance.interval_ms == DEFAULT_INTERVAL_MS
    assert instance.subscription_id == subscription_id(
        (), DEFAULT_INTERVAL_MS, instance.instance_id
    )


def test_a_second_get_within_the_interval_is_throttled() -> None:
    metrics = ClientMetrics((Subscription("all", ("*",), 5000),))
    _, instance = metrics.get_subscription(None, PRODUCER, T0)
    assert instance is not None and instance.interval_ms == 5000
    again, _ = metrics.get_subscription(instance.instance_id, PRODUCER, T0 + 4999)
    assert again is ErrorCode.throttling_quota_exceeded
    later, same = metrics.get_subscription(instance.instance_id, PRODUCER, T0 + 5000)
    assert later is ErrorCode.none and same is instance


def test_pushes_are_refused_in_kafkas_order() -> None:
    metrics = ClientMetrics((Subscription("all", ("*",), 5000),), max_bytes=100)
    _, instance = metrics.get_subscription(None, PRODUCER, T0)
    assert instance is not None
    ident, sub = instance.instance_id, instance.subscription_id

    def push(at: int, subscription: int = sub, terminating: bool = False, compression: int = 0,
             size: int = 10, instance_id: uuid.UUID | None = ident) -> ErrorCode:  # fmt: skip
        return metrics.push(
            instance_id, subscription, terminating, compression, size, PRODUCER, at
        )[0]

    assert push(T0, instance_id=uuid.UUID(int=0)) is ErrorCode.invalid_request
    assert push(T0, instance_id=uuid.UUID(int=1)) is ErrorCode.invalid_request
    assert push(T0 + 1) is ErrorCode.none  # the first after a Get, however soon
    assert push(T0 + 2) is ErrorCode.throttling_quota_exceeded
    assert push(T0 + 5001, subscription=sub + 1) is ErrorCode.unknown_subscription_id
    # A Get after UNKNOWN_SUBSCRIPTION_ID (or UNSUPPORTED_COMPRESSION_TYPE) is not throttled,
    # so the client learns the new subscription; it does not count as a Get for the pushes.
    assert metrics.get_subscription(ident, PRODUCER, T0 + 5002)[0] is ErrorCode.none
    assert push(T0 + 5003) is ErrorCode.throttling_quota_exceeded
    assert push(T0 + 10_001, compression=9) is ErrorCode.unsupported_compression_type
    assert metrics.get_subscription(ident, PRODUCER, T0 + 10_002)[0] is ErrorCode.none
    assert push(T0 + 15_001, size=101) is ErrorCode.telemetry_too_large
    assert push(T0 + 15_002, terminating=True) is ErrorCode.none  # past the throttle
    assert push(T0 + 20_000) is ErrorCode.invalid_request  # after the terminating push


def test_subscriptions_match_clients_and_a_change_makes_a_new_subscription() -> None:
    metrics = ClientMetrics(
        (
            Subscription("producers", ("org.apache.kafka.producer.",), 5000,
                         (("client_software_name", "apache-kafka-java"),)),
            Subscription("slow", ("org.apache.kafka.consumer.",), 60_000),
            Subscription("others", ("*",), 1000, (("client_id", "spark-.*"),)),
        )
    )  # fmt: skip
    _, producer = metrics.get_subscription(None, PRODUCER, T0)
    assert producer is not None
    assert sorted(producer.metrics) == ["org.apache.kafka.consumer.", "org.apache.kafka.producer."]
    assert producer.interval_ms == 5000  # the least of those that match
    _, spark = metrics.get_subscription(None, {"client_id": "spark-executor-1"}, T0)
    assert spark is not None and spark.metrics == ("*",) and spark.interval_ms == 1000
    before = producer.subscription_id
    metrics.unsubscribe("producers")
    _, again = metrics.get_subscription(producer.instance_id, PRODUCER, T0 + 1)
    assert again is not None and again.metrics == ("org.apache.kafka.consumer.",)
    assert again.subscription_id != before and again.interval_ms == 60_000


def test_instances_are_bounded_and_expire() -> None:
    metrics = ClientMetrics(max_instances=2)
    ids = []
    for offset in range(3):
        _, instance = metrics.get_subscription(None, PRODUCER, T0 + offset)
        assert instance is not None
        ids.append(instance.instance_id)
    assert list(metrics.instances) == ids[1:] and metrics.dropped == 1
    # Unseen for three push intervals (five minutes each, no subscription): forgotten.
    metrics.get_subscription(None, PRODUCER, T0 + 3 * DEFAULT_INTERVAL_MS + 2)
    assert ids[1] not in metrics.instances and ids[2] not in metrics.instances


# Subscriptions as client-metrics config resources: refusals and their words as a running
# Kafka 4.4.0 gave them (tests/oracle/test_differential_telemetry.py compares them live).


@pytest.mark.parametrize(
    ("name", "configs", "error", "message"),
    [
        ("", {"metrics": "a"}, ErrorCode.invalid_request, "Subscription name can't be empty"),
        (
            "s",
            {"interval.ms": "1", "match": "foo=1", "bogus": "x"},
            ErrorCode.invalid_request,
            "Unknown client metrics configuration: bogus",
        ),
        (
            "s",
            {"interval.ms": "soon", "metrics": "a,,b"},
            ErrorCode.invalid_config,
            "Configuration 'metrics' values must not be empty.",
        ),
        (
            "s",
            {"match": "a,,b", "interval.ms": "1_000"},
            ErrorCode.invalid_config,
            "Invalid value 1_000 for configuration interval.ms: Not a number of type INT",
        ),
        (
            "s",
            {"match": "foo=1", "interval.ms": "-5"},
            ErrorCode.invalid_request,
            "Invalid value -5 for interval.ms, interval must be between 100 and 3600000 (1 hour)",
        ),
        (
            "s",
            {"match": "client_id=a=b"},
            ErrorCode.invalid_config,
            "Illegal client matching pattern: client_id=a=b",
        ),
    ],
)
def test_client_metrics_configs_are_refused_first_where_kafka_refuses_them(
    name: str, configs: dict[str, str], error: ErrorCode, message: str
) -> None:
    with pytest.raises(ConfigRefused) as refused:
        subscription_of(name, configs)
    assert (refused.value.error, str(refused.value)) == (error, message)


def test_client_metrics_configs_are_described_as_kafka_parses_them() -> None:
    made = subscription_of(
        "s",
        {"metrics": " b , a,b ", "interval.ms": " +1000 ", "match": "client_id = x "},
    )
    assert made.metrics == ("b", "a") and made.interval_ms == 1000
    assert made.match == (("client_id", "x"),)
    assert made.set_configs() == {"interval.ms": "1000", "match": "client_id = x", "metrics": "b,a"}


def test_a_subscription_is_made_changed_and_removed_by_its_configs() -> None:
    metrics = ClientMetrics((Subscription(DEFAULT_SUBSCRIPTION, ("*",), 5000),))
    assert configs_of(metrics, DEFAULT_SUBSCRIPTION) == {"metrics": "*", "interval.ms": "5000"}
    configure(metrics, "mine", {"metrics": "org.apache.kafka.producer."})
    assert metrics.version == 1
    assert sorted(subscription_names(metrics)) == sorted(("mine", DEFAULT_SUBSCRIPTION))
    configure(metrics, "mine", {"metrics": " org.apache.kafka.producer."})
    assert metrics.version == 1, "unchanged configs change no subscription"
    configure(metrics, DEFAULT_SUBSCRIPTION, {})
    assert list(metrics.subscriptions) == ["mine"] and metrics.version == 2


def test_a_match_on_the_instance_id_takes_it_as_kafka_writes_it() -> None:
    instance_id = uuid.UUID("fe7583d2-763a-478b-84d7-7486bc10cdec")
    text = kafka_uuid_text(instance_id)
    assert text == "_nWD0nY6R4uE13SGvBDN7A"
    metrics = ClientMetrics(
        (Subscription("one", ("org.apache.kafka.",), 1000, (("client_instance_id", text),)),)
    )
    _, instance = metrics.get_subscription(instance_id, PRODUCER, T0)
    assert instance is not None and instance.metrics == ("org.apache.kafka.",)


def test_requested_metrics_are_listed_in_the_order_of_kafkas_hash_set() -> None:
    # A running Kafka 4.4.0 answered these two prefixes so, whatever order they were set in.
    subscription = Subscription(
        "two", ("org.apache.kafka.consumer.", "org.apache.kafka.producer."), 1000
    )
    _, instance = ClientMetrics((subscription,)).get_subscription(None, PRODUCER, T0)
    assert instance is not None
    assert instance.metrics == ("org.apache.kafka.producer.", "org.apache.kafka.consumer.")
