"""The connection loop on trio's in-memory streams: framing across reads, pipelining,
one send per read, acks=0, KIP-511, and how a connection ends (client close, drain, errors).

No sockets: `serve_connection` takes any `trio.abc.Stream`, so these tests control exactly
which bytes each read returns and see every send the broker makes.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode

from nullbroker.broker import Broker
from nullbroker.net.connection import Drain, serve_connection
from nullbroker.net.shared import Shared
from nullbroker.sessions import Endpoint, Session
from nullbroker.settings import Config
from tests.support.kafka_wire import (
    WAIT_SECONDS,
    FrameStream,
    decode_response,
    frame_header,
    recorded_frame,
    size_prefix,
    with_correlation_id,
    with_version,
)
from tests.support.kio_calls import dispatch_of

SESSION = Session(peer="memory:1", advertised=Endpoint("127.0.0.1", 9092))

API_VERSIONS_V4 = recorded_frame("java-4.0/001-ApiVersions-v4")
API_VERSIONS_V2 = recorded_frame("java-4.0/002-ApiVersions-v2")
API_VERSIONS_V0 = recorded_frame("librdkafka-2.16/002-ApiVersions-v0")
METADATA_V12 = recorded_frame("java-4.0/003-Metadata-v12")
INIT_PRODUCER_ID_V4 = recorded_frame("java-4.0/004-InitProducerId-v4")
# Java's kafka-producer-perf-test with acks=0: 60 records over 4 partitions, no response due.
PRODUCE_ACKS_0 = recorded_frame("java-4.0/017-Produce-v10")
UNKNOWN_API = b"\x03\xe7\x00\x00\x00\x00\x00\x63\xff\xff"  # key 999 v0, correlation 99


class RecordingStream(trio.abc.Stream):
    """The broker's end of an in-memory connection, recording every `send_all`.

    With a gate, each send waits for it to open, so a test can hold the broker mid-send.
    """

    def __init__(self, inner: trio.abc.Stream, gate: trio.Event | None = None) -> None:
        self.inner = inner
        self.gate = gate
        self.sends: list[bytes] = []
        self.sending = trio.Event()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.sending.set()
        if self.gate is not None:
            await self.gate.wait()
        self.sends.append(bytes(data))
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


class Connection:
    """A served in-memory connection: the client's end, the broker's recorded end and
    whether the broker's connection task has returned."""

    def __init__(self, client: FrameStream, server: RecordingStream) -> None:
        self.client = client
        self.server = server
        self.ended = trio.Event()

    async def wait_ended(self) -> None:
        with trio.fail_after(WAIT_SECONDS):
            await self.ended.wait()


@asynccontextmanager
async def serving(
    broker: Broker, drain: Drain | None = None, gate: trio.Event | None = None
) -> AsyncIterator[Connection]:
    """Run `serve_connection` on an in-memory stream for the duration of the block; the
    client end is closed at the end, as a client that hangs up."""
    client_stream, server_stream = trio.testing.memory_stream_pair()
    connection = Connection(FrameStream(client_stream), RecordingStream(server_stream, gate))

    async def serve() -> None:
        await serve_connection(
            connection.server, Shared(dispatch_of(broker)), SESSION, drain or Drain()
        )
        connection.ended.set()

    with trio.fail_after(WAIT_SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve)
            yield connection
            await connection.client.aclose()


def numbered(frames: list[bytes], first_correlation_id: int = 100) -> list[bytes]:
    """The frames with distinct, increasing correlation ids, so order is visible."""
    return [
        with_correlation_id(frame, first_correlation_id + index)
        for index, frame in enumerate(frames)
    ]


def assert_answers(responses: list[bytes], requests: list[bytes]) -> None:
    """Each response answers its request, in order, and decodes with kio."""
    assert len(responses) == len(requests)
    for response, request in zip(responses, requests, strict=True):
        key, version, correlation_id = frame_header(request)
        answered, _body = decode_response(response, key, version)
        assert answered == correlation_id


