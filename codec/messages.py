"""Request decoding and response encoding: a frame in, a header and a kio entity out; and
the client's half, a kio request entity into a frame (encode_request).

A request is decoded along the route of its (key, version), worked out once: kio's native
reader reads the whole frame, header and payload, in one call (see request_frames.py),
after the payload's safety check when its schema has an array (see validate.py); Produce's
payload is read by codec.produce's zero-copy decoder instead. A response entity is written
by the compiled writer of its class (see writers.py), size prefix and header included.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, NamedTuple, cast

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader
from kio.serial import entity_writer as kio_entity_writer
from kio.serial.readers import Reader
from kio.static.primitive import i16, i32

from .apis import (
    ApiKey,
    ApiRange,
    api_name,
    request_header_version,
    request_schema,
    response_header_version,
    response_schema,
)
from .errors import TruncatedHeader, UndecodableRequest, UnsupportedApi, UnsupportedVersion
from .framing import Buffer, size_prefixed
from .produce import produce_request_decoder
from .request_frames import Request, RequestHeader, frame_type, new_header
from .validate import Step, entity_check, needs_check, safety_check
from .writers import FrameWriter, Parts, entity_writer, response_frame_writer

_KEY_VERSION_CORRELATION = struct.Struct(">hhi")
# api key, api version, correlation id and the client id's length: every header starts so.
_HEADER_PREFIX = struct.Struct(">hhih")
_unpack_header_prefix = _HEADER_PREFIX.unpack_from
_CORRELATION = struct.Struct(">i")
_SIZE = struct.Struct(">i")
_pack_size = _SIZE.pack
_PRE_ENCODED = (bytes, list)

PayloadDecoder = Callable[[Buffer, int], tuple[Any, int]]
"""Decodes a request payload at an offset of a frame: (body, bytes it took). Raises
UndecodableRequest for bytes that do not decode."""

FAST_DECODERS: dict[int, Callable[[int], PayloadDecoder]] = {
    0: produce_request_decoder,
}
"""Hand-written payload decoders for the hot path, by API key, used instead of kio's reader.
Each checks every length against the bytes left itself, and is tested equal to kio's reader."""


class _Route(NamedTuple):
    """How frames of one (key, version) are decoded, worked out on first use."""

    read: Reader[Request]
    """kio's reader of the whole frame: header and payload, or (`payload` set) the header."""
    check: Step | None
    """The payload's safety check (see validate.py), if its schema has an array."""
    payload: PayloadDecoder | None
    """The hand-written payload decoder, if there is one."""
    usual_header_size: int
    """The header's size without its client id's bytes, when it has no tagged fields."""
    flexible_header: bool
    name: str


_ROUTES: dict[int, _Route] = {}


def _route(key: int, version: int) -> _Route:
    route = _ROUTES.get(key << 16 | version)
    if route is None:
        schema: type = request_schema(key, version)
        header_version = request_header_version(key, version)
        fast_decoder = FAST_DECODERS.get(key)
        flexible_header = header_version >= 2
        route = _Route(
            read=_frame_reader(header_version, None if fast_decoder else schema),
            check=safety_check(schema) if needs_check(schema) and not fast_decoder else None,
            payload=fast_decoder(version) if fast_decoder else None,
            usual_header_size=_HEADER_PREFIX.size + (1 if flexible_header else 0),
            flexible_header=flexible_header,
            name=f"{api_name(key)} v{version}",
        )
        _ROUTES[key << 16 | version] = route
    return route


@cache
def request_check(key: int, version: int) -> Step:
    """The structure check of the request payload of (key, version)."""
    schema: type = request_schema(key, version)
    return entity_check(schema)


def _frame_reader(header_version: int, body_type: type | None) -> Reader[Request]:
    """kio's reader of a frame_type(); kio's typing wants one of its own entities."""
    reader: Reader[Request] = entity_reader(cast(Any, frame_type(header_version, body_type)))
    return reader


def _read_header(frame: Buffer, key: int, version: int) -> tuple[RequestHeader, int]:
    """The header through kio's reader, and the offset of the payload after it; any
    failure is a TruncatedHeader."""
    header_version = request_header_version(key, version)
    try:
        decoded, header_size = _frame_reader(header_version, None)(frame, 0)
    except Exception as error:  # kio's native reader raises several kinds on short input
        raise TruncatedHeader(
            f"{api_name(key)} v{version} request header v{header_version} does not decode: {error}"
        ) from None
    return decoded.header, header_size


