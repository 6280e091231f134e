"""Fixtures for the tests that run nullbroker as a process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nullbroker.settings import CONNECTION_LOOPS, Config
from perf.java_perf import CACHE
from perf.kafka_broker import KafkaBroker, SaslListener, lib
from perf.kafka_broker import missing as kafka_missing
from tests.support.certificates import Certificates, make_certificates
from tests.support.java_classes import compiled

KAFKA_SASL = SaslListener(
    {"alice": "alice-secret", "bob": "bob-secret"}, session_lifetime_ms=60_000
)
"""The `kafka` fixture's SASL_PLAINTEXT listener: PLAIN, SCRAM-SHA-256 and -512 for these
users, OAUTHBEARER's unsecured tokens, sessions of a minute (KIP-368): what
tests/oracle/test_differential_sasl.py asks of it and of a nullbroker given the same."""

TELEMETRY_SINK = Path(__file__).parent / "clients" / "java" / "TelemetrySink.java"
KAFKA_METRIC_REPORTERS = "TelemetrySink,org.apache.kafka.common.metrics.JmxReporter"
"""The `kafka` fixture's metric.reporters: TelemetrySink, a client-telemetry plugin (KIP-714),
makes Kafka advertise GetTelemetrySubscriptions and PushTelemetry as nullbroker does; Kafka's
default JmxReporter is kept beside it."""


@pytest.fixture
def connection_loop(request: pytest.FixtureRequest) -> str:
    """The --connection-loop of the brokers `nullbroker_factory` starts: the default one, or
    each in turn for tests marked `every_connection_loop`."""
    return str(getattr(request, "param", Config().connection_loop))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "connection_loop" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "every_connection_loop"
    ):
        metafunc.parametrize("connection_loop", CONNECTION_LOOPS, indirect=True)


@pytest.fixture
def nullbroker_defaults(connection_loop: str) -> dict[str, str]:
    """Every broker the plugin's fixtures start for a test names its connection loop (the
    plugin's fixture family, nullbroker.app.pytest_plugin; the suite's ini option
    `nullbroker_teardown = kill` has them killed after the test: a test that wants the clean
    stop calls stop() itself)."""
    return {"connection_loop": connection_loop}


@pytest.fixture
def certificates(tmp_path: Path) -> Certificates:
    """A CA, the broker's certificate and key, a client's, and a CA no one trusts (trustme)."""
    folder = tmp_path / "certificates"
    folder.mkdir()
    return make_certificates(folder)


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """Apache Kafka 4.4.0 (one KRaft node, perf.kafka_broker), started once for the session:
    the reference every differential test asks, share groups' and streams groups' too (it
    finalizes share.version=2 and streams.version=1 by default). Tests share it, so each
    uses topic and group names of its own. Beside its PLAINTEXT listener (`bootstrap`) a
    SASL_PLAINTEXT one (`sasl_bootstrap`, KAFKA_SASL). A client-telemetry plugin
    (TelemetrySink, KAFKA_METRIC_REPORTERS) makes it serve KIP-714 as nullbroker does: it
    advertises GetTelemetrySubscriptions and PushTelemetry, so Java and librdkafka clients ask
    it for their subscription; it has no client-metrics subscription of its own, so they push
    nothing unless a test subscribes them. Skipped, with the reason, where Java or Kafka's jars
    are missing."""
    why = kafka_missing()
    if why is not None:
        pytest.skip(why)
    sink = compiled(TELEMETRY_SINK, lib(), CACHE.parent / "java-telemetry-sink")
    with KafkaBroker(
        tmp_path_factory.mktemp("kafka"),
        sasl=KAFKA_SASL,
        properties={"metric.reporters": KAFKA_METRIC_REPORTERS},
        classpath=(sink,),
    ) as broker:
        yield broker
