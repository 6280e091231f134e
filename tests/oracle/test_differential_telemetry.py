"""Client telemetry (KIP-714) asked of Kafka 4.4.0 and of nullbroker alike
(tests/support/differential.py): GetTelemetrySubscriptions and PushTelemetry through each of
their answers, and the client-metrics config resources that hold the subscriptions.

The session's Kafka serves both APIs through its client-telemetry plugin (TelemetrySink,
tests/conftest.py) and has no subscription; the pair's nullbroker has --client-metrics' own
deleted (tests/oracle/client_metrics_steps.py), so both answer from the same subscriptions.
Each sequence names its client instances itself (a fresh, non-zero id per instance, the same
to both brokers), so instance ids and subscription ids compare exactly; where a sequence lets
the brokers make an id up (a first request with the zero id), each broker's subscription id is
checked as the one its id gives."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import gzip
import random
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import cramjam
import pytest
from kio.schema.errors import ErrorCode

from nullbroker.state.client_metrics import DEFAULT_INTERVAL_MS, TELEMETRY_MAX_BYTES
from nullbroker.state.client_metrics import subscription_id as expected_subscription_id
from perf.kafka_broker import KafkaBroker
from tests.oracle.client_metrics_steps import (
    CLIENT_METRICS_RESOURCE,
    DELETE,
    GZIP,
    LZ4,
    NONE,
    SET,
    alter_subscription,
    deleted,
    metrics_data,
    without_default_subscription,
)
from tests.support.differential import (
    Answers,
    Listed,
    Pair,
    Side,
    pair,
    request,
    uncompared_versions,
    unique,
)
from tests.support.kafka_tools import requires_kafka_tools, run_tool
from tests.support.otlp_payloads import compressed

pytestmark = pytest.mark.differential
__all__ = ["pair"]

Sequence_ = Callable[[Pair], Awaitable[tuple[str, ...]]]
TELEMETRY_SWEEP: dict[int, Sequence_] = {}
ZERO, ONE = uuid.UUID(int=0), uuid.UUID(int=1)
COMPRESSIONS = range(5)


def sweep(api_key: int) -> Callable[[Sequence_], Sequence_]:
    def register(run: Sequence_) -> Sequence_:
        TELEMETRY_SWEEP[api_key] = run
        return run

    return register


@pytest.fixture
async def telemetry_pair(pair: Pair) -> Pair:
    """The pair, its nullbroker with the subscriptions the session's Kafka has (none)."""
    await without_default_subscription(pair)
    return pair


def get(instance_id: uuid.UUID | None) -> Any:
    return request(71, 0, client_instance_id=instance_id)


def push(
    instance_id: uuid.UUID | None,
    metrics: bytes = b"",
    *,
    compression: int = NONE,
    terminating: bool = False,
    subscription: int | None = None,
) -> Callable[[Side], Any]:
    """A push for the instance, naming the subscription id that broker gave it (or the one
    given)."""

    def build(side: Side) -> Any:
        return request(
            72,
            0,
            client_instance_id=instance_id,
            subscription_id=(
                side.learned[("subscription", instance_id)]
                if subscription is None
                else subscription
            ),
            terminating=terminating,
            compression_type=compression,
            metrics=metrics,
        )

    return build


async def subscribed(pair: Pair, instance_id: uuid.UUID, until: Any = None) -> Answers:
    """GetTelemetrySubscriptions for the instance; its subscription id learned on each side."""
    answers = await pair.step(get(instance_id), until=until)
    for side in pair.sides:
        side.learned[("subscription", instance_id)] = answers[side].subscription_id
    return answers


async def expect(pair: Pair, step: Any, error: ErrorCode) -> Answers:
    """A step compared, whose answer from Kafka must be `error` (so that the sequence does
    what it means to, whatever nullbroker answers)."""
    answers = await pair.step(step)
    assert answers.kafka.error_code == error, (answers.kafka, error)
    return answers


def interval_ms(push_interval: datetime.timedelta) -> int:
    return int(push_interval / datetime.timedelta(milliseconds=1))