def split_responses(sent: bytes) -> list[bytes]:
    """The size-prefixed frames of what one send carried, without their prefixes."""
    frames = []
    while sent:
        size = int.from_bytes(sent[:4], "big", signed=True)
        frames.append(sent[4 : 4 + size])
        sent = sent[4 + size :]
    return frames


PIPELINE = numbered([API_VERSIONS_V2, METADATA_V12, API_VERSIONS_V0, INIT_PRODUCER_ID_V4])


async def test_pipelined_requests_in_one_write_are_answered_in_order_in_one_send() -> None:
    broker = Broker(Config())
    async with serving(broker) as connection:
        await connection.client.send(b"".join(size_prefix(frame) for frame in PIPELINE))
        responses = [await connection.client.receive_frame() for _ in PIPELINE]
        assert_answers(responses, PIPELINE)
        # One read held all four requests, so all four answers share one send.
        assert len(connection.server.sends) == 1
        assert split_responses(connection.server.sends[0]) == responses


async def test_frames_split_at_every_byte_boundary_are_answered_in_order() -> None:
    wire = b"".join(size_prefix(frame) for frame in PIPELINE)
    frame_ends = []
    end = 0
    for frame in PIPELINE:
        end += 4 + len(frame)
        frame_ends.append(end)
    broker = Broker(Config())
    for split in range(1, len(wire)):
        async with serving(broker) as connection:
            await connection.client.send(wire[:split])
            # Let the broker read (and answer) the first part alone before the rest arrives.
            await trio.testing.wait_all_tasks_blocked()
            complete_in_first_read = sum(1 for end in frame_ends if end <= split)
            assert len(connection.server.sends) == (1 if complete_in_first_read else 0)
            await connection.client.send(wire[split:])
            responses = [await connection.client.receive_frame() for _ in PIPELINE]
            assert_answers(responses, PIPELINE)
            expected_sends = (1 if complete_in_first_read else 0) + (
                1 if complete_in_first_read < len(PIPELINE) else 0
            )
            assert len(connection.server.sends) == expected_sends


async def test_bytes_arriving_one_at_a_time_are_answered_as_each_frame_completes() -> None:
    wire = b"".join(size_prefix(frame) for frame in PIPELINE)
    broker = Broker(Config())
    async with serving(broker) as connection:
        for index in range(len(wire)):
            await connection.client.send(wire[index : index + 1])
            await trio.testing.wait_all_tasks_blocked()
        assert len(connection.server.sends) == len(PIPELINE)
        responses = [await connection.client.receive_frame() for _ in PIPELINE]
        assert_answers(responses, PIPELINE)


async def test_produce_with_acks_zero_gets_no_response_but_the_next_request_does() -> None:
    broker = Broker(Config(partitions=4))
    requests = numbered([PRODUCE_ACKS_0, API_VERSIONS_V2, PRODUCE_ACKS_0, METADATA_V12])
    answered = [requests[1], requests[3]]
    async with serving(broker) as connection:
        await connection.client.send(b"".join(size_prefix(frame) for frame in requests))
        responses = [await connection.client.receive_frame() for _ in answered]
        assert_answers(responses, answered)
        # Nothing else is on its way: the next answer is the one to the next request.
        probe = with_correlation_id(API_VERSIONS_V0, 999)
        await connection.client.send(size_prefix(probe))
        assert_answers([await connection.client.receive_frame()], [probe])
    # The acks=0 batches still count: twice 60 records over 4 partitions.
    assert sum(counters.records for counters in broker.stats.produced.values()) == 120
    assert broker.stats.apis["Produce"].requests == 2
    assert not broker.stats.errors


async def test_api_versions_v4_then_v2_answers_decode_with_kio_behind_header_v0() -> None:
    broker = Broker(Config())
    requests = numbered([API_VERSIONS_V4, API_VERSIONS_V2])
    async with serving(broker) as connection:
        for request in requests:
            await connection.client.send(size_prefix(request))
            response = await connection.client.receive_frame()
            # decode_response reads header v0 for ApiVersions (kio's schema says so) and
            # insists that no byte is left over: a flexible header v1 would leave one.
            correlation_id, body = decode_response(response, 18, frame_header(request)[1])
            assert correlation_id == frame_header(request)[2]
            assert body.error_code is ErrorCode.none
            ranges = {api.api_key: (api.min_version, api.max_version) for api in body.api_keys}
            assert ranges[18] == (0, 5)  # Kafka 4.4.0's range
            assert ranges[0] == (0, 13)  # Produce listed from v0, as Kafka 4 lists it
    assert broker.stats.apis["ApiVersions"].requests == 2


