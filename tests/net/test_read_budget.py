"""The read budget (`--max-buffered-bytes`): large requests reserve their announced size
before their body is read, connections without room stop reading until there is, small
requests keep flowing, and clients that announce huge requests and stall cannot take the
broker's memory, while a well-behaved producer beside them is counted exactly."""

from __future__ import annotations

import socket
import struct
import threading
import time

import pytest
import trio
import trio.testing
from confluent_kafka import Producer

from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.net.read_budget import SMALL_REQUEST_BYTES, ReadBudget, Reservation
from tests.net.test_bad_input import GOOD_TOPIC, connect, produce_request, running_broker
from tests.support.broker_counts import produced_from_metrics
from tests.support.kafka_wire import record_batch, request_frame, size_prefix

MIB = 1024 * 1024


async def test_reservations_are_granted_in_turn_as_room_frees() -> None:
    budget = ReadBudget(10 * MIB)
    first, second, third = (Reservation(budget) for _ in range(3))
    assert first.try_fit(6 * MIB) and budget.reserved == 6 * MIB
    assert not second.try_fit(6 * MIB)
    granted: list[str] = []

    async def wait(name: str, reservation: Reservation, size: int) -> None:
        await reservation.fit(size)
        granted.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait, "second", second, 6 * MIB)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(wait, "third", third, 3 * MIB)  # it would fit: it waits its turn
        await trio.testing.wait_all_tasks_blocked()
        assert granted == [] and budget.waits == 2
        first.release()  # room for both: granted in turn, woken in any order
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(granted) == ["second", "third"] and budget.reserved == 9 * MIB
    assert Reservation.needed(SMALL_REQUEST_BYTES) == 0
    assert Reservation.needed(SMALL_REQUEST_BYTES + 1) == SMALL_REQUEST_BYTES + 1


async def test_a_cancelled_wait_gives_its_turn_away() -> None:
    budget = ReadBudget(4 * MIB)
    holder, quitter, patient = (Reservation(budget) for _ in range(3))
    await holder.fit(3 * MIB)
    with trio.move_on_after(0.05):
        await quitter.fit(4 * MIB)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(patient.fit, MIB)  # would have waited behind the quitter
    assert budget.reserved == 4 * MIB and patient.reserved == MIB


def large_produce(value_bytes: int) -> bytes:
    """A size-prefixed Produce request to GOOD_TOPIC carrying one record of that size."""
    batch = record_batch(1, value_bytes=value_bytes)
    return size_prefix(request_frame(produce_request(GOOD_TOPIC, [(0, batch)]), 7))


async def test_a_large_request_waits_for_room_then_is_answered() -> None:
    budget = 3 * MIB
    async with running_broker(max_buffered_bytes=budget) as server:
        # The broker's message.max.bytes raised past the 2 MiB batch, as an
        # IncrementalAlterConfigs would raise it (its default, 1 MiB, refuses the batch).
        server.broker.topics.configs_changed(4 * MIB)
        staller = await connect(server)
        # Announce 2 MiB and send half: the reservation is held while the rest is awaited.
        await staller.send(struct.pack(">i", 2 * MIB) + bytes(MIB))
        waiting = await connect(server)
        async with trio.open_nursery() as nursery:
            # The broker stops reading it, so its send waits for room: in the background.
            nursery.start_soon(waiting.stream.send_all, large_produce(2 * MIB))
            with trio.move_on_after(0.5):
                await waiting.receive_frame()
                pytest.fail("answered while the budget had no room for it")
            assert server.shared.read_budget.waits >= 1
            await staller.stream.aclose()  # its reservation goes with it
            with trio.fail_after(10):
                answer = await waiting.receive_frame()
        assert answer[:4] == struct.pack(">i", 7)  # the request's correlation id
        assert server.broker.stats.produced[(GOOD_TOPIC, 0)].records == 1


async def test_a_request_announced_larger_than_the_budget_closes_its_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with running_broker(max_buffered_bytes=2 * MIB) as server:
        greedy = await connect(server)
        await greedy.send(struct.pack(">i", 3 * MIB) + bytes(1024))
        with trio.fail_after(10):
            assert await greedy.stream.receive_some(1) == b""
    lines = [r.getMessage() for r in caplog.records if "exceeds the maximum" in r.getMessage()]
    assert len(lines) == 1 and f"of {2 * MIB} bytes" in lines[0]


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def stalled_upload(
    address: tuple[str, int], announced: int, sent: int, stop: threading.Event
) -> None:
    """Announce `announced` bytes, send `sent` of them as fast as the broker takes them, then
    hold the connection open until told to stop."""
    with socket.create_connection(address) as sock:
        sock.settimeout(0.5)
        sock.sendall(struct.pack(">i", announced))
        chunk = bytes(256 * 1024)
        left = sent
        while left > 0 and not stop.is_set():
            try:
                left -= sock.send(chunk[: min(left, len(chunk))])
            except TimeoutError:
                continue  # the broker stopped reading: keep trying until told to stop
        stop.wait(120)


@pytest.mark.clients
@pytest.mark.every_connection_loop
def test_stalled_huge_requests_cannot_take_the_memory_a_producer_needs(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--partitions", "4")
    pid = broker.process.pid
    host, port = broker.bootstrap.rsplit(":", 1)
    stop = threading.Event()
    attackers = [
        threading.Thread(
            target=stalled_upload, args=((host, int(port)), 100 * MIB, 50 * MIB, stop), daemon=True
        )
        for _ in range(20)
    ]
    peak = rss_kib(pid)
    try:
        for attacker in attackers:
            attacker.start()
        producer = Producer({
            "bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5,
        })  # fmt: skip
        records = 20_000
        for index in range(records):
            producer.produce("beside", value=b"x" * 200)
            producer.poll(0)
            if index % 1000 == 0:
                peak = max(peak, rss_kib(pid))
        assert producer.flush(60) == 0
        deadline = time.monotonic() + 5  # let the uploads take what they can
        while time.monotonic() < deadline:
            peak = max(peak, rss_kib(pid))
            time.sleep(0.1)
        produced = produced_from_metrics(broker.scrape())
        assert sum(c.records for (topic, _), c in produced.items() if topic == "beside") == records
    finally:
        stop.set()
        for attacker in attackers:
            attacker.join(10)
    # The budget (100 MiB by default) plus 64 MiB; 20 stalled uploads would be 1,000 MiB.
    assert peak < (100 + 64) * 1024, f"peak RSS {peak / 1024:.0f} MiB"
