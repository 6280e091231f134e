"""Whole SASL conversations asked of Kafka 4.1.1's SASL_PLAINTEXT listener (the `kafka`
fixture's, tests/conftest.py KAFKA_SASL) and of a nullbroker given the same users and
mechanisms, every answer compared field by field (tests/support/differential.py): the handshake's
mechanism list, PLAIN, SCRAM-SHA-256 and -512 (client-first to server-final) and unsecured
OAUTHBEARER, their refusals and Kafka's words for them, what each broker does with requests
out of turn (answered with an error and closed, or closed unanswered: compared too), a
request after authenticating, re-authentication (KIP-368) and a session past its lifetime.

What is random by nature is allowed exactly, after checking it: SCRAM's server nonce and salt
(well formed, Kafka's kind, the client's nonce kept) and its server signature (verified with
scramp on each side, so a wrong one still fails); an OAUTHBEARER session's lifetime (within
the time the token had left while each broker was asked). Error messages are compared
word for word here, where clients show them to people."""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from scramp import ScramClient

from codec.apis import api_name
from nullbroker.app.pytest_plugin import StartBroker
from perf.kafka_broker import KafkaBroker
from tests.conftest import KAFKA_SASL
from tests.net.test_sasl import LISTENED
from tests.support.differential import (
    KAFKA,
    NULLBROKER,
    NULLBROKER_FLAGS,
    Answers,
    Difference,
    Pair,
    Side,
    request,
)
from tests.support.differential_allowed import SCRAM_MESSAGE, TOKEN_LIFETIME
from tests.support.kafka_wire import FrameStream, decode_response, request_frame, size_prefix

pytestmark = pytest.mark.differential

CLOSED = "<closed>"
"""What a request got from a broker that closed the connection instead of answering."""
USER, PASSWORD = "alice", KAFKA_SASL.users["alice"]
OTHER_USER, OTHER_PASSWORD = "bob", KAFKA_SASL.users["bob"]
SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
BASE36 = re.compile(r"[0-9a-z]{1,26}")
"""Kafka's nonces and salts: a 130-bit random number in base 36 (ScramFormatter)."""


@pytest.fixture
def sasl_nullbroker(nullbroker_factory: StartBroker, tmp_path: Path) -> str:
    """A nullbroker with KAFKA_SASL's listener (the harness's flags, PLAINTEXT beside it):
    the SASL_PLAINTEXT address."""
    users = tmp_path / "users.toml"
    users.write_text(
        "[users]\n" + "".join(f'{name} = "{word}"\n' for name, word in KAFKA_SASL.users.items())
    )
    broker = nullbroker_factory(
        *NULLBROKER_FLAGS,
        "--listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--users", str(users),
        "--sasl-mechanisms", ",".join(KAFKA_SASL.mechanisms),
        "--sasl-session-lifetime-ms", str(KAFKA_SASL.session_lifetime_ms),
    )  # fmt: skip
    found = re.search(r"SASL_PLAINTEXT on (\S+:\d+)", broker.wait_for_line(LISTENED, 10))
    assert found is not None
    return found[1]


class Conversations:
    """Connections to both brokers' SASL listeners, one Pair each, checked together."""

    def __init__(self, kafka: KafkaBroker, nullbroker: str) -> None:
        self.kafka = kafka
        self.nullbroker = nullbroker
        self.pairs: list[Pair] = []

    async def open(self, api_versions: bool = True) -> Pair:
        """A connection to each; with `api_versions`, ApiVersions first (as clients open
        one), whose answer the pair's versions come from."""
        if api_versions:
            pair = await Pair.open(self.kafka.sasl_bootstrap, self.nullbroker, self.kafka.node_id)
        else:
            sides = []
            for name, address in (
                (KAFKA, self.kafka.sasl_bootstrap),
                (NULLBROKER, self.nullbroker),
            ):
                host, port = address.rsplit(":", 1)
                stream = FrameStream(await trio.open_tcp_stream(host, int(port)))
                sides.append(Side(name, host, int(port), stream))
            pair = Pair(*sides, self.kafka.node_id)
        self.pairs.append(pair)
        return pair

    def check(self) -> None:
        for pair in self.pairs:
            pair.check()

    async def aclose(self) -> None:
        for pair in self.pairs:
            await pair.aclose()


