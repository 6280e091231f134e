"""The status page's "Clients" section and its charts, in a real browser (headless Chromium,
tests/support/chromium.py), from accounts the test fills: hidden while no client pushed;
then a row per client instance (an ended one greyed) with what it pushed, a dash for what it
did not, the largest of a metric's per-node or per-partition series, the broker's own counts for
its client id, and the pushed count of records sent beside the broker's. The charts draw the
samples of GET /history, the ring at first and then what each poll adds.

The page is served as the --metrics listener serves it: /accounts is report.summary of the
test's BrokerStats and /history the real handler over a History, both through
json_response (a pushed NaN goes out as null)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from nullbroker.ops.history import CONSUMED_RATE, QUEUE_TIME, SENT_RATE, History
from nullbroker.ops.http_endpoint import (
    STATUS_PAGE,
)
from nullbroker.stats import GAUGE, SUM, BrokerStats, ClientSnapshot
from tests.ops.test_history import ClockedStats, pushed
from tests.ops.test_share_status_page import browser
from tests.support.chromium import Chromium, Page
from tests.support.page_server import PageServer

__all__ = ["browser"]

KAFKA = "org.apache.kafka."
LOADER, READER, WRITER = "loader-instance", "reader-instance", "writer-instance"
TIMEOUT = 20.0
PUSH_MS = 1_764_000_000_000
"""2025-11-24T16:00:00Z: a push at a whole second (the accounts' ISO time has no
fraction then)."""

READ_CLIENTS = """(() => {
  const rows = (table, key) => Object.fromEntries(
    [...document.querySelectorAll(`#${table} tbody tr`)]
      .filter((row) => row.dataset[key] !== undefined)
      .map((row) => [row.dataset[key], {
        ended: row.classList.contains("ended"),
        ...Object.fromEntries([...row.cells].map((cell) => [cell.dataset.key, cell.textContent])),
      }]));
  return {
    hidden: document.getElementById("clients").hidden,
    uptime: document.body.dataset.uptime ?? null,
    instances: rows("client-instances", "instance"),
    agreement: rows("client-agreement", "agreement"),
  };
})()"""
READ_CHARTS = """Object.fromEntries([...document.querySelectorAll("figure.chart")].map((figure) => [
  figure.dataset.chart,
  Object.fromEntries([...figure.querySelectorAll("path")].map((path) =>
    [path.dataset.series, path.getAttribute("d")])),
]))"""


def snapshot(
    instance: str,
    client_id: str,
    software: tuple[str, str],
    series: list[tuple[str, tuple[tuple[str, str], ...], float]],
    ended: str = "",
) -> ClientSnapshot:
    return dataclasses.replace(
        pushed(instance, client_id, {}, PUSH_MS, ended),
        software_name=software[0],
        software_version=software[1],
        first_push_ms=PUSH_MS - 3000,
        pushes=7,
        payload_bytes=4096,
        series=tuple(  # by name, as the accounts list them
            (KAFKA + name, SUM if name.endswith(".total") else GAUGE, attributes, value)
            for name, attributes, value in sorted(series)
        ),
    )


def pushing_clients() -> tuple[ClientSnapshot, ...]:
    """A Java producer still pushing (its request latency NaN: an average of nothing yet) and
    a librdkafka consumer that closed, pushing per-node latency and per-partition lag."""
    loader = snapshot(
        LOADER,
        "loader",
        ("apache-kafka-java", "4.4.0"),
        [
            ("producer.record.send.rate", (), 950.4),
            ("producer.record.queue.time.avg", (), 3.2),
            ("producer.request.latency.avg", (), float("nan")),
            ("producer.batch.size.avg", (), 16384.5),
            ("producer.buffer.available.bytes", (), 33554432.0),
            ("producer.record.send.total", (), 1200.0),
        ],
    )
    reader = snapshot(
        READER,
        "reader",
        ("confluent-kafka-python", "2.16.0-rdkafka-2.16.0"),
        [
            ("consumer.node.request.latency.avg", (("node.id", "1"),), 2.5),
            ("consumer.node.request.latency.avg", (("node.id", "2"),), 4.7),
            ("consumer.fetch.manager.records.lag.max", (("partition", "0"),), 5.0),
            ("consumer.fetch.manager.records.lag.max", (("partition", "1"),), 12.0),
        ],
        ended="terminated",
    )
    return loader, reader


def shown_once(page: Page, condition: str) -> dict[str, Any]:
    """READ_CLIENTS once `condition` (JavaScript, of `read`) holds."""
    return page.wait_for(
        f"(() => {{ const read = {READ_CLIENTS}; return {condition} && read; }})()"
    )


def test_the_clients_section_shows_each_instance_beside_the_brokers_counts(
    browser: Chromium,
) -> None:
    stats = BrokerStats()
    server = PageServer(stats, History())
    try:
        page = browser.open(server.url)
        page.wait_for("document.body?.dataset.uptime !== undefined")
        before = page.evaluate(READ_CLIENTS)
        assert before["hidden"] is True and before["instances"] == {}

        # A producer whose connection closed before its closing push: its last count short.
        writer = snapshot(
            WRITER,
            "writer",
            ("apache-kafka-java", "4.4.0"),
            [("producer.record.send.total", (), 800.0)],
            ended="closed",
        )
        stats.pushed_clients = (*pushing_clients(), writer)
        stats.client_records["loader"] = 1200
        stats.client_records["writer"] = 1000
        stats.client_fetched["reader"] = 77
        shown = shown_once(page, "!read.hidden")
    finally:
        server.close()

    assert shown["instances"][WRITER]["state"] == "closed"
    assert shown["instances"][WRITER]["ended"] is True
    del shown["instances"][WRITER]
    assert shown["instances"] == {
        LOADER: {
            "ended": False,
            "client_id": "loader",
            "software": "apache-kafka-java 4.4.0",
            "instance": LOADER,
            "state": "pushing",
            "records_per_second": "950.4",
            "queue_time_ms": "3.2",
            "request_latency_ms": "\N{EN DASH}",  # pushed NaN
            "batch_size": "16,385",
            "buffer_available": "33,554,432",
            "lag": "\N{EN DASH}",
            "pushes": "7",
            "last_push": "16:00:00.000",
            "produced_records": "1,200",
            "fetched_records": "0",
        },
        READER: {
            "ended": True,
            "client_id": "reader",
            "software": "confluent-kafka-python 2.16.0-rdkafka-2.16.0",
            "instance": READER,
            "state": "terminated",
            "records_per_second": "\N{EN DASH}",
            "queue_time_ms": "\N{EN DASH}",
            "request_latency_ms": "4.7",  # the slower node's
            "batch_size": "\N{EN DASH}",
            "buffer_available": "\N{EN DASH}",
            "lag": "12",  # the larger partition's
            "pushes": "7",
            "last_push": "16:00:00.000",
            "produced_records": "0",
            "fetched_records": "77",
        },
    }
    assert shown["agreement"] == {
        "loader": {
            "ended": False,
            "client_id": "loader",
            "metric": "org.apache.kafka.producer.record.send.total",
            "pushed": "1,200",
            "counted": "1,200",
            "instances": "1",
            "final": "not yet",
            "agrees": "yes",
        },
        "writer": {
            "ended": False,
            "client_id": "writer",
            "metric": "org.apache.kafka.producer.record.send.total",
            "pushed": "800",
            "counted": "1,000",
            "instances": "1",
            "final": "yes (1 without a closing push)",
            "agrees": "no",
        },
    }


def points(path: str) -> list[list[tuple[float, float]]]:
    """An SVG path's stretches (each begun by M), as (x, y) points."""
    stretches: list[list[tuple[float, float]]] = []
    for command in path.replace("M", "\0M").replace("L", "\0L").split("\0")[1:]:
        x, y = (float(number) for number in command[1:].split())
        if command[0] == "M":
            stretches.append([])
        stretches[-1].append((x, y))
    return stretches


