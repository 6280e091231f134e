"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802) as Kafka's ScramSaslServer serves them: its
message formats (Kafka's regular expressions: a GS2 header of "n" only, an authorization id
that must be the user, a reserved "m=" part and extensions taken and ignored), its nonces and
salts (a 130-bit random number in base 36, as ScramFormatter.secureRandomString makes them),
the auth message rebuilt from what it parsed (the client-final message without its
extensions), the channel binding not checked, and the client's nonce required whole.

Failures are told as Kafka tells them: an authorization id other than the user by its own
message (AuthorizationIdRefused); anything else (an unknown user, a wrong proof, a malformed
message) as a ValueError, which the client hears of only as "invalid credentials" with the
mechanism's name; a proof of the wrong length, which Kafka fails on unexpectedly, closes the
connection unanswered (ClosedUnanswered).

Written here rather than on scramp, which the tests use as the independent client and check
of this server: scramp's server refuses an authorization id, the reserved "m=" part and
extensions, all of which Kafka takes, and checks the channel binding Kafka leaves unchecked,
and an answer that differs from Kafka's on those is what tests/oracle would catch.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from ..java_hashing import java_hash_order
from .oauthbearer import ClosedUnanswered

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
ITERATIONS = 4096
"""What Kafka's credentials made at format time (and by kafka-configs) use by default; also
its minimum for both mechanisms."""
TOKEN_AUTH = "tokenauth"
"""The extension of delegation tokens, which nullbroker does not serve (as a Kafka with none)."""
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"

# Kafka's ScramMessages patterns, as Python expressions ([\x01-\x7F&&[^=,]] and the like).
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_BASE64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})"
)
_CLIENT_FINAL = re.compile(
    rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},p=(?P<proof>{_BASE64})"
)


class AuthorizationIdRefused(ValueError):
    """An authorization id other than the user, which Kafka tells the client in its own
    words (`told`)."""

    told = (
        "Authentication failed: Client requested an authorization id that is different from "
        "username"
    )


def random_string() -> str:
    """Kafka's ScramFormatter.secureRandomString: `new BigInteger(130, random)` in base 36."""
    value = secrets.randbits(130)
    digits = []
    while value:
        value, digit = divmod(value, 36)
        digits.append(_DIGITS[digit])
    return "".join(reversed(digits)) or "0"


@dataclass(frozen=True, slots=True)
class Credential:
    """What Kafka stores of a SCRAM user: salt, stored key, server key, iterations."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def of(cls, mechanism: str, password: str, iterations: int = ITERATIONS) -> Credential:
        """A new credential, as ScramFormatter.generateCredential makes one: the salt is a
        random string's bytes."""
        algorithm = HASHES[mechanism]
        salt = random_string().encode()
        salted = hashlib.pbkdf2_hmac(algorithm, password.encode(), salt, iterations)
        return cls.salted(mechanism, salt, salted, iterations)

    @classmethod
    def salted(cls, mechanism: str, salt: bytes, salted: bytes, iterations: int) -> Credential:
        """The credential of a salted password (what AlterUserScramCredentials sends: the
        client salts it, the broker never sees the password)."""
        algorithm = HASHES[mechanism]
        client_key = hmac.digest(salted, b"Client Key", algorithm)
        return cls(
            salt,
            hashlib.new(algorithm, client_key).digest(),
            hmac.digest(salted, b"Server Key", algorithm),
            iterations,
        )


class ScramServer:
    """One SCRAM exchange: `first` takes the client-first message and gives the
    server-first, `final` the client-final and gives the server-final."""

    def __init__(self, mechanism: str, credentials: dict[str, Credential]) -> None:
        self.algorithm = HASHES[mechanism]
        self.credentials = credentials
        self.user: str | None = None
        self._credential: Credential | None = None
        self._bare = ""
        self._server_first = ""
        self._nonce = ""

    def first(self, message: bytes) -> bytes:
        """The server-first message; ValueError (or ToldClient) if the client is refused."""
        found = _CLIENT_FIRST.fullmatch(message.decode("utf-8", "replace"))
        if found is None:
            raise ValueError("invalid SCRAM client first message format")
        extensions = _parse_map(found["extensions"][1:])
        if extensions.get(TOKEN_AUTH, "").lower() == "true":
            raise ValueError("delegation token authentication is not served")
        saslname = found["saslname"]
        user = _username(saslname)
        self.user = user
        credential = self.credentials.get(user)
        if credential is None:
            raise ValueError(f"unknown user {user!r}")
        authzid = found["authzid"] or ""
        if authzid and authzid != user:
            raise AuthorizationIdRefused(f"user {user!r} may not act as {authzid!r}")
        self._credential = credential
        self._nonce = found["nonce"] + random_string()
        # Kafka signs the bare message as it rebuilds it: its extensions in its map's order.
        self._bare = ",".join(
            [f"n={saslname}", f"r={found['nonce']}"]
            + [f"{key}={extensions[key]}" for key in java_hash_order(extensions)]
        )
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    def final(self, message: bytes) -> bytes:
        """The server-final message; ValueError if the proof is wrong, ClosedUnanswered if
        it has the wrong length."""
        credential = self._credential
        assert credential is not None, "final before first"
        found = _CLIENT_FINAL.fullmatch(message.decode("utf-8", "replace"))
        if found is None:
            raise ValueError("invalid SCRAM client final message format")
        if found["nonce"] != self._nonce:
            raise ValueError("invalid client nonce in the final client message")
        try:
            channel = base64.b64decode(found["channel"])
            proof = base64.b64decode(found["proof"])
        except binascii.Error:
            raise ValueError("invalid SCRAM client final message format") from None
        without_proof = f"c={base64.b64encode(channel).decode()},r={self._nonce}"
        auth_message = f"{self._bare},{self._server_first},{without_proof}".encode()
        signature = hmac.digest(credential.stored_key, auth_message, self.algorithm)
        if len(proof) != len(signature):
            raise ClosedUnanswered("a SCRAM client proof of the wrong length")
        client_key = bytes(a ^ b for a, b in zip(signature, proof, strict=True))
        if not hmac.compare_digest(
            hashlib.new(self.algorithm, client_key).digest(), credential.stored_key
        ):
            raise ValueError("invalid client credentials")
        server = hmac.digest(credential.server_key, auth_message, self.algorithm)
        return b"v=" + base64.b64encode(server)


def _username(saslname: str) -> str:
    """ScramFormatter.username: =2C is a comma, =3D an equals sign."""
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _parse_map(text: str) -> dict[str, str]:
    """Kafka's Utils.parseMap(text, "=", ","): a later key wins."""
    found: dict[str, str] = {}
    if text:
        for pair in text.split(","):
            key, _, value = pair.partition("=")
            found[key] = value
    return found