@pytest.fixture
async def conversations(kafka: KafkaBroker, sasl_nullbroker: str) -> AsyncIterator[Conversations]:
    opened = Conversations(kafka, sasl_nullbroker)
    try:
        yield opened
    finally:
        await opened.aclose()


# -- asking both, closed connections compared too --------------------------------------


async def answer_or_closed(side: Side, payload: Any) -> Any:
    """The broker's answer, or CLOSED if it closed the connection instead."""
    side.correlation += 1
    try:
        await side.stream.send(size_prefix(request_frame(payload, side.correlation)))
        frame = await side.stream.receive_frame()
    except (EOFError, trio.BrokenResourceError, trio.ClosedResourceError):
        return CLOSED
    answered, body = decode_response(frame, payload.__api_key__, payload.__version__)
    assert answered == side.correlation
    return body


Check = Callable[[Pair, Answers], None]


async def exchange(pair: Pair, build: Any, check: Check | None = None) -> Answers:
    """One request to each broker (`build`: a request, or a function of the side), answers
    compared: a connection closed by one broker and not the other is a difference. `check`
    sees both answers first (to verify what is random and allow exactly it). A SASL error
    message is compared word for word."""
    answers = Answers(*[
        await answer_or_closed(side, build(side) if callable(build) else build)
        for side in pair.sides
    ])  # fmt: skip
    sample = build(pair.kafka) if callable(build) else build
    key, version = sample.__api_key__, sample.__version__
    closed = (answers.kafka is CLOSED, answers.nullbroker is CLOSED)
    if any(closed):
        if not all(closed):
            where = f"{type(sample).__name__} (v{version}): the connection"
            pair.unexplained.append(
                Difference(api_name(key), version, where, answers.kafka, answers.nullbroker)
            )
        return answers
    if check is not None:
        check(pair, answers)
    pair.record(key, version, answers)
    message = getattr(answers.kafka, "error_message", None)
    if key in (17, 36) and message != getattr(answers.nullbroker, "error_message", None):
        pair.unexplained.append(
            Difference(
                api_name(key), version, "error_message (word for word)", message,
                answers.nullbroker.error_message,
            )
        )  # fmt: skip
    return answers


async def raw_exchange(pair: Pair, token: bytes) -> Answers:
    """A token as a bare size-prefixed frame (after a SaslHandshake v0): each broker's
    bare reply, or CLOSED; compared as bytes."""
    replies = []
    for side in pair.sides:
        try:
            await side.stream.send(size_prefix(token))
            replies.append(await side.stream.receive_frame())
        except (EOFError, trio.BrokenResourceError, trio.ClosedResourceError):
            replies.append(CLOSED)
    answers = Answers(*replies)
    if answers.kafka != answers.nullbroker:
        pair.unexplained.append(
            Difference("SaslHandshake", 0, "bare token reply", answers.kafka, answers.nullbroker)
        )
    return answers


def handshake(mechanism: str, version: int = 1) -> Any:
    return request(17, version, mechanism=mechanism)


def authenticate(token: bytes | Callable[[Side], bytes], version: int = 2) -> Any:
    if callable(token):
        return lambda side: request(36, version, auth_bytes=token(side))
    return request(36, version, auth_bytes=token)


METADATA = request(3, 12, topics=[], allow_auto_topic_creation=False,
                   include_topic_authorized_operations=False)  # fmt: skip
