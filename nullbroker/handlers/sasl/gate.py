"""What a SASL listener makes of the requests other than SaslHandshake and SaslAuthenticate
while a client authenticates (nullbroker.sessions.sasl holds the mechanisms and the states):
not an API, the gate dispatch passes a SASL connection's requests through."""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import UUID

from kio.schema.errors import ErrorCode

from codec import ApiKey, decode_request, encode_response
from codec.entities import make, response_module

from ...sessions.sasl import RAW_TOKENS, SaslAuthenticationFailed, UnexpectedRequest
from ..common import NO_THROTTLE, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


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
