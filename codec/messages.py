"""Request decoding and response encoding: a frame in, a header and a kio entity out."""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader
from kio.serial.readers import Reader
from kio.static.primitive import i16

from .apis import (
    API_VERSIONS_KEY,
    ApiRange,
    api_name,
    request_header_version,
    request_reader,
    request_schema,
    response_header_version,
    response_writer,
)
from .errors import TruncatedHeader, UndecodableRequest, UnsupportedApi, UnsupportedVersion
from .framing import size_prefixed
from .produce import decode_produce_request
from .validate import Step, entity_check

_KEY_VERSION_CORRELATION = struct.Struct(">hhi")
_CORRELATION = struct.Struct(">i")

_HEADER_READERS: dict[int, Reader[RequestHeaderV1 | RequestHeaderV2]] = {
    1: entity_reader(RequestHeaderV1),
    2: entity_reader(RequestHeaderV2),
}

FAST_DECODERS: dict[int, Callable[[bytes | bytearray | memoryview, int, int], tuple[Any, int]]] = {
    0: decode_produce_request,
}
"""Hand-written payload decoders for the hot path, by API key, used instead of kio's reader.
Each checks every length against the bytes left itself, and is tested equal to kio's reader."""


@cache
def request_check(key: int, version: int) -> Step:
    """The structure check of the request payload of (key, version)."""
    schema: type = request_schema(key, version)
    return entity_check(schema)


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """The fields of a request header that the broker uses."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None

    @property
    def api_name(self) -> str:
        return api_name(self.api_key)


@dataclass(frozen=True, slots=True)
class Request:
    """A decoded request: its header, its kio payload entity and its size on the wire."""

    header: RequestHeader
    body: Any
    size: int
    trailing_bytes: int = 0
    """Bytes after the body that the schema does not account for (ignored)."""


def peek_header(frame: bytes | bytearray | memoryview) -> RequestHeader:
    """Read api key, version and correlation id, the part every header version shares.

    The client id is left out (None): it is not needed to route or to refuse a request.
    """
    if len(frame) < _KEY_VERSION_CORRELATION.size:
        raise TruncatedHeader(f"frame of {len(frame)} bytes ends inside the request header")
    key, version, correlation_id = _KEY_VERSION_CORRELATION.unpack_from(frame, 0)
    return RequestHeader(key, version, correlation_id, None)


def check_served(header: RequestHeader, served: Mapping[int, ApiRange]) -> None:
    """Raise if (key, version) of the header is not in the served table."""
    served_range = served.get(header.api_key)
    if served_range is None:
        raise UnsupportedApi(f"API key {header.api_key} ({header.api_name}) is not served")
    if header.api_version not in served_range:
        raise UnsupportedVersion(
            f"{served_range.name} v{header.api_version} is not served "
            f"(versions {served_range.min_version}-{served_range.max_version})"
        )


def decode_header(
    frame: bytes | bytearray | memoryview, peeked: RequestHeader | None = None
) -> tuple[RequestHeader, int]:
    """Decode the full request header of a frame whose (key, version) is known to kio;
    `peeked` is peek_header(frame) when the caller has it already.

    Returns the header and the offset where the payload starts.
    """
    if peeked is None:
        peeked = peek_header(frame)
    header_version = request_header_version(peeked.api_key, peeked.api_version)
    try:
        header, header_size = _HEADER_READERS[header_version](frame, 0)
    except Exception as error:  # kio's native reader raises several kinds on short input
        raise TruncatedHeader(
            f"{peeked.api_name} v{peeked.api_version} request header v{header_version} "
            f"does not decode: {error}"
        ) from None
    return (
        RequestHeader(peeked.api_key, peeked.api_version, peeked.correlation_id, header.client_id),
        header_size,
    )


def decode_request(
    frame: bytes | bytearray | memoryview, served: Mapping[int, ApiRange]
) -> Request:
    """Decode a request frame (without its size prefix) into header and kio entity.

    Raises UnsupportedApi or UnsupportedVersion for what `served` does not list,
    TruncatedHeader or UndecodableRequest for bytes that do not decode.
    """
    peeked = peek_header(frame)
    check_served(peeked, served)
    header, offset = decode_header(frame, peeked)
    fast_decoder = FAST_DECODERS.get(header.api_key)
    if fast_decoder is not None:
        body, body_size = fast_decoder(frame, offset, header.api_version)
        return Request(header, body, len(frame), len(frame) - offset - body_size)
    try:
        # kio's native reader must only ever see well-formed structure: see validate.py.
        checked_end = request_check(header.api_key, header.api_version)(frame, offset, len(frame))
        # kio's readers return the number of bytes they consumed, not an end offset.
        body, body_size = request_reader(header.api_key, header.api_version)(frame, offset)
    except Exception as error:  # the check, or kio's reader (it raises several kinds)
        raise UndecodableRequest(
            f"{header.api_name} v{header.api_version} body does not decode: {error}"
        ) from None
    # Bytes after the body are ignored, as Apache Kafka ignores them: librdkafka's Metadata
    # v9+ request for all topics writes the null topic array in four bytes instead of one.
    if offset + body_size != checked_end:
        raise UndecodableRequest(
            f"{header.api_name} v{header.api_version} body: kio read {body_size} bytes, "
            f"the structure check {checked_end - offset}"
        )
    return Request(header, body, len(frame), len(frame) - offset - body_size)


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    """Response header v0 (correlation id) or v1 (plus an empty tagged-field section).

    Written by hand: five bytes do not need kio's generic writer on every response.
    Tests check it against kio's ResponseHeader writers.
    """
    encoded = _CORRELATION.pack(correlation_id)
    return encoded + b"\x00" if header_version >= 1 else encoded


def encode_response_body(api_key: int, api_version: int, body: Any) -> bytes:
    """The payload of a response entity, through kio's generic writer."""
    buffer = io.BytesIO()
    response_writer(api_key, api_version)(buffer, body)
    return buffer.getvalue()


def encode_response(header: RequestHeader, body: Any) -> bytes:
    """A size-prefixed response frame for a request header and a response body.

    The body is a kio response entity, or bytes a handler encoded (or cached) itself.
    """
    key, version = header.api_key, header.api_version
    encoded = body if isinstance(body, bytes) else encode_response_body(key, version, body)
    return size_prefixed(
        encode_response_header(header.correlation_id, response_header_version(key, version)),
        encoded,
    )


def encode_api_versions_fallback(correlation_id: int, api_versions: ApiRange) -> bytes:
    """KIP-511: the answer to an ApiVersions request at a version the broker does not know.

    A v0 body with UNSUPPORTED_VERSION listing only the ApiVersions range, behind header v0,
    so the client can retry at a version both sides know.
    """
    return size_prefixed(
        encode_response_header(correlation_id, 0),
        _api_versions_fallback_body(api_versions),
    )


@cache
def _api_versions_fallback_body(api_versions: ApiRange) -> bytes:
    from kio.schema.api_versions.v0.response import ApiVersion, ApiVersionsResponse

    body = ApiVersionsResponse(
        error_code=ErrorCode.unsupported_version,
        api_keys=(
            ApiVersion(
                api_key=i16(api_versions.key),
                min_version=i16(api_versions.min_version),
                max_version=i16(api_versions.max_version),
            ),
        ),
    )
    return encode_response_body(API_VERSIONS_KEY, 0, body)


__all__ = [
    "Request",
    "RequestHeader",
    "check_served",
    "decode_header",
    "decode_request",
    "encode_api_versions_fallback",
    "encode_response",
    "encode_response_body",
    "encode_response_header",
    "peek_header",
]
