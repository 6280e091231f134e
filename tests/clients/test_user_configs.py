"""Kafka's own `kafka-configs` on users and clients against nullbroker, as against Kafka: a
SCRAM credential set with it is the one SCRAM then authenticates with (confluent-kafka
produces with the new password, not with the old), quotas set on a user and a client id are
described back, and a user's description (its quotas and its SCRAM mechanisms together, two
APIs) reads as Kafka's tool prints it. The answers themselves are compared with Kafka's by
tests/oracle/test_differential_apis.py (sweeps 48 to 51)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nullbroker.app.pytest_plugin import StartBroker
from tests.net.test_sasl import PASSWORD, USER, scram, start_sasl_broker
from tests.net.test_tls import counted, produce
from tests.support.certificates import Certificates
from tests.support.kafka_tools import BIN, TOOL_TIMEOUT, requires_kafka_tools, run_tool

pytestmark = [pytest.mark.clients, requires_kafka_tools]


@pytest.fixture
def users(tmp_path: Path) -> Path:
    path = tmp_path / "users.toml"
    path.write_text(f'[users]\n{USER} = "{PASSWORD}"\n')
    return path


def configs(bootstrap: str, *arguments: str) -> str:
    return run_tool("kafka-configs", "--bootstrap-server", bootstrap, *arguments)


def test_a_scram_password_set_with_kafka_configs_is_the_one_scram_takes(
    nullbroker_factory: StartBroker, users: Path, certificates: Certificates
) -> None:
    broker, sasl_plaintext, _ = start_sasl_broker(nullbroker_factory, users, certificates)
    plaintext = broker.bootstrap
    described = configs(plaintext, "--describe", "--entity-type", "users", "--entity-name", USER)
    assert "SCRAM-SHA-256=iterations=4096" in described, described
    assert "SCRAM-SHA-512=iterations=4096" in described, described
    told = configs(
        plaintext, "--alter", "--entity-type", "users", "--entity-name", USER,
        "--add-config", "SCRAM-SHA-512=[iterations=8192,password=changed-secret]",
    )  # fmt: skip
    assert f"Completed updating config for user {USER}." in told, told
    described = configs(plaintext, "--describe", "--entity-type", "users", "--entity-name", USER)
    assert "SCRAM-SHA-512=iterations=8192" in described, described
    assert produce(scram(sasl_plaintext, "changed-secret"), "new-password", 200) == []
    assert produce(scram(sasl_plaintext, PASSWORD), "old-password", 20) != []
    assert (counted(broker, "new-password"), counted(broker, "old-password")) == (200, 0)


def test_quotas_set_with_kafka_configs_are_described_back(
    nullbroker_factory: StartBroker,
) -> None:
    bootstrap = nullbroker_factory().bootstrap
    for entity, name in (("users", "etl"), ("clients", "spark-app")):
        told = configs(
            bootstrap, "--alter", "--entity-type", entity, "--entity-name", name,
            "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152",
        )  # fmt: skip
        assert "Completed updating config" in told, told
    users = configs(bootstrap, "--describe", "--entity-type", "users", "--entity-name", "etl")
    assert "producer_byte_rate=1048576.0" in users and "consumer_byte_rate=2097152.0" in users
    clients = configs(bootstrap, "--describe", "--entity-type", "clients")
    assert "spark-app" in clients and "producer_byte_rate=1048576.0" in clients, clients
    refused = subprocess.run(
        [str(BIN / "kafka-configs"), "--bootstrap-server", bootstrap, "--alter",
         "--entity-type", "users", "--entity-name", "etl",
         "--add-config", "producer_byte_rate=1.5"],
        capture_output=True, text=True, timeout=TOOL_TIMEOUT, check=False,
    )  # fmt: skip
    told = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "cannot be a fractional value" in told, told
