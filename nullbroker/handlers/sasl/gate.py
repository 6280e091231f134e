"""SaslHandshake and SaslAuthenticate, and what a SASL listener makes of the other requests
while a client authenticates (nullbroker.net.sasl holds the mechanisms and the states)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request, decode_request, encode_response
from codec.entities import make, response_module

from ..net.listeners import MECHANISMS
from ..net.sasl import AUTHENTICATE, RAW_TOKENS, SaslAuthenticationFailed, UnexpectedRequest
from .common import NO_THROTTLE, counted

if TYPE_CHECKING:
    from ..broker import Broker, Session

AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"
"""Kafka's words (KafkaApis) for a SaslAuthenticate where no authentication is under way: on
an authenticated connection, or on a listener without SASL."""


def gate(
    broker: Broker, frame: bytes | memoryview, key: int, version: int, session: Session
) -> bytes | None:
    """A request on a SASL listener before its handler: None lets it through; a bare token's
    reply (after a SaslHandshake v0) is the answer; what its connection's state refuses
    raises (a ProtocolError: the connection closes, answered as Kafka answers or not)."""
    sasl = session.sasl
    assert sasl is not None
    if sasl.state is RAW_TOKENS:
        return sasl.raw_reply(bytes(frame))
    try:
        sasl.admit(key, version)
    except UnexpectedRequest as unexpected:
        answer = _illegal_state_answer(broker, frame)
        if answer is None:
            raise
        raise SaslAuthenticationFailed(str(unexpected), answer) from None
    return None


def _illegal_state_answer(broker: Broker, frame: bytes | memoryview) -> bytes | None:
    """Kafka's answer to a request other than SaslAuthenticate while a client authenticates:
    the request's own error response (AbstractRequest.getErrorResponse) with
    ILLEGAL_SASL_STATE, written here for ApiVersions, SaslHandshake and Metadata, the
    requests a client sends around authentication; None for the others (the connection
    closes unanswered)."""
    try:
        request = decode_request(frame, broker.served)
    except Exception:
        return None
    key, version = request.header.api_key, request.header.api_version
    illegal = counted(broker, ErrorCode.illegal_sasl_state)
    types = response_module(key, version)
    if key == ApiKey.API_VERSIONS:
        body = make(
            types.ApiVersionsResponse,
            error_code=illegal,
            api_keys=(),
            throttle_time=NO_THROTTLE,
            supported_features=(),
            finalized_features_epoch=-1,
            finalized_features=(),
            zk_migration_ready=False,
        )
    elif key == ApiKey.SASL_HANDSHAKE:
        body = make(types.SaslHandshakeResponse, error_code=illegal, mechanisms=())
    elif key == ApiKey.METADATA:
        body = make(
            types.MetadataResponse,
            throttle_time=NO_THROTTLE,
            brokers=(),
            cluster_id=None,
            controller_id=-1,
            topics=tuple(
                make(
                    types.MetadataResponseTopic,
                    error_code=illegal,
                    name=wanted.name or "",
                    topic_id=getattr(wanted, "topic_id", None) or UUID(int=0),
                    is_internal=False,
                    partitions=(),
                )
                for wanted in request.body.topics or ()
            ),
        )
    else:
        return None
    return encode_response(request.header, body)


def handle_sasl_handshake(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.SASL_HANDSHAKE, request.header.api_version)
    sasl = session.sasl
    if sasl is None or not sasl.expects_handshake:
        # Not a SASL listener, or an authenticated connection that is not re-authenticating
        # (KafkaApis answers it): no mechanisms listed.
        error = counted(broker, ErrorCode.illegal_sasl_state)
        return make(types.SaslHandshakeResponse, error_code=error, mechanisms=())
    mechanism = request.body.mechanism
    if mechanism not in sasl.mechanisms:
        body = make(
            types.SaslHandshakeResponse,
            error_code=counted(broker, ErrorCode.unsupported_sasl_mechanism),
            mechanisms=sasl.offered,
        )
        # Kafka answers, then closes the connection.
        raise SaslAuthenticationFailed(
            f"unsupported SASL mechanism {mechanism!r}", encode_response(request.header, body)
        )
    # v0 (clients before Kafka 1.0) sends the tokens bare, outside Kafka's framing.
    sasl.start(mechanism, raw_tokens=request.header.api_version == 0)
    return make(types.SaslHandshakeResponse, error_code=ErrorCode.none, mechanisms=sasl.offered)


def handle_sasl_authenticate(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.SASL_AUTHENTICATE, request.header.api_version)
    sasl = session.sasl
    if sasl is None or sasl.state is not AUTHENTICATE:
        # Not a SASL listener, or an authenticated connection (a connection in any other
        # state did not get here: nullbroker.net.sasl's admit closed it).
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


HANDLERS = {
    ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
}
__all__ = ["HANDLERS", "MECHANISMS"]
