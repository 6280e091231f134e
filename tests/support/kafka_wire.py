"""Kafka wire helpers for tests: encode requests and record batches with kio, read
size-prefixed responses from any trio stream and decode them with kio.

Nothing here knows the broker: these are the client's half of the protocol, written with
kio so a test never trusts the codec it is testing (codec.encode_request, which frames the
requests, writes them with kio's own writers too).
"""

from __future__ import annotations

import datetime
import io
import struct
from pathlib import Path
from typing import Any

import trio
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.serial import entity_reader
from kio.static.primitive import i8, i16, i32, i64

from codec.apis import response_schema
from codec.messages import encode_request, encode_request_header

FRAMES = Path(__file__).parent.parent / "vectors" / "frames"
CLIENT_ID = "nullbroker-tests"

# How long a test waits for the broker to answer or to close; generous, since a loaded CI
# machine is slow, and no assertion depends on it.
WAIT_SECONDS = 10.0

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
_KEY_VERSION_CORRELATION = struct.Struct(">hhi")

# Record batch v2 offsets (see PROTOCOL.md).
BATCH_LENGTH_OFFSET = 8
MAGIC_OFFSET = 16


def recorded_frame(name: str) -> bytes:
    """A recorded request frame (without size prefix), e.g. 'java-4.0/001-ApiVersions-v4'."""
    return (FRAMES / f"{name}-request.bin").read_bytes()


def size_prefix(frame: bytes) -> bytes:
    return _SIZE.pack(len(frame)) + frame


def frame_header(frame: bytes) -> tuple[int, int, int]:
    """(api key, api version, correlation id) of a request frame."""
    key, version, correlation_id = _KEY_VERSION_CORRELATION.unpack_from(frame, 0)
    return key, version, correlation_id


def with_correlation_id(frame: bytes, correlation_id: int) -> bytes:
    """A request frame with its correlation id replaced."""
    return frame[:4] + _CORRELATION.pack(correlation_id) + frame[8:]


def with_version(frame: bytes, version: int) -> bytes:
    """A request frame with its api version replaced (the rest left as it was)."""
    return frame[:2] + struct.pack(">h", version) + frame[4:]


def unsigned_varint(value: int) -> bytes:
    """Kafka's unsigned varint (compact lengths and counts store the value plus one)."""
    encoded = bytearray()
    while value >= 0x80:
        encoded.append(value & 0x7F | 0x80)
        value >>= 7
    encoded.append(value)
    return bytes(encoded)


def request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None = CLIENT_ID
) -> bytes:
    """The request header a client sends for (key, version), as the tests' client."""
    return encode_request_header(api_key, api_version, correlation_id, client_id)


def request_frame(payload: Any, correlation_id: int, client_id: str | None = CLIENT_ID) -> bytes:
    """A request frame (without size prefix) for a kio request payload entity, as the
    tests' client."""
    return encode_request(payload, correlation_id, client_id)


def decode_response(frame: bytes, api_key: int, api_version: int) -> tuple[int, Any]:
    """(correlation id, kio response entity) of a response frame without size prefix.

    Asserts that the body decodes with no byte left over: a strict client's view.
    """
    schema = response_schema(api_key, api_version)
    (correlation_id,) = _CORRELATION.unpack_from(frame, 0)
    offset = 4
    if schema.__header_schema__.__version__ >= 1:
        assert frame[offset] == 0, "response header v1 must carry an empty tagged-field section"
        offset += 1
    body, size = entity_reader(schema)(memoryview(frame).toreadonly(), offset)
    assert offset + size == len(frame), f"{len(frame) - offset - size} bytes left over"
    return correlation_id, body


def record_batch(
    count: int,
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    value_bytes: int = 16,
) -> bytes:
    """A valid, uncompressed RecordBatch v2 of `count` records, through kio's writer."""
    timestamp = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
    records = tuple(
        Record(
            attributes=i8(0),
            timestamp=timestamp,
            offset=i64(index),
            key=None,
            value=bytes([65 + index % 26]) * value_bytes,
            headers=(),
        )
        for index in range(count)
    )
    batch = NewRecordBatch(
        producer_id=i64(producer_id),
        producer_epoch=i16(producer_epoch),
        base_sequence=i32(base_sequence),
        records=records,
        attributes=i16(0),
    )
    buffer = io.BytesIO()
    write_new_batch(buffer, batch)
    return buffer.getvalue()


def patched(data: bytes, offset: int, replacement: bytes) -> bytes:
    """`data` with the bytes at `offset` overwritten."""
    return data[:offset] + replacement + data[offset + len(replacement) :]


class FrameStream:
    """The client side of a Kafka connection on any trio stream: send frames, read
    size-prefixed responses however the bytes arrive, notice when the peer closes."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self._buffer = bytearray()
        self._next_correlation_id = 1

    async def send(self, data: bytes) -> None:
        with trio.fail_after(WAIT_SECONDS):
            await self.stream.send_all(data)

    async def send_request(self, payload: Any) -> int:
        """Send a kio request payload; return the correlation id it carries."""
        correlation_id = self._next_correlation_id
        self._next_correlation_id += 1
        await self.send(size_prefix(request_frame(payload, correlation_id)))
        return correlation_id

    async def receive_frame(self) -> bytes:
        """The next response frame, without its size prefix."""
        with trio.fail_after(WAIT_SECONDS):
            while True:
                if len(self._buffer) >= 4:
                    (size,) = _SIZE.unpack_from(self._buffer, 0)
                    if len(self._buffer) >= 4 + size:
                        frame = bytes(self._buffer[4 : 4 + size])
                        del self._buffer[: 4 + size]
                        return frame
                data = await self.stream.receive_some(65536)
                if not data:
                    raise EOFError(f"connection closed with {len(self._buffer)} bytes pending")
                self._buffer += data

    async def request(self, payload: Any) -> Any:
        """Send a request and return the decoded body of its response."""
        correlation_id = await self.send_request(payload)
        frame = await self.receive_frame()
        answered, body = decode_response(frame, payload.__api_key__, payload.__version__)
        assert answered == correlation_id
        return body

    async def is_closed_by_peer(self) -> bool:
        """Whether the peer has closed: end of stream (or a reset) before any further byte."""
        with trio.fail_after(WAIT_SECONDS):
            try:
                data = await self.stream.receive_some(65536)
            except trio.BrokenResourceError:
                return True
        self._buffer += data
        return not data and not self._buffer

    async def aclose(self) -> None:
        await self.stream.aclose()
