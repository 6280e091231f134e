"""SaslHandshake and SaslAuthenticate (nullbroker.net.sasl holds the mechanisms)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request, encode_response
from codec.entities import make, response_module

from ..net.listeners import MECHANISMS
from ..net.sasl import SaslAuthenticationFailed
from .common import counted

if TYPE_CHECKING:
    from ..broker import Broker, Session


def handle_sasl_handshake(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.SASL_HANDSHAKE, request.header.api_version)
    sasl = session.sasl
    offered = sasl.mechanisms if sasl is not None else ()
    if sasl is None:
        error = ErrorCode.illegal_sasl_state  # not a SASL listener
    elif request.header.api_version == 0:
        # v0 would send the tokens raw, outside Kafka's framing: clients since Kafka 1.0
        # send v1, and SaslAuthenticate.
        error = ErrorCode.unsupported_version
    elif not sasl.start(request.body.mechanism):
        error = ErrorCode.unsupported_sasl_mechanism
    else:
        error = ErrorCode.none
    return make(types.SaslHandshakeResponse, error_code=counted(broker, error), mechanisms=offered)


def handle_sasl_authenticate(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.SASL_AUTHENTICATE, request.header.api_version)
    sasl = session.sasl
    if sasl is None or sasl.mechanism is None:
        return make(
            types.SaslAuthenticateResponse,
            error_code=counted(broker, ErrorCode.illegal_sasl_state),
            error_message="SaslAuthenticate before SaslHandshake on a SASL listener",
            auth_bytes=b"",
        )
    mechanism = sasl.mechanism
    try:
        reply, complete = sasl.step(request.body.auth_bytes)
    except ValueError as failure:
        sasl.counts[mechanism, "failed"] += 1
        body = make(
            types.SaslAuthenticateResponse,
            error_code=counted(broker, ErrorCode.sasl_authentication_failed),
            error_message=sasl.told_client(failure),
            auth_bytes=b"",
        )
        # Kafka answers, then closes the connection.
        raise SaslAuthenticationFailed(
            str(failure), encode_response(request.header, body)
        ) from None
    if complete:
        sasl.counts[mechanism, "succeeded"] += 1
    fields: dict[str, Any] = {}
    if hasattr(types.SaslAuthenticateResponse, "session_lifetime"):  # v1+ (KIP-368)
        # As Kafka: 0 until authentication is complete.
        lifetime_ms = sasl.session_lifetime_ms if complete else 0
        fields["session_lifetime"] = datetime.timedelta(milliseconds=lifetime_ms)
    return make(
        types.SaslAuthenticateResponse,
        error_code=ErrorCode.none,
        error_message="",  # Kafka's: the field's default, not null
        auth_bytes=reply,
        **fields,
    )


HANDLERS = {
    ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
}
__all__ = ["HANDLERS", "MECHANISMS"]