"""Metadata of the brokers alone: the session's Kafka holds other tests' topics."""
METADATA_OF_A_TOPIC = request(3, 12, topics=[{"name": "t", "topic_id": uuid.UUID(int=0)}],
                              allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)  # fmt: skip
API_VERSIONS = request(18, 3, client_software_name="nb", client_software_version="1")


def plain(user: str = USER, password: str = PASSWORD, authzid: str = "") -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


async def authenticated(pair: Pair, version: int = 2) -> None:
    """PLAIN as alice: handshake and SaslAuthenticate, compared, both succeeding."""
    await exchange(pair, handshake("PLAIN"))
    answers = await exchange(pair, authenticate(plain(), version))
    assert answers.kafka is not CLOSED and answers.kafka.error_code == 0, answers.kafka


# -- PLAIN -----------------------------------------------------------------------------


async def test_plain_at_every_version_then_requests_as_kafka(
    conversations: Conversations,
) -> None:
    first = await conversations.open()
    for version in first.versions(36):
        pair = first if version == 0 else await conversations.open()
        await authenticated(pair, version)
        await exchange(pair, METADATA)
        # ApiVersions is served after authenticating too (its answer is compared whole by
        # tests/oracle/test_api_versions_as_kafka.py: the APIs nullbroker does not serve).
        served = [await answer_or_closed(side, API_VERSIONS) for side in pair.sides]
        assert [answer.error_code for answer in served] == [0, 0], served
    # SaslHandshake v0 (clients before Kafka 1.0): the token goes as a bare frame, and so
    # does the reply.
    pair = await conversations.open()
    await exchange(pair, handshake("PLAIN", version=0))
    await raw_exchange(pair, plain())
    await exchange(pair, METADATA)
    conversations.check()


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (plain(password="wrong"), "wrong password"),
        (plain(user="carol"), "unknown user"),
        (plain(authzid=OTHER_USER), "another authorization id"),
        (b"alice", "not three tokens"),
        (plain(user=""), "no user"),
        (plain(password=""), "no password"),
    ],
)
async def test_plain_refusals_as_kafka(
    conversations: Conversations, token: bytes, why: str
) -> None:
    pair = await conversations.open()
    await exchange(pair, handshake("PLAIN"))
    refused = await exchange(pair, authenticate(token))
    assert refused.kafka is not CLOSED and refused.kafka.error_code == 58, (why, refused.kafka)
    closed = await exchange(pair, METADATA)
    assert closed.kafka is CLOSED, why
    conversations.check()


async def test_requests_out_of_turn_are_answered_or_refused_as_kafka(
    conversations: Conversations,
) -> None:
    for name, steps in {
        "metadata before the handshake": [METADATA],
        "SaslAuthenticate before the handshake": [authenticate(plain())],
        "ApiVersions twice": [API_VERSIONS],  # the pair opened with one
        "a mechanism not offered": [handshake("GSSAPI")],
        "metadata after the handshake": [handshake("PLAIN"), METADATA_OF_A_TOPIC],
        "ApiVersions after the handshake": [handshake("PLAIN"), API_VERSIONS],
        "a second handshake": [handshake("PLAIN"), handshake("PLAIN")],
        "SaslAuthenticate after authenticating": [
            handshake("PLAIN"),
            authenticate(plain()),
            authenticate(plain()),
        ],
    }.items():
        pair = await conversations.open(api_versions=name == "ApiVersions twice")
        for step in steps:
            last = await exchange(pair, step)
        # Then whether the connection is still open, on both.
        if last.kafka is not CLOSED:
            await exchange(pair, METADATA)
    conversations.check()


# -- SCRAM -----------------------------------------------------------------------------


