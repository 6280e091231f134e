"""What the client-telemetry sequences (KIP-714) send to both brokers of a pair: OTLP payloads
(compressed as Kafka's clients compress them: tests.support.otlp_payloads), client-metrics
subscriptions set and removed, and the pair's nullbroker given the subscriptions the
session's Kafka has (none).

The session's Kafka (tests/conftest.py) has a client-telemetry plugin and no subscription, so
a client it meets is asked for no metric every 300 s, as a stock Kafka asks. nullbroker asks
every client for every metric every 5 s unless told otherwise (--client-metrics); its
subscription is a client-metrics resource like any other (nullbroker-default), and the pair's
nullbroker has it deleted, as an operator would with `kafka-client-metrics --delete`, so that
both brokers answer from the same subscriptions. Kafka's 300 s also keep the throttling
sequences (a second request within the interval) far from any machine's slowness."""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from nullbroker.state.client_metrics import DEFAULT_SUBSCRIPTION
from tests.support.differential import Pair, request

CLIENT_METRICS_RESOURCE = 16
SET, DELETE = 0, 1
NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
SUBSCRIPTION_CONFIGS = ("metrics", "interval.ms", "match")


def metrics_data(value: float = 42.0) -> bytes:
    """An OTLP MetricsData as a Java producer pushes one: a resource, one delta sum."""
    data = MetricsData()
    resource = data.resource_metrics.add()
    resource.resource.attributes.append(
        KeyValue(key="client_rack", value=AnyValue(string_value="rack-1"))
    )
    metric = resource.scope_metrics.add().metrics.add()
    metric.name = "org.apache.kafka.producer.record.send.total"
    metric.sum.is_monotonic = True
    metric.sum.aggregation_temporality = 1  # delta, as the brokers ask
    point = metric.sum.data_points.add()
    point.as_double = value
    point.time_unix_nano = 1_767_225_600_000_000_000
    return data.SerializeToString()


def alter_subscription(
    name: str, *configs: tuple[str, int, str | None], validate_only: bool = False
) -> Any:
    """IncrementalAlterConfigs of one client-metrics resource: (config, operation, value)."""
    return request(
        44,
        1,
        resources=[
            {
                "resource_type": CLIENT_METRICS_RESOURCE,
                "resource_name": name,
                "configs": [
                    {"name": config, "config_operation": operation, "value": value}
                    for config, operation, value in configs
                ],
            }
        ],
        validate_only=validate_only,
    )


def deleted(name: str) -> Any:
    """Every config of a subscription deleted: the subscription removed."""
    return alter_subscription(name, *((config, DELETE, None) for config in SUBSCRIPTION_CONFIGS))


async def without_default_subscription(pair: Pair) -> None:
    """The pair's nullbroker without --client-metrics' subscription: the subscriptions the
    session's Kafka has (none)."""
    answer = await pair.nullbroker.ask(deleted(DEFAULT_SUBSCRIPTION))
    assert [result.error_code for result in answer.responses] == [0], answer
