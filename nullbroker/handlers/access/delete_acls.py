"""DeleteAcls: each filter refused, matching nothing, as a Kafka broker without an authorizer
refuses it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..common import NO_THROTTLE, counted
from .bindings import refuse_unknown
from .create_acls import NO_AUTHORIZER

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.DELETE_ACLS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    refuse_unknown(
        "DeleteAcls",
        [
            (f.resource_type_filter, f.pattern_type_filter, f.operation, f.permission_type)
            for f in request.body.filters
        ],
    )
    types = response_module(ApiKey.DELETE_ACLS, request.header.api_version)
    return make(
        types.DeleteAclsResponse,
        throttle_time=NO_THROTTLE,
        filter_results=tuple(
            make(
                types.DeleteAclsFilterResult,
                error_code=counted(broker, ErrorCode.security_disabled),
                error_message=NO_AUTHORIZER,
                matching_acls=(),
            )
            for _ in request.body.filters
        ),
    )