def test_the_charts_draw_the_history_and_what_each_poll_adds(browser: Chromium) -> None:
    stats = ClockedStats()
    history = History()
    history.sample(stats)
    loader = pushing_clients()[0]
    rates = [100, 300, 0, 200]
    for second, records in enumerate(rates, start=1):
        stats.clock = float(second)
        stats.partition_counters("orders", 0).records += records
        if records:  # no request in the third second: no p99 there
            stats.api("Produce").requests += 1
            stats.api("Produce").latency.observe(2_000_000)
        stats.pushed_clients = (loader,) if second > 1 else ()
        history.sample(stats)
    server = PageServer(stats, history)
    try:
        page = browser.open(server.url)
        charts = page.wait_for(
            f"(() => {{ const c = {READ_CHARTS}; return c.records?.produced && c; }})()"
        )

        produced = points(charts["records"]["produced"])
        assert len(produced) == 1 and len(produced[0]) == len(rates)
        xs = [x for x, _ in produced[0]]
        assert xs == sorted(xs) and len(set(xs)) == len(xs)
        heights = [y for _, y in produced[0]]  # SVG's y grows downwards
        assert heights.index(min(heights)) == 1 and heights.index(max(heights)) == 2
        # The p99 breaks where no request was answered.
        assert [len(stretch) for stretch in points(charts["latency"]["p99"])] == [2, 1]
        # The producer pushed from the second sample on: its line starts there.
        (sent,) = points(charts["client-records"]["loader"])
        assert [x for x, _ in sent] == xs[1:]
        assert len(points(charts["client-queue-time"]["loader"])[0]) == len(rates) - 1

        # A sample more on the broker: the next poll asks for what is after the last one
        # it has, and draws it.
        stats.clock = 5.0
        stats.partition_counters("orders", 0).records += 50
        history.sample(stats)
        grown = page.wait_for(
            f"(() => {{ const c = {READ_CHARTS}; "
            f"return c.records.produced.split('L').length === {len(rates) + 1} && c; }})()"
        )
        assert len(points(grown["records"]["produced"])[0]) == len(rates) + 1
        asked = history_asked(page, server.http.server_port, "/history?after=5")
    finally:
        server.close()
    assert asked[0] == "/history"
    assert "/history?after=4" in asked
    assert all(url.startswith("/history?after=") for url in asked[1:])


