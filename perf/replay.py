"""Replay pre-encoded requests as fast as a broker answers them: the broker's ceiling.

A Kafka client spends more CPU building and parsing records than a null broker spends on
them, so on a 2-core machine kafka-producer-perf-test measures the client as much as the
broker. These load generators encode their requests once and then only send them and read
the answers, without looking at a record:

- `produce`: reads the topic's Metadata (which creates it where the broker auto-creates
  topics), then opens one connection to each node that leads some of its first
  `--partitions` partitions, as a producer does, and sends each one Produce request (N
  records of S bytes per batch, one batch for each of those partitions that node leads,
  acks=all, not idempotent, so every replay is appended and counted) `--requests` times,
  `--in-flight` requests outstanding on each, the way a producer pipelines. With
  `--clients N`, N processes each do all of that at once, so that the load is not bounded
  by one Python process: it is how a cluster's ceiling (`--brokers`, `--processes`) is
  measured apart from the client's cost; `--rate` paces each connection instead, so that
  brokers compared are given the same load. Only each connection's first answer is decoded
  (an error in it stops the run); the others are counted by their size prefixes.
- `fetch`: Fetch requests for every partition of a topic from offset 0, one at a time like a
  consumer, each from where the last answer ended (found by walking batch headers, never
  records), until `--records` records per partition were served.

With `--broker-pid` each reports the CPU time (from /proc) per request and per GB of that
process and every process descended from it (a cluster's supervisor and its workers); without
it, none.

    .venv/bin/nullbroker serve --source clicks:partitions=4,records=100000,size=1024 &
    broker=$!
    .venv/bin/python -m perf.replay produce --bootstrap-server 127.0.0.1:9092 \\
        --requests 50000 --broker-pid "$broker"
    .venv/bin/python -m perf.replay fetch --bootstrap-server 127.0.0.1:9092 --topic clicks \\
        --partitions 4 --records 100000 --broker-pid "$broker"
    kill "$broker"
    .venv/bin/nullbroker serve --brokers 8 --partitions 16 --processes 2 &
    broker=$!
    .venv/bin/python -m perf.replay produce --bootstrap-server 127.0.0.1:9092 \\
        --partitions 16 --clients 4 --requests 5000 --broker-pid "$broker"
    kill "$broker"
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import multiprocessing
import selectors
import socket
import struct
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection as Pipe
from typing import Any

from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.serial import entity_reader
from kio.static.primitive import i8, i16, i32, i64

from codec import ApiKey
from codec.apis import response_schema
from codec.entities import request_module
from codec.framing import size_prefixed
from codec.messages import encode_request

from .proc_sampler import machine_busy_seconds, process_tree, tree_cpu_seconds

PRODUCE_VERSION = 9  # librdkafka 2.x's; flexible, so the current header path is measured
FETCH_VERSION = 12  # the last version that names topics (13+ use topic ids)
METADATA_VERSION = 12  # flexible, names topics, may create them
FLEXIBLE_RESPONSE_HEADER = 5  # correlation id and an empty tagged-field section
METADATA_TRIES = 100
METADATA_RETRY_SECONDS = 0.1
"""How long a topic's leaders are waited for (a broker may create it asynchronously)."""
CLIENTS_READY_SECONDS = 60.0
"""How long the client processes may take to connect before the run is called off."""
CLIENT_ID = "replay"
_SIZE = struct.Struct(">i")
_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length (after these 12 bytes)
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23  # within a RecordBatch v2


