"""SASL/OAUTHBEARER (RFC 7628) as Kafka serves it without an identity provider: Kafka's
unsecured-token validator (OAuthBearerUnsecuredValidatorCallbackHandler), which takes an
unsigned JWS (`{"alg":"none"}`, an empty signature) and makes the principal of its `sub`
claim (the claim's name is a setting, Kafka's unsecuredValidatorPrincipalClaimName).

As Kafka checks it: the principal claim must be a string; `exp` is required and must be
after now; `iat`, if present, must be a number not after now and before `exp`. A token that
fails is answered with the JSON error challenge `{"status":"invalid_token"}`; the client
answers it with %x01 and the authentication fails with that JSON as its message. A client
first message that is not the GS2 header and `auth=Bearer <token>` key-value pairs fails at
once, as a malformed SASL message does in Kafka. The session lasts until the token's `exp`
(or --sasl-session-lifetime-ms, if sooner), as Kafka's does: the client re-authenticates
on its connection before then (KIP-368).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any

from codec import ProtocolError

PRINCIPAL_CLAIM = "sub"
INVALID_TOKEN = b'{"status":"invalid_token"}'
"""Kafka's error challenge for a token its validator refused (jsonErrorResponse)."""
CONTROL_A = b"\x01"

# Kafka's OAuthBearerClientInitialResponse: "n,[a=authzid]," %x01 key=value%x01 ... %x01.
# A saslname is %x01-7F but "=" and ",", or those two escaped as =2C and =3D.
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KVPAIRS = r"(?:[A-Za-z]+=[\x21-\x7e \t\r\n]+\x01)*"
_CLIENT_FIRST = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>{_KVPAIRS})\x01")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)", re.ASCII)


class ClosedUnanswered(ProtocolError):
    """A message Kafka's OAUTHBEARER server fails on with an unexpected exception (a JWS
    header without `alg`: a NullPointerException; an auth scheme other than Bearer: an
    IllegalArgumentException while it words the error): Kafka closes the connection
    without answering, and so does nullbroker."""


class MalformedMessage(ValueError):
    """A client first message Kafka cannot read: authentication fails at once."""


class InvalidToken(ValueError):
    """A token the unsecured validator refuses: the client gets the invalid_token
    challenge; the message says why (for the broker's log)."""


@dataclass(frozen=True, slots=True)
class ClientFirst:
    """What the client's first OAUTHBEARER message carries."""

    authzid: str
    token: str


def parse_client_first(message: bytes) -> ClientFirst:
    """The GS2 header and key-value pairs of RFC 7628 section 3.1, as Kafka reads them."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedMessage("an OAUTHBEARER client first message is UTF-8") from None
    found = _CLIENT_FIRST.fullmatch(text)
    if found is None:
        raise MalformedMessage("invalid OAUTHBEARER client first message")
    pairs = dict(
        pair.split("=", 1) for pair in found["kvpairs"].split("\x01") if pair
    )  # Kafka's Utils.parseMap: a later key wins
    auth = pairs.get("auth")
    if auth is None:
        raise MalformedMessage("invalid OAUTHBEARER client first message: 'auth' not specified")
    bearer = _AUTH.fullmatch(auth)
    if bearer is None:
        raise MalformedMessage("invalid OAUTHBEARER client first message: invalid 'auth' format")
    if bearer["scheme"].lower() != "bearer":
        raise ClosedUnanswered(f"invalid scheme in OAUTHBEARER client first message: {auth!r}")
    return ClientFirst(found["authzid"] or "", bearer["token"])


@dataclass(frozen=True, slots=True)
class Token:
    """A token the validator took."""

    principal: str
    expires_ms: float
    """Its `exp`, in ms since the epoch: Kafka ends the session then (the client
    re-authenticates on its connection before, KIP-368)."""


def validate_unsecured(token: str, now_ms: int, principal_claim: str = PRINCIPAL_CLAIM) -> Token:
    """An unsecured JWS, checked as Kafka's unsecured validator checks it (no clock skew
    allowed, its default); InvalidToken says why not."""
    header, claims = _unsecured_jws(token)
    if header.get("alg") is None:
        raise ClosedUnanswered("an OAUTHBEARER token whose JWS header has no alg")
    if header["alg"] != "none":
        raise InvalidToken("an unsecured JWS must have 'none' for an algorithm")
    principal = claims.get(principal_claim)
    if principal is None:
        raise InvalidToken(f"required claim missing: {principal_claim}")
    if not isinstance(principal, str):
        raise InvalidToken(f"the {principal_claim} claim is not a string")
    issued_at = _seconds(claims, "iat")
    if issued_at is not None and issued_at * 1000 > now_ms:
        raise InvalidToken(f"the Issued At value ({issued_at} s) is after now ({now_ms} ms)")
    expires = _seconds(claims, "exp")
    if expires is None:
        raise InvalidToken("no expiration time in the JWT")
    if now_ms >= expires * 1000:
        raise InvalidToken(f"now ({now_ms} ms) is on or after the Expiration Time ({expires} s)")
    if issued_at is not None and expires <= issued_at:
        raise InvalidToken(
            f"the Expiration Time ({expires} s) is not after Issued At ({issued_at} s)"
        )
    return Token(principal, expires * 1000)


def _unsecured_jws(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Header and claims of `header.claims.` (three dot-separated parts, the last empty)."""
    parts = token.split(".")
    if len(parts) != 3 or ".." in token:
        raise InvalidToken("an unsecured JWS is three dot-separated Base64URL values")
    if parts[2]:
        raise InvalidToken("an unsecured JWS must not contain a digital signature")
    return _json_object(parts[0]), _json_object(parts[1])


def _json_object(part: str) -> dict[str, Any]:
    try:
        decoded = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(decoded)
    except (binascii.Error, ValueError):
        raise InvalidToken(f"a JWS part that is not Base64URL-encoded JSON: {part!r}") from None
    if not isinstance(value, dict):
        raise InvalidToken(f"a JWS part that is not a JSON object: {part!r}")
    return value


def _seconds(claims: dict[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidToken(f"the {name} claim is not a number")
    return float(value)