@sweep(71)
async def get_telemetry_subscriptions(pair: Pair) -> tuple[str, ...]:
    """A first request with the zero id (each broker makes one up), then an instance of the
    sequence's own: subscribed, throttled, let through at once after a push refused for its
    subscription or its compression (and not twice)."""
    made_up = await pair.step(get(None), compared=False)
    for side in pair.sides:
        answer = made_up[side]
        assert answer.error_code == ErrorCode.none, (side.name, answer)
        assert answer.client_instance_id not in (None, ZERO, ONE), (side.name, answer)
        assert answer.subscription_id == expected_subscription_id(
            answer.requested_metrics, interval_ms(answer.push_interval), answer.client_instance_id
        ), (side.name, "a subscription id that is not the one its instance id gives")
    # The rest of the answer compared: the id and the subscription id are each broker's own.
    pair.record(
        71,
        0,
        Answers(
            *(
                dataclasses.replace(made_up[side], client_instance_id=None, subscription_id=0)
                for side in pair.sides
            )
        ),
    )

    instance = uuid.uuid4()
    first = await subscribed(pair, instance)
    assert first.kafka.error_code == ErrorCode.none and first.kafka.client_instance_id == instance
    assert first.kafka.accepted_compression_types == (4, 3, 1, 2)
    assert interval_ms(first.kafka.push_interval) == DEFAULT_INTERVAL_MS
    assert first.kafka.telemetry_max_bytes == TELEMETRY_MAX_BYTES
    assert first.kafka.delta_temporality and first.kafka.requested_metrics == ()
    await expect(pair, get(instance), ErrorCode.throttling_quota_exceeded)
    await expect(pair, push(instance, subscription=-1), ErrorCode.unknown_subscription_id)
    await expect(pair, get(instance), ErrorCode.none)  # let through once after that refusal
    await expect(pair, get(instance), ErrorCode.throttling_quota_exceeded)

    compression = uuid.uuid4()
    await subscribed(pair, compression)
    await expect(pair, push(compression, compression=9), ErrorCode.unsupported_compression_type)
    await expect(pair, get(compression), ErrorCode.none)
    return ()


@sweep(72)
async def push_telemetry(pair: Pair) -> tuple[str, ...]:
    """A push of each compression type accepted; each refusal: too large, unreadable (corrupt,
    inflating past the limit, not OTLP), a reserved id, too soon, after a terminating push;
    and a push for an instance neither broker has seen, naming the subscription id it gets."""
    data = metrics_data()
    for compression in COMPRESSIONS:
        instance = uuid.uuid4()
        await subscribed(pair, instance)
        await expect(
            pair,
            push(instance, compressed(compression, data), compression=compression),
            ErrorCode.none,
        )

    noise = random.Random(714).randbytes(TELEMETRY_MAX_BYTES + 1)
    unreadable = {
        ErrorCode.telemetry_too_large: (GZIP, gzip.compress(noise)),  # over the limit, sent
        ErrorCode.invalid_record: (GZIP, b"\x1f\x8b\x08\x00" + bytes(range(64))),
    }
    for error, (compression, payload) in unreadable.items():
        instance = uuid.uuid4()
        await subscribed(pair, instance)
        await expect(pair, push(instance, payload, compression=compression), error)
    bomb = gzip.compress(bytes(2 * TELEMETRY_MAX_BYTES))  # a few KiB, inflating past the limit
    not_otlp = b"\xff" * 64
    # An LZ4 frame of linked blocks (the lz4 library's default): Kafka's reader takes
    # independent blocks only.
    linked = bytes(cramjam.lz4.compress(data))
    for compression, payload in ((GZIP, bomb), (NONE, not_otlp), (LZ4, linked)):
        instance = uuid.uuid4()
        await subscribed(pair, instance)
        await expect(
            pair, push(instance, payload, compression=compression), ErrorCode.invalid_record
        )

    for reserved in (None, ONE):
        await expect(pair, push(reserved, data, subscription=0), ErrorCode.invalid_request)

    soon = uuid.uuid4()
    await subscribed(pair, soon)
    await expect(pair, push(soon, data), ErrorCode.none)
    await expect(pair, push(soon, data), ErrorCode.throttling_quota_exceeded)

    ending = uuid.uuid4()
    await subscribed(pair, ending)
    await expect(pair, push(ending, data, terminating=True), ErrorCode.none)
    await expect(pair, push(ending, data), ErrorCode.invalid_request)
    await expect(pair, push(ending, data), ErrorCode.throttling_quota_exceeded)

    # A client that moved from another broker keeps its id and subscription id: accepted if
    # the id is the one this broker would give.
    unseen = uuid.uuid4()
    computed = expected_subscription_id((), DEFAULT_INTERVAL_MS, unseen)
    await expect(pair, push(unseen, data, subscription=computed), ErrorCode.none)
    mismatched = uuid.uuid4()
    await expect(
        pair, push(mismatched, data, subscription=computed), ErrorCode.unknown_subscription_id
    )
    return ()


