"""The epoll host loop (`--connection-loop epoll`, the default) and the connections it serves.

The broker runs in-process here, inside `HostLoop.run`, and clients are trio sockets in
the same guest run: they wait through trio's own I/O, the broker's plain-TCP connections
through the host loop's. The real clients' tests (tests/clients/test_clients_*.py, and both loops
in the modules marked every_connection_loop) run it as users do, in `nullbroker serve`.
"""

from __future__ import annotations

import datetime
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

from codec.entities import make
from nullbroker.app.configuration import load
from nullbroker.net import host_loop
from nullbroker.net.host_loop import HostLoop
from nullbroker.workers.server import BrokerServer
from tests.support.kafka_wire import FrameStream, size_prefix
from tests.support.kio_calls import decode_response, fetch_frame, record_batch, request_frame, types

SOURCE = "clicks:partitions=1,records=5000,size=1000"
FETCHES = 40  # about 40 MB of answers: far more than loopback's socket buffers hold


def run_hosted(
    scenario: Callable[[BrokerServer], Awaitable[Any]], *sources: str, **settings: Any
) -> Any:
    """Run `scenario` against a broker served by a host loop, as `nullbroker serve` does."""

    async def main() -> Any:
        server = BrokerServer(load({"listen": "127.0.0.1:0", "source": list(sources), **settings}))
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            try:
                return await scenario(server)
            finally:
                server.stop()

    return HostLoop().run(main)


async def connect(server: BrokerServer) -> FrameStream:
    assert server.address is not None
    return FrameStream(await trio.open_tcp_stream(server.address.host, server.address.port))


def all_fetches() -> bytes:
    """FETCHES Fetch requests of the source topic in one send, so that the broker reads them
    all before it stops reading (requests still unread when a connection closes are not
    answered, and the kernel resets it)."""
    return b"".join(
        size_prefix(fetch_frame("clicks", 0, 0, correlation_id=number)) for number in range(FETCHES)
    )


def produce_frame(topic: str, records: int, correlation_id: int) -> bytes:
    t = types(0, 9)
    body = make(
        t.ProduceRequest,
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            make(
                t.TopicProduceData,
                name=topic,
                partition_data=(
                    make(t.PartitionProduceData, index=0, records=record_batch(records)),
                ),
            ),
        ),
    )
    return request_frame(0, 9, body, correlation_id=correlation_id)


def test_run_returns_what_trio_returns_and_raises_what_it_raises() -> None:
    async def answer() -> int:
        await trio.sleep(0)
        return 42

    async def fail() -> None:
        await trio.sleep(0)
        raise LookupError("from the guest")

    assert HostLoop().run(answer) == 42
    with pytest.raises(LookupError, match="from the guest"):
        HostLoop().run(fail)


def test_timers_worker_threads_and_calls_from_other_threads_reach_the_guest() -> None:
    async def main() -> list[str]:
        loop = host_loop.current()
        assert loop is not None
        seen: list[str] = []
        await trio.sleep(0.01)
        seen.append(await trio.to_thread.run_sync(lambda: "worker thread"))
        called = trio.Event()
        token = trio.lowlevel.current_trio_token()

        def from_a_thread() -> None:
            loop.call_soon_threadsafe(lambda: token.run_sync_soon(called.set))

        threading.Thread(target=from_a_thread).start()
        with trio.fail_after(10):
            await called.wait()
        seen.append("threadsafe call")
        return seen

    assert HostLoop().run(main) == ["worker thread", "threadsafe call"]


def test_a_late_call_from_a_thread_is_dropped_without_touching_the_descriptor() -> None:
    # A thread of the run may call in after the run's last pass (the threadsafe call of
    # the test above raced the loop's end on a loaded machine: EBADF on the closed eventfd).
    loop = HostLoop()

    async def main() -> None:
        await trio.sleep(0)

    loop.run(main)
    # The eventfd's number now belongs to the next file opened: the late call must not
    # write to it.
    read_end, write_end = os.pipe()
    try:
        loop.call_soon_threadsafe(lambda: None)
        os.set_blocking(read_end, False)
        with pytest.raises(BlockingIOError):
            os.read(read_end, 8)
    finally:
        os.close(read_end)
        os.close(write_end)


def test_without_a_host_loop_there_is_none() -> None:
    async def main() -> object:
        return host_loop.current()

    assert trio.run(main) is None


def test_a_client_that_reads_no_answers_gets_them_all_in_order_and_is_then_served_again() -> None:
    """Answers larger than the socket takes wait in the loop (which reads nothing from that
    client meanwhile) and go out in order as the client reads; the connection then goes on."""

    async def scenario(server: BrokerServer) -> list[int]:
        client = await connect(server)
        for number in range(FETCHES):
            await client.send(size_prefix(fetch_frame("clicks", 0, 0, correlation_id=number)))
        await trio.sleep(0.2)  # let the broker fill the socket and wait for room
        answered = []
        for _ in range(FETCHES):
            correlation_id, body = decode_response(1, 12, size_prefix(await client.receive_frame()))
            assert body.responses[0].partitions[0].error_code.value == 0
            answered.append(correlation_id)
        await client.send(size_prefix(produce_frame("events", 3, correlation_id=FETCHES)))
        correlation_id, body = decode_response(0, 9, size_prefix(await client.receive_frame()))
        assert correlation_id == FETCHES
        assert body.responses[0].partition_responses[0].base_offset == 0
        await client.aclose()
        return answered

    assert run_hosted(scenario, SOURCE) == list(range(FETCHES))