def scram_clients(pair: Pair, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {side.name: ScramClient([mechanism], user, password) for side in pair.sides}


def server_first_checked(clients: dict[str, Any], firsts: dict[str, str]) -> Check:
    """Each server-first message well formed as Kafka's: the client's nonce and a server
    nonce of Kafka's kind, a salt of Kafka's kind, 4096 iterations; then exactly this pair
    of messages is allowed (SCRAM_MESSAGE)."""

    def check(pair: Pair, answers: Answers) -> None:
        for side in pair.sides:
            answer = answers[side]
            if answer.error_code:
                return
            fields = dict(part.split("=", 1) for part in answer.auth_bytes.decode().split(","))
            client_nonce = firsts[side.name].rsplit("r=", 1)[1]
            assert fields["r"].startswith(client_nonce), (side.name, fields)
            assert BASE36.fullmatch(fields["r"][len(client_nonce) :]), (side.name, fields)
            assert BASE36.fullmatch(base64.b64decode(fields["s"]).decode()), (side.name, fields)
            assert fields["i"] == "4096", (side.name, fields)
            clients[side.name].set_server_first(answer.auth_bytes.decode())
        pair.identities[SCRAM_MESSAGE] = (answers.kafka.auth_bytes, answers.nullbroker.auth_bytes)

    return check


def server_final_verified(clients: dict[str, Any]) -> Check:
    """Each server's signature verified by its client (scramp raises on a wrong one); then
    exactly this pair of messages is allowed."""

    def check(pair: Pair, answers: Answers) -> None:
        if answers.kafka.error_code or answers.nullbroker.error_code:
            return
        for side in pair.sides:
            clients[side.name].set_server_final(answers[side].auth_bytes.decode())
        pair.identities[SCRAM_MESSAGE] = (answers.kafka.auth_bytes, answers.nullbroker.auth_bytes)

    return check


async def scram_conversation(
    pair: Pair, mechanism: str, user: str = USER, password: str = PASSWORD
) -> Answers:
    """Handshake, client-first, server-first, client-final, server-final: compared."""
    await exchange(pair, handshake(mechanism))
    clients = scram_clients(pair, mechanism, user, password)
    firsts = {name: client.get_client_first() for name, client in clients.items()}
    first = await exchange(
        pair,
        authenticate(lambda side: firsts[side.name].encode()),
        server_first_checked(clients, firsts),
    )
    if first.kafka is CLOSED or first.kafka.error_code:
        return first
    finals = {name: client.get_client_final() for name, client in clients.items()}
    return await exchange(
        pair, authenticate(lambda side: finals[side.name].encode()), server_final_verified(clients)
    )


@pytest.mark.parametrize("mechanism", SCRAM)
async def test_scram_as_kafka(conversations: Conversations, mechanism: str) -> None:
    pair = await conversations.open()
    done = await scram_conversation(pair, mechanism)
    assert done.kafka.error_code == 0 and done.kafka.auth_bytes.startswith(b"v=")
    await exchange(pair, METADATA)
    again = await scram_conversation(pair, mechanism)  # re-authentication (KIP-368)
    assert again.kafka.error_code == 0
    await exchange(pair, METADATA)
    for user, password in ((USER, "wrong"), ("carol", PASSWORD)):
        pair = await conversations.open()
        refused = await scram_conversation(pair, mechanism, user, password)
        assert refused.kafka.error_code == 58
        assert (await exchange(pair, METADATA)).kafka is CLOSED
    conversations.check()


# -- OAUTHBEARER -----------------------------------------------------------------------


def unsecured(claims: dict[str, Any], header: dict[str, Any] | None = None) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part(header or {'alg': 'none'})}.{part(claims)}."


