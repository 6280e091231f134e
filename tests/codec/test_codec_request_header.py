"""Request headers as decode_request reads them: the usual ones by hand, every other one
through kio's header reader, so what is accepted and refused is exactly kio's."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer

import codec
from codec import apis

SERVED = codec.KAFKA_4_RANGES
HEARTBEAT_V3 = (12, 3)  # header v1
HEARTBEAT_V4 = (12, 4)  # header v2
API_VERSIONS_V0_BODY = b""
# Heartbeat v3: group "g", generation 1, member "m", no group instance id.
HEARTBEAT_V3_BODY = struct.pack(">h", 1) + b"g" + struct.pack(">ih", 1, 1) + b"m" + b"\xff\xff"
# Heartbeat v4: the same, compact, with an empty tagged-field section.
HEARTBEAT_V4_BODY = b"\x02g" + struct.pack(">i", 1) + b"\x02m" + b"\x00" + b"\x00"


def frame(key: int, version: int, client_id: bytes | None, after: bytes, body: bytes) -> bytes:
    """A request frame with a raw client id (-1 length for None) and raw bytes between the
    client id and the body (a v2 header's tagged-field section)."""
    size = -1 if client_id is None else len(client_id)
    return struct.pack(">hhih", key, version, 7, size) + (client_id or b"") + after + body


def readonly(data: bytes) -> memoryview:
    return memoryview(data).toreadonly()


@pytest.mark.parametrize("client_id", [None, b"", b"client", "é".encode() * 40])
@pytest.mark.parametrize(
    ("api", "after", "body"),
    [(HEARTBEAT_V3, b"", HEARTBEAT_V3_BODY), (HEARTBEAT_V4, b"\x00", HEARTBEAT_V4_BODY)],
)
def test_usual_headers_decode_to_their_fields(
    client_id: bytes | None, api: tuple[int, int], after: bytes, body: bytes
) -> None:
    request = codec.decode_request(readonly(frame(*api, client_id, after, body)), SERVED)
    text = None if client_id is None else client_id.decode()
    assert request.header == codec.RequestHeader(*api, 7, text)
    assert isinstance(request, codec.Request)
    assert (request.body.group_id, request.body.member_id) == ("g", "m")
    assert request.trailing_bytes == 0


def test_a_tagged_field_count_of_zero_in_two_bytes_is_read_as_kio_reads_it() -> None:
    # 0x80 0x00 is a varint of 0 that takes two bytes: unusual, but what kio accepts.
    data = frame(*HEARTBEAT_V4, b"c", b"\x80\x00", HEARTBEAT_V4_BODY)
    request = codec.decode_request(readonly(data), SERVED)
    assert request.header.client_id == "c"
    assert request.body.member_id == "m"
    assert codec.decode_header(readonly(data))[1] == 10 + 1 + 2


@pytest.mark.parametrize(
    ("client_id_size", "client_id", "after"),
    [
        pytest.param(-2, b"", b"", id="negative-length"),
        pytest.param(50, b"short", b"", id="length-past-the-end"),
        pytest.param(2, b"\xff\xfe", b"", id="not-utf-8"),
        pytest.param(1, b"c", b"\x01\x00\x00", id="a-tagged-field-no-header-defines"),
    ],
)
def test_headers_kio_refuses_are_truncated_headers(
    client_id_size: int, client_id: bytes, after: bytes
) -> None:
    data = struct.pack(">hhih", *HEARTBEAT_V4, 7, client_id_size) + client_id + after
    with pytest.raises(codec.TruncatedHeader, match="Heartbeat v4 request header v2"):
        codec.decode_request(readonly(data), SERVED)


@pytest.mark.parametrize("size", range(0, 10))
def test_a_frame_shorter_than_any_header_is_refused_in_the_usual_order(size: int) -> None:
    data = frame(*HEARTBEAT_V3, None, b"", HEARTBEAT_V3_BODY)[:size]
    with pytest.raises(codec.TruncatedHeader):
        codec.decode_request(readonly(data), SERVED)
    unserved = struct.pack(">hhi", 99, 0, 7)[:size]
    expected = codec.UnsupportedApi if size >= 8 else codec.TruncatedHeader
    with pytest.raises(expected):
        codec.decode_request(readonly(unserved), SERVED)


@settings(max_examples=300, deadline=None)
@given(
    api=st.sampled_from([HEARTBEAT_V3, HEARTBEAT_V4, (18, 0), (18, 3)]),
    client_id_size=st.integers(-3, 12) | st.integers(-(2**15), 2**15 - 1),
    rest=st.binary(max_size=24),
)
def test_any_header_bytes_are_read_as_kios_header_reader_reads_them(
    api: tuple[int, int], client_id_size: int, rest: bytes
) -> None:
    data = readonly(struct.pack(">hhih", *api, 7, client_id_size) + rest)
    header_type = apis.request_schema(*api).__header_schema__
    try:
        expected, expected_size = entity_reader(header_type)(data, 0)
    except Exception:
        with pytest.raises(codec.TruncatedHeader):
            codec.decode_header(data)
        return
    header, size = codec.decode_header(data)
    assert size == expected_size
    assert header == codec.RequestHeader(*api, 7, expected.client_id)


@pytest.mark.parametrize("header_version", [1, 2])
def test_a_kio_written_header_reads_back(header_version: int) -> None:
    header_type = RequestHeaderV2 if header_version == 2 else RequestHeaderV1
    api = HEARTBEAT_V4 if header_version == 2 else HEARTBEAT_V3
    buffer = io.BytesIO()
    entity_writer(header_type)(
        buffer,
        header_type(
            request_api_key=api[0],
            request_api_version=api[1],
            correlation_id=-5,
            client_id="kio",
        ),
    )
    header, size = codec.decode_header(readonly(buffer.getvalue()))
    assert header == codec.RequestHeader(*api, -5, "kio")
    assert size == len(buffer.getvalue())


def test_peek_header_reads_key_version_and_correlation_id_only() -> None:
    peeked = codec.peek_header(readonly(frame(*HEARTBEAT_V3, b"c", b"", b"")))
    assert peeked == codec.RequestHeader(*HEARTBEAT_V3, 7, None)
    assert peeked.api_name == "Heartbeat"