@pytest.mark.parametrize("api_key", sorted(TELEMETRY_SWEEP))
async def test_every_version_answers_as_kafka_does(telemetry_pair: Pair, api_key: int) -> None:
    known = await TELEMETRY_SWEEP[api_key](telemetry_pair)
    telemetry_pair.check(*known)
    uncompared = uncompared_versions(
        telemetry_pair.compared, api_key, telemetry_pair.advertised(api_key)
    )
    assert not uncompared, f"versions both advertise the sweep never compared: {uncompared}"


# -- client-metrics config resources: the subscriptions ------------------------------------


def kafka_uuid(instance_id: uuid.UUID) -> str:
    """An id as Kafka writes it (Uuid.toString: URL-safe base64, unpadded), which a
    subscription's client_instance_id pattern matches."""
    return base64.urlsafe_b64encode(instance_id.bytes).decode().rstrip("=")


def describe(*names: str, version: int = 4) -> Any:
    return request(
        32,
        version,
        resources=[
            {
                "resource_type": CLIENT_METRICS_RESOURCE,
                "resource_name": name,
                "configuration_keys": None,
            }
            for name in names
        ],
        include_synonyms=True,
        include_documentation=True,
    )


def described(name: str, config: str, source: int) -> Callable[[Any], bool]:
    """Whether a DescribeConfigs answer shows `config` of subscription `name` from `source`
    (Kafka applies a change a moment after it answers)."""

    def shown(answer: Any) -> bool:
        return any(
            entry.name == config and entry.config_source == source
            for result in answer.results
            if result.resource_name == name
            for entry in result.configs
        )

    return shown


CLIENT_METRICS_CONFIG, DEFAULT_CONFIG = 7, 5
APPEND, SUBTRACT, UNKNOWN_OPERATION = 2, 3, 7


