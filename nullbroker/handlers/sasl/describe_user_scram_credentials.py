"""DescribeUserScramCredentials: each user's SCRAM mechanisms and iterations (never the
credentials themselves), as Kafka answers (nullbroker.sessions.user_credentials)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...sessions.user_credentials import described
from ..common import NO_THROTTLE, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, request.header.api_version)
    asked = request.body.users
    outcomes = described(broker.sasl_users, None if asked is None else [u.name for u in asked])
    return make(
        types.DescribeUserScramCredentialsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message="",
        results=tuple(
            make(
                types.DescribeUserScramCredentialsResult,
                user=outcome.user,
                error_code=counted(broker, outcome.error),
                error_message=outcome.message,
                credential_infos=tuple(
                    make(types.CredentialInfo, mechanism=mechanism, iterations=iterations)
                    for mechanism, iterations in outcome.credentials
                ),
            )
            for outcome in outcomes
        ),
    )
