"""AlterUserScramCredentials: SCRAM credentials deleted and set from salted passwords, as
Kafka's controller checks them (nullbroker.sessions.user_credentials); SCRAM authenticates
with them from the next exchange on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...sessions.user_credentials import altered
from ..common import NO_THROTTLE, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.ALTER_USER_SCRAM_CREDENTIALS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, request.header.api_version)
    body = request.body
    outcomes = altered(
        broker.sasl_users,
        [(d.name, d.mechanism) for d in body.deletions],
        [
            (u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
            for u in body.upsertions
        ],
    )
    return make(
        types.AlterUserScramCredentialsResponse,
        throttle_time=NO_THROTTLE,
        results=tuple(
            make(
                types.AlterUserScramCredentialsResult,
                user=outcome.user,
                error_code=counted(broker, outcome.error),
                error_message=outcome.message,
            )
            for outcome in outcomes
        ),
    )