async def test_client_metrics_resources_are_altered_described_and_listed_as_kafka_does(
    telemetry_pair: Pair,
) -> None:
    pair = telemetry_pair
    name, other = unique("subscription"), unique("subscription")
    good = (
        (
            "metrics",
            SET,
            " org.apache.kafka.producer. , org.apache.kafka.consumer.,org.apache.kafka.producer.",
        ),
        ("interval.ms", SET, " +1000 "),
        ("match", SET, f"client_id = nobody-{name},client_software_name=nb"),
    )
    refused = [
        (("interval.ms", SET, "50"),),
        (("interval.ms", SET, "3600001"),),
        (("interval.ms", SET, "soon"),),
        (("interval.ms", SET, "1_000"),),
        (("match", SET, "foo=bar"),),
        (("match", SET, "client_id=[a"),),
        (("match", SET, "client_id=a=b"),),
        (("match", SET, "client_id=*"),),
        (("match", SET, "client_id="),),
        (("match", SET, "client_id=a, ,client_id=b"),),
        (("metrics", SET, "a,,b"),),
        (("metrics", SET, "a,b,"),),
        (("bogus", SET, "1"),),
        (("metrics", APPEND, "a"),),
        (("interval.ms", SUBTRACT, "5"),),
        (("metrics", UNKNOWN_OPERATION, "a"),),
        (("interval.ms", SET, None),),
        (("metrics", SET, "a"), ("metrics", SET, "b")),
        # Which refusal when several: unknown names, then each config's type in the order
        # Kafka defines them (metrics, interval.ms, match), then the interval's bounds.
        (("interval.ms", SET, "1"), ("match", SET, "foo=bar"), ("bogus", SET, "x")),
        (("match", SET, "foo=bar"), ("interval.ms", SET, "1")),
        (("interval.ms", SET, "soon"), ("metrics", SET, "a,,b")),
        (("match", SET, "a,,b"), ("interval.ms", SET, "soon")),
    ]
    for configs in refused:
        answers = await pair.step(alter_subscription(other, *configs))
        assert answers.kafka.responses[0].error_code != ErrorCode.none, configs
    answers = await pair.step(alter_subscription("", ("metrics", SET, "a")))
    assert answers.kafka.responses[0].error_code == ErrorCode.invalid_request
    for interval in ("1", "1000"):  # checked, not applied
        await pair.step(
            alter_subscription(other, ("interval.ms", SET, interval), validate_only=True)
        )
    await expect_altered(pair, alter_subscription(name, *good))

    for version in range(1, 5):
        await pair.step(
            describe(name, other, "", version=version),
            until=described(name, "metrics", CLIENT_METRICS_CONFIG),
        )
    for version in (0, 1):
        spec = {"resource_types": [CLIENT_METRICS_RESOURCE]} if version else {}
        await pair.step(
            request(74, version, **spec),
            only=Listed.of("config_resources", "resource_name", [name, other], [name]),
        )

    # One config deleted, another set: the rest kept; then AlterConfigs replaces them all.
    await expect_altered(
        pair, alter_subscription(name, ("match", DELETE, None), ("interval.ms", SET, "2000"))
    )
    await pair.step(describe(name), until=described(name, "match", DEFAULT_CONFIG))
    legacy = {
        "resource_type": CLIENT_METRICS_RESOURCE,
        "resource_name": name,
        "configs": [{"name": "metrics", "value": "*"}],
    }
    await expect_altered(pair, request(33, 2, resources=[legacy], validate_only=False))
    await pair.step(describe(name), until=described(name, "interval.ms", DEFAULT_CONFIG))
    bad = {**legacy, "configs": [{"name": "interval.ms", "value": "5"}]}
    await pair.step(request(33, 2, resources=[bad], validate_only=False))

    # Every config deleted: the subscription is gone, described at its defaults.
    await expect_altered(pair, deleted(name))
    await pair.step(
        request(74, 1, resource_types=[CLIENT_METRICS_RESOURCE]),
        only=Listed.of("config_resources", "resource_name", [name, other], []),
    )
    await pair.step(describe(name), until=described(name, "metrics", DEFAULT_CONFIG))
    pair.check()


async def expect_altered(pair: Pair, step: Any) -> None:
    answers = await pair.step(step)
    assert [r.error_code for r in answers.kafka.responses] == [ErrorCode.none], answers.kafka


