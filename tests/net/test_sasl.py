"""SASL listeners: confluent-kafka, kcat and Kafka's perf test produce over SASL_PLAINTEXT with
SCRAM-SHA-512 and over SASL_SSL with PLAIN and are counted exactly; a wrong password fails
and nothing is counted; a request before authentication, or after the session's lifetime
(KIP-368) without re-authenticating, closes the connection."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import shutil
import socket
import struct
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from scramp import ScramClient

from codec import ApiKey
from nullbroker.app.configuration import checked
from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.sessions.oauthbearer import ClosedUnanswered
from nullbroker.sessions.sasl import (
    COMPLETE,
    NotAuthenticated,
    SaslSession,
    ToldClient,
    UnexpectedRequest,
    Users,
    offered_order,
)
from nullbroker.sessions.scram import HASHES, AuthorizationIdRefused, ScramServer
from nullbroker.settings import Config, ConfigError
from tests.net.test_tls import counted, produce
from tests.support.broker_counts import samples
from tests.support.certificates import Certificates
from tests.support.kafka_tools import requires_kafka_tools, run_tool
from tests.support.kafka_wire import request_frame, size_prefix

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
        checked(Config(**settings))


def test_a_users_file_without_users_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "users.toml"
    path.write_text("[people]\n")
    with pytest.raises(ConfigError, match=re.escape("needs a [users] table")):
        checked(Config(listeners="SASL_PLAINTEXT://127.0.0.1:0", users=str(path)))


def start_sasl_broker(
    nullbroker_factory: StartBroker, users: Path, certs: Certificates, *flags: str
) -> tuple[RunningBroker, str, str]:
    """A broker with PLAINTEXT, SASL_PLAINTEXT and SASL_SSL listeners: it, and the two SASL
    bootstrap addresses."""
    broker = nullbroker_factory(
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
    nullbroker_factory: StartBroker, users: Path, certificates: Certificates
) -> None:
    broker, sasl_plaintext, sasl_ssl = start_sasl_broker(
        nullbroker_factory, users, certificates, "--partitions", "4"
    )
    assert produce(scram(sasl_plaintext), "scram", 2000) == []
    assert produce(plain_over_tls(sasl_ssl, certificates), "plain-tls", 2000) == []
    assert counted(broker, "scram") == counted(broker, "plain-tls") == 2000
    done = samples(broker.scrape(), "nullbroker_authentications_total")
    assert done[(("mechanism", "SCRAM-SHA-512"), ("result", "succeeded"))] >= 1
    assert done[(("mechanism", "PLAIN"), ("result", "succeeded"))] >= 1


@pytest.mark.clients
def test_a_wrong_password_fails_and_nothing_is_counted(
    nullbroker_factory: StartBroker, users: Path, certificates: Certificates
) -> None:
    broker, sasl_plaintext, sasl_ssl = start_sasl_broker(nullbroker_factory, users, certificates)
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
    nullbroker_factory: StartBroker, users: Path, certificates: Certificates
) -> None:
    lifetime_ms = str(int(LIFETIME_S * 1000))
    broker, sasl_plaintext, _ = start_sasl_broker(
        nullbroker_factory, users, certificates, "--sasl-session-lifetime-ms", lifetime_ms
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
    nullbroker_factory: StartBroker, users: Path, certificates: Certificates, tmp_path: Path
) -> None:
    broker, sasl_plaintext, sasl_ssl = start_sasl_broker(nullbroker_factory, users, certificates)
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
    nullbroker_factory: StartBroker, users: Path, certificates: Certificates, tmp_path: Path
) -> None:
    broker, sasl_plaintext, sasl_ssl = start_sasl_broker(
        nullbroker_factory, users, certificates, "--partitions", "4"
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


# -- the mechanisms and the connection's states, as Kafka 4.1.1's (tests/oracle compares
# -- them with Kafka's own answers on the wire) --------------------------------------------


def test_the_mechanisms_are_listed_in_the_order_kafka_lists_them() -> None:
    # Kafka lists a HashSet of sasl.enabled.mechanisms, not the configured order.
    configured = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
    assert offered_order(configured) == ("PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256", "OAUTHBEARER")
    # One bucket, in the order configured.
    assert offered_order(("SCRAM-SHA-512", "PLAIN")) == ("SCRAM-SHA-512", "PLAIN")


def scram_final(
    mechanism: str, server_first: bytes, bare: str, without_proof: str, password: str = PASSWORD
) -> bytes:
    """The client-final message a client knowing `password` sends: its proof signs `bare`,
    the server-first message and `without_proof`."""
    algorithm = HASHES[mechanism]
    fields = dict(part.split("=", 1) for part in server_first.decode().split(","))
    salted = hashlib.pbkdf2_hmac(
        algorithm, password.encode(), base64.b64decode(fields["s"]), int(fields["i"])
    )
    client_key = hmac.digest(salted, b"Client Key", algorithm)
    auth = f"{bare},{server_first.decode()},{without_proof}".encode()
    signature = hmac.digest(hashlib.new(algorithm, client_key).digest(), auth, algorithm)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def scram_server(mechanism: str = "SCRAM-SHA-256") -> ScramServer:
    return ScramServer(mechanism, Users.of({USER: PASSWORD}).scram[mechanism])


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_as_kafkas_server_serves_it(mechanism: str) -> None:
    server = scram_server(mechanism)
    first = server.first(b"n,,n=alice,r=abc")
    nonce, salt, iterations = (part.split("=", 1)[1] for part in first.decode().split(","))
    # Kafka's nonce and salt: random strings of base 36 (a 130-bit number).
    assert nonce.startswith("abc") and re.fullmatch(r"[0-9a-z]{1,26}", nonce[3:])
    assert re.fullmatch(r"[0-9a-z]{1,26}", base64.b64decode(salt).decode())
    assert iterations == "4096"
    client = ScramClient([mechanism], USER, PASSWORD)
    server = scram_server(mechanism)
    client.set_server_first(server.first(client.get_client_first().encode()).decode())
    client.set_server_final(server.final(client.get_client_final().encode()).decode())
    assert server.user == USER


@pytest.mark.parametrize(
    ("client_first", "bare"),
    [
        ("n,a=alice,n=alice,r=abc", "n=alice,r=abc"),  # an authorization id that is the user
        ("n,,m=ext,n=alice,r=abc", "n=alice,r=abc"),  # reserved: taken and ignored
        ("n,,n=alice,r=abc,foo=bar", "n=alice,r=abc,foo=bar"),  # an extension, signed
    ],
)
def test_scram_takes_what_kafkas_server_takes(client_first: str, bare: str) -> None:
    server = scram_server()
    first = server.first(client_first.encode())
    nonce = first.decode().split(",")[0][2:]
    # The channel binding is not checked, and the final message's extensions not signed.
    final = scram_final("SCRAM-SHA-256", first, bare, f"c=eSws,r={nonce}")
    assert server.final(final.replace(b",p=", b",x=1,p=")).startswith(b"v=")


def test_scram_refuses_what_kafkas_server_refuses() -> None:
    for refused in ("y,,n=alice,r=abc", "n,,n=carol,r=abc", "n,,n=alicé,r=abc", "hello",
                    "n,,n=alice,r=abc,tokenauth=true"):  # fmt: skip
        with pytest.raises(ValueError) as failure:
            scram_server().first(refused.encode())
        assert not isinstance(failure.value, AuthorizationIdRefused), refused
    with pytest.raises(AuthorizationIdRefused, match="may not act as") as told:
        scram_server().first(b"n,a=bob,n=alice,r=abc")
    assert told.value.told == (
        "Authentication failed: Client requested an authorization id that is different from "
        "username"
    )
    server = scram_server()
    first = server.first(b"n,,n=alice,r=abc")
    nonce = first.decode().split(",")[0][2:]
    with pytest.raises(ValueError, match="nonce"):  # the client's nonce, whole
        server.final(scram_final("SCRAM-SHA-256", first, "n=alice,r=abc", f"c=biws,r=abc{nonce}"))
    with pytest.raises(ClosedUnanswered):  # Kafka fails on it unexpectedly
        server.final(f"c=biws,r={nonce},p=AAAA".encode())


def sasl_session(lifetime_ms: int = 0) -> SaslSession:
    return SaslSession(
        Users.of({USER: PASSWORD}), ("PLAIN", "SCRAM-SHA-256"), lifetime_ms, Counter()
    )


def test_a_connection_goes_through_kafkas_states(monkeypatch: pytest.MonkeyPatch) -> None:
    metadata, versions = int(ApiKey.METADATA), int(ApiKey.API_VERSIONS)
    session = sasl_session()
    session.admit(versions, 3)
    with pytest.raises(NotAuthenticated):  # one ApiVersions before the handshake
        session.admit(versions, 3)
    session = sasl_session(lifetime_ms=60_000)
    session.admit(int(ApiKey.SASL_HANDSHAKE), 1)
    session.start("PLAIN")
    with pytest.raises(UnexpectedRequest):  # answered with its error, then closed
        session.admit(metadata, 12)
    session.admit(int(ApiKey.SASL_AUTHENTICATE), 2)
    assert session.step(f"\0{USER}\0{PASSWORD}".encode()) == (b"", True)
    assert session.state is COMPLETE and session.session_lifetime_ms == 60_000
    # Re-authentication: once at once, then not again within the second.
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    session.admit(int(ApiKey.SASL_HANDSHAKE), 1)
    assert session.expects_handshake
    session.start("PLAIN")
    session.step(f"\0{USER}\0{PASSWORD}".encode())
    now[0] += 0.5
    session.admit(int(ApiKey.SASL_HANDSHAKE), 1)
    assert not session.expects_handshake  # answered ILLEGAL_SASL_STATE, the connection kept
    now[0] += 1.0
    session.admit(int(ApiKey.SASL_HANDSHAKE), 1)
    session.start("SCRAM-SHA-256")  # another mechanism: the next frame closes the connection
    with pytest.raises(NotAuthenticated, match="not supported for re-authentication"):
        session.admit(int(ApiKey.SASL_AUTHENTICATE), 2)


def test_plain_refuses_with_kafkas_words() -> None:
    for token, told in (
        (b"alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
        (b"a\0b\0c\0d\0e", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
        (b"\0\0secret", "Authentication failed: username not specified"),
        (b"\0alice\0", "Authentication failed: password not specified"),
        (b"\0carol\0secret", "Authentication failed: Invalid username or password"),
        (b"bob\0alice\0alice-secret", "Authentication failed: Client requested an "
         "authorization id that is different from username"),
    ):  # fmt: skip
        session = sasl_session()
        session.start("PLAIN")
        with pytest.raises(ToldClient) as refused:
            session.step(token)
        assert session.told_client(refused.value) == told
