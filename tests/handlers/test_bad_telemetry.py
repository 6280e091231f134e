"""Bad PushTelemetry payloads (KIP-714) sent to a `nullbroker serve` process over real
sockets, as raw kio frames: each gets the error Kafka 4.4.0 answers (INVALID_RECORD for a
payload it cannot inflate, or that inflates past telemetry.max.bytes, or that is not OTLP;
TELEMETRY_TOO_LARGE for one over the limit as sent) and one line in the broker's log, its
repeats summarised (nullbroker.log_limit); a payload of more series than the broker keeps is
accepted, its series kept up to --client-metrics-max-series and the rest counted; and the
broker's memory stays within a bound its settings give, however many such payloads come.

Each kind of bad payload comes from a loopback address of its own (127.0.0.N): the broker
limits its log per client host and kind of line, so that one line per address is one line
per kind."""

from __future__ import annotations

import functools
import os
import uuid
from dataclasses import dataclass

import pytest
import trio
from kio.schema.errors import ErrorCode
from kio.schema.get_telemetry_subscriptions.v0.request import GetTelemetrySubscriptionsRequest
from kio.schema.push_telemetry.v0.request import PushTelemetryRequest
from kio.static.primitive import i8, i32

from nullbroker.app.accounts import Accounts
from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.settings import Config
from tests.support.kafka_wire import FrameStream, request_frame, size_prefix
from tests.support.otlp_payloads import (
    GZIP,
    NONE,
    ZSTD,
    compressed,
    gauge,
    many_gauges,
    many_points,
    metrics_data,
    total,
)

MAX_BYTES = Config().telemetry_max_bytes
"""telemetry.max.bytes: Kafka's default, 1 MiB."""
MAX_SERIES = Config().client_metrics_max_series
INTERVAL_MS = 100
"""The shortest push interval Kafka allows: a client may push again soon after."""
REPEATS = 5
CLOSE_SEEN_S = 30.0
"""A connection's close reaches the broker after the client's side of it returns."""
MIB = 1 << 20

GOOD = metrics_data(
    [
        gauge("org.apache.kafka.producer.record.queue.time.avg", 2.5),
        total("org.apache.kafka.producer.record.send.total", 10),
    ]
)


@functools.cache
def a_million_series() -> bytes:
    """A million gauges, zstd: under half a MiB as sent, about 15 MiB inflated."""
    return compressed(ZSTD, many_gauges(1_000_000))


@dataclass(frozen=True)
class Bad:
    name: str
    codec: int
    payload: bytes
    error: ErrorCode
    logged: str
    """What the broker's log line says of it."""


