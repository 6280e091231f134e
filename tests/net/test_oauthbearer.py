"""OAUTHBEARER with unsecured tokens, as Kafka's default validator
(OAuthBearerUnsecuredValidatorCallbackHandler) takes them: the validator's checks, the
exchange of a SASL session (a refused token gets the invalid_token challenge, the client's
%x01 then fails the authentication with it), the session's lifetime, what Kafka 4.1.1
answered the same requests on the wire, and confluent-kafka producing over it."""

from __future__ import annotations

import base64
import json
import re
import socket
import time
from collections import Counter
from typing import Any

import pytest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from nullbroker.app.configuration import checked
from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.sessions.oauthbearer import (
    ClosedUnanswered,
    InvalidToken,
    MalformedMessage,
    Token,
    parse_client_first,
    validate_unsecured,
)
from nullbroker.sessions.sasl import SaslSession, ToldClient, Users
from nullbroker.settings import Config, ConfigError
from tests.net.test_sasl import LISTENED, METADATA, Inconclusive, answered_within, call
from tests.net.test_tls import counted, produce
from tests.support.broker_counts import samples
from tests.support.kafka_wire import decode_response

NOW_MS = 1_790_000_000_000
NOW_S = NOW_MS // 1000


def encoded(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def unsecured(claims: dict[str, Any], header: dict[str, Any] | None = None) -> str:
    """An unsecured JWS: header, claims and an empty signature."""
    return f"{encoded(header or {'alg': 'none'})}.{encoded(claims)}."


def client_first(token: str, authzid: str = "") -> bytes:
    """RFC 7628's initial client response, as franz-go and librdkafka send it."""
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()


def test_a_good_token_names_its_subject_and_expiry() -> None:
    token = unsecured({"sub": "alice", "iat": NOW_S - 10, "exp": NOW_S + 3600})
    assert validate_unsecured(token, NOW_MS) == Token("alice", (NOW_S + 3600) * 1000)


def test_the_principal_claim_is_a_setting() -> None:
    token = unsecured({"sub": "alice", "user": "bob", "exp": NOW_S + 60})
    assert validate_unsecured(token, NOW_MS, principal_claim="user").principal == "bob"
    with pytest.raises(InvalidToken, match="required claim missing: principal"):
        validate_unsecured(token, NOW_MS, principal_claim="principal")


@pytest.mark.parametrize(
    ("claims", "header", "why"),
    [
        ({"sub": "alice", "exp": NOW_S - 60}, None, "on or after the Expiration Time"),
        # Kafka refuses a token that expires this very millisecond.
        ({"sub": "alice", "exp": NOW_S}, None, "on or after the Expiration Time"),
        ({"sub": "alice"}, None, "no expiration time"),
        ({"exp": NOW_S + 60}, None, "required claim missing: sub"),
        ({"sub": 7, "exp": NOW_S + 60}, None, "sub claim is not a string"),
        ({"sub": "alice", "exp": NOW_S + 60}, {"alg": "HS256"}, "'none' for an algorithm"),
        ({"sub": "alice", "exp": NOW_S + 60}, {"alg": 5}, "'none' for an algorithm"),
        ({"sub": "alice", "exp": NOW_S + 60, "iat": NOW_S + 5}, None, "Issued At value"),
        ({"sub": "alice", "exp": NOW_S - 1, "iat": NOW_S - 1}, None, "Expiration Time"),
        ({"sub": "alice", "exp": "soon"}, None, "exp claim is not a number"),
    ],
)
def test_tokens_the_unsecured_validator_refuses(
    claims: dict[str, Any], header: dict[str, Any] | None, why: str
) -> None:
    with pytest.raises(InvalidToken, match=re.escape(why)):
        validate_unsecured(unsecured(claims, header), NOW_MS)


def test_a_signed_or_malformed_jws_is_refused() -> None:
    good = unsecured({"sub": "alice", "exp": NOW_S + 60})
    with pytest.raises(InvalidToken, match="must not contain a digital signature"):
        validate_unsecured(good + "c2lnbmVk", NOW_MS)
    with pytest.raises(InvalidToken, match="three dot-separated"):
        validate_unsecured(good.rstrip("."), NOW_MS)
    with pytest.raises(InvalidToken, match="Base64URL-encoded JSON"):
        validate_unsecured("bm90IGpzb24." + good.split(".")[1] + ".", NOW_MS)


def test_the_client_first_message_is_read_as_kafka_reads_it() -> None:
    first = parse_client_first(b"n,a=alice,\x01host=h\x01auth=Bearer abc.def.\x01port=9\x01\x01")
    assert (first.authzid, first.token) == ("alice", "abc.def.")
    assert parse_client_first(b"n,,\x01auth=bearer x\x01\x01").token == "x"
    for message, why in (
        (b"n,,\x01auth=Bearer abc\x01", "invalid OAUTHBEARER client first message"),
        (b"y,,\x01auth=Bearer abc\x01\x01", "invalid OAUTHBEARER client first message"),
        (b"n,,\x01host=h\x01\x01", "'auth' not specified"),
        (b"n,,\x01auth=Bearer a b\x01\x01", "invalid 'auth' format"),
    ):
        with pytest.raises(MalformedMessage, match=re.escape(why)):
            parse_client_first(message)


def test_what_kafka_fails_on_unexpectedly_closes_the_connection_unanswered() -> None:
    # Kafka 4.1.1 closes the connection without a SaslAuthenticate answer for these (an
    # IllegalArgumentException while it words the error, a NullPointerException).
    with pytest.raises(ClosedUnanswered, match="invalid scheme"):
        parse_client_first(b"n,,\x01auth=Basic abc\x01\x01")
    with pytest.raises(ClosedUnanswered, match="no alg"):
        validate_unsecured(unsecured({"sub": "a", "exp": NOW_S + 60}, {"typ": "JWT"}), NOW_MS)
    with pytest.raises(ClosedUnanswered, match="no alg"):
        validate_unsecured(unsecured({"sub": "a", "exp": NOW_S + 60}, {"alg": None}), NOW_MS)


def oauth_session() -> SaslSession:
    session = SaslSession(Users.of({}), ("OAUTHBEARER",), 0, Counter())
    session.start("OAUTHBEARER")
    return session


def test_a_session_authenticates_the_tokens_subject_until_its_expiry() -> None:
    session = oauth_session()
    token = unsecured({"sub": "alice", "exp": time.time() + 60})
    assert session.step(client_first(token)) == (b"", True)
    assert session.principal == "alice"
    # As Kafka: the session lasts as long as the token (KIP-368's session lifetime), even
    # without --sasl-session-lifetime-ms; with it, whichever ends first.
    assert 59_000 < session.session_lifetime_ms <= 60_000
    shorter = SaslSession(Users.of({}), ("OAUTHBEARER",), 5000, Counter())
    shorter.start("OAUTHBEARER")
    assert shorter.step(client_first(token)) == (b"", True)
    assert shorter.session_lifetime_ms == 5000


def test_a_refused_token_gets_the_invalid_token_challenge_then_fails_with_it() -> None:
    session = oauth_session()
    expired = unsecured({"sub": "alice", "exp": time.time() - 60})
    assert session.step(client_first(expired)) == (b'{"status":"invalid_token"}', False)
    with pytest.raises(ToldClient) as refused:
        session.step(b"\x01")
    assert session.told_client(refused.value) == '{"status":"invalid_token"}'
    assert session.principal is None


def test_an_authorization_id_other_than_the_subject_is_refused() -> None:
    session = oauth_session()
    token = unsecured({"sub": "alice", "exp": time.time() + 60})
    with pytest.raises(ToldClient) as refused:
        session.step(client_first(token, authzid="bob"))
    assert "authorization id (bob) that is different from the token's principal name (alice)" in (
        session.told_client(refused.value)
    )


def test_a_malformed_first_message_fails_at_once_naming_only_the_mechanism() -> None:
    session = oauth_session()
    with pytest.raises(ValueError) as refused:
        session.step(b"\x01")  # %x01 with no challenge outstanding is no first message
    assert session.told_client(refused.value) == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism OAUTHBEARER"
    )


