"""SASL on SASL_PLAINTEXT and SASL_SSL listeners: PLAIN and SCRAM-SHA-256/512
(nullbroker.sessions.scram) against the users of `--users FILE`; OAUTHBEARER with unsecured tokens,
as Kafka's default validator takes them (nullbroker.sessions.oauthbearer).

A connection goes through the states of Kafka's SaslServerAuthenticator, and a request that
does not fit its state is answered as Kafka answers it. Before SaslHandshake it may send one
ApiVersions, and nothing else: any other request (SaslAuthenticate too) closes the connection.
A handshake naming a mechanism not offered is answered UNSUPPORTED_SASL_MECHANISM, then the
connection closes. After the handshake (v1) come SaslAuthenticate requests only: another
request is answered with its own error response (ILLEGAL_SASL_STATE), then the connection
closes. A handshake v0 is followed by the mechanism's tokens as bare size-prefixed frames, as
before Kafka 1.0. A failed authentication is answered SASL_AUTHENTICATION_FAILED and the
connection closed.

Once authenticated, SaslHandshake and SaslAuthenticate are answered ILLEGAL_SASL_STATE, the
connection kept, unless the session has a lifetime (`--sasl-session-lifetime-ms`, an
OAUTHBEARER token's expiry: KIP-368): then a SaslHandshake begins re-authentication (with the
same mechanism and for the same principal, or it fails), at most once a second. A session
past its lifetime closes the connection at the next request other than that handshake.

The users file is TOML: `[users]` with `name = "password"`. SCRAM credentials are made from
the passwords at start, as `kafka-storage format --add-scram` makes them (4096 iterations).
"""

from __future__ import annotations

import struct
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from codec import KAFKA_4_RANGES, ApiKey, ProtocolError

from ..java_hashing import hash_set_capacity, java_hash_order
from ..settings import ConfigError
from ..toml_files import read_table
from .mechanisms import OAUTHBEARER, PLAIN, SCRAM_MECHANISMS
from .oauthbearer import CONTROL_A, INVALID_TOKEN
from .scram import AuthorizationIdRefused, Credential, ScramServer

API_VERSIONS = int(ApiKey.API_VERSIONS)
SASL_HANDSHAKE = int(ApiKey.SASL_HANDSHAKE)
SASL_AUTHENTICATE = int(ApiKey.SASL_AUTHENTICATE)
API_VERSIONS_MAX = KAFKA_4_RANGES[ApiKey.API_VERSIONS].max_version
MIN_REAUTHENTICATION_INTERVAL_S = 1.0
"""Kafka re-authenticates a connection at most once a second (KafkaChannel): a handshake
sooner is answered as on an authenticated connection."""
_SIZE = struct.Struct(">i")

# Where a connection is in its authentication (Kafka's SaslServerAuthenticator states).
VERSIONS_OR_HANDSHAKE = "versions or handshake"
HANDSHAKE = "handshake"
AUTHENTICATE = "authenticate"
RAW_TOKENS = "raw tokens"
"""After a SaslHandshake v0: the tokens come as bare frames, not SaslAuthenticate requests."""
BAD_MECHANISM = "bad mechanism"
"""Re-authentication asked for another mechanism: the next frame closes the connection."""
COMPLETE = "complete"


class UsersError(ValueError):
    """A users file that cannot be used; the message says why."""


class ToldClient(ValueError):
    """A refusal whose reason Kafka tells the client (`told`); the message is the log's."""

    def __init__(self, message: str, told: str) -> None:
        super().__init__(message)
        self.told = told


class WrongPassword(ToldClient):
    """PLAIN's unknown user or wrong password."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "Authentication failed: Invalid username or password")


class NotAuthenticated(ProtocolError):
    """A request that closes the connection unanswered: one other than those a client may
    send before it has authenticated, or after the session's lifetime."""


