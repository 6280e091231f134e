"""The plain-TCP fast path of a connection: non-blocking reads, writev of response buffers.

tests/net/test_connection.py drives `serve_connection` over in-memory streams (the generic
path); these use real socket pairs, where a full send buffer forces partial writes.
"""

from __future__ import annotations

import os
import random
import socket

import pytest
import trio
import trio.testing

from nullbroker.net.connection import (
    FIRST_RECEIVE_BYTES,
    RECEIVE_BYTES,
    SHRINK_AFTER_READS,
    Drain,
    SocketWire,
    after_sent,
)


@pytest.mark.parametrize("sent", [0, 1, 2, 3, 4, 5, 6, 9])
def test_after_drops_exactly_the_bytes_sent(sent: int) -> None:
    parts: list[bytes | bytearray | memoryview] = [b"ab", b"", bytearray(b"cde"), b"f", b"ghi"]
    rest = after_sent(parts, sent)
    assert b"".join(bytes(part) for part in rest) == b"abcdefghi"[sent:]


async def _socket_wire_pair() -> tuple[SocketWire, trio.SocketStream]:
    left, right = trio.socket.socketpair()
    # A small send buffer makes every large writev partial.
    left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    return SocketWire(trio.SocketStream(left)), trio.SocketStream(right)


async def test_send_all_delivers_many_buffers_in_order_through_partial_writes() -> None:
    wire, peer = await _socket_wire_pair()
    rng = random.Random(7)
    # More buffers than one writev takes, of sizes from empty to well over the send buffer.
    parts: list[bytes | bytearray | memoryview] = [
        rng.randbytes(rng.choice([0, 1, 61, 1000, 16_384, 100_000])) for _ in range(2500)
    ]
    expected = b"".join(bytes(part) for part in parts)
    received = bytearray()

    async def read_slowly() -> None:
        while len(received) < len(expected):
            received.extend(await peer.receive_some(7919))
            await trio.sleep(0)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_slowly)
        await wire.send_all(list(parts))
    assert received == expected


async def test_receive_returns_bytes_then_none_at_end_of_stream() -> None:
    wire, peer = await _socket_wire_pair()
    await peer.send_all(b"hello")
    assert await wire.receive(Drain()) == b"hello"
    await peer.aclose()
    assert await wire.receive(Drain()) is None


async def test_a_waiting_receive_stops_when_draining_starts() -> None:
    wire, _peer = await _socket_wire_pair()
    drain = Drain()
    result: list[object] = []

    async def receive() -> None:
        with wire.scope:  # as serve_connection runs a connection
            result.append(await wire.receive(drain))
        result.append("after")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receive)
        await trio.testing.wait_all_tasks_blocked()
        drain.start()
    # Draining cancels the connection's scope: the wait ends it, with nothing returned.
    assert result == ["after"]


async def test_send_to_a_closed_peer_raises_broken_resource() -> None:
    wire, peer = await _socket_wire_pair()
    await peer.aclose()
    with pytest.raises(trio.BrokenResourceError):
        for _ in range(100):  # the first writes may land in the buffer before the reset
            await wire.send_all([os.urandom(65_536)])


async def test_the_receive_buffer_grows_with_full_reads_and_shrinks_when_reads_are_small() -> None:
    wire, peer = await _socket_wire_pair()
    assert not wire.into  # no buffer before the first read
    await peer.send_all(b"x")
    assert await wire.receive(Drain()) == b"x"
    assert len(wire.view) == FIRST_RECEIVE_BYTES  # what a quiet connection holds
    payload = random.Random(3).randbytes(3 * RECEIVE_BYTES)
    received = bytearray()

    async def send() -> None:
        await peer.send_all(payload)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(send)
        while len(received) < len(payload):
            data = await wire.receive(Drain())
            assert data is not None
            received.extend(data)  # a read's bytes are valid until the next read
    assert received == payload
    assert len(wire.view) == RECEIVE_BYTES  # grew, doubling, to the most one read takes

    for _ in range(SHRINK_AFTER_READS * 8):
        await peer.send_all(b"x")
        assert await wire.receive(Drain()) == b"x"
    assert len(wire.view) < RECEIVE_BYTES // 8  # quiet again: halved, and halved again