def test_oauthbearer_alone_needs_no_users_but_a_principal_claim() -> None:
    checked(Config(listeners="SASL_PLAINTEXT://127.0.0.1:0", sasl_mechanisms="OAUTHBEARER"))
    with pytest.raises(ConfigError, match="needs --users"):
        checked(
            Config(listeners="SASL_PLAINTEXT://127.0.0.1:0", sasl_mechanisms="OAUTHBEARER,PLAIN")
        )
    with pytest.raises(ConfigError, match="must not be blank"):
        checked(Config(oauthbearer_principal_claim=" "))


def start_oauthbearer_broker(
    nullbroker_factory: StartBroker,
) -> tuple[RunningBroker, tuple[str, int]]:
    """A broker whose SASL_PLAINTEXT listener offers OAUTHBEARER alone; its address."""
    broker = nullbroker_factory(
        "--listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--sasl-mechanisms", "OAUTHBEARER",
    )  # fmt: skip
    found = re.search(r"SASL_PLAINTEXT on (\S+):(\d+)", broker.wait_for_line(LISTENED, 10))
    assert found is not None
    return broker, (found[1], int(found[2]))


@pytest.mark.clients
def test_confluent_kafka_produces_over_oauthbearer_with_librdkafkas_unsecured_token(
    nullbroker_factory: StartBroker,
) -> None:
    broker, (host, port) = start_oauthbearer_broker(nullbroker_factory)
    # librdkafka's builtin unsecured JWT: alg none, sub from principal=, iat and exp.
    config = {"bootstrap.servers": f"{host}:{port}", "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanisms": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
              "sasl.oauthbearer.config": "principal=alice lifeSeconds=600"}  # fmt: skip
    assert produce(config, "oauth", 500) == []
    assert counted(broker, "oauth") == 500
    done = samples(broker.scrape(), "nullbroker_authentications_total")
    assert done[(("mechanism", "OAUTHBEARER"), ("result", "succeeded"))] >= 1


