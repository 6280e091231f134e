"""SASL listeners: confluent-kafka, kcat and Kafka's perf test produce over SASL_PLAINTEXT with
SCRAM-SHA-512 and over SASL_SSL with PLAIN and are counted exactly; a wrong password fails
and nothing is counted; a request before authentication, or after the session's lifetime
(KIP-368) without re-authenticating, closes the connection."""

from __future__ import annotations

import os
import re
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from nullbroker.settings import Config, ConfigError
from tests.broker_process import BrokerProcess, samples
from tests.certificates import Certificates
from tests.conftest import StartBroker
from tests.kafka_tools import requires_kafka_tools, run_tool
from tests.kafka_wire import request_frame, size_prefix
from tests.net.test_tls import counted, produce

LISTENED = re.compile(r"^listeners: (?P<listed>.*)$")
USER, PASSWORD = "alice", "alice-secret"


@pytest.fixture
def users(tmp_path: Path) -> Path:
    path = tmp_path / "users.toml"
    path.write_text(f'[users]\n{USER} = "{PASSWORD}"\nbob = "bob-secret"\n')
    return path


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}, "a SASL listener needs --users"),
        ({"sasl_mechanisms": "GSSAPI"}, "choose from PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
        ({"sasl_session_lifetime_ms": -1}, "must not be negative"),
    ],
)
def test_sasl_settings_that_cannot_be_served_are_refused(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        Config(**settings)


def test_a_users_file_without_users_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "users.toml"
    path.write_text("[people]\n")
    with pytest.raises(ConfigError, match=re.escape("needs a [users] table")):
        Config(listeners="SASL_PLAINTEXT://127.0.0.1:0", users=str(path))


def start_sasl_broker(
    start_broker: StartBroker, users: Path, certs: Certificates, *flags: str
) -> tuple[BrokerProcess, str, str]:
    """A broker with PLAINTEXT, SASL_PLAINTEXT and SASL_SSL listeners: it, and the two SASL
    bootstrap addresses."""
    broker = start_broker(
        "--listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "--users", str(users), "--tls-cert", str(certs.cert), "--tls-key", str(certs.key),
        *flags,
    )  # fmt: skip
    line = broker.wait_for_line(LISTENED, 10)
    plain = re.search(r"SASL_PLAINTEXT on (\S+:\d+)", line)
    tls = re.search(r"SASL_SSL on (\S+:\d+)", line)
    assert plain is not None and tls is not None, line
    return broker, plain[1], tls[1]


def scram(bootstrap: str, password: str = PASSWORD) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": USER,
            "sasl.password": password}  # fmt: skip


def plain_over_tls(bootstrap: str, certs: Certificates) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(certs.ca), "sasl.mechanisms": "PLAIN",
            "sasl.username": USER, "sasl.password": PASSWORD}  # fmt: skip


@pytest.mark.clients
def test_confluent_kafka_over_scram_and_over_plain_with_tls_is_counted_exactly(
    start_broker: StartBroker, users: Path, certificates: Certificates
) -> None:
    broker, sasl_plaintext, sasl_ssl = start_sasl_broker(
        start_broker, users, certificates, "--partitions", "4"
    )
    assert produce(scram(sasl_plaintext), "scram", 2000) == []
    assert produce(plain_over_tls(sasl_ssl, certificates), "plain-tls", 2000) == []
    assert counted(broker, "scram") == counted(broker, "plain-tls") == 2000
    done = samples(broker.scrape(), "nullbroker_authentications_total")
    assert done[(("mechanism", "SCRAM-SHA-512"), ("result", "succeeded"))] >= 1
    assert done[(("mechanism", "PLAIN"), ("result", "succeeded"))] >= 1


@pytest.mark.clients
def test_a_wrong_password_fails_and_nothing_is_counted(
    start_broker: StartBroker, users: Path, certificates: Certificates
) -> None:
    broker, sasl_plaintext, sasl_ssl = start_sasl_broker(start_broker, users, certificates)
    wrong_plain = {**plain_over_tls(sasl_ssl, certificates), "sasl.password": "wrong"}
    # Kafka's words to the client: SCRAM's name only the phase and the mechanism.
    for config, topic, told in (
        (scram(sasl_plaintext, "wrong"), "refused", "Authentication failed during "
         "authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"),
        (wrong_plain, "refused-plain", "Authentication failed: Invalid username or password"),
    ):  # fmt: skip
        client_errors: list[KafkaError] = []
        assert len(produce({**config, "error_cb": client_errors.append}, topic, 20)) == 20
        assert counted(broker, topic) == 0
        # librdkafka's usual report of a refused password.
        assert any(
            error.code() == KafkaError._AUTHENTICATION and told in error.str()
            for error in client_errors
        ), client_errors
    done = samples(broker.scrape(), "nullbroker_authentications_total")
    assert done[(("mechanism", "SCRAM-SHA-512"), ("result", "failed"))] >= 1
    assert done[(("mechanism", "PLAIN"), ("result", "failed"))] >= 1
    assert "authentication failed for user 'alice'" in broker.stderr_text()


