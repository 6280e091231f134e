"""Real clients' recorded frames through codec: decoded, refused, and re-encoded byte for byte.

The frames in tests/vectors/frames were sent by Java 4.0, librdkafka 2.16, kafka-python 3.0,
aiokafka 0.14 and kcat 1.7, and answered by librdkafka's mock cluster (see their README).
Requests are the clients' own bytes; responses carry the mock's quirks, listed below.
"""

from __future__ import annotations

import enum
import io
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import DecodeError
from kio.serial.readers import Reader

import codec
from codec import apis
from codec.errors import ResponseSchemaError
from tests.support.produce_views import as_kio_body
from tests.support.vectors import (
    FRAMES_DIR,
    Entry,
    by_file,
    entry_id,
    frame_bytes,
    load_index,
    requests,
    responses,
)

SERVED = codec.KAFKA_4_RANGES

UNSERVED_APIS: dict[int, str] = {35: "DescribeLogDirs"}
"""API keys the recorded clients send that KAFKA_4_RANGES leaves out: log dirs (ACLs are
served, as a broker without an authorizer answers them; so is KIP-714's telemetry, whose
recorded GetTelemetrySubscriptions and PushTelemetry frames decode here). decode_request
must refuse each frame of these with UnsupportedApi, before decoding a byte of its body."""

SERVED_REQUESTS = [entry for entry in requests() if entry["api_key"] not in UNSERVED_APIS]
UNSERVED_REQUESTS = [entry for entry in requests() if entry["api_key"] in UNSERVED_APIS]


class Quirk(enum.Enum):
    """Why a recorded response does not re-encode to its own bytes."""

    V0_FALLBACK_BODY = (
        "KIP-511 answer to an ApiVersions version the broker does not know, made by the "
        "recording's ApiVersions shim: a v0 body (error 35, ApiVersions 0-2) behind a v4 "
        "request. Canonical as v0; it does not decode as the request's version."
    )
    MALFORMED_API_VERSIONS = (
        "librdkafka mock: its ApiVersions v3+ body writes the compact array length as N "
        "instead of N+1 and leaves out the tagged-field bytes, so kio reads an empty array "
        "and 5 bytes are left over."
    )
    METADATA_TRAILING_ZERO = (
        "librdkafka mock: its Metadata v12+ responses end with one extra zero byte after the body."
    )
    NULL_WHERE_NOT_NULLABLE = (
        "librdkafka mock: its OffsetFetch responses write `topics` as a null array, which the "
        "schema does not allow (the Java client would dereference it); our encoder refuses to "
        "write such a response."
    )


