"""SASL on SASL_PLAINTEXT and SASL_SSL listeners: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512
(scramp), users from `--users FILE`; OAUTHBEARER with unsecured tokens, as Kafka's default
validator takes them (nullbroker.net.oauthbearer).

A connection on such a listener starts unauthenticated: it may send ApiVersions,
SaslHandshake (v1: the mechanism; its tokens then come in SaslAuthenticate requests) and
SaslAuthenticate; any other request closes it, as Kafka does. A wrong password is answered
SASL_AUTHENTICATION_FAILED and the connection closed. With `--sasl-session-lifetime-ms` the
session lasts that long (KIP-368): the client re-authenticates on the same connection before
it ends, or its next request closes the connection.

The users file is TOML: `[users]` with `name = "password"`. SCRAM credentials (salt, stored
and server keys) are derived from the passwords at start, 4096 iterations, as Kafka's
kafka-configs --add-config 'SCRAM-SHA-512=[password=...]' stores them.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from codec import ApiKey, ProtocolError

from ..toml_files import read_table
from .listeners import OAUTHBEARER, PLAIN, SCRAM_MECHANISMS
from .oauthbearer import CONTROL_A, INVALID_TOKEN

SCRAM_ITERATIONS = 4096
BEFORE_AUTHENTICATION = frozenset(
    map(int, (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE))
)
"""What a client may send before it has authenticated: plain ints, looked up per request."""


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
    """A request other than the SASL ones before authentication, or after the session's
    lifetime: the connection is closed, as Kafka closes it."""


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
    scram: Mapping[str, Mapping[str, tuple[Any, ...]]]

    @classmethod
    def read(cls, path: str) -> Users:
        _, users = read_table(path, "users", 'name = "password"', UsersError)
        for name, password in users.items():
            if not isinstance(password, str) or not password:
                raise UsersError(f"{path}: user {name!r} needs a password string")
        return cls.of(users)

    @classmethod
    def of(cls, passwords: Mapping[str, str]) -> Users:
        from scramp import ScramMechanism  # only a broker with SASL listeners needs it

        scram = {
            mechanism: {
                name: ScramMechanism(mechanism).make_auth_info(
                    password, iteration_count=SCRAM_ITERATIONS
                )
                for name, password in passwords.items()
            }
            for mechanism in SCRAM_MECHANISMS
        }
        return cls(dict(passwords), scram)


@dataclass(slots=True)
class SaslSession:
    """One connection's authentication: the mechanism under way, and whether it succeeded."""

    users: Users
    mechanisms: tuple[str, ...]
    lifetime_ms: int
    counts: Counter[tuple[str, str]]
    """Authentications by (mechanism, result): the broker's, for /metrics."""
    principal: str | None = None
    """The authenticated user."""
    expires_at: float | None = None
    """time.monotonic() when the session ends (with --sasl-session-lifetime-ms, or an
    OAUTHBEARER token's expiry)."""
    session_lifetime_ms: int = 0
    """What the last SaslAuthenticate tells the client of its session: 0 (for ever, or
    authentication not complete yet), else how long it lasts."""
    mechanism: str | None = None
    oauth_principal_claim: str = "sub"
    """The token claim OAUTHBEARER's principal comes from (Kafka's
    unsecuredValidatorPrincipalClaimName)."""
    _oauth_error: bytes | None = None
    """The invalid_token challenge sent, awaiting the client's %x01."""
    _scram: Any = field(default=None, repr=False)
    _scram_step: int = 0
    _scram_user: str | None = None
    """The user a SCRAM exchange is for (scramp's server does not keep it)."""

    def admit(self, api_key: int) -> None:
        """Let a request through, or raise NotAuthenticated (the connection closes)."""
        if api_key in BEFORE_AUTHENTICATION:
            return
        if self.principal is None:
            raise NotAuthenticated(
                f"request (API key {api_key}) before SASL authentication on a SASL listener"
            )
        if self.expires_at is not None and time.monotonic() > self.expires_at:
            raise NotAuthenticated(
                f"SASL session of {self.principal!r} expired without re-authentication "
                "(--sasl-session-lifetime-ms, or its OAUTHBEARER token's exp)"
            )

    def start(self, mechanism: str) -> bool:
        """SaslHandshake: begin `mechanism` (also to re-authenticate); False if not offered."""
        if mechanism not in self.mechanisms:
            return False
        self.mechanism = mechanism
        self.session_lifetime_ms = 0
        self._oauth_error = None
        self._scram = None
        self._scram_step = 0
        self._scram_user = None
        return True

    def step(self, token: bytes) -> tuple[bytes, bool]:
        """One SaslAuthenticate token: (the server's reply, whether authentication is
        complete). Raises ValueError with the reason it failed."""
        if self.mechanism is None:
            raise ValueError("SaslAuthenticate before SaslHandshake")
        if self.mechanism == PLAIN:
            return self._plain(token), True
        if self.mechanism == OAUTHBEARER:
            return self._oauthbearer(token)
        return self._scram_token(token)

    def told_client(self, failure: ValueError) -> str:
        """What Kafka tells a client whose authentication `failure` refused (the broker's
        log has the detail): PLAIN's server names a wrong user or password; anything else
        names only the phase and the mechanism, never whether the user exists."""
        if isinstance(failure, ToldClient):
            return failure.told
        phase = "re-authentication" if self.principal is not None else "authentication"
        return (
            f"Authentication failed during {phase} due to invalid credentials with SASL "
            f"mechanism {self.mechanism}"
        )

    def _plain(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise ValueError("a PLAIN token is authzid NUL user NUL password")
        authzid, user, password = (part.decode("utf-8", "replace") for part in parts)
        if authzid and authzid != user:
            raise ValueError(f"user {user!r} may not act as {authzid!r}")
        if self.users.passwords.get(user) != password:
            raise WrongPassword(f"authentication failed for user {user!r}: invalid credentials")
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
            token = validate_unsecured(first.token, now_ms, self.oauth_principal_claim)
        except InvalidToken:
            self._oauth_error = INVALID_TOKEN
            return INVALID_TOKEN, False
        if first.authzid and first.authzid != token.principal:
            told = (
                f"Authentication failed: Client requested an authorization id ({first.authzid}) "
                f"that is different from the token's principal name ({token.principal})"
            )
            raise ToldClient(told, told)
        self._authenticated(token.principal, credential_ms=token.expires_ms - now_ms)
        return b"", True

    def _scram_token(self, token: bytes) -> tuple[bytes, bool]:
        from scramp import ScramException, ScramMechanism

        assert self.mechanism is not None
        credentials = self.users.scram[self.mechanism]
        try:
            if self._scram_step == 0:
                self._scram = ScramMechanism(self.mechanism).make_server(
                    lambda name: self._credentials_of(credentials, name)
                )
                self._scram.set_client_first(token.decode("utf-8"))
                self._scram_step = 1
                return self._scram.get_server_first().encode(), False
            self._scram.set_client_final(token.decode("utf-8"))
            final = self._scram.get_server_final().encode()
        except (ScramException, KeyError, UnicodeDecodeError) as error:
            raise ValueError(
                f"authentication failed for user {self._scram_user!r}: invalid credentials "
                f"({error})"
            ) from None
        assert self._scram_user is not None
        self._authenticated(self._scram_user)
        return final, True

    def _credentials_of(
        self, credentials: Mapping[str, tuple[Any, ...]], name: str
    ) -> tuple[Any, ...]:
        self._scram_user = name
        if name not in credentials:
            raise KeyError(f"unknown user {name!r}")
        return credentials[name]

    def _authenticated(self, user: str, credential_ms: float | None = None) -> None:
        """`user` is authenticated; its session lasts --sasl-session-lifetime-ms, or as long
        as its credential (`credential_ms`, an OAUTHBEARER token's) if sooner, as Kafka's
        session lasts (SaslServerAuthenticator's calcCompletionTimesAndReturnSessionLifetimeMs)."""
        self.principal = user
        limits = [ms for ms in (self.lifetime_ms or None, credential_ms) if ms is not None]
        if limits:
            self.session_lifetime_ms = max(0, int(min(limits)))
            self.expires_at = time.monotonic() + self.session_lifetime_ms / 1000
        else:
            self.session_lifetime_ms = 0
            self.expires_at = None