def test_a_held_fetch_goes_to_trio_and_its_connection_comes_back_to_the_loop() -> None:
    async def scenario(server: BrokerServer) -> None:
        follower = await connect(server)
        producer = await connect(server)
        # At the log end: held until the producer's records arrive.
        await producer.send(size_prefix(produce_frame("events", 1, correlation_id=1)))
        await producer.receive_frame()
        await follower.send(size_prefix(fetch_frame("events", 1, 20_000, correlation_id=1)))
        await trio.sleep(0.1)
        await producer.send(size_prefix(produce_frame("events", 2, correlation_id=2)))
        await producer.receive_frame()
        correlation_id, body = decode_response(1, 12, size_prefix(await follower.receive_frame()))
        assert correlation_id == 1
        assert body.responses[0].partitions[0].high_watermark == 3
        # The same connection, back on the loop: answered at once.
        await follower.send(size_prefix(fetch_frame("events", 0, 0, correlation_id=2)))
        correlation_id, _ = decode_response(1, 12, size_prefix(await follower.receive_frame()))
        assert correlation_id == 2
        for client in (follower, producer):
            await client.aclose()
        stats = server.broker.stats
        assert stats.api("Fetch").requests == 2

    run_hosted(scenario, SOURCE)


def test_draining_sends_the_answers_a_slow_reader_is_owed_then_closes() -> None:
    async def scenario(server: BrokerServer) -> int:
        client = await connect(server)
        await client.send(all_fetches())
        await trio.sleep(0.2)
        server.stop()
        read = 0
        for _ in range(FETCHES):
            await client.receive_frame()
            read += 1
        assert await client.is_closed_by_peer()
        return read

    assert run_hosted(scenario, SOURCE) == FETCHES


def test_an_idle_client_whose_answers_wait_for_room_is_closed_as_any_idle_one() -> None:
    """Answers waiting on the loop for room in the socket do not keep a client that reads
    nothing for the idle timeout: it is closed, as the trio path's cancelled send would be."""

    async def scenario(server: BrokerServer) -> int:
        client = await connect(server)
        await client.send(all_fetches())
        stats = server.broker.stats
        with trio.fail_after(10):
            while not stats.connections_idle_closed:
                await trio.sleep(0.05)
        assert stats.connections == 0
        read = 0
        with pytest.raises((trio.BrokenResourceError, EOFError)):
            while True:  # what the kernel holds, then the end
                await client.receive_frame()
                read += 1
        await client.aclose()
        return read

    assert run_hosted(scenario, SOURCE, idle_timeout_ms=300) < FETCHES


def test_requests_sent_behind_a_held_one_are_answered_after_it_in_order() -> None:
    async def scenario(server: BrokerServer) -> list[int]:
        follower = await connect(server)
        producer = await connect(server)
        await follower.send(size_prefix(fetch_frame("events", 0, 20_000, correlation_id=1)))
        await trio.sleep(0.1)
        # Read by the connection while the Fetch before them is held.
        await follower.send(
            size_prefix(fetch_frame("clicks", 0, 0, correlation_id=2))
            + size_prefix(fetch_frame("clicks", 10, 0, correlation_id=3))
        )
        await trio.sleep(0.1)
        await producer.send(size_prefix(produce_frame("events", 1, correlation_id=1)))
        order = [decode_response(1, 12, size_prefix(await follower.receive_frame()))[0]]
        order += [decode_response(1, 12, size_prefix(await follower.receive_frame()))[0]]
        order += [decode_response(1, 12, size_prefix(await follower.receive_frame()))[0]]
        for client in (follower, producer):
            await client.aclose()
        return order

    assert run_hosted(scenario, SOURCE) == [1, 2, 3]


def test_a_bad_frame_closes_its_connection_after_the_answers_before_it() -> None:
    async def scenario(server: BrokerServer) -> None:
        client = await connect(server)
        bad_size = (-5).to_bytes(4, "big", signed=True)
        await client.send(size_prefix(fetch_frame("clicks", 0, 0, correlation_id=9)) + bad_size)
        correlation_id, _ = decode_response(1, 12, size_prefix(await client.receive_frame()))
        assert correlation_id == 9
        assert await client.is_closed_by_peer()
        assert server.broker.stats.protocol_errors == {"InvalidFrameSize": 1}
        # Another connection is served as before.
        other = await connect(server)
        await other.send(size_prefix(fetch_frame("clicks", 0, 0, correlation_id=1)))
        await other.receive_frame()
        await other.aclose()

    run_hosted(scenario, SOURCE)
