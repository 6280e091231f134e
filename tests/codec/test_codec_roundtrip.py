"""Property tests: every served API key and version survives codec's framing and headers.

Requests are written the way a client writes them (codec.encode_request: kio's generic
writers, behind a size prefix), cut into random reads, reframed by FrameReader and decoded
by decode_request.
Responses are written by encode_response and read back by kio's generic readers, the way a
client reads them. Either way, what comes out must equal what went in.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import types
import typing
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import Reader
from kio.static.constants import uuid_zero
from kio.static.primitive import i32, i64Timedelta

import codec
from codec import apis
from tests.support.produce_views import as_kio_body

EVERY_SERVED_VERSION = [
    pytest.param(key, version, id=f"{served.name}-v{version}")
    for key, served in codec.KAFKA_4_RANGES.items()
    for version in range(served.min_version, served.max_version + 1)
]

# A few examples per (key, version) is enough: there are about 160 of them, and every
# example draws a whole nested entity. Entities are kept small for the same reason.
PER_VERSION = settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

INT32 = st.integers(-(2**31), 2**31 - 1)
CLIENT_IDS = st.none() | st.text(max_size=20)


def values(hint: Any) -> st.SearchStrategy[Any]:
    """Values of one kio field type that survive kio's writer and reader unchanged."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        (inner,) = (arg for arg in typing.get_args(hint) if arg is not type(None))
        return st.none() | values(inner)
    if origin is tuple:
        (item, _ellipsis) = typing.get_args(hint)
        return st.lists(values(item), max_size=2).map(tuple)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return entities(hint)
    if hint is uuid.UUID:
        # The zero UUID is how the wire says "no UUID": kio reads it back as None.
        return st.uuids().filter(lambda value: value != uuid_zero)
    if hint is i64Timedelta:
        # kio's own strategy reaches timedelta's limits, where milliseconds overflow.
        return st.integers(-(2**47), 2**47).map(
            lambda milliseconds: datetime.timedelta(milliseconds=milliseconds)
        )
    if isinstance(hint, type) and issubclass(hint, bytes):
        return st.binary(max_size=16)
    if isinstance(hint, type) and issubclass(hint, str):
        return st.text(max_size=8)
    return st.from_type(hint)


_ENTITY_STRATEGIES: dict[type, st.SearchStrategy[Any]] = {}


def entities(entity_type: type) -> st.SearchStrategy[Any]:
    """Instances of a kio entity class with every field drawn, arrays of at most 2 items.

    Memoised: the strategy of a class is asked for on every example.
    """
    strategy = _ENTITY_STRATEGIES.get(entity_type)
    if strategy is None:
        hints = typing.get_type_hints(entity_type)
        fields = dataclasses.fields(entity_type)
        strategy = st.builds(entity_type, **{f.name: values(hints[f.name]) for f in fields})
        _ENTITY_STRATEGIES[entity_type] = strategy
    return strategy


@st.composite
def cuts(draw: st.DrawFn, length: int) -> list[int]:
    return sorted(draw(st.lists(st.integers(0, length), max_size=6)))


@pytest.mark.parametrize(("key", "version"), EVERY_SERVED_VERSION)
@PER_VERSION
@given(data=st.data(), correlation_id=INT32, client_id=CLIENT_IDS)
def test_request_survives_framing_in_any_reads_and_decode_request(
    key: int, version: int, data: st.DataObject, correlation_id: int, client_id: str | None
) -> None:
    body = data.draw(entities(apis.request_schema(key, version)), label="body")
    stream = codec.size_prefixed(codec.encode_request(body, correlation_id, client_id))
    reader = codec.FrameReader()
    frames: list[memoryview] = []
    points = data.draw(cuts(len(stream)), label="cuts")
    for start, end in zip([0, *points], [*points, len(stream)], strict=True):
        reader.feed(stream[start:end])
        frames.extend(reader.frames())
    (frame,) = frames
    request = codec.decode_request(frame, codec.KAFKA_4_RANGES)
    assert request.header == codec.RequestHeader(key, version, correlation_id, client_id)
    assert as_kio_body(key, version, request.body) == body
    assert request.size == len(stream) - 4
    assert request.trailing_bytes == 0


def expected_response_header_version(key: int, version: int) -> int:
    """Header v1 for flexible versions, v0 before them and always for ApiVersions (KIP-511)."""
    if key == codec.ApiKey.API_VERSIONS:
        return 0
    return 1 if apis.response_schema(key, version).__flexible__ else 0


@pytest.mark.parametrize(("key", "version"), EVERY_SERVED_VERSION)
@PER_VERSION
@given(data=st.data(), correlation_id=INT32)
def test_response_from_encode_response_reads_back_with_kio_readers(
    key: int, version: int, data: st.DataObject, correlation_id: int
) -> None:
    schema = apis.response_schema(key, version)
    body = data.draw(entities(schema), label="body")
    request_header = codec.RequestHeader(key, version, correlation_id, "client")
    encoded = codec.encode_response(request_header, body)
    assert int.from_bytes(encoded[:4], "big") == len(encoded) - 4
    header_reader: Reader[ResponseHeaderV0 | ResponseHeaderV1] = (
        entity_reader(ResponseHeaderV1)
        if expected_response_header_version(key, version)
        else entity_reader(ResponseHeaderV0)
    )
    header, header_size = header_reader(encoded, 4)
    assert header.correlation_id == correlation_id
    decoded, body_size = entity_reader(schema)(encoded, 4 + header_size)
    assert decoded == body
    assert 4 + header_size + body_size == len(encoded)
    # A handler may hand over bytes it encoded (or cached) itself: same frame.
    pre_encoded = codec.encode_response_body(key, version, body)
    assert codec.encode_response(request_header, pre_encoded) == encoded


@settings(max_examples=200, deadline=None)
@given(correlation_id=INT32, header_version=st.sampled_from([0, 1]))
def test_encode_response_header_matches_kio_response_header_writers(
    correlation_id: int, header_version: int
) -> None:
    expected = io.BytesIO()
    if header_version:
        entity_writer(ResponseHeaderV1)(
            expected, ResponseHeaderV1(correlation_id=i32(correlation_id))
        )
    else:
        entity_writer(ResponseHeaderV0)(
            expected, ResponseHeaderV0(correlation_id=i32(correlation_id))
        )
    assert codec.encode_response_header(correlation_id, header_version) == expected.getvalue()


@settings(max_examples=100, deadline=None)
@given(
    correlation_id=INT32,
    versions=st.tuples(st.integers(0, 2**15 - 1), st.integers(0, 2**15 - 1)).map(sorted),
)
def test_api_versions_fallback_is_a_v0_unsupported_version_body_listing_one_range(
    correlation_id: int, versions: list[int]
) -> None:
    low, high = versions
    served = codec.ApiRange(codec.ApiKey.API_VERSIONS, "ApiVersions", low, high)
    encoded = codec.encode_api_versions_fallback(correlation_id, served)
    assert int.from_bytes(encoded[:4], "big") == len(encoded) - 4
    header, header_size = entity_reader(ResponseHeaderV0)(encoded, 4)
    assert header.correlation_id == correlation_id
    body, body_size = entity_reader(ApiVersionsResponseV0)(encoded, 4 + header_size)
    assert 4 + header_size + body_size == len(encoded)
    assert body.error_code == ErrorCode.unsupported_version
    assert [(entry.api_key, entry.min_version, entry.max_version) for entry in body.api_keys] == [
        (codec.ApiKey.API_VERSIONS, low, high)
    ]