def history_asked(page: Page, port: int, awaited: str) -> list[str]:
    """The /history paths the page asked for, once it has asked for `awaited` (the poll
    after the one that drew the newest sample)."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        asked = [
            event["request"]["url"].partition(str(port))[2]
            for event in page.browser.events_of(page.session, "Network.requestWillBeSent")
            if "/history" in event["request"]["url"]
        ]
        if awaited in asked or time.monotonic() > deadline:
            assert awaited in asked
            return asked
        time.sleep(0.05)


@pytest.mark.parametrize("rate", [SENT_RATE, CONSUMED_RATE])
def test_the_charted_rate_is_the_one_the_client_pushed(rate: str) -> None:
    """The history's client rate is a producer's send rate or a consumer's consumed rate;
    the queue time a producer's: the names the page's table reads too."""
    stats = ClockedStats()
    history = History()
    history.sample(stats)
    stats.pushed_clients = (
        snapshot("i", "c", ("apache-kafka-java", "4.4.0"), [(rate.removeprefix(KAFKA), (), 12.5)]),
    )
    stats.clock = 1.0
    sample = history.sample(stats)
    assert sample is not None and sample.clients[0].records_per_second == 12.5
    assert QUEUE_TIME.removeprefix(KAFKA) in STATUS_PAGE.read_text()
    assert rate.removeprefix(KAFKA) in STATUS_PAGE.read_text()