RESPONSE_QUIRKS: dict[str, Quirk] = {
    "aiokafka-0.14/028-OffsetFetch-v3-response.bin": Quirk.NULL_WHERE_NOT_NULLABLE,
    "java-4.0/035-OffsetFetch-v6-response.bin": Quirk.NULL_WHERE_NOT_NULLABLE,
    "kafka-python-3.0/025-OffsetFetch-v6-response.bin": Quirk.NULL_WHERE_NOT_NULLABLE,
    "librdkafka-2.16/050-OffsetFetch-v6-response.bin": Quirk.NULL_WHERE_NOT_NULLABLE,
    "java-4.0/001-ApiVersions-v4-response.bin": Quirk.V0_FALLBACK_BODY,
    "java-4.0/028-ApiVersions-v4-response.bin": Quirk.V0_FALLBACK_BODY,
    "java-4.0/036-ApiVersions-v4-response.bin": Quirk.V0_FALLBACK_BODY,
    "kafka-python-3.0/001-ApiVersions-v4-response.bin": Quirk.V0_FALLBACK_BODY,
    "kafka-python-3.0/010-ApiVersions-v4-response.bin": Quirk.V0_FALLBACK_BODY,
    "kafka-python-3.0/021-ApiVersions-v4-response.bin": Quirk.V0_FALLBACK_BODY,
    "kcat-1.7/001-ApiVersions-v3-response.bin": Quirk.MALFORMED_API_VERSIONS,
    "kcat-1.7/005-ApiVersions-v3-response.bin": Quirk.MALFORMED_API_VERSIONS,
    "kcat-1.7/009-ApiVersions-v3-response.bin": Quirk.MALFORMED_API_VERSIONS,
    "librdkafka-2.16/001-ApiVersions-v3-response.bin": Quirk.MALFORMED_API_VERSIONS,
    "librdkafka-2.16/006-ApiVersions-v3-response.bin": Quirk.MALFORMED_API_VERSIONS,
    "librdkafka-2.16/012-ApiVersions-v3-response.bin": Quirk.MALFORMED_API_VERSIONS,
    "java-4.0/003-Metadata-v12-response.bin": Quirk.METADATA_TRAILING_ZERO,
    "java-4.0/010-Metadata-v12-response.bin": Quirk.METADATA_TRAILING_ZERO,
    "java-4.0/013-Metadata-v12-response.bin": Quirk.METADATA_TRAILING_ZERO,
    "kafka-python-3.0/003-Metadata-v13-response.bin": Quirk.METADATA_TRAILING_ZERO,
    "kafka-python-3.0/005-Metadata-v13-response.bin": Quirk.METADATA_TRAILING_ZERO,
    "kafka-python-3.0/008-Metadata-v13-response.bin": Quirk.METADATA_TRAILING_ZERO,
    "librdkafka-2.16/003-Metadata-v13-response.bin": Quirk.METADATA_TRAILING_ZERO,
    "librdkafka-2.16/008-Metadata-v13-response.bin": Quirk.METADATA_TRAILING_ZERO,
    "librdkafka-2.16/014-Metadata-v13-response.bin": Quirk.METADATA_TRAILING_ZERO,
}
"""Every recorded response that does not re-encode byte for byte, and why. Every other
response must, and every one listed here must still not: the test of a listed frame fails
once its quirk is gone. (The OffsetFetch responses with a null `topics` array are not
listed: kio reads the null and writes it back, so they re-encode exactly.) Every recorded
request re-encodes exactly, so requests have no such list."""

CANONICAL_RESPONSES = [entry for entry in responses() if entry["file"] not in RESPONSE_QUIRKS]
QUIRKY_RESPONSES = [entry for entry in responses() if entry["file"] in RESPONSE_QUIRKS]

CLIENTS = sorted({entry["client"] for entry in load_index()})


def readonly(frame: bytes) -> memoryview:
    """A frame as FrameReader hands it out: a read-only view, the type kio's reader needs."""
    return memoryview(frame).toreadonly()


def decode_response(entry: Entry, frame: bytes, version: int) -> tuple[int, Any, int]:
    """Correlation id, body at `version` and trailing byte count of a response frame.

    The header version comes from the recording, so codec's own table is not trusted here.
    """
    header_reader: Reader[ResponseHeaderV0 | ResponseHeaderV1] = (
        entity_reader(ResponseHeaderV0)
        if entry["response_header_version"] == 0
        else entity_reader(ResponseHeaderV1)
    )
    header, header_size = header_reader(frame, 0)
    body_type = apis.response_schema(entry["api_key"], version)
    body, body_size = entity_reader(body_type)(frame, header_size)
    return header.correlation_id, body, len(frame) - header_size - body_size


def reencode_response(entry: Entry, correlation_id: int, body: Any, version: int) -> bytes:
    return codec.encode_response_header(
        correlation_id, entry["response_header_version"]
    ) + codec.encode_response_body(entry["api_key"], version, body)


def test_index_lists_every_frame_file_with_its_size() -> None:
    files = {
        str(path.relative_to(FRAMES_DIR)) for path in FRAMES_DIR.glob("*/*.bin") if path.is_file()
    }
    assert files == set(by_file())
    for entry in load_index():
        assert len(frame_bytes(entry)) == entry["size"], entry["file"]


def test_unserved_apis_are_exactly_the_recorded_keys_missing_from_the_table() -> None:
    missing = {
        entry["api_key"]: entry["api_name"]
        for entry in requests()
        if entry["api_key"] not in SERVED
    }
    assert missing == UNSERVED_APIS