class UnexpectedRequest(ProtocolError):
    """A request other than SaslAuthenticate while a client authenticates: Kafka answers it
    with its own error response (ILLEGAL_SASL_STATE), then closes the connection."""


class SaslAuthenticationFailed(ProtocolError):
    """A failed authentication: its answer (SASL_AUTHENTICATION_FAILED) is sent, then the
    connection is closed."""

    def __init__(self, message: str, response: bytes) -> None:
        super().__init__(message)
        self.response = response


@dataclass(frozen=True, slots=True)
class Users:
    """Passwords by user name, and each user's SCRAM credentials by mechanism."""

    passwords: Mapping[str, str]
    scram: Mapping[str, dict[str, Credential]]

    @classmethod
    def read(cls, path: str) -> Users:
        _, users = read_table(path, "users", 'name = "password"', UsersError)
        for name, password in users.items():
            if not isinstance(password, str) or not password:
                raise UsersError(f"{path}: user {name!r} needs a password string")
        return cls.of(users)

    @classmethod
    def of(cls, passwords: Mapping[str, str]) -> Users:
        scram = {
            mechanism: {
                name: Credential.of(mechanism, password) for name, password in passwords.items()
            }
            for mechanism in SCRAM_MECHANISMS
        }
        return cls(dict(passwords), scram)


def read_users(path: str, setting: str) -> Users:
    """The users file at `path`, read and checked; ConfigError names the setting as the
    user gave it (`setting`)."""
    try:
        return Users.read(path)
    except UsersError as error:
        raise ConfigError(f"{setting} {error}") from None


def offered_order(mechanisms: tuple[str, ...]) -> tuple[str, ...]:
    """The mechanisms as Kafka lists them in SaslHandshake: the order of a HashSet of the
    listener's sasl.enabled.mechanisms (SaslServerAuthenticator), not the configured one."""
    return tuple(java_hash_order(mechanisms, hash_set_capacity(len(set(mechanisms)))))


