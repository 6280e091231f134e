"""The ring of samples behind the status page's charts (nullbroker.ops.history) and its
endpoint, GET /history: each sample is the change in the accounts over its interval, the ring
keeps the last `capacity` and each sample at most MAX_CLIENTS pushing clients."""

from __future__ import annotations

import json
import math

import pytest

from nullbroker.ops.history import (
    CAPACITY,
    CONSUMED_RATE,
    MAX_CLIENTS,
    QUEUE_TIME,
    SENT_RATE,
    ClientSample,
    History,
)
from nullbroker.ops.http_endpoint import (
    HttpRequest,
    HttpResponse,
    history_handler,
    json_response,
)
from nullbroker.stats import GAUGE, SUM, BrokerStats, ClientSnapshot, percentile_ns


class ClockedStats(BrokerStats):
    """Accounts whose uptime the test sets."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = 0.0

    @property
    def uptime_seconds(self) -> float:
        return self.clock


def pushed(
    instance: str,
    client_id: str,
    metrics: dict[str, float],
    last_push_ms: int = 1000,
    ended: str = "",
) -> ClientSnapshot:
    return ClientSnapshot(
        instance_id=instance,
        client_id=client_id,
        software_name="apache-kafka-java",
        software_version="4.4.0",
        address="127.0.0.1",
        first_push_ms=last_push_ms - 500,
        last_push_ms=last_push_ms,
        pushes=1,
        payload_bytes=100,
        interval_ms=500,
        ended=ended,
        resource=(),
        series=tuple(  # by name, as the accounts list them
            (name, SUM if name.endswith(".total") else GAUGE, (), value)
            for name, value in sorted(metrics.items())
        ),
    )


def produce(stats: BrokerStats, records: int, latency_ns: int = 0) -> None:
    stats.partition_counters("orders", 0).records += records
    stats.api("Produce").requests += 1
    stats.api("Produce").latency.observe(latency_ns or 1_000_000)


def test_a_sample_is_the_change_over_its_interval() -> None:
    stats = ClockedStats()
    history = History()
    assert history.sample(stats) is None  # the first call only starts the interval

    stats.clock = 2.0
    produce(stats, 300)
    stats.fetch_counters("orders", 0).records += 100
    stats.api("Fetch").held.observe(5_000_000)
    stats.api("Fetch").held.observe(7_000_000)
    sample = history.sample(stats)

    assert sample is not None
    assert sample.uptime_seconds == 2.0 and sample.seconds == 2.0
    assert sample.produced_records_per_second == 150.0
    assert sample.fetched_records_per_second == 50.0
    assert sample.held_requests_per_second == 1.0
    assert sample.p99_request_latency_ms == percentile_ns(stats.latency_counts(), 0.99) / 1e6
    assert list(history.samples) == [sample]


def test_the_p99_is_of_the_interval_alone_and_none_without_requests() -> None:
    stats = ClockedStats()
    history = History()
    history.sample(stats)
    for _ in range(100):
        produce(stats, 1, latency_ns=900_000_000)  # slow, in the first interval
    stats.clock = 1.0
    slow = history.sample(stats)
    stats.clock = 2.0
    quiet = history.sample(stats)
    for _ in range(100):
        produce(stats, 1, latency_ns=100_000)
    stats.clock = 3.0
    fast = history.sample(stats)

    assert slow is not None and quiet is not None and fast is not None
    assert slow.p99_request_latency_ms is not None and slow.p99_request_latency_ms > 500
    assert quiet.p99_request_latency_ms is None and quiet.produced_records_per_second == 0
    assert fast.p99_request_latency_ms is not None and fast.p99_request_latency_ms < 1


def test_after_a_reset_the_counts_start_again_from_zero() -> None:
    stats = ClockedStats()
    history = History()
    history.sample(stats)
    produce(stats, 1000)
    stats.clock = 1.0
    history.sample(stats)
    stats.reset_counts()
    produce(stats, 40)
    stats.clock = 2.0
    sample = history.sample(stats)

    assert sample is not None and sample.produced_records_per_second == 40.0


def test_the_ring_keeps_the_last_samples_only() -> None:
    assert History().samples.maxlen == CAPACITY == 600
    stats = ClockedStats()
    history = History(capacity=3)
    history.sample(stats)
    for second in range(1, 11):
        stats.clock = float(second)
        produce(stats, second)
        history.sample(stats)

    assert [sample.uptime_seconds for sample in history.samples] == [8.0, 9.0, 10.0]
    assert [sample.produced_records_per_second for sample in history.samples] == [8, 9, 10]


def test_a_sample_keeps_the_clients_still_pushing_that_pushed_last() -> None:
    stats = ClockedStats()
    history = History()
    history.sample(stats)
    producer = pushed("p", "loader", {SENT_RATE: 950.5, QUEUE_TIME: 3.25})
    consumer = pushed("c", "reader", {CONSUMED_RATE: 400.0})
    closed = pushed("x", "gone", {SENT_RATE: 1.0}, ended="terminated")
    crowd = [
        pushed(f"n{number:02}", f"crowd-{number}", {}, last_push_ms=100 + number)
        for number in range(MAX_CLIENTS)
    ]
    stats.pushed_clients = (closed, producer, consumer, *crowd)
    stats.clock = 1.0
    sample = history.sample(stats)

    assert sample is not None and len(sample.clients) == MAX_CLIENTS
    kept = {client.instance_id: client for client in sample.clients}
    assert kept["p"] == ClientSample("p", "loader", 950.5, 3.25)
    assert kept["c"] == ClientSample("c", "reader", 400.0, None)
    assert "x" not in kept  # ended
    # The two crowd instances that pushed longest ago make room for the producer and the
    # consumer; the rest keep the order they first pushed in.
    assert [client.instance_id for client in sample.clients] == [
        *(f"n{number:02}" for number in range(2, MAX_CLIENTS)),
        "c",
        "p",
    ]


def test_the_json_gives_every_sample_or_those_after_an_uptime() -> None:
    stats = ClockedStats()
    history = History()
    history.sample(stats)
    stats.pushed_clients = (pushed("p", "loader", {SENT_RATE: 10.0}),)
    for second in (1, 2, 3):
        stats.clock = float(second)
        produce(stats, 10)
        history.sample(stats)

    document = history.as_json()
    assert (document["interval_seconds"], document["capacity"]) == (1.0, CAPACITY)
    assert [sample["uptime_seconds"] for sample in document["samples"]] == [1.0, 2.0, 3.0]
    assert document["samples"][0] == {
        "uptime_seconds": 1.0,
        "seconds": 1.0,
        "produced_records_per_second": 10.0,
        "fetched_records_per_second": 0.0,
        "p99_request_latency_ms": percentile_ns(stats.latency_counts(), 0.99) / 1e6,
        "held_requests_per_second": 0.0,
        "clients": [
            {
                "instance_id": "p",
                "client_id": "loader",
                "records_per_second": 10.0,
                "queue_time_ms": None,
            }
        ],
    }
    after = history.as_json(after=1.5)["samples"]
    assert [sample["uptime_seconds"] for sample in after] == [2.0, 3.0]


def answer(handle: object, method: bytes, path: str, query: str = "") -> HttpResponse:
    assert callable(handle)
    response = handle(HttpRequest(method, path, query, b""))
    assert isinstance(response, HttpResponse)
    return response


def test_get_history_answers_from_the_ring_and_passes_other_paths_on() -> None:
    stats = ClockedStats()
    history = History()
    history.sample(stats)
    for second in (1, 2):
        stats.clock = float(second)
        history.sample(stats)
    handle = history_handler(history, lambda request: HttpResponse(404, b"elsewhere"))

    whole = answer(handle, b"GET", "/history")
    assert (whole.status, whole.content_type) == (200, b"application/json")
    assert json.loads(whole.body) == history.as_json()
    later = answer(handle, b"GET", "/history", "after=1.0")
    assert [sample["uptime_seconds"] for sample in json.loads(later.body)["samples"]] == [2.0]
    assert answer(handle, b"GET", "/history", "after=soon").status == 400
    assert answer(handle, b"POST", "/history").status == 405
    assert answer(handle, b"GET", "/accounts").body == b"elsewhere"


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_json_answers_are_json_with_null_for_what_is_no_number(number: float) -> None:
    # A Java client pushes NaN for an average of nothing yet; a browser refuses NaN.
    response = json_response(200, {"metrics": {"avg": number, "rate": 1.5}, "list": [number]})
    assert b"NaN" not in response.body and b"Infinity" not in response.body
    assert json.loads(response.body) == {"metrics": {"avg": None, "rate": 1.5}, "list": [None]}