async def test_api_versions_at_unknown_version_gets_kip511_v0_answer_and_may_retry() -> None:
    broker = Broker(Config())
    too_new = with_correlation_id(with_version(API_VERSIONS_V4, 99), 7)
    async with serving(broker) as connection:
        await connection.client.send(size_prefix(too_new))
        response = await connection.client.receive_frame()
        # Header v0 and a v0 body, whatever the request's version: the client can read it.
        correlation_id, body = decode_response(response, 18, 0)
        assert correlation_id == 7
        assert body.error_code is ErrorCode.unsupported_version
        assert [(api.api_key, api.min_version, api.max_version) for api in body.api_keys] == [
            (18, 0, 5)
        ]
        retry = with_correlation_id(API_VERSIONS_V4, 8)
        await connection.client.send(size_prefix(retry))
        assert_answers([await connection.client.receive_frame()], [retry])
    assert broker.stats.errors == {"unsupported_version": 1}
    assert not broker.stats.protocol_errors


async def test_client_closing_mid_frame_is_counted_and_logged_in_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="nullbroker")
    broker = Broker(Config())
    async with serving(broker) as connection:
        await connection.client.send(size_prefix(METADATA_V12)[:20])
        await trio.testing.wait_all_tasks_blocked()
        await connection.client.aclose()
        await connection.wait_ended()
    assert connection.server.sends == []
    assert broker.stats.connections == 0
    assert broker.stats.connections_total == 1
    # A request cut short is a broken request, if no one's bug: counted, one INFO line.
    assert broker.stats.protocol_errors == {"ClosedMidRequest": 1}
    lines = [record for record in caplog.records if record.name == "nullbroker"]
    assert [(line.levelno, line.getMessage()) for line in lines] == [
        (
            logging.INFO,
            "connection from memory:1 closed by the client with 20 bytes of a request unread",
        )
    ]


async def test_drain_stops_a_connection_waiting_for_bytes() -> None:
    broker = Broker(Config())
    drain = Drain()
    async with serving(broker, drain) as connection:
        await connection.client.send(size_prefix(API_VERSIONS_V2))
        await connection.client.receive_frame()
        await trio.testing.wait_all_tasks_blocked()
        drain.start()
        await connection.wait_ended()
        assert await connection.client.is_closed_by_peer()
    assert broker.stats.connections == 0


async def test_draining_connection_answers_what_it_has_read_then_stops() -> None:
    broker = Broker(Config())
    drain = Drain()
    gate = trio.Event()
    read_before_drain = numbered([API_VERSIONS_V2, METADATA_V12])
    async with serving(broker, drain, gate) as connection:
        await connection.client.send(b"".join(size_prefix(frame) for frame in read_before_drain))
        with trio.fail_after(WAIT_SECONDS):
            await connection.server.sending.wait()
        # The broker is sending the answers to what it read when shutdown begins; a request
        # arriving now is not read any more.
        drain.start()
        await connection.client.send(size_prefix(with_correlation_id(API_VERSIONS_V0, 500)))
        gate.set()
        await connection.wait_ended()
        responses = [await connection.client.receive_frame() for _ in read_before_drain]
        assert_answers(responses, read_before_drain)
        assert await connection.client.is_closed_by_peer()
    assert len(connection.server.sends) == 1
    assert broker.stats.apis["ApiVersions"].requests == 1


