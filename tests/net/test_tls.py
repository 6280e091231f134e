"""Listeners as Kafka names them (`--listeners PLAINTEXT://…,SSL://…`) and TLS on trio's
SSLStream: confluent-kafka, kcat and Kafka's own perf test produce over SSL and are counted
exactly; each client is told the nodes' addresses on the listener it came in on; a client
that does not trust the broker's CA, or that has no certificate where one is required,
fails with its usual error and nothing is counted. Certificates come from trustme."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer

from nullbroker.app.configuration import checked
from nullbroker.app.launcher import RunningBroker, nullbroker_program
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.settings import Config, ConfigError
from tests.support.broker_counts import produced_from_metrics
from tests.support.certificates import Certificates
from tests.support.kafka_tools import requires_kafka_tools, run_tool

LISTENERS = re.compile(r"^listeners: (?P<listed>.*)$")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"listeners": "SSL://127.0.0.1:0"},
            "an SSL or SASL_SSL listener needs --tls-cert and --tls-key",
        ),
        ({"listeners": "HTTP://127.0.0.1:0"}, "unknown security protocol 'HTTP'"),
        ({"listeners": "PLAINTEXT://127.0.0.1"}, "expected PROTOCOL://HOST:PORT"),
        (
            {"listeners": "PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:1"},
            "each security protocol may have one listener",
        ),
        (
            {"listeners": "PLAINTEXT://127.0.0.1:0", "advertised_listeners": "SSL://h:1"},
            "must name the listeners' protocols (PLAINTEXT), got SSL",
        ),
        ({"tls_client_auth": "required"}, "--tls-client-auth required: needs --tls-ca"),
        ({"tls_client_auth": "always"}, "must be one of none, requested, required"),
    ],
)
def test_listener_settings_that_cannot_be_served_are_refused(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        checked(Config(**settings))


def test_listen_and_listeners_are_not_given_together(tmp_path: Path) -> None:
    done = subprocess.run(
        [*nullbroker_program(), "serve", "--listen", "127.0.0.1:0",
         "--listeners", "PLAINTEXT://127.0.0.1:0"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--listeners and --listen: give one of them" in done.stderr


def test_a_certificate_that_cannot_be_read_stops_the_start(
    certificates: Certificates, tmp_path: Path
) -> None:
    done = subprocess.run(
        [*nullbroker_program(), "serve", "--listeners", "SSL://127.0.0.1:0",
         "--tls-cert", str(tmp_path / "missing.pem"), "--tls-key", str(certificates.key)],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "missing.pem" in done.stderr and "cannot use them" in done.stderr


def start_tls_broker(
    nullbroker_factory: StartBroker, certificates: Certificates, *flags: str
) -> tuple[RunningBroker, str]:
    """A broker with a PLAINTEXT and an SSL listener; it and the SSL bootstrap address."""
    broker = nullbroker_factory(
        "--listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "--tls-cert", str(certificates.cert), "--tls-key", str(certificates.key), *flags,
    )  # fmt: skip
    line = broker.wait_for_line(LISTENERS, 10)
    ssl_address = re.search(r"SSL on (\S+:\d+)", line)
    assert ssl_address is not None, line
    return broker, ssl_address[1]


def produce(config: dict[str, Any], topic: str, records: int) -> list[Any]:
    """Send `records` with an idempotent producer; the delivery errors."""
    errors: list[Any] = []
    producer = Producer({
        "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 5000, **config,
    })  # fmt: skip
    for _ in range(records):
        producer.produce(topic, value=b"s" * 100, on_delivery=lambda e, m: errors.append(e))
        producer.poll(0)
    producer.flush(30)
    return [error for error in errors if error is not None]


def counted(broker: RunningBroker, topic: str) -> int:
    produced = produced_from_metrics(broker.scrape())
    return sum(c.records for (name, _), c in produced.items() if name == topic)


@pytest.mark.clients
@pytest.mark.parametrize("processes", ["1", "2"], ids=["one-process", "two-processes"])
def test_confluent_kafka_produces_over_ssl_and_each_listener_tells_its_own_addresses(
    nullbroker_factory: StartBroker, certificates: Certificates, processes: str
) -> None:
    """On one process and on two (each node's listeners served by its own worker)."""
    broker, ssl_bootstrap = start_tls_broker(
        nullbroker_factory, certificates, "--brokers", "2", "--partitions", "4",
        "--processes", processes,
    )  # fmt: skip
    secure = {"bootstrap.servers": ssl_bootstrap, "security.protocol": "SSL",
              "ssl.ca.location": str(certificates.ca)}  # fmt: skip
    assert produce(secure, "secure", 3000) == []
    assert counted(broker, "secure") == 3000
    ssl_port = int(ssl_bootstrap.rsplit(":", 1)[1])
    plain_port = int(broker.bootstrap.rsplit(":", 1)[1])
    over_ssl = Producer(secure).list_topics(timeout=10)
    over_plaintext = Producer({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    ssl_ports = {b.port for b in over_ssl.brokers.values()}
    plain_ports = {b.port for b in over_plaintext.brokers.values()}
    # Two nodes on each listener (port 0: each node on a free port of its own).
    assert ssl_port in ssl_ports and plain_port in plain_ports
    assert len(ssl_ports) == len(plain_ports) == 2 and not ssl_ports & plain_ports


@pytest.mark.clients
def test_a_client_that_does_not_trust_the_ca_fails_and_nothing_is_counted(
    nullbroker_factory: StartBroker, certificates: Certificates
) -> None:
    broker, ssl_bootstrap = start_tls_broker(nullbroker_factory, certificates)
    client_errors: list[KafkaError] = []
    errors = produce(
        {"bootstrap.servers": ssl_bootstrap, "security.protocol": "SSL",
         "ssl.ca.location": str(certificates.other_ca), "error_cb": client_errors.append},
        "distrusted", 20,
    )  # fmt: skip
    assert len(errors) == 20
    # librdkafka's usual report of a broker it cannot verify.
    assert any(
        error.code() == KafkaError._SSL and "certificate verify failed" in error.str()
        for error in client_errors
    ), client_errors
    assert counted(broker, "distrusted") == 0
    assert "TLS handshake failed" in broker.stderr_text()


@pytest.mark.clients
def test_client_certificates_when_required(
    nullbroker_factory: StartBroker, certificates: Certificates
) -> None:
    broker, ssl_bootstrap = start_tls_broker(
        nullbroker_factory, certificates,
        "--tls-ca", str(certificates.ca), "--tls-client-auth", "required",
    )  # fmt: skip
    base = {"bootstrap.servers": ssl_bootstrap, "security.protocol": "SSL",
            "ssl.ca.location": str(certificates.ca)}  # fmt: skip
    assert len(produce(base, "mutual", 10)) == 10  # no certificate: refused
    with_certificate = {**base, "ssl.certificate.location": str(certificates.client_cert),
                        "ssl.key.location": str(certificates.client_key)}  # fmt: skip
    assert produce(with_certificate, "mutual", 500) == []
    assert counted(broker, "mutual") == 500


@pytest.mark.clients
@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not on PATH")
def test_kcat_produces_over_ssl(
    nullbroker_factory: StartBroker, certificates: Certificates
) -> None:
    broker, ssl_bootstrap = start_tls_broker(nullbroker_factory, certificates)
    lines = "".join(f"record {index}\n" for index in range(200))
    subprocess.run(
        ["kcat", "-b", ssl_bootstrap, "-X", "security.protocol=ssl",
         "-X", f"ssl.ca.location={certificates.ca}", "-P", "-t", "kcat-secure"],
        input=lines, text=True, capture_output=True, timeout=60, check=True,
    )  # fmt: skip
    assert counted(broker, "kcat-secure") == 200


@pytest.mark.clients
@requires_kafka_tools
def test_kafka_producer_perf_test_produces_over_ssl(
    nullbroker_factory: StartBroker, certificates: Certificates, tmp_path: Path
) -> None:
    broker, ssl_bootstrap = start_tls_broker(nullbroker_factory, certificates, "--partitions", "4")
    config = tmp_path / "ssl.properties"
    config.write_text(
        f"bootstrap.servers={ssl_bootstrap}\nsecurity.protocol=SSL\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={certificates.ca}\n"
    )
    output = run_tool(
        "kafka-producer-perf-test", "--topic", "java-secure", "--num-records", "5000",
        "--record-size", "100", "--throughput", "-1", "--producer.config", str(config),
    )  # fmt: skip
    assert output.strip().splitlines()[-1].startswith("5000 records sent"), output
    assert counted(broker, "java-secure") == 5000