@pytest.mark.parametrize("entry", SERVED_REQUESTS, ids=entry_id)
def test_served_request_decodes_with_no_trailing_bytes(entry: Entry) -> None:
    frame = frame_bytes(entry)
    request = codec.decode_request(readonly(frame), SERVED)
    assert request.header == codec.RequestHeader(
        entry["api_key"], entry["api_version"], entry["correlation_id"], entry["client_id"]
    )
    body = as_kio_body(entry["api_key"], entry["api_version"], request.body)
    assert type(body) is apis.request_schema(entry["api_key"], entry["api_version"])
    assert request.trailing_bytes == 0
    assert request.size == len(frame)


@pytest.mark.parametrize("entry", UNSERVED_REQUESTS, ids=entry_id)
def test_unserved_request_raises_unsupported_api(entry: Entry) -> None:
    with pytest.raises(codec.UnsupportedApi, match=f"API key {entry['api_key']} "):
        codec.decode_request(readonly(frame_bytes(entry)), SERVED)


@pytest.mark.parametrize("entry", load_index(), ids=entry_id)
def test_codec_header_versions_match_the_recording(entry: Entry) -> None:
    key, version = entry["api_key"], entry["api_version"]
    if entry["direction"] == "request":
        assert apis.request_header_version(key, version) == entry["request_header_version"]
    else:
        assert apis.response_header_version(key, version) == entry["response_header_version"]


@pytest.mark.parametrize("entry", requests(), ids=entry_id)
def test_request_reencodes_byte_for_byte_with_kio_writers(entry: Entry) -> None:
    key, version = entry["api_key"], entry["api_version"]
    frame = frame_bytes(entry)
    schema = apis.request_schema(key, version)
    header, header_size = entity_reader(schema.__header_schema__)(readonly(frame), 0)
    if key in UNSERVED_APIS:
        # codec refuses these, but they are real clients' bytes all the same: kio must agree.
        body, body_size = entity_reader(schema)(readonly(frame), header_size)
        assert header_size + body_size == len(frame)
    else:
        body = as_kio_body(key, version, codec.decode_request(readonly(frame), SERVED).body)
    encoded = io.BytesIO()
    entity_writer(schema.__header_schema__)(encoded, header)
    entity_writer(schema)(encoded, body)
    assert encoded.getvalue() == frame


@pytest.mark.parametrize("entry", CANONICAL_RESPONSES, ids=entry_id)
def test_response_reencodes_byte_for_byte_with_codec_encoders(entry: Entry) -> None:
    key, version = entry["api_key"], entry["api_version"]
    frame = frame_bytes(entry)
    correlation_id, body, trailing = decode_response(entry, frame, version)
    assert (correlation_id, trailing) == (entry["correlation_id"], 0)
    assert reencode_response(entry, correlation_id, body, version) == frame
    request_header = codec.RequestHeader(key, version, correlation_id, entry["client_id"])
    assert codec.encode_response(request_header, body) == codec.size_prefixed(frame)


