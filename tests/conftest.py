"""Fixtures for the tests that run nullbroker as a process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from itertools import count
from pathlib import Path

import pytest

from nullbroker.settings import CONNECTION_LOOPS, Config
from perf.kafka_broker import KafkaBroker, SaslListener
from perf.kafka_broker import missing as kafka_missing
from tests.broker_process import BrokerProcess
from tests.certificates import Certificates, make_certificates

StartBroker = Callable[..., BrokerProcess]

KAFKA_SASL = SaslListener(
    {"alice": "alice-secret", "bob": "bob-secret"}, session_lifetime_ms=60_000
)
"""The `kafka` fixture's SASL_PLAINTEXT listener: PLAIN, SCRAM-SHA-256 and -512 for these
users, OAUTHBEARER's unsecured tokens, sessions of a minute (KIP-368): what
tests/oracle/test_differential_sasl.py asks of it and of a nullbroker given the same."""


@pytest.fixture
def connection_loop(request: pytest.FixtureRequest) -> str:
    """The --connection-loop of the brokers `start_broker` starts: the default one, or
    each in turn for tests marked `every_connection_loop`."""
    return str(getattr(request, "param", Config().connection_loop))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "connection_loop" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "every_connection_loop"
    ):
        metafunc.parametrize("connection_loop", CONNECTION_LOOPS, indirect=True)


@pytest.fixture
def start_broker(tmp_path: Path, connection_loop: str) -> Iterator[StartBroker]:
    """Starts `nullbroker serve` with the given flags; every process started is killed at
    teardown, whether or not the test stopped it."""
    numbers = count()
    with ExitStack() as processes:

        def start(*flags: str, metrics: bool = True) -> BrokerProcess:
            workdir = tmp_path / f"broker-{next(numbers)}"
            workdir.mkdir()
            loop = ("--connection-loop", connection_loop)
            broker = BrokerProcess(workdir, *loop, *flags, metrics=metrics)
            # Killed, not stopped: a test that wants the clean stop calls stop() itself.
            processes.callback(broker.kill)
            return broker

        yield start


@pytest.fixture
def certificates(tmp_path: Path) -> Certificates:
    """A CA, the broker's certificate and key, a client's, and a CA no one trusts (trustme)."""
    folder = tmp_path / "certificates"
    folder.mkdir()
    return make_certificates(folder)


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """Apache Kafka 4.1.1 (one KRaft node, perf.kafka_broker), started once for the session:
    the reference every differential test asks. Tests share it, so each uses topic and group
    names of its own. Beside its PLAINTEXT listener (`bootstrap`) a SASL_PLAINTEXT one
    (`sasl_bootstrap`, KAFKA_SASL). Skipped, with the reason, where Java or Kafka's jars are
    missing."""
    why = kafka_missing()
    if why is not None:
        pytest.skip(why)
    with KafkaBroker(tmp_path_factory.mktemp("kafka"), sasl=KAFKA_SASL) as broker:
        yield broker
