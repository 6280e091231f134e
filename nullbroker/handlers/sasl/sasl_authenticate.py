"""SaslAuthenticate: one step of the mechanism the handshake chose, its tokens in Kafka's
framing (nullbroker.sessions.sasl holds the mechanisms and the states)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request, encode_response
from codec.entities import make, response_module

from ...sessions.sasl import AUTHENTICATE, SaslAuthenticationFailed
from ..common import counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"
"""Kafka's words (KafkaApis) for a SaslAuthenticate where no authentication is under way: on
an authenticated connection, or on a listener without SASL."""


KEY = ApiKey.SASL_AUTHENTICATE


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.SASL_AUTHENTICATE, request.header.api_version)
    sasl = session.sasl
    if sasl is None or sasl.state is not AUTHENTICATE:
        # Not a SASL listener, or an authenticated connection (a connection in any other
        # state did not get here: nullbroker.sessions.sasl's admit closed it).
        return make(
            types.SaslAuthenticateResponse,
            error_code=counted(broker, ErrorCode.illegal_sasl_state),
            error_message=AFTER_AUTHENTICATION,
            auth_bytes=b"",
        )
    mechanism = sasl.mechanism
    assert mechanism is not None
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
