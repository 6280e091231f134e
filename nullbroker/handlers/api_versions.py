"""ApiVersions: what this broker serves. The answer never changes, so it is encoded once."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from codec import API_VERSIONS_KEY, ApiRange, Request, encode_response_body
from codec.entities import make, response_module

from .common import NO_THROTTLE

if TYPE_CHECKING:
    from ..broker import Broker, Session


def handle_api_versions(broker: Broker, request: Request, session: Session) -> bytes:
    return _encoded_body(request.header.api_version, tuple(broker.served.values()))


@cache
def _encoded_body(version: int, served: tuple[ApiRange, ...]) -> bytes:
    types = response_module(API_VERSIONS_KEY, version)
    body = make(
        types.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=tuple(
            types.ApiVersion(
                api_key=api.key, min_version=api.min_version, max_version=api.max_version
            )
            for api in served
        ),
        throttle_time=NO_THROTTLE,
    )
    return encode_response_body(API_VERSIONS_KEY, version, body)


HANDLERS = {API_VERSIONS_KEY: handle_api_versions}
