"""DescribeAcls: no ACLs to list, as a Kafka broker without an authorizer answers."""

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


KEY = ApiKey.DESCRIBE_ACLS

NO_AUTHORIZER = "No Authorizer is configured on the broker"
"""Kafka 4.4's words for DescribeAcls (CreateAcls and DeleteAcls say it otherwise)."""


def handle(broker: Broker, request: Request, session: Session) -> Any:
    body = request.body
    refuse_unknown(
        "DescribeAcls",
        [
            (
                body.resource_type_filter,
                body.pattern_type_filter,
                body.operation,
                body.permission_type,
            )
        ],
    )
    types = response_module(ApiKey.DESCRIBE_ACLS, request.header.api_version)
    return make(
        types.DescribeAclsResponse,
        throttle_time=NO_THROTTLE,
        error_code=counted(broker, ErrorCode.security_disabled),
        error_message=NO_AUTHORIZER,
        resources=(),
    )