@pytest.mark.parametrize("entry", QUIRKY_RESPONSES, ids=entry_id)
def test_listed_quirky_response_is_still_not_canonical(entry: Entry) -> None:
    version = entry["api_version"]
    frame = frame_bytes(entry)
    quirk = RESPONSE_QUIRKS[entry["file"]]
    if quirk is Quirk.V0_FALLBACK_BODY:
        with pytest.raises(DecodeError):
            decode_response(entry, frame, version)
        fallback = codec.ApiRange(codec.ApiKey.API_VERSIONS, "ApiVersions", 0, 2)
        expected = codec.encode_api_versions_fallback(entry["correlation_id"], fallback)
        assert expected == codec.size_prefixed(frame)
        correlation_id, body, trailing = decode_response(entry, frame, 0)
        assert trailing == 0
        assert reencode_response(entry, correlation_id, body, 0) == frame
    elif quirk is Quirk.MALFORMED_API_VERSIONS:
        # correlation id (4), error code (2), then the array length byte and 6 bytes per
        # entry, then throttle time (4): the length byte counts the entries, off by one.
        entries = (len(frame) - 4 - 2 - 1 - 4) // 6
        assert frame[6] == entries
        correlation_id, body, trailing = decode_response(entry, frame, version)
        assert body.api_keys == ()
        assert trailing == 5
        assert reencode_response(entry, correlation_id, body, version) != frame
    elif quirk is Quirk.METADATA_TRAILING_ZERO:
        correlation_id, body, trailing = decode_response(entry, frame, version)
        assert trailing == 1
        assert frame[-1] == 0
        assert reencode_response(entry, correlation_id, body, version) == frame[:-1]
    elif quirk is Quirk.NULL_WHERE_NOT_NULLABLE:
        correlation_id, body, trailing = decode_response(entry, frame, version)
        assert trailing == 0
        assert body.topics is None
        with pytest.raises(
            ResponseSchemaError, match=r"OffsetFetchResponse\.topics is not nullable"
        ):
            reencode_response(entry, correlation_id, body, version)
    else:
        pytest.fail(f"no check for {quirk}")


def test_response_quirks_name_recorded_responses_only() -> None:
    recorded = {entry["file"] for entry in responses()}
    assert set(RESPONSE_QUIRKS) <= recorded


def chunks(data: bytes, size: int) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


@pytest.mark.parametrize("client", CLIENTS)
def test_client_request_stream_reframes_into_the_recorded_frames(client: str) -> None:
    sent = [entry for entry in requests() if entry["client"] == client]
    stream = b"".join(codec.size_prefixed(frame_bytes(entry)) for entry in sent)
    reader = codec.FrameReader()
    received: list[memoryview] = []
    # 1000 bytes: not a divisor of any frame size, so frames straddle the reads.
    for chunk in chunks(stream, 1000):
        reader.feed(chunk)
        received.extend(reader.frames())
    assert [bytes(frame) for frame in received] == [frame_bytes(entry) for entry in sent]
    assert reader.buffered_bytes == 0
    for entry, frame in zip(sent, received, strict=True):
        if entry["api_key"] not in UNSERVED_APIS:
            assert (
                codec.decode_request(frame, SERVED).header.correlation_id
                == (entry["correlation_id"])
            )


PRODUCE_V7 = by_file()["aiokafka-0.14/004-Produce-v7-request.bin"]


@pytest.mark.parametrize("version", [SERVED[0].min_version - 1, SERVED[0].max_version + 1])
def test_request_at_a_version_outside_the_served_range_raises_unsupported_version(
    version: int,
) -> None:
    frame = bytearray(frame_bytes(PRODUCE_V7))
    frame[2:4] = version.to_bytes(2, "big", signed=True)
    with pytest.raises(codec.UnsupportedVersion, match=f"Produce v{version} is not served"):
        codec.decode_request(readonly(bytes(frame)), SERVED)


def test_bytes_after_the_body_are_counted_and_otherwise_ignored() -> None:
    # Apache Kafka ignores them too: a client that over-writes a field still gets served.
    frame = frame_bytes(PRODUCE_V7)
    clean = codec.decode_request(readonly(frame), SERVED)
    padded = codec.decode_request(readonly(frame + b"\x00\x01\x02"), SERVED)
    assert padded.trailing_bytes == 3
    assert padded.size == len(frame) + 3
    assert (padded.header, padded.body) == (clean.header, clean.body)


@pytest.mark.parametrize("entry", SERVED_REQUESTS, ids=entry_id)
def test_truncated_request_raises_truncated_header_or_undecodable_request(entry: Entry) -> None:
    frame = frame_bytes(entry)
    _, header_size = codec.decode_header(readonly(frame))
    for cut in (7, header_size - 1, len(frame) // 2, len(frame) - 1):
        expected = codec.TruncatedHeader if cut < header_size else codec.UndecodableRequest
        with pytest.raises(expected):
            codec.decode_request(readonly(frame[:cut]), SERVED)