async def test_answers_before_a_protocol_error_are_sent_then_the_connection_closes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="nullbroker")
    broker = Broker(Config())
    good = numbered([API_VERSIONS_V2, METADATA_V12])
    async with serving(broker) as connection:
        await connection.client.send(
            b"".join(size_prefix(frame) for frame in [*good, UNKNOWN_API, API_VERSIONS_V0])
        )
        responses = [await connection.client.receive_frame() for _ in good]
        assert_answers(responses, good)
        # The request after the broken one is never answered: the stream is not trusted.
        assert await connection.client.is_closed_by_peer()
        await connection.wait_ended()
    assert broker.stats.protocol_errors == {"UnsupportedApi": 1}
    lines = [record for record in caplog.records if record.name == "nullbroker"]
    assert len(lines) == 1
    assert lines[0].levelno == logging.WARNING
    assert "memory:1" in lines[0].getMessage()
    assert "999" in lines[0].getMessage()


async def test_protocol_error_is_counted_even_when_the_client_has_already_gone() -> None:
    # Regression: the count was taken after sending the answers read before the broken
    # frame, so a client that hung up first made the broker log an error it never counted.
    broker = Broker(Config())
    async with serving(broker) as connection:
        client = connection.client.stream
        assert isinstance(client, trio.StapledStream)
        await client.send_all(size_prefix(API_VERSIONS_V2) + size_prefix(UNKNOWN_API))
        await client.receive_stream.aclose()
        await connection.wait_ended()
    assert broker.stats.protocol_errors == {"UnsupportedApi": 1}
    assert broker.stats.connections == 0


async def test_internal_error_costs_one_connection_and_is_counted(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger="nullbroker")
    broker = Broker(Config())

    def broken_handler(*_args: Any) -> Any:
        raise RuntimeError("handler bug")

    async with serving(broker) as bystander, serving(broker) as victim:
        monkeypatch.setitem(dispatch_of(broker).handlers, 22, broken_handler)
        await victim.client.send(size_prefix(INIT_PRODUCER_ID_V4))
        assert await victim.client.is_closed_by_peer()
        await victim.wait_ended()
        monkeypatch.undo()
        # The other connection of the same broker goes on.
        await bystander.client.send(size_prefix(INIT_PRODUCER_ID_V4))
        assert_answers([await bystander.client.receive_frame()], [INIT_PRODUCER_ID_V4])
    assert broker.stats.protocol_errors == {"InternalError": 1}
    lines = [record for record in caplog.records if record.name == "nullbroker"]
    assert len(lines) == 1
    assert lines[0].levelno == logging.ERROR
    assert lines[0].exc_info is not None


async def test_produce_split_across_reads_counts_like_one_read() -> None:
    # FrameReader hands out views of its buffer and starts a new one on the next feed; a
    # Produce frame arriving in pieces must count exactly as one arriving whole.
    whole, pieces = Broker(Config(partitions=4)), Broker(Config(partitions=4))
    wire = size_prefix(PRODUCE_ACKS_0) + size_prefix(API_VERSIONS_V2)
    async with serving(whole) as connection:
        await connection.client.send(wire)
        await connection.client.receive_frame()
    async with serving(pieces) as connection:
        for start, end in [(0, 3), (3, 1000), (1000, 40000), (40000, len(wire))]:
            await connection.client.send(wire[start:end])
            await trio.testing.wait_all_tasks_blocked()
        await connection.client.receive_frame()
    assert pieces.stats.produced == whole.stats.produced
    assert sum(counters.records for counters in whole.stats.produced.values()) == 60