def authenticate_with(sock: socket.socket, token: bytes) -> Any:
    """SaslHandshake OAUTHBEARER, then one SaslAuthenticate (v2): its answer, or None if the
    broker closed the connection."""
    assert call(sock, SaslHandshakeRequest(mechanism="OAUTHBEARER")) is not None
    answer = call(sock, SaslAuthenticateRequest(auth_bytes=token), 2)
    return None if answer is None else decode_response(answer, 36, 2)[1]


TOKEN_LIFE_S = 6.0
"""How long the token of the test below lives: a loaded machine's pauses do not decide it."""


def token_life_run(sock: socket.socket) -> None:
    """Authenticate with a token that expires in TOKEN_LIFE_S: the session's lifetime is what
    is left of the token when the broker reads it (between the clock readings either side of
    the exchange), a request within it is answered and one after it is refused."""
    before_wall, before = time.time(), time.monotonic()
    expires = before_wall + TOKEN_LIFE_S
    answer = authenticate_with(sock, client_first(unsecured({"sub": "alice", "exp": expires})))
    after_wall, after = time.time(), time.monotonic()
    assert (answer.error_code, answer.error_message) == (0, "")
    lifetime = answer.session_lifetime.total_seconds()
    assert expires - after_wall - 0.001 <= lifetime <= expires - before_wall + 0.001, lifetime
    answered_within(sock, METADATA, 3, ends_by=before + lifetime)
    time.sleep(max(0.0, after + lifetime + 0.2 - time.monotonic()))  # past the token's exp
    assert call(sock, METADATA, 4) is None, "answered after the token expired"


@pytest.mark.clients
def test_on_the_wire_as_kafka_answers(nullbroker_factory: StartBroker) -> None:
    """What Kafka 4.1.1 answered the same requests: an empty error message (not null) and
    the token's remaining life as the session's; after it, the next request closes the
    connection; a header without alg closes it unanswered."""
    broker, address = start_oauthbearer_broker(nullbroker_factory)
    for runs in range(1, 4):
        with socket.create_connection(address, timeout=30) as sock:
            try:
                token_life_run(sock)
                break
            except Inconclusive:
                assert runs < 3, "three runs in a row were too slow to decide anything"
    with socket.create_connection(address, timeout=10) as sock:
        no_alg = unsecured({"sub": "alice", "exp": time.time() + 60}, {"typ": "JWT"})
        assert authenticate_with(sock, client_first(no_alg)) is None
    log = broker.stderr_text()
    assert "expired without re-authentication" in log and "has no alg" in log