def produce_frame(topic: str, partitions: Sequence[int], records: int, record_size: int) -> bytes:
    """A size-prefixed Produce request (acks=all): one uncompressed batch for each of
    `partitions`."""
    value = bytes(65 + i % 26 for i in range(record_size))
    timestamp = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    batch = io.BytesIO()
    write_new_batch(
        batch,
        NewRecordBatch(
            producer_id=i64(-1),
            producer_epoch=i16(-1),
            base_sequence=i32(-1),
            attributes=i16(0),
            records=tuple(
                Record(
                    attributes=i8(0),
                    timestamp=timestamp,  # type: ignore[arg-type]
                    offset=i64(index),
                    key=None,
                    value=value,
                    headers=(),
                )
                for index in range(records)
            ),
        ),
    )
    types = request_module(ApiKey.PRODUCE, PRODUCE_VERSION)
    body = types.ProduceRequest(
        transactional_id=None,
        acks=i16(-1),
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            types.TopicProduceData(
                name=topic,
                partition_data=tuple(
                    types.PartitionProduceData(index=i32(p), records=batch.getvalue())
                    for p in partitions
                ),
            ),
        ),
    )
    return size_prefixed(encode_request(body, 0, CLIENT_ID))


def fetch_frame(topic: str, offsets: list[int], partition_max_bytes: int) -> bytes:
    """A size-prefixed Fetch request for every partition of `topic` at `offsets`."""
    types = request_module(ApiKey.FETCH, FETCH_VERSION)
    body = types.FetchRequest(
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=i32(1),
        max_bytes=i32(2**31 - 1),
        topics=(
            types.FetchTopic(
                topic=topic,
                partitions=tuple(
                    types.FetchPartition(
                        partition=i32(index),
                        fetch_offset=i64(offset),
                        partition_max_bytes=i32(partition_max_bytes),
                    )
                    for index, offset in enumerate(offsets)
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    return size_prefixed(encode_request(body, 0, CLIENT_ID))


def metadata_frame(topic: str) -> bytes:
    """A size-prefixed Metadata request for `topic`, allowing the broker to create it."""
    types = request_module(ApiKey.METADATA, METADATA_VERSION)
    body = types.MetadataRequest(
        topics=(types.MetadataRequestTopic(topic_id=None, name=topic),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    return size_prefixed(encode_request(body, 0, CLIENT_ID))


@dataclass(frozen=True, slots=True)
class Leader:
    """A node that leads some of the topic's partitions, where its clients reach it."""

    node: int
    address: tuple[str, int]
    partitions: tuple[int, ...]


def leaders(connection: Connection, topic: str, partitions: int | None) -> list[Leader]:
    """The nodes that lead `topic`'s first `partitions` partitions (all of them with None),
    from its Metadata, asked again until every one has a leader (a new topic's may not yet)."""
    read = entity_reader(response_schema(ApiKey.METADATA, METADATA_VERSION))
    problem = "no answer"
    for _ in range(METADATA_TRIES):
        connection.sock.sendall(metadata_frame(topic))
        response, _ = read(connection.frame(), FLEXIBLE_RESPONSE_HEADER)
        found = [entry for entry in response.topics if entry.name == topic]
        problem = _leaderless(found[0] if found else None, partitions)
        if not problem:
            addresses = {b.node_id: (b.host, int(b.port)) for b in response.brokers}
            led: dict[int, list[int]] = {}
            for partition in sorted(found[0].partitions, key=lambda p: p.partition_index):
                if partitions is None or partition.partition_index < partitions:
                    led.setdefault(partition.leader_id, []).append(partition.partition_index)
            if all(node in addresses for node in led):
                return [
                    Leader(node, addresses[node], tuple(indexes))
                    for node, indexes in sorted(led.items())
                ]
            problem = "a leader missing from the brokers listed"
        time.sleep(METADATA_RETRY_SECONDS)
    raise RuntimeError(f"topic {topic}: {problem}")


def _leaderless(topic: Any, partitions: int | None) -> str:
    """Why `topic`'s Metadata cannot be written to yet (empty when it can)."""
    if topic is None:
        return "not in the Metadata answer"
    if topic.error_code:
        return f"error {int(topic.error_code)}"
    if partitions is not None and len(topic.partitions) < partitions:
        return f"{len(topic.partitions)} partitions, fewer than the {partitions} asked for"
    if any(p.error_code or p.leader_id < 0 for p in topic.partitions):
        return "a partition without a leader"
    return ""


def next_offset(records: bytes, offset: int) -> int:
    """The offset after the last batch in a Fetch response's records (batch headers only)."""
    position = 0
    while len(records) - position >= _LAST_OFFSET_DELTA_AT + 4:
        base, length = _BATCH_HEAD.unpack_from(records, position)
        (delta,) = _LAST_OFFSET_DELTA.unpack_from(records, position + _LAST_OFFSET_DELTA_AT)
        offset = base + delta + 1
        position += 12 + length
    return offset


class Connection:
    """One blocking socket that sends frames and yields the response frames it reads."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = bytearray()
        self.bytes_received = 0

    def responses(self) -> list[memoryview]:
        """Block for more bytes, then return every complete response frame buffered."""
        data = self.sock.recv(4 << 20)
        if not data:
            raise ConnectionError("the broker closed the connection")
        self.bytes_received += len(data)
        buffer = self.buffer
        buffer += data
        frames = []
        start = 0
        while len(buffer) - start >= 4:
            (size,) = _SIZE.unpack_from(buffer, start)
            if len(buffer) - start - 4 < size:
                break
            frames.append(memoryview(bytes(buffer[start + 4 : start + 4 + size])))
            start += 4 + size
        del buffer[:start]
        return frames

    def count_responses(self) -> int:
        """Block for more bytes, then count (and drop) every complete response frame."""
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("the broker closed the connection")
        self.bytes_received += len(data)
        buffer = self.buffer
        buffer += data
        count = start = 0
        while len(buffer) - start >= 4:
            (size,) = _SIZE.unpack_from(buffer, start)
            if len(buffer) - start - 4 < size:
                break
            count += 1
            start += 4 + size
        del buffer[:start]
        return count

    def frame(self) -> memoryview:
        """Block for exactly one response frame, read straight into a buffer of its size
        (a large Fetch response is never copied on the client)."""
        assert not self.buffer, "frame() after responses() left bytes behind"
        header = self._exactly(4)
        (size,) = _SIZE.unpack(header)
        return self._exactly(size)

    def _exactly(self, size: int) -> memoryview:
        view = memoryview(bytearray(size))
        received = 0
        while received < size:
            count = self.sock.recv_into(view[received:])
            if not count:
                raise ConnectionError("the broker closed the connection")
            received += count
        self.bytes_received += size
        return view.toreadonly()

    def close(self) -> None:
        self.sock.close()


class _Replaying:
    """One connection's part of a produce replay: what it has sent, and had answered."""

    __slots__ = ("answered", "checked", "connection", "frame", "in_flight", "requests", "sent")

    def __init__(self, connection: Connection, frame: bytes, requests: int, in_flight: int) -> None:
        self.connection = connection
        self.frame = frame
        self.requests = requests
        self.in_flight = in_flight
        self.sent = self.answered = 0
        self.checked = False

    def send_more(self, due: int | None = None) -> None:
        """Send what the in-flight window allows (and no more than `due` in all)."""
        limit = self.requests if due is None else min(due, self.requests)
        window = min(self.in_flight - (self.sent - self.answered), limit - self.sent)
        if window > 0:
            self.connection.sock.sendall(self.frame * window)
            self.sent += window

    def read(self) -> bool:
        """Read what the broker answered; whether every request has been answered."""
        if self.checked:
            self.answered += self.connection.count_responses()
        else:
            answers = self.connection.responses()
            if answers:
                _check_produce_answer(answers[0])
                self.checked = True
            self.answered += len(answers)
        return self.answered >= self.requests


def _check_produce_answer(frame: memoryview) -> None:
    """Raise if any partition of a Produce answer has an error (a broker that does not
    lead it, a topic it does not know): such a replay would count nothing."""
    read = entity_reader(response_schema(ApiKey.PRODUCE, PRODUCE_VERSION))
    response, _ = read(frame, FLEXIBLE_RESPONSE_HEADER)
    for topic in response.responses:
        for partition in topic.partition_responses:
            if partition.error_code:
                raise RuntimeError(
                    f"Produce to {topic.name} partition {partition.index}: error "
                    f"{int(partition.error_code)} ({partition.error_code.name})"
                )


def replay_produce(
    connections: Sequence[Connection],
    frames: Sequence[bytes],
    requests: int,
    in_flight: int,
    rate: float = 0.0,
    phase: float = 0.0,
) -> int:
    """Send each connection its frame `requests` times, at most `in_flight` unanswered on
    each, and with a `rate` at most that many a second on each (0: as fast as answered;
    `phase`: this client's place, from 0 to 1, among several paced alike); the requests
    sent."""
    replays = [
        _Replaying(connection, frame, requests, in_flight)
        for connection, frame in zip(connections, frames, strict=True)
    ]
    if rate > 0:
        _replay_paced(replays, rate, phase)
    elif len(replays) == 1:  # one connection: block in its recv, no selector's wait beside it
        replay = replays[0]
        replay.send_more()
        while not replay.read():
            replay.send_more()
    else:
        with selectors.DefaultSelector() as selector:
            for replay in replays:
                selector.register(replay.connection.sock, selectors.EVENT_READ, replay)
                replay.send_more()
            waiting = len(replays)
            while waiting:
                for key, _ in selector.select():
                    replay = key.data
                    if replay.read():
                        selector.unregister(replay.connection.sock)
                        waiting -= 1
                    else:
                        replay.send_more()
    return requests * len(replays)


def _replay_paced(replays: list[_Replaying], rate: float, phase: float = 0.0) -> None:
    """Send each connection's request n no sooner than (n + its phase) / `rate` seconds
    after the start, nor with more than its in-flight unanswered: every broker measured
    this way is given the same load, whatever it could take. The connections' phases are
    spread evenly over a period, from `phase` (this client's among several) on, so that
    their requests arrive one by one, as independent producers' do, not all at once."""
    count = len(replays)
    # The schedule in order: request k of connection i is the (k * count + i)-th due.
    scheduled = replays[0].requests * count
    step = 1 / (rate * count)
    started = time.monotonic() + phase / rate
    allowed = [0] * count
    due = 0
    with selectors.DefaultSelector() as selector:
        for index, replay in enumerate(replays):
            selector.register(replay.connection.sock, selectors.EVENT_READ, index)
        going = count
        while going:
            now = time.monotonic()
            while due < scheduled and started + due * step <= now:
                index = due % count
                allowed[index] += 1
                replays[index].send_more(allowed[index])
                due += 1
            timeout = max(started + due * step - now, 0.0) if due < scheduled else None
            for key, _ in selector.select(timeout):
                index = key.data
                replay = replays[index]
                if replay.read():
                    selector.unregister(replay.connection.sock)
                    going -= 1
                else:  # an answer frees the window for what fell due meanwhile
                    replay.send_more(allowed[index])


@dataclass(frozen=True, slots=True)
class ProducePlan:
    """What every client process of a produce replay sends: a frame to each leader."""

    leaders: list[Leader]
    frames: list[bytes]
    requests: int
    """Per connection."""
    in_flight: int
    rate: float = 0.0
    """Requests a second per connection at most (0: as fast as the broker answers)."""


@dataclass(frozen=True, slots=True)
class ClientRun:
    """One client process's replay: its clock (time.monotonic, the same in every process)
    and its own CPU time."""

    started: float
    ended: float
    cpu_seconds: float
    requests: int


def _produce_client(
    plan: ProducePlan,
    phase: float,
    connected: threading.Barrier,
    go: threading.Barrier,
    results: Pipe,
) -> None:
    """A client process: connect to every leader, wait for the others, replay, report."""
    try:
        connections = [Connection(leader.address) for leader in plan.leaders]
        connected.wait()
        go.wait()
        cpu, started = time.process_time(), time.monotonic()
        requests = replay_produce(
            connections, plan.frames, plan.requests, plan.in_flight, plan.rate, phase
        )
        run = ClientRun(started, time.monotonic(), time.process_time() - cpu, requests)
        for connection in connections:
            connection.close()
        results.send(run)
    except BaseException as error:  # reported to the parent, which fails the run
        connected.abort()
        go.abort()
        results.send(f"{type(error).__name__}: {error}")
    finally:
        results.close()


def run_clients(plan: ProducePlan, clients: int, broker_pid: int | None) -> dict[str, Any]:
    """Replay `plan` from `clients` processes at once: the wall time from the first start to
    the last end, the clients' CPU time, and the broker's (its process tree's) if given, with
    what the rest of the machine used meanwhile (other work that shared the cores)."""
    context = multiprocessing.get_context("fork")  # the children inherit the encoded frames
    connected = context.Barrier(clients + 1, timeout=CLIENTS_READY_SECONDS)
    go = context.Barrier(clients + 1, timeout=CLIENTS_READY_SECONDS)
    processes, pipes = [], []
    for client in range(clients):
        receiving, sending = context.Pipe(duplex=False)
        # Paced clients take turns within each period, their connections spread between.
        phase = client / clients / len(plan.leaders)
        process = context.Process(
            target=_produce_client, args=(plan, phase, connected, go, sending)
        )
        process.start()
        sending.close()
        processes.append(process)
        pipes.append(receiving)
    broker = process_tree(broker_pid) if broker_pid else []
    cpu_before = busy_before = 0.0
    try:
        connected.wait()
        cpu_before, busy_before = tree_cpu_seconds(broker), machine_busy_seconds()
        go.wait()
    except threading.BrokenBarrierError:
        pass  # a client failed: its message says why
    runs = [_received(pipe) for pipe in pipes]
    cpu = tree_cpu_seconds(broker) - cpu_before
    busy = machine_busy_seconds() - busy_before
    for process in processes:
        process.join()
    failures = [run for run in runs if isinstance(run, str)]
    if failures:
        raise RuntimeError(f"{len(failures)} of {clients} clients failed: {failures[0]}")
    done = [run for run in runs if isinstance(run, ClientRun)]
    client_cpu = sum(run.cpu_seconds for run in done)
    return {
        "seconds": max(run.ended for run in done) - min(run.started for run in done),
        "requests": sum(run.requests for run in done),
        "client_cpu_seconds": client_cpu,
        "broker_cpu_seconds": cpu if broker else None,
        "broker_processes": len(broker),
        "other_cpu_seconds": max(busy - cpu - client_cpu, 0.0) if broker else None,
    }


def _received(pipe: Pipe) -> ClientRun | str:
    try:
        run: ClientRun | str = pipe.recv()
    except EOFError:
        return "the client process ended without a word"
    return run


def replay_fetch(
    connection: Connection, topic: str, partitions: int, records: int, partition_max_bytes: int
) -> int:
    """Fetch every partition from 0 until each has `records` records; requests sent."""
    read = entity_reader(response_schema(ApiKey.FETCH, FETCH_VERSION))
    offsets = [0] * partitions
    requests = 0
    while min(offsets) < records:
        connection.sock.sendall(fetch_frame(topic, offsets, partition_max_bytes))
        requests += 1
        # Response header v1: correlation id and an empty tagged-field section.
        response, _ = read(connection.frame(), 5)
        for topic_response in response.responses:
            for partition in topic_response.partitions:
                if partition.error_code:
                    raise RuntimeError(
                        f"partition {partition.partition_index}: error {partition.error_code}"
                    )
                index = partition.partition_index
                offsets[index] = next_offset(partition.records or b"", offsets[index])
    return requests


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m perf.replay",
        description=(__doc__ or "").split("\n\n")[0],
        epilog="\n\n".join((__doc__ or "").split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="workload", required=True)
    produce = commands.add_parser("produce", help="replay one Produce request to each leader")
    produce.add_argument("--topic", default="replay")
    produce.add_argument("--requests", type=int, default=20_000, help="per connection")
    produce.add_argument(
        "--in-flight", type=int, default=5, help="per connection; default 5, as producers"
    )
    produce.add_argument(
        "--partitions",
        type=int,
        default=1,
        help="write the topic's first N partitions (default 1); each request carries a batch "
        "for each of them its node leads",
    )
    produce.add_argument("--records-per-batch", type=int, default=15)
    produce.add_argument("--record-size", type=int, default=1024)
    produce.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="requests a second per connection at most (default: as fast as answered), so "
        "that brokers compared are given the same load",
    )
    produce.add_argument(
        "--clients",
        type=int,
        default=1,
        help="client processes replaying at once, each with a connection to every leader",
    )
    fetch = commands.add_parser("fetch", help="read a topic from offset 0 with Fetch")
    fetch.add_argument("--topic", required=True)
    fetch.add_argument("--partitions", type=int, default=1, help="the topic's partitions")
    fetch.add_argument("--records", type=int, default=100_000, help="per partition")
    fetch.add_argument(
        "--partition-max-bytes", type=int, default=1 << 20, help="default 1 MiB, as Java's"
    )
    for command in (produce, fetch):
        command.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
        command.add_argument(
            "--broker-pid", type=int, help="report the CPU time of this process and its children"
        )
        command.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.workload == "produce" and args.clients < 1:
        parser.error("--clients must be at least 1")
    host, _, port = args.bootstrap_server.rpartition(":")
    connection = Connection((host, int(port)))
    run = _produce if args.workload == "produce" else _fetch
    result = run(args, connection)
    if args.json:
        print(json.dumps(result))
    else:
        print(", ".join(f"{key} {value}" for key, value in result.items()))
    return 0


def _produce(args: argparse.Namespace, bootstrap: Connection) -> dict[str, Any]:
    try:
        found = leaders(bootstrap, args.topic, args.partitions)
    finally:
        bootstrap.close()
    frames = [
        produce_frame(args.topic, leader.partitions, args.records_per_batch, args.record_size)
        for leader in found
    ]
    plan = ProducePlan(found, frames, args.requests, args.in_flight, args.rate)
    run = run_clients(plan, args.clients, args.broker_pid)
    batches = sum(len(leader.partitions) for leader in found)
    return _result(
        "produce",
        run["requests"],
        args.clients * args.requests * batches * args.records_per_batch,
        args.clients * args.requests * sum(map(len, frames)),
        run["seconds"],
        run["broker_cpu_seconds"],
        clients=args.clients,
        connections=args.clients * len(found),
        client_cpu_seconds=round(run["client_cpu_seconds"], 3),
        **(
            {
                "broker_processes": run["broker_processes"],
                "other_cpu_seconds": round(run["other_cpu_seconds"], 3),
            }
            if args.broker_pid
            else {}
        ),
    )


def _fetch(args: argparse.Namespace, connection: Connection) -> dict[str, Any]:
    broker = process_tree(args.broker_pid) if args.broker_pid else []
    cpu_before = tree_cpu_seconds(broker)
    started = time.perf_counter()
    requests = replay_fetch(
        connection, args.topic, args.partitions, args.records, args.partition_max_bytes
    )
    seconds = time.perf_counter() - started
    cpu = tree_cpu_seconds(broker) - cpu_before if broker else None
    connection.close()
    return _result(
        "fetch", requests, args.records * args.partitions, connection.bytes_received, seconds, cpu
    )


def _result(
    workload: str,
    requests: int,
    records: int,
    payload: int,
    seconds: float,
    broker_cpu: float | None,
    **more: Any,
) -> dict[str, Any]:
    gigabytes = payload / 1e9
    result: dict[str, Any] = {
        "workload": workload,
        "requests": requests,
        "records": records,
        "bytes": payload,
        "seconds": round(seconds, 3),
        "requests_per_second": round(requests / seconds),
        "records_per_second": round(records / seconds),
        "mb_per_second": round(gigabytes * 1e3 / seconds, 1),
        **more,
    }
    if broker_cpu is not None:
        result["broker_cpu_seconds"] = round(broker_cpu, 3)
        result["broker_cpu_us_per_request"] = round(broker_cpu / requests * 1e6, 1)
        result["broker_cpu_seconds_per_gb"] = round(broker_cpu / gigabytes, 3)
    return result


if __name__ == "__main__":
    sys.exit(main())