def hold_init_producer_id(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> trio.Event:
    """Make InitProducerId a request that waits (like a Fetch held at the log end) until
    the returned event is set; the handler table is restored after the test."""
    release = trio.Event()
    original = dispatch_of(broker).handlers[22]

    async def held(*args: Any) -> Any:
        await release.wait()
        return original(*args)

    monkeypatch.setitem(dispatch_of(broker).handlers, 22, held)
    return release


async def test_answers_before_a_held_request_go_out_before_it_waits_and_order_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broker = Broker(Config())
    release = hold_init_producer_id(broker, monkeypatch)
    requests = numbered([API_VERSIONS_V2, INIT_PRODUCER_ID_V4, METADATA_V12])
    async with serving(broker) as connection:
        await connection.client.send(b"".join(size_prefix(frame) for frame in requests))
        # The client is not kept waiting for the answer it could have had already.
        assert_answers([await connection.client.receive_frame()], requests[:1])
        await trio.testing.wait_all_tasks_blocked()
        assert len(connection.server.sends) == 1
        release.set()
        responses = [await connection.client.receive_frame() for _ in requests[1:]]
        assert_answers(responses, requests[1:])
        assert len(connection.server.sends) == 2


async def test_client_gone_while_answers_wait_for_a_held_request_is_a_quiet_close(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression: sending the answers ready before a held request happened inside the
    # handler's try block, so a client that had hung up was logged with a traceback and
    # counted as an InternalError of the broker.
    caplog.set_level(logging.INFO, logger="nullbroker")
    broker = Broker(Config())
    hold_init_producer_id(broker, monkeypatch)
    async with serving(broker) as connection:
        client = connection.client.stream
        assert isinstance(client, trio.StapledStream)
        await client.send_all(size_prefix(API_VERSIONS_V2) + size_prefix(INIT_PRODUCER_ID_V4))
        await client.receive_stream.aclose()
        await connection.wait_ended()
    assert not broker.stats.protocol_errors
    assert broker.stats.connections == 0
    assert [record for record in caplog.records if record.name == "nullbroker"] == []


async def test_a_held_request_is_cancelled_the_moment_its_client_closes(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger="nullbroker")
    broker = Broker(Config())
    cancelled = trio.Event()

    async def held_forever(*_args: Any) -> Any:
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    monkeypatch.setitem(dispatch_of(broker).handlers, 22, held_forever)
    async with serving(broker) as connection:
        client = connection.client.stream
        assert isinstance(client, trio.StapledStream)
        await client.send_all(size_prefix(INIT_PRODUCER_ID_V4))
        await trio.testing.wait_all_tasks_blocked()
        assert broker.stats.connections == 1
        # The client hangs up; the request would have waited forever.
        await client.send_stream.aclose()
        await connection.wait_ended()
        assert cancelled.is_set()
    assert broker.stats.connections == 0
    assert not broker.stats.protocol_errors
    assert broker.stats.requests_total() == 0
    lines = [record.getMessage() for record in caplog.records if record.name == "nullbroker"]
    assert lines == [
        "connection from memory:1 closed while its request was held; the request is cancelled"
    ]


async def test_requests_sent_while_one_is_held_are_answered_after_it_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broker = Broker(Config())
    release = hold_init_producer_id(broker, monkeypatch)
    first, *later = numbered([INIT_PRODUCER_ID_V4, API_VERSIONS_V2, METADATA_V12, API_VERSIONS_V0])
    async with serving(broker) as connection:
        await connection.client.send(size_prefix(first))
        await trio.testing.wait_all_tasks_blocked()
        # Sent while the first is held, in pieces: read meanwhile (to see a close), kept.
        tail = b"".join(size_prefix(frame) for frame in later)
        for start in range(0, len(tail), 7):
            await connection.client.send(tail[start : start + 7])
            await trio.testing.wait_all_tasks_blocked()
        assert connection.server.sends == []
        release.set()
        responses = [await connection.client.receive_frame() for _ in range(4)]
    assert_answers(responses, [first, *later])


async def test_an_unforeseen_failure_costs_only_its_connection_and_is_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="nullbroker")
    broker = Broker(Config())

    class FailingStream(RecordingStream):
        async def send_all(self, data: bytes | bytearray | memoryview) -> None:
            raise RuntimeError("a failure no one foresaw")

    client_stream, server_stream = trio.testing.memory_stream_pair()
    client = FrameStream(client_stream)
    with trio.fail_after(WAIT_SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                serve_connection,
                FailingStream(server_stream),
                Shared(dispatch_of(broker)),
                SESSION,
                Drain(),
            )
            await client.send(size_prefix(API_VERSIONS_V2))
            assert await client.is_closed_by_peer()
    assert broker.stats.protocol_errors == {"InternalError": 1}
    assert broker.stats.connections == 0
    errors = [record for record in caplog.records if record.name == "nullbroker"]
    assert len(errors) == 1 and errors[0].exc_info is not None
