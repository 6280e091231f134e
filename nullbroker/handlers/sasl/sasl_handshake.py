"""SaslHandshake: the mechanism a client chooses among those its listener offers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request, encode_response
from codec.entities import make, response_module

from ...sessions.sasl import SaslAuthenticationFailed
from ..common import counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.SASL_HANDSHAKE


def handle(broker: Broker, request: Request, session: Session) -> Any:
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