@dataclass(slots=True)
class SaslSession:
    """One connection's authentication: where it is (`state`), the mechanism under way, and
    who it authenticated."""

    users: Users
    mechanisms: tuple[str, ...]
    lifetime_ms: int
    counts: Counter[tuple[str, str]]
    """Authentications by (mechanism, result): the broker's, for /metrics."""
    oauth_principal_claim: str = "sub"
    """The token claim OAUTHBEARER's principal comes from (Kafka's
    unsecuredValidatorPrincipalClaimName)."""
    state: str = VERSIONS_OR_HANDSHAKE
    principal: str | None = None
    """The authenticated user (during a re-authentication, the one authenticated before)."""
    expires_at: float | None = None
    """time.monotonic() when the session ends (with --sasl-session-lifetime-ms, or an
    OAUTHBEARER token's expiry); None: it does not, and it is not re-authenticated."""
    session_lifetime_ms: int = 0
    """What the last SaslAuthenticate tells the client of its session: 0 (for ever, or
    authentication not complete yet), else how long it lasts."""
    mechanism: str | None = None
    offered: tuple[str, ...] = ()
    """The mechanisms in the order SaslHandshake lists them (Kafka's)."""
    _reauthenticating: bool = False
    _reauthenticated_at: float | None = None
    """time.monotonic() the last re-authentication began."""
    _bad_mechanism: str = ""
    _oauth_error: bytes | None = None
    """The invalid_token challenge sent, awaiting the client's %x01."""
    _scram: ScramServer | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.offered = offered_order(self.mechanisms)

    def admit(self, api_key: int, api_version: int) -> None:
        """Let a request through to its handler, or raise NotAuthenticated (the connection
        closes unanswered) or UnexpectedRequest (answered with its error, then closed)."""
        state = self.state
        if state is COMPLETE:
            if api_key == SASL_HANDSHAKE and self._reauthentication_begins():
                return
            if self.expires_at is not None and time.monotonic() > self.expires_at:
                raise NotAuthenticated(
                    f"SASL session of {self.principal!r} expired without re-authentication "
                    "(--sasl-session-lifetime-ms, or its OAUTHBEARER token's exp)"
                )
            return
        if state is AUTHENTICATE:
            if api_key != SASL_AUTHENTICATE:
                raise UnexpectedRequest(f"request (API key {api_key}) during SASL authentication")
            return
        if state is BAD_MECHANISM:
            raise NotAuthenticated(self._bad_mechanism)
        if api_key == SASL_HANDSHAKE:
            return
        if api_key == API_VERSIONS and state is VERSIONS_OR_HANDSHAKE:
            if api_version <= API_VERSIONS_MAX:  # else answered UNSUPPORTED_VERSION: again
                self.state = HANDSHAKE
            return
        raise NotAuthenticated(
            f"request (API key {api_key}) before SASL authentication on a SASL listener"
        )

    def _reauthentication_begins(self) -> bool:
        """Whether a SaslHandshake on an authenticated connection begins re-authenticating
        it (KafkaChannel.maybeBeginServerReauthentication): only a session with a lifetime
        is, and at most once a second."""
        if self.expires_at is None:
            return False
        now = time.monotonic()
        last = self._reauthenticated_at
        if last is not None and now - last < MIN_REAUTHENTICATION_INTERVAL_S:
            return False
        self._reauthenticated_at = now
        self._reauthenticating = True
        self.state = HANDSHAKE
        return True

    @property
    def expects_handshake(self) -> bool:
        """Whether a SaslHandshake now begins an authentication (else it is answered
        ILLEGAL_SASL_STATE, as on an authenticated connection)."""
        return self.state is VERSIONS_OR_HANDSHAKE or self.state is HANDSHAKE

    def start(self, mechanism: str, raw_tokens: bool = False) -> None:
        """SaslHandshake of an offered `mechanism`: its tokens come next, in SaslAuthenticate
        requests or (`raw_tokens`, a handshake v0) as bare frames."""
        previous = self.mechanism
        if self._reauthenticating and mechanism != previous:
            # As Kafka: the handshake is answered, the next frame closes the connection.
            self.state = BAD_MECHANISM
            self._bad_mechanism = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{previous}'"
            )
            return
        self.mechanism = mechanism
        self.state = RAW_TOKENS if raw_tokens else AUTHENTICATE
        self.session_lifetime_ms = 0
        self._oauth_error = None
        self._scram = None

    def step(self, token: bytes) -> tuple[bytes, bool]:
        """One token: (the server's reply, whether authentication is complete). Raises
        ValueError with the reason it failed."""
        mechanism = self.mechanism
        if mechanism == PLAIN:
            return self._plain(token), True
        if mechanism == OAUTHBEARER:
            return self._oauthbearer(token)
        return self._scram_token(token)

    def raw_reply(self, frame: bytes) -> bytes:
        """A token that came as a bare frame (after a handshake v0): the reply, a bare
        size-prefixed frame too. A refused token closes the connection unanswered, as
        Kafka closes it."""
        mechanism = self.mechanism
        assert mechanism is not None
        try:
            reply, complete = self.step(bytes(frame))
        except ValueError as failure:
            self.counts[mechanism, "failed"] += 1
            raise SaslAuthenticationFailed(str(failure), b"") from None
        if complete:
            self.counts[mechanism, "succeeded"] += 1
        return _SIZE.pack(len(reply)) + reply

    def told_client(self, failure: ValueError) -> str:
        """What Kafka tells a client whose authentication `failure` refused (the broker's
        log has the detail): PLAIN's server names a wrong user or password; anything else
        names only the phase and the mechanism, never whether the user exists."""
        if isinstance(failure, ToldClient):
            return failure.told
        phase = "re-authentication" if self._reauthenticating else "authentication"
        return (
            f"Authentication failed during {phase} due to invalid credentials with SASL "
            f"mechanism {self.mechanism}"
        )

    def _plain(self, token: bytes) -> bytes:
        """As Kafka's PlainSaslServer: authzid NUL user NUL password, the messages its own."""
        parts = token.decode("utf-8", "replace").split("\0")
        if len(parts) != 3:
            got = min(len(parts), 4)  # Kafka splits at most four times
            told = f"Invalid SASL/PLAIN response: expected 3 tokens, got {got}"
            raise ToldClient(told, told)
        authzid, user, password = parts
        if not user:
            raise ToldClient(
                "PLAIN without a user", "Authentication failed: username not specified"
            )
        if not password:
            raise ToldClient(
                "PLAIN without a password", "Authentication failed: password not specified"
            )
        if self.users.passwords.get(user) != password:
            raise WrongPassword(f"authentication failed for user {user!r}: invalid credentials")
        if authzid and authzid != user:
            raise ToldClient(
                f"user {user!r} may not act as {authzid!r}",
                "Authentication failed: Client requested an authorization id that is "
                "different from username",
            )
        self._authenticated(user)
        return b""

    def _oauthbearer(self, token: bytes) -> tuple[bytes, bool]:
        """As Kafka's OAuthBearerSaslServer: a refused token is answered with the error
        challenge, and the client's %x01 after it fails the authentication with it."""
        from .oauthbearer import InvalidToken, parse_client_first, validate_unsecured

        error, self._oauth_error = self._oauth_error, None
        if error is not None and token == CONTROL_A:
            raise ToldClient(f"OAUTHBEARER token refused: {error.decode()}", error.decode())
        first = parse_client_first(token)  # MalformedMessage: a ValueError, told generically
        now_ms = int(time.time() * 1000)
        try:
            valid = validate_unsecured(first.token, now_ms, self.oauth_principal_claim)
        except InvalidToken:
            self._oauth_error = INVALID_TOKEN
            return INVALID_TOKEN, False
        if first.authzid and first.authzid != valid.principal:
            told = (
                f"Authentication failed: Client requested an authorization id ({first.authzid}) "
                f"that is different from the token's principal name ({valid.principal})"
            )
            raise ToldClient(told, told)
        self._authenticated(valid.principal, credential_ms=valid.expires_ms - now_ms)
        return b"", True

    def _scram_token(self, token: bytes) -> tuple[bytes, bool]:
        assert self.mechanism is not None
        server = self._scram
        try:
            if server is None:
                server = self._scram = ScramServer(self.mechanism, self.users.scram[self.mechanism])
                return server.first(token), False
            final = server.final(token)
        except AuthorizationIdRefused as refused:
            raise ToldClient(str(refused), refused.told) from None
        except ValueError as error:
            raise ValueError(
                f"authentication failed for user {server.user!r}: invalid credentials ({error})"
            ) from None
        assert server.user is not None
        self._authenticated(server.user)
        return final, True

    def _authenticated(self, user: str, credential_ms: float | None = None) -> None:
        """`user` is authenticated; its session lasts --sasl-session-lifetime-ms, or as long
        as its credential (`credential_ms`, an OAUTHBEARER token's) if sooner, as Kafka's
        session lasts (SaslServerAuthenticator's calcCompletionTimesAndReturnSessionLifetimeMs).
        Re-authenticated, it must be the user it was."""
        if self._reauthenticating and user != self.principal:
            told = (
                "Cannot change principals during re-authentication from "
                f"User.{self.principal}: User.{user}"
            )
            raise ToldClient(told, told)
        self.principal = user
        self.state = COMPLETE
        self._reauthenticating = False
        limits = [ms for ms in (self.lifetime_ms or None, credential_ms) if ms is not None]
        if limits:
            self.session_lifetime_ms = max(0, int(min(limits)))
            self.expires_at = time.monotonic() + self.session_lifetime_ms / 1000
        else:
            self.session_lifetime_ms = 0
            self.expires_at = None