async def test_the_subscriptions_that_match_a_client_are_served_to_it_as_kafka_serves_them(
    telemetry_pair: Pair,
) -> None:
    """Every subscription whose `match` selects the client (here by its instance id, as
    Kafka writes it, and the software it named in ApiVersions): their metrics together, in
    Kafka's order, `*` standing for all once one asks for it, the least of their intervals.
    A change reaches an instance at its next request, throttled or not."""
    pair = telemetry_pair
    client, bystander = uuid.uuid4(), uuid.uuid4()
    names = [unique("served") for _ in range(3)]
    selected = f"client_instance_id={kafka_uuid(client)}"
    await subscribed(pair, client)
    await subscribed(pair, bystander)
    await expect_altered(
        pair,
        alter_subscription(
            names[0],
            ("metrics", SET, "org.apache.kafka.producer."),
            ("interval.ms", SET, "2000"),
            ("match", SET, selected),
        ),
    )
    await expect_altered(
        pair,
        alter_subscription(
            names[1],
            ("metrics", SET, "org.apache.kafka.consumer.,org.apache.kafka.producer."),
            ("interval.ms", SET, "1000"),
            ("match", SET, f"{selected},client_software_name=n."),
        ),
    )
    both = await subscribed(pair, client, until=lambda answer: len(answer.requested_metrics) == 2)
    assert set(both.kafka.requested_metrics) == {
        "org.apache.kafka.producer.",
        "org.apache.kafka.consumer.",
    }
    assert interval_ms(both.kafka.push_interval) == 1000
    await expect_altered(
        pair, alter_subscription(names[2], ("metrics", SET, "*"), ("match", SET, selected))
    )
    every = await subscribed(pair, client, until=lambda answer: answer.requested_metrics == ("*",))
    assert interval_ms(every.kafka.push_interval) == 1000
    # Not selected: no metric, every 300 s (let through: the subscriptions changed).
    await expect(pair, get(bystander), ErrorCode.none)
    for name in names:
        await expect_altered(pair, deleted(name))
    # Until Kafka has applied the deletions, so that no later sequence sees them land.
    gone = await subscribed(
        pair, client, until=lambda answer: not answer.error_code and not answer.requested_metrics
    )
    assert interval_ms(gone.kafka.push_interval) == DEFAULT_INTERVAL_MS
    pair.check()


@requires_kafka_tools
def test_kafka_client_metrics_says_the_same_of_both_brokers(
    kafka: KafkaBroker, nullbroker_factory: Any
) -> None:
    """Kafka's own kafka-client-metrics, run against each broker: what it prints of a
    subscription it alters, describes, lists and deletes."""
    ours = nullbroker_factory().bootstrap
    name = unique("tool")
    said = []
    for bootstrap in (kafka.bootstrap, ours):
        said.append(tool_session(bootstrap, name))
    assert said[0] == said[1]
    metrics = "org.apache.kafka.producer.,org.apache.kafka.consumer."
    assert said[0] == [
        f"Altered client metrics config for {name}.",
        f"Client metrics configs for {name} are:\n  interval.ms=1000\n  match=client_id=x\n"
        f"  metrics={metrics}",
        name,
        f"Deleted client metrics config for {name}.",
        "",
        f"The client metric resource {name} doesn't exist and doesn't have dynamic config.",
    ]


def tool_session(bootstrap: str, name: str) -> list[str]:
    def tool(*arguments: str) -> str:
        return run_tool(
            "kafka-run-class",
            "org.apache.kafka.tools.ClientMetricsCommand",
            "--bootstrap-server",
            bootstrap,
            *arguments,
        ).strip()

    outputs = [
        tool(
            "--alter",
            "--name",
            name,
            "--metrics",
            "org.apache.kafka.producer.,org.apache.kafka.consumer.",
            "--interval",
            "1000",
            "--match",
            "client_id=x",
        ),
    ]
    outputs.append(until_said(lambda: tool("--describe", "--name", name), "metrics="))
    outputs.append(until_said(lambda: _listed(tool("--list"), name), name))
    outputs.append(tool("--delete", "--name", name))
    outputs.append(until_said(lambda: _listed(tool("--list"), name), None))
    outputs.append(tool("--describe", "--name", name))
    return outputs


def _listed(output: str, name: str) -> str:
    return "\n".join(line for line in output.splitlines() if name in line)


def until_said(run: Callable[[], str], expected: str | None, attempts: int = 30) -> str:
    """The tool's output once it holds `expected` (or is empty, for None): Kafka applies a
    change a moment after it answers."""
    import time

    output = run()
    for _ in range(attempts):
        if (expected in output) if expected is not None else not output:
            return output
        time.sleep(0.5)
        output = run()
    return output
