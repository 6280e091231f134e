"""The console line and summary tell the truth: the broker's own time per request without
the time a request was held, held requests apart, and records fetched beside produced."""

from __future__ import annotations

import re

import trio

from nullbroker.broker import Broker
from nullbroker.ops.report import ConsoleReporter, summary
from nullbroker.settings import Config
from nullbroker.sources.synthetic import SourceSpec
from tests.support.kio_calls import SESSION, answered, dispatch_of, fetch_frame

HOLD_MS = 300
LINE = re.compile(
    r"^(?P<produced>[\d.]+) records/sec \([\d.]+ MB/sec\) produced, "
    r"(?P<fetched>[\d.]+) records/sec \((?P<fetched_mb>[\d.]+) MB/sec\) fetched, "
    r"(?P<requests>[\d.]+) requests/sec, (?P<p50>\d+) us p50, (?P<p99>\d+) us p99 request "
    r"latency, (?P<held>\d+) held( \(p99 (?P<held_p99>\d+) ms\))?, \d+ connections, "
    r"[\d.]+ MiB RSS\.$"
)


def source_broker(records: int = 10) -> Broker:
    return Broker(Config(sources=(SourceSpec("q", partitions=1, records=records, size=10),)))


async def test_a_held_fetch_is_reported_as_held_not_as_request_latency() -> None:
    broker = source_broker()
    reporter = ConsoleReporter(broker.stats)
    pending = dispatch_of(broker).answer(fetch_frame("q", offset=10, max_wait_ms=HOLD_MS), SESSION)
    assert not isinstance(pending, bytes | list), "a Fetch at the log end is held"
    with trio.fail_after(10):
        await pending  # type: ignore[misc]
    line = reporter.line(1.0)
    assert line is not None
    match = LINE.match(line)
    assert match is not None, line
    assert match["held"] == "1"
    # The hold itself: 300 ms, read from buckets that are within 25 %.
    assert int(match["held_p99"]) >= HOLD_MS * 0.75
    # The broker's own time for the request stays far below the hold it sat through.
    assert int(match["p99"]) < HOLD_MS * 1000 / 10
    fetch_stats = broker.stats.apis["Fetch"]
    assert fetch_stats.requests == 1
    assert fetch_stats.latency.count == 1 and fetch_stats.held.count == 1
    assert summary(broker.stats)["held_requests"] == {"Fetch": 1}


def test_fetched_records_and_bytes_are_on_the_line_beside_produced() -> None:
    broker = source_broker(records=10)
    reporter = ConsoleReporter(broker.stats)
    answered(dispatch_of(broker).answer(fetch_frame("q", offset=0, max_wait_ms=0), SESSION))
    line = reporter.line(2.0)
    assert line is not None
    match = LINE.match(line)
    assert match is not None, line
    assert float(match["produced"]) == 0.0
    assert float(match["fetched"]) == 5.0  # 10 records in 2 s
    assert match["held"] == "0" and match["held_p99"] is None
    served = broker.stats.fetched_totals()
    assert served[0] == 10 and served[1] > 10 * 10
    assert reporter.line(1.0) is None  # no request since: no line