def call(sock: socket.socket, payload: Any, correlation_id: int = 1) -> bytes | None:
    """Send a request; its response frame, or None if the broker closed the connection."""
    sock.sendall(size_prefix(request_frame(payload, correlation_id)))
    header = sock.recv(4, socket.MSG_WAITALL)
    if len(header) < 4:
        return None
    return sock.recv(struct.unpack(">i", header)[0], socket.MSG_WAITALL)


def authenticate(sock: socket.socket) -> None:
    assert call(sock, SaslHandshakeRequest(mechanism="PLAIN")) is not None
    token = f"\0{USER}\0{PASSWORD}".encode()
    answer = call(sock, SaslAuthenticateRequest(auth_bytes=token))
    assert answer is not None and answer[5:7] == b"\0\0", answer  # error code none


METADATA = MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


LIFETIME_S = 6.0
"""The session lifetime of the test below: long enough that a loaded machine's pauses (a second
or two) do not decide it, and its windows are checked against the clock rather than trusted."""


class Inconclusive(Exception):
    """A pause on the machine moved a step past the end of the session it was meant to land
    in, and the broker closed the connection: the run proves nothing and is tried again."""


def answered_within(sock: socket.socket, request: Any, version: int, ends_by: float) -> Any:
    """`request`'s answer, which must come while the session lasts: if the broker closed the
    connection instead, the test fails when the answer came before `ends_by` (the earliest the
    session can end, by the clock read before it began) and is Inconclusive after it."""
    answer = call(sock, request, version)
    if answer is None and time.monotonic() >= ends_by:
        raise Inconclusive(f"{type(request).__name__} answered too late to decide")
    assert answer is not None, f"{type(request).__name__} refused within the session"
    return answer


def session_lifetime_run(sock: socket.socket) -> None:
    """Authenticate, re-authenticate within the lifetime, go past the first session's end,
    then past the renewed one's: the requests within are answered, the one after is refused.
    Each window is decided by the clock read before a step was sent and after it was
    answered (the broker's reading lies between), so only the order of events is asserted."""
    started = time.monotonic()
    authenticate(sock)
    first_ends_by, first_ends_after = started + LIFETIME_S, time.monotonic() + LIFETIME_S
    answered_within(sock, METADATA, 2, first_ends_by)
    time.sleep(max(0.0, started + LIFETIME_S / 2 - time.monotonic()))
    renewed = time.monotonic()
    answered_within(sock, SaslHandshakeRequest(mechanism="PLAIN"), 1, first_ends_by)
    token = f"\0{USER}\0{PASSWORD}".encode()
    answer = answered_within(sock, SaslAuthenticateRequest(auth_bytes=token), 2, first_ends_by)
    assert answer[5:7] == b"\0\0", answer  # re-authenticated within its lifetime (KIP-368)
    renewed_ends_by, renewed_ends_after = renewed + LIFETIME_S, time.monotonic() + LIFETIME_S
    time.sleep(max(0.0, first_ends_after + 0.2 - time.monotonic()))  # past the first session
    answered_within(sock, METADATA, 3, renewed_ends_by)  # so the second one renewed it
    time.sleep(max(0.0, renewed_ends_after + 0.2 - time.monotonic()))
    assert call(sock, METADATA, 4) is None, "answered after the renewed session ended"


@pytest.mark.clients
def test_requests_before_authentication_or_after_the_session_close_the_connection(
    start_broker: StartBroker, users: Path, certificates: Certificates
) -> None:
    lifetime_ms = str(int(LIFETIME_S * 1000))
    broker, sasl_plaintext, _ = start_sasl_broker(
        start_broker, users, certificates, "--sasl-session-lifetime-ms", lifetime_ms
    )
    host, port = sasl_plaintext.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as early:
        assert call(early, METADATA) is None  # not authenticated: closed
    runs = 0
    while True:
        runs += 1
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            try:
                session_lifetime_run(sock)
                break
            except Inconclusive:
                assert runs < 3, "three runs in a row were too slow to decide anything"
    assert "before SASL authentication" in broker.stderr_text()
    closed = samples(broker.scrape(), "nullbroker_connections_closed_on_error_total")
    # The early connection, then each run's: at the end of its renewed session, or earlier
    # in an inconclusive run.
    assert closed[(("reason", "NotAuthenticated"),)] == 1 + runs


