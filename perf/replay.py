"""Replay pre-encoded requests as fast as a broker answers them: the broker's ceiling.

A Kafka client spends more CPU building and parsing records than a null broker spends on
them, so on a 2-core machine kafka-producer-perf-test measures the client as much as the
broker. These load generators encode their requests once and then only send them and read
the answers on one connection, without looking at a record:

- `produce`: one Produce request (N records of S bytes per batch, one batch per partition,
  acks=all, not idempotent, so every replay is appended and counted), `--in-flight`
  requests outstanding, the way a producer pipelines;
- `fetch`: Fetch requests for every partition of a topic from offset 0, one at a time like a
  consumer, each from where the last answer ended (found by walking batch headers, never
  records), until `--records` records per partition were served.

With `--broker-pid` each reports the broker's CPU time (from /proc) per request and per GB;
without it, none.

    .venv/bin/nullbroker serve --source clicks:partitions=4,records=100000,size=1024 &
    broker=$!
    .venv/bin/python -m perf.replay produce --bootstrap-server 127.0.0.1:9092 \\
        --requests 50000 --broker-pid "$broker"
    .venv/bin/python -m perf.replay fetch --bootstrap-server 127.0.0.1:9092 --topic clicks \\
        --partitions 4 --records 100000 --broker-pid "$broker"
    kill "$broker"
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import socket
import struct
import sys
import time
from collections.abc import Callable
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

from .proc_sampler import cpu_seconds

PRODUCE_VERSION = 9  # librdkafka 2.x's; flexible, so the current header path is measured
FETCH_VERSION = 12  # the last version that names topics (13+ use topic ids)
CLIENT_ID = "replay"
_SIZE = struct.Struct(">i")
_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length (after these 12 bytes)
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23  # within a RecordBatch v2


def produce_frame(topic: str, partitions: int, records: int, record_size: int) -> bytes:
    """A size-prefixed Produce request (acks=all): one uncompressed batch per partition."""
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
                    for p in range(partitions)
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


def replay_produce(connection: Connection, frame: bytes, requests: int, in_flight: int) -> int:
    """Send `frame` `requests` times, at most `in_flight` unanswered; requests sent."""
    sent = answered = 0
    while answered < requests:
        window = min(in_flight - (sent - answered), requests - sent)
        if window > 0:
            connection.sock.sendall(frame * window)
            sent += window
        answered += len(connection.responses())
    return requests


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
    produce = commands.add_parser("produce", help="replay one Produce request")
    produce.add_argument("--topic", default="replay")
    produce.add_argument("--requests", type=int, default=20_000)
    produce.add_argument("--in-flight", type=int, default=5, help="default 5, as producers")
    produce.add_argument("--partitions", type=int, default=1, help="batches per request")
    produce.add_argument("--records-per-batch", type=int, default=15)
    produce.add_argument("--record-size", type=int, default=1024)
    fetch = commands.add_parser("fetch", help="read a topic from offset 0 with Fetch")
    fetch.add_argument("--topic", required=True)
    fetch.add_argument("--partitions", type=int, default=1, help="the topic's partitions")
    fetch.add_argument("--records", type=int, default=100_000, help="per partition")
    fetch.add_argument(
        "--partition-max-bytes", type=int, default=1 << 20, help="default 1 MiB, as Java's"
    )
    for command in (produce, fetch):
        command.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
        command.add_argument("--broker-pid", type=int, help="report this process's CPU time")
        command.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    host, _, port = args.bootstrap_server.rpartition(":")
    connection = Connection((host, int(port)))
    run: Callable[[], int]
    if args.workload == "produce":
        frame = produce_frame(args.topic, args.partitions, args.records_per_batch, args.record_size)
        records = args.requests * args.partitions * args.records_per_batch
        run = lambda: replay_produce(connection, frame, args.requests, args.in_flight)  # noqa: E731
        payload = lambda: args.requests * len(frame)  # noqa: E731
    else:
        records = args.records * args.partitions
        run = lambda: replay_fetch(  # noqa: E731
            connection, args.topic, args.partitions, args.records, args.partition_max_bytes
        )
        payload = lambda: connection.bytes_received  # noqa: E731
    cpu_before = cpu_seconds(args.broker_pid) if args.broker_pid else None
    started = time.perf_counter()
    requests = run()
    seconds = time.perf_counter() - started
    cpu = cpu_seconds(args.broker_pid) - cpu_before if cpu_before is not None else None
    connection.close()
    gigabytes = payload() / 1e9
    result: dict[str, Any] = {
        "workload": args.workload,
        "requests": requests,
        "records": records,
        "bytes": payload(),
        "seconds": round(seconds, 3),
        "requests_per_second": round(requests / seconds),
        "records_per_second": round(records / seconds),
        "mb_per_second": round(gigabytes * 1e3 / seconds, 1),
    }
    if cpu is not None:
        result["broker_cpu_seconds"] = round(cpu, 3)
        result["broker_cpu_us_per_request"] = round(cpu / requests * 1e6, 1)
        result["broker_cpu_seconds_per_gb"] = round(cpu / gigabytes, 3)
    if args.json:
        print(json.dumps(result))
    else:
        print(", ".join(f"{key} {value}" for key, value in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
