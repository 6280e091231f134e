"""CreateAcls: each creation refused, as a Kafka broker without an authorizer refuses it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..common import NO_THROTTLE, counted
from .bindings import refuse_unknown

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.CREATE_ACLS

NO_AUTHORIZER = "No Authorizer is configured."
"""Kafka 4.4's words for each ACL it cannot create or delete."""


def handle(broker: Broker, request: Request, session: Session) -> Any:
    refuse_unknown(
        "CreateAcls",
        [
            (c.resource_type, c.resource_pattern_type, c.operation, c.permission_type)
            for c in request.body.creations
        ],
    )
    types = response_module(ApiKey.CREATE_ACLS, request.header.api_version)
    return make(
        types.CreateAclsResponse,
        throttle_time=NO_THROTTLE,
        results=tuple(
            make(
                types.AclCreationResult,
                error_code=counted(broker, ErrorCode.security_disabled),
                error_message=NO_AUTHORIZER,
            )
            for _ in request.body.creations
        ),
    )