def kcat_librdkafka(env: dict[str, str] | None = None) -> tuple[int, ...]:
    """The version of the librdkafka kcat runs on (with `env`'s library path)."""
    found = re.search(r"librdkafka (\d+)\.(\d+)\.(\d+)", subprocess.run(
        ["kcat", "-V"], capture_output=True, text=True, timeout=30, check=False, env=env
    ).stdout)  # fmt: skip
    return tuple(int(part) for part in found.groups()) if found else (0, 0, 0)


def current_librdkafka(directory: Path) -> dict[str, str]:
    """An environment in which kcat runs on the librdkafka that confluent-kafka's wheel
    ships (a current release; librdkafka keeps its ABI, so Debian's kcat binary loads it)."""
    import confluent_kafka

    libraries = Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs"
    shipped = sorted(libraries.glob("librdkafka-*.so.1"))
    assert shipped, f"no librdkafka in {libraries}"
    (directory / "librdkafka.so.1").symlink_to(shipped[0])
    return {**os.environ, "LD_LIBRARY_PATH": str(directory)}


@pytest.mark.clients
@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not on PATH")
def test_kcat_over_scram_and_over_plain_with_tls(
    start_broker: StartBroker, users: Path, certificates: Certificates, tmp_path: Path
) -> None:
    broker, sasl_plaintext, sasl_ssl = start_sasl_broker(start_broker, users, certificates)
    lines = "".join(f"record {index}\n" for index in range(100))

    def kcat(
        bootstrap: str, topic: str, *options: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        settings = [*options, f"sasl.username={USER}", f"sasl.password={PASSWORD}"]
        return subprocess.run(
            ["kcat", "-b", bootstrap, *[arg for s in settings for arg in ("-X", s)],
             "-P", "-t", topic],
            input=lines, text=True, capture_output=True, timeout=60, check=False, env=env,
        )  # fmt: skip

    plain = kcat(sasl_ssl, "kcat-plain", "security.protocol=sasl_ssl", "sasl.mechanisms=PLAIN",
                 f"ssl.ca.location={certificates.ca}")  # fmt: skip
    assert plain.returncode == 0, plain.stderr
    assert counted(broker, "kcat-plain") == 100
    scram = ("security.protocol=sasl_plaintext", "sasl.mechanisms=SCRAM-SHA-512")
    if kcat_librdkafka() < (2, 6, 1):
        # Debian's kcat: librdkafka before 2.6.1 puts its own nonce twice in the client-final
        # message (librdkafka#4895); Kafka 4 checks the nonce as RFC 5802 says and refuses
        # it, and so does nullbroker.
        refused = kcat(sasl_plaintext, "kcat-scram-old", *scram)
        assert refused.returncode != 0, refused.stderr
        assert "Authentication failed during authentication" in refused.stderr, refused.stderr
        assert "nonce" in broker.stderr_text()  # the reason, in the broker's log only
        assert counted(broker, "kcat-scram-old") == 0
    # The same kcat on a current librdkafka authenticates and is counted exactly.
    current = current_librdkafka(tmp_path)
    assert kcat_librdkafka(current) >= (2, 6, 1)
    accepted = kcat(sasl_plaintext, "kcat-scram", *scram, env=current)
    assert accepted.returncode == 0, accepted.stderr
    assert counted(broker, "kcat-scram") == 100


@pytest.mark.clients
@requires_kafka_tools
def test_kafka_producer_perf_test_over_scram_and_over_plain_with_tls(
    start_broker: StartBroker, users: Path, certificates: Certificates, tmp_path: Path
) -> None:
    broker, sasl_plaintext, sasl_ssl = start_sasl_broker(
        start_broker, users, certificates, "--partitions", "4"
    )
    jaas = 'org.apache.kafka.common.security.{}.{} required username="{}" password="{}";'
    configs = {
        "java-scram": (
            f"bootstrap.servers={sasl_plaintext}\nsecurity.protocol=SASL_PLAINTEXT\n"
            f"sasl.mechanism=SCRAM-SHA-512\n"
            f"sasl.jaas.config={jaas.format('scram', 'ScramLoginModule', USER, PASSWORD)}\n"
        ),
        "java-plain": (
            f"bootstrap.servers={sasl_ssl}\nsecurity.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
            f"sasl.jaas.config={jaas.format('plain', 'PlainLoginModule', USER, PASSWORD)}\n"
            f"ssl.truststore.type=PEM\nssl.truststore.location={certificates.ca}\n"
        ),
    }
    for topic, properties in configs.items():
        config = tmp_path / f"{topic}.properties"
        config.write_text(properties)
        output = run_tool(
            "kafka-producer-perf-test", "--topic", topic, "--num-records", "3000",
            "--record-size", "100", "--throughput", "-1", "--producer.config", str(config),
        )  # fmt: skip
        assert output.strip().splitlines()[-1].startswith("3000 records sent"), output
        assert counted(broker, topic) == 3000