def bad_payloads() -> list[Bad]:
    zstd_good = compressed(ZSTD, GOOD)
    return [
        Bad(
            "truncated protobuf",
            ZSTD,
            compressed(ZSTD, GOOD[: len(GOOD) // 2]),
            ErrorCode.invalid_record,
            "not OTLP MetricsData",
        ),
        Bad(
            "truncated zstd",
            ZSTD,
            zstd_good[: len(zstd_good) // 2],
            ErrorCode.invalid_record,
            "not zstd data",
        ),
        Bad(
            "gzip flag on zstd data",
            GZIP,
            zstd_good,
            ErrorCode.invalid_record,
            "not gzip data",
        ),
        Bad(
            "not protobuf",
            ZSTD,
            compressed(ZSTD, b'{"resourceMetrics": "JSON is not what OTLP pushes"}'),
            ErrorCode.invalid_record,
            "not OTLP MetricsData",
        ),
        Bad(
            "over the limit as sent",
            NONE,
            os.urandom(MAX_BYTES + 1),
            ErrorCode.telemetry_too_large,
            "over telemetry.max.bytes",
        ),
        Bad(
            "inflates past the limit",
            ZSTD,
            compressed(ZSTD, bytes(MAX_BYTES + 1)),
            ErrorCode.invalid_record,
            "inflates past telemetry.max.bytes",
        ),
        Bad(
            "a million series",
            ZSTD,
            a_million_series(),
            ErrorCode.invalid_record,
            "inflates past telemetry.max.bytes",
        ),
    ]


class TelemetryClient:
    """A client's half of KIP-714 on one connection: each push is made by an instance of
    its own (GetTelemetrySubscriptions with no id first), so that no push is refused for
    coming too soon after another."""

    def __init__(self, stream: FrameStream) -> None:
        self.stream = stream
        self.instance_id: uuid.UUID | None = None
        self.subscription_id = 0

    @classmethod
    async def connect(cls, broker: RunningBroker, source: str = "127.0.0.1") -> TelemetryClient:
        host, port = broker.bootstrap.rsplit(":", 1)
        stream = await trio.open_tcp_stream(host, int(port), local_address=source)
        return cls(FrameStream(stream))

    async def subscribe(self) -> None:
        answer = await self.stream.request(
            GetTelemetrySubscriptionsRequest(client_instance_id=None)
        )
        assert answer.error_code is ErrorCode.none
        self.instance_id = answer.client_instance_id
        self.subscription_id = answer.subscription_id

    def push_request(
        self, codec: int, payload: bytes, terminating: bool = False
    ) -> PushTelemetryRequest:
        return PushTelemetryRequest(
            client_instance_id=self.instance_id,
            subscription_id=i32(self.subscription_id),
            terminating=terminating,
            compression_type=i8(codec),
            metrics=payload,
        )

    async def push(self, codec: int, payload: bytes, terminating: bool = False) -> ErrorCode:
        await self.subscribe()
        answer = await self.stream.request(self.push_request(codec, payload, terminating))
        error: ErrorCode = answer.error_code
        return error

    async def aclose(self) -> None:
        await self.stream.aclose()


@pytest.fixture
def broker(nullbroker_factory: StartBroker) -> RunningBroker:
    return nullbroker_factory("--client-metrics-interval-ms", str(INTERVAL_MS))


def log_lines(broker: RunningBroker, containing: str) -> list[str]:
    return [line for line in broker.stderr_text().splitlines() if containing in line]


def test_each_bad_payload_gets_kafkas_error_and_one_log_line(broker: RunningBroker) -> None:
    cases = bad_payloads()

    async def send_all() -> dict[str, list[ErrorCode]]:
        answers = {}
        for index, bad in enumerate(cases):
            client = await TelemetryClient.connect(broker, f"127.0.0.{10 + index}")
            answers[bad.name] = [await client.push(bad.codec, bad.payload) for _ in range(REPEATS)]
            await client.aclose()
        return answers

    answers = trio.run(send_all)
    assert answers == {bad.name: [bad.error] * REPEATS for bad in cases}
    unreadable = sum(bad.error is ErrorCode.invalid_record for bad in cases) * REPEATS
    accounts = broker.accounts()
    assert accounts.clients.refused_payloads == unreadable
    assert accounts.errors["invalid_record"] == unreadable
    assert accounts.errors["telemetry_too_large"] == REPEATS
    assert accounts.clients.instances == ()

    for index, bad in enumerate(cases):
        lines = log_lines(broker, f"PushTelemetry from 127.0.0.{10 + index}:")
        assert len(lines) == 1, (bad.name, lines)
        assert bad.logged in lines[0], (bad.name, lines[0])
    broker.stop()
    # Stopping, the broker summarises each host's repeats (the window is still open).
    for index, bad in enumerate(cases):
        kind = (
            "telemetry too large"
            if bad.error is ErrorCode.telemetry_too_large
            else ("unreadable telemetry")
        )
        summaries = log_lines(
            broker, f"… {REPEATS - 1} more like this ({kind}) from 127.0.0.{10 + index} "
        )
        assert len(summaries) == 1, (bad.name, broker.stderr_tail())


def test_a_push_of_more_series_than_kept_is_accepted_and_the_rest_counted(
    broker: RunningBroker,
) -> None:
    gauges = 50_000
    payload = compressed(ZSTD, many_gauges(gauges))
    assert len(many_gauges(gauges)) <= MAX_BYTES  # within the limit inflated too

    async def push_twice() -> list[ErrorCode]:
        client = await TelemetryClient.connect(broker)
        answers = [await client.push(ZSTD, payload) for _ in range(2)]
        await client.aclose()
        return answers

    assert trio.run(push_twice) == [ErrorCode.none, ErrorCode.none]
    clients = broker.accounts().clients
    # The first instance's series fill the broker's room; the second's find none.
    assert [len(instance.series) for instance in clients.instances] == [MAX_SERIES, 0]
    assert clients.series_kept == MAX_SERIES
    assert clients.dropped_series == 2 * gauges - MAX_SERIES
    assert clients.refused_payloads == 0
    first = clients.instances[0]
    assert first.metrics["g0"] == 0.0
    assert f"g{MAX_SERIES - 1}" in first.metrics and f"g{MAX_SERIES}" not in first.metrics


# The broker's memory bound, from its settings.
KEPT_BYTES_PER_SERIES = 1024
"""A kept series: its name and attributes, its key and value objects, its dict entry
(about 400 bytes measured; twice over for the allocator's slack)."""
BUFFERS = 4
"""Payload-sized buffers a push holds at once: the request frame as read, the payload
bytes, the inflate buffer, the inflated bytes."""
PARSE_BYTES_PER_BYTE = 40
"""What protobuf (upb) takes to hold a decoded payload, per byte of it, at worst: a
payload of empty two-byte messages (measured 33 MB for 1 MB)."""


def rss_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (the peak) of a process, in KiB."""
    with open(f"/proc/{pid}/status") as status:
        fields = dict(line.split(":", 1) for line in status)
    return {name: int(fields[name].split()[0]) for name in ("VmRSS", "VmHWM")}


def test_the_brokers_memory_stays_within_its_bound_through_bad_and_big_payloads(
    broker: RunningBroker,
) -> None:
    kept_bound = MAX_SERIES * KEPT_BYTES_PER_SERIES + BUFFERS * MAX_BYTES
    peak_bound = kept_bound + PARSE_BYTES_PER_BYTE * MAX_BYTES
    rounds = 4
    big = [
        (ZSTD, compressed(ZSTD, many_gauges(50_000)), ErrorCode.none),
        (ZSTD, compressed(ZSTD, many_points(500_000)), ErrorCode.none),
        *((bad.codec, bad.payload, bad.error) for bad in bad_payloads()),
    ]

    async def warm_up(client: TelemetryClient) -> None:
        # The first push imports the payload's readers and makes the inflate buffer.
        assert await client.push(ZSTD, compressed(ZSTD, GOOD)) is ErrorCode.none
        assert await client.push(GZIP, b"not gzip") is ErrorCode.invalid_record

    async def send_everything(client: TelemetryClient) -> None:
        for _ in range(rounds):
            for codec, payload, error in big:
                assert await client.push(codec, payload) is error

    async def run() -> tuple[dict[str, int], dict[str, int]]:
        client = await TelemetryClient.connect(broker)
        await warm_up(client)
        before = rss_kib(broker.pid)
        await send_everything(client)
        after = rss_kib(broker.pid)
        await client.aclose()
        return before, after

    before, after = trio.run(run)
    grown = (after["VmRSS"] - before["VmRSS"]) * 1024
    peak = (after["VmHWM"] - before["VmRSS"]) * 1024
    print(
        f"broker RSS {before['VmRSS'] / 1024:.1f} MiB -> {after['VmRSS'] / 1024:.1f} MiB "
        f"(bound +{kept_bound / MIB:.0f} MiB), peak {after['VmHWM'] / 1024:.1f} MiB "
        f"(bound +{peak_bound / MIB:.0f} MiB) after {rounds * len(big)} pushes"
    )
    assert grown <= kept_bound
    assert peak <= peak_bound
    clients = broker.accounts().clients
    assert clients.series_kept <= MAX_SERIES
    assert len(clients.instances) <= Config().client_metrics_max_clients


def test_a_client_that_disconnects_mid_push_does_not_disturb_another(
    broker: RunningBroker,
) -> None:
    async def run() -> list[ErrorCode]:
        steady = await TelemetryClient.connect(broker)
        answers = [await steady.push(ZSTD, compressed(ZSTD, GOOD))]
        leaving = await TelemetryClient.connect(broker, "127.0.0.2")
        await leaving.subscribe()
        frame = size_prefix(
            request_frame(leaving.push_request(ZSTD, compressed(ZSTD, many_gauges(20_000))), 9)
        )
        await leaving.stream.send(frame[: len(frame) // 2])
        await leaving.aclose()
        answers.append(await steady.push(ZSTD, compressed(ZSTD, GOOD), terminating=True))
        await steady.aclose()
        return answers

    assert trio.run(run) == [ErrorCode.none, ErrorCode.none]
    # The first instance's connection closed with no closing push from it: "closed".
    accounts = broker.accounts_until(
        lambda accounts: accounts.clients.instances[0].ended == "closed",
        CLOSE_SEEN_S,
        what="the first instance closed",
    )
    assert [
        (instance.address, instance.pushes, instance.ended)
        for instance in accounts.clients.instances
    ] == [("127.0.0.1", 1, "closed"), ("127.0.0.1", 1, "terminated")]
    assert all(
        instance.metrics["org.apache.kafka.producer.record.send.total"] == 10
        for instance in accounts.clients.instances
    )
    assert accounts.clients.refused_payloads == 0
    assert broker.running


def test_an_instance_whose_connection_closes_before_its_closing_push_ends_closed(
    broker: RunningBroker,
) -> None:
    """As a Java producer that drops its closing push: the agreement row is final at once,
    and says that what the instance sent after its last push was never pushed."""

    async def run() -> Accounts:
        leaving = await TelemetryClient.connect(broker)
        staying = await TelemetryClient.connect(broker)
        assert await leaving.push(ZSTD, compressed(ZSTD, GOOD)) is ErrorCode.none
        assert await staying.push(ZSTD, compressed(ZSTD, GOOD)) is ErrorCode.none
        await leaving.aclose()
        accounts = broker.accounts_until(
            lambda accounts: any(i.ended for i in accounts.clients.instances),
            CLOSE_SEEN_S,
            what="an instance ended",
        )
        await staying.aclose()
        return accounts

    accounts = trio.run(run)
    assert [instance.ended for instance in accounts.clients.instances] == ["closed", ""]
    (row,) = accounts.clients.agreement
    assert (row.pushed, row.instances, row.final, row.without_closing_push) == (20, 2, False, 1)
    assert "1 without a closing push" in str(row)