def peek_header(frame: Buffer) -> RequestHeader:
    """Read api key, version and correlation id, the part every header version shares.

    The client id is left out (None): it is not needed to route or to refuse a request.
    """
    if len(frame) < _KEY_VERSION_CORRELATION.size:
        raise TruncatedHeader(f"frame of {len(frame)} bytes ends inside the request header")
    key, version, correlation_id = _KEY_VERSION_CORRELATION.unpack_from(frame, 0)
    return new_header(key, version, correlation_id, None)


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


def decode_header(frame: Buffer, peeked: RequestHeader | None = None) -> tuple[RequestHeader, int]:
    """Decode the full request header of a frame whose (key, version) is known to kio;
    `peeked` is peek_header(frame) when the caller has it already.

    Returns the header and the offset where the payload starts.
    """
    if peeked is None:
        peeked = peek_header(frame)
    return _read_header(frame, peeked.api_key, peeked.api_version)


def decode_request(frame: Buffer, served: Mapping[int, ApiRange]) -> Request:
    """Decode a request frame (without its size prefix) into header and body.

    Raises UnsupportedApi or UnsupportedVersion for what `served` does not list,
    TruncatedHeader or UndecodableRequest for bytes that do not decode.
    """
    try:
        key, version, correlation_id, client_id_size = _unpack_header_prefix(frame, 0)
    except struct.error:  # shorter than that: refused, in the usual order
        peeked = peek_header(frame)
        check_served(peeked, served)
        raise TruncatedHeader(
            f"{peeked.api_name} v{peeked.api_version}: a frame of {len(frame)} bytes ends "
            "inside the request header"
        ) from None
    served_range = served.get(key)
    if served_range is None or not served_range.min_version <= version <= served_range.max_version:
        check_served(new_header(key, version, correlation_id, None), served)
    route = _ROUTES.get(key << 16 | version) or _route(key, version)
    check = route.check
    if check is not None:
        # Where the payload starts after the usual header (a client id that fits, no
        # header tagged fields); kio's header reader finds it after any other.
        offset = route.usual_header_size + (client_id_size if client_id_size > 0 else 0)
        if (
            client_id_size < -1
            or offset > len(frame)
            or (route.flexible_header and frame[offset - 1])
        ):
            offset = _read_header(frame, key, version)[1]
        try:
            # kio's native reader must only ever see array counts the bytes can hold.
            check(frame, offset, len(frame))
        except UndecodableRequest as error:
            raise UndecodableRequest(f"{route.name} body does not decode: {error}") from None
    try:
        request, request_size = route.read(frame, 0)
    except Exception as error:  # kio's native reader raises several kinds
        _read_header(frame, key, version)  # a TruncatedHeader if the header is at fault
        raise UndecodableRequest(f"{route.name} body does not decode: {error}") from None
    if route.payload is not None:
        # The hand-written decoder raises its own UndecodableRequest.
        request.body, body_size = route.payload(frame, request_size)
        request_size += body_size
    request.size = size = len(frame)
    request.trailing_bytes = size - request_size
    return request


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    """Response header v0 (correlation id) or v1 (plus an empty tagged-field section).

    Written by hand: five bytes do not need kio's generic writer on every response.
    Tests check it against kio's ResponseHeader writers.
    """
    encoded = _CORRELATION.pack(correlation_id)
    return encoded + b"\x00" if header_version >= 1 else encoded


def encode_response_body(api_key: int, api_version: int, body: Any) -> bytes:
    """The payload of a response entity, through its compiled writer (see writers.py)."""
    schema: type = response_schema(api_key, api_version)
    parts: Parts = []
    entity_writer(schema)(body, parts)
    return b"".join(parts)


_FRAME_WRITERS: dict[int, FrameWriter] = {}


def _frame_writer(key: int, version: int) -> FrameWriter:
    frame_writer = _FRAME_WRITERS.get(key << 16 | version)
    if frame_writer is None:
        schema: type = response_schema(key, version)
        frame_writer = response_frame_writer(schema, response_header_version(key, version))
        _FRAME_WRITERS[key << 16 | version] = frame_writer
    return frame_writer