def bearer(token: str, authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()


async def oauth_authenticated(pair: Pair, expires: int, subject: str = USER) -> Answers:
    """SaslAuthenticate with an unsecured token expiring at `expires` (s): each broker's
    session lifetime must be what the token had left while that broker was asked (Kafka's:
    exp less the time authentication ended), then exactly this pair is allowed."""
    token = bearer(unsecured({"sub": subject, "exp": expires, "iat": expires - 3600}))
    payload = authenticate(token)
    answers = []
    for side in pair.sides:
        before = time.time()
        answer = await answer_or_closed(side, payload)
        after = time.time()
        assert answer is not CLOSED and answer.error_code == 0, (side.name, answer)
        lifetime_ms = answer.session_lifetime.total_seconds() * 1000
        assert (
            expires * 1000 - after * 1000 - 1 <= lifetime_ms <= expires * 1000 - before * 1000 + 1
        )
        answers.append(answer)
    both = Answers(*answers)
    pair.identities[TOKEN_LIFETIME] = (
        both.kafka.session_lifetime,
        both.nullbroker.session_lifetime,
    )
    pair.record(36, payload.__version__, both)
    return both


async def test_oauthbearer_as_kafka(conversations: Conversations) -> None:
    pair = await conversations.open()
    await exchange(pair, handshake("OAUTHBEARER"))
    await oauth_authenticated(pair, int(time.time()) + 30)
    await exchange(pair, METADATA)
    now = int(time.time())
    for name, first in {
        "expired": bearer(unsecured({"sub": USER, "exp": now - 30})),
        "signed": bearer(unsecured({"sub": USER, "exp": now + 30}, {"alg": "HS256"})),
        "no subject": bearer(unsecured({"exp": now + 30})),
        "no alg": bearer(unsecured({"sub": USER, "exp": now + 30}, {"typ": "JWT"})),
        "another authorization id": bearer(unsecured({"sub": USER, "exp": now + 30}), "bob"),
        "no auth": b"n,,\x01host=x\x01\x01",
    }.items():
        pair = await conversations.open()
        await exchange(pair, handshake("OAUTHBEARER"))
        answer = await exchange(pair, authenticate(first))
        if answer.kafka is not CLOSED and answer.kafka.auth_bytes:  # the error challenge
            await exchange(pair, authenticate(b"\x01"))
        assert (await exchange(pair, METADATA)).kafka is CLOSED, name
    conversations.check()


# -- re-authentication and a session's end (KIP-368) ------------------------------------


async def test_reauthentication_as_kafka(conversations: Conversations) -> None:
    pair = await conversations.open()
    await authenticated(pair)
    await exchange(pair, METADATA)
    await authenticated(pair)  # a session has a lifetime: a handshake re-authenticates
    await exchange(pair, METADATA)
    # Re-authenticating as someone else fails; with another mechanism, the connection closes
    # at the next frame.
    pair = await conversations.open()
    await authenticated(pair)
    await exchange(pair, handshake("PLAIN"))
    refused = await exchange(pair, authenticate(plain(OTHER_USER, OTHER_PASSWORD)))
    assert refused.kafka.error_code == 58
    assert (await exchange(pair, METADATA)).kafka is CLOSED
    pair = await conversations.open()
    await authenticated(pair)
    await exchange(pair, handshake("SCRAM-SHA-256"))
    assert (await exchange(pair, authenticate(b"n,,n=alice,r=abc"))).kafka is CLOSED
    conversations.check()


async def test_a_session_past_its_lifetime_as_kafka(conversations: Conversations) -> None:
    """An OAUTHBEARER session ends at its token's exp: the next request closes the
    connection, but a handshake re-authenticates it, on both."""
    expires = int(time.time()) + 3
    ended, renewed = await conversations.open(), await conversations.open()
    for pair in (ended, renewed):
        await exchange(pair, handshake("OAUTHBEARER"))
        await oauth_authenticated(pair, expires)
        await exchange(pair, METADATA)
    while time.time() < expires + 0.5:  # the session's end, the same for both brokers
        await trio.sleep(0.2)
    assert (await exchange(ended, METADATA)).kafka is CLOSED
    await exchange(renewed, handshake("OAUTHBEARER"))
    await oauth_authenticated(renewed, int(time.time()) + 30)
    await exchange(renewed, METADATA)
    conversations.check()