# The size prefix and response header v0 (correlation id) or v1 (plus no tagged fields), by
# header version; by API, their packer and the header's size.
_FRAME_HEADS = (struct.Struct(">ii"), struct.Struct(">iix"))
_FRAME_HEADS_BY_API: dict[int, tuple[Callable[..., bytes], int]] = {}


def _frame_head(key: int, version: int) -> tuple[Callable[..., bytes], int]:
    head = _FRAME_HEADS[response_header_version(key, version)]
    packed = _FRAME_HEADS_BY_API[key << 16 | version] = (head.pack, head.size - _SIZE.size)
    return packed


def encode_response(header: RequestHeader, body: Any) -> bytes:
    """A size-prefixed response frame for a request header and a response body.

    The body is a kio response entity (written by its compiled frame writer), or what a
    handler encoded (or cached) itself: bytes, or a list of buffers (e.g. the parts of a
    Fetch response around its records, joined here in the one copy they take; see
    encode_response_parts for none).
    """
    key = header.api_key
    version = header.api_version
    if isinstance(body, _PRE_ENCODED):
        if isinstance(body, list):
            return b"".join(encode_response_parts(header, body))
        pack_head, header_size = _FRAME_HEADS_BY_API.get(key << 16 | version) or _frame_head(
            key, version
        )
        return pack_head(header_size + len(body), header.correlation_id) + body
    frame_writer = _FRAME_WRITERS.get(key << 16 | version) or _frame_writer(key, version)
    return frame_writer(header.correlation_id, body)


def encode_response_parts(header: RequestHeader, body: Any) -> list[Buffer]:
    """encode_response's frame as buffers to write in order (with writev) rather than one
    bytes: a body given as a list of buffers (a Fetch response's record batches among
    them) follows the size prefix and header as it is, never copied."""
    if not isinstance(body, list):
        return [encode_response(header, body)]
    key = header.api_key
    version = header.api_version
    pack_head, header_size = _FRAME_HEADS_BY_API.get(key << 16 | version) or _frame_head(
        key, version
    )
    return [pack_head(header_size + sum(map(len, body)), header.correlation_id), *body]


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """The request header a client sends for (key, version): v1, or v2 from the API's first
    flexible version on, written by kio's own writer."""
    header_type = request_schema(api_key, api_version).__header_schema__
    header = header_type(
        request_api_key=i16(api_key),
        request_api_version=i16(api_version),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    buffer = io.BytesIO()
    kio_entity_writer(header_type)(buffer, header)
    return buffer.getvalue()


def encode_request(body: Any, correlation_id: int, client_id: str | None) -> bytes:
    """A request frame (no size prefix) for a kio request entity, as a client sends it: the
    header of the entity's API and version, then the entity.

    Written by kio's generic writers, not the codec's compiled ones: this is the client's
    half of the protocol (tests, perf's frames and replays), so a test that sends what it
    returns never trusts the codec it is testing.
    """
    schema = type(body)
    header = encode_request_header(
        schema.__api_key__, schema.__version__, correlation_id, client_id
    )
    buffer = io.BytesIO()
    kio_entity_writer(schema)(buffer, body)
    return header + buffer.getvalue()


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
    return encode_response_body(ApiKey.API_VERSIONS, 0, body)


__all__ = [
    "Request",
    "RequestHeader",
    "check_served",
    "decode_header",
    "decode_request",
    "encode_api_versions_fallback",
    "encode_request",
    "encode_request_header",
    "encode_response",
    "encode_response_body",
    "encode_response_header",
    "encode_response_parts",
    "peek_header",
]


def decode_response(frame: bytes | bytearray | memoryview, api_key: int, api_version: int) -> Any:
    """The response entity of a size-prefixed response frame: the client's half, for what
    one broker asks another (nullbroker.workers.inter_broker)."""
    offset = _SIZE.size + _CORRELATION.size
    if response_header_version(api_key, api_version) >= 1:
        offset += 1  # the header's empty tagged fields
    body, _ = entity_reader(response_schema(api_key, api_version))(memoryview(frame), offset)
    return body
