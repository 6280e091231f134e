"""The status page at / of the --metrics listener, in a real browser: headless Chromium
(tests/support/chromium.py) loads it while producers and a consumer group run, and every number it
shows is compared with the accounts it polled (the very /accounts responses its script
received) and with the broker's accounts.

`STATUS_PAGE_SCREENSHOT=docs/status-page.png` keeps the screenshot it takes."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

import nullbroker
from nullbroker import RunningBroker
from nullbroker.ops.http_endpoint import (
    CONTENT_TYPE,
    STATUS_PAGE,
    HttpRequest,
    HttpResponse,
    metrics_handler,
    status_page_handler,
)
from tests.support.broker_counts import read_and_commit
from tests.support.chromium import Chromium, Page, find_chromium

POLL_SECONDS = 0.25
TIMEOUT = 20.0
MIB = 1024 * 1024
GROUP = "watchers"
NO_VALUE = "\N{EN DASH}"
"""What the page shows for a rate before it has two polls to take it from."""
FAULT = "latency:api=DeleteRecords,ms=5"
"""A fault in force for the page to show, on an API none of these clients sends."""

READ_PAGE = """(() => {
  const cells = (row) => Object.fromEntries([...row.cells]
    .filter((cell) => cell.dataset.key).map((cell) => [cell.dataset.key, cell.textContent]));
  const rows = (table, key) => Object.fromEntries(
    [...document.querySelectorAll(`#${table} tbody tr`)]
      .filter((row) => row.dataset[key] !== undefined)
      .map((row) => [row.dataset[key], cells(row)]));
  const text = (id) => document.getElementById(id).textContent;
  const cards = ["produced-records", "produced-rate", "fetched-records", "fetched-rate",
    "requests-total", "requests-rate", "connections", "connections-total", "rss", "peak-rss"];
  return {
    uptime: document.body.dataset.uptime ?? null,
    cards: Object.fromEntries(cards.map((id) => [id, text(id)])),
    topics: rows("topics", "topic"),
    groups: rows("groups", "group"),
    requests: rows("requests", "api"),
    faults: rows("faults", "fault"),
    applied: text("faults-applied"),
  };
})()"""
"""Everything the page shows, read in one go (one JavaScript task: no poll lands midway)."""


def what_the_page_should_show(
    doc: dict[str, Any], before: dict[str, Any] | None, faults: list[dict[str, Any]]
) -> dict[str, Any]:
    """What the page must show for the document `doc`, polled after `before` (rates are the
    change over the broker's uptime between them), with `faults` in force: the numbers
    as numbers (None for a rate it cannot have), the rest as text."""
    if before is not None and before["counts_since"] != doc["counts_since"]:
        before = None
    seconds = None if before is None else doc["uptime_seconds"] - before["uptime_seconds"]

    def rate(now: float, then: float | None, unit: float = 1) -> float | None:
        if seconds is None:
            return None
        return (now - (then or 0)) / seconds / unit

    def earlier(*path: str) -> Any:
        value: Any = before
        for key in path:
            value = None if value is None else value.get(key)
        return value

    topics = {}
    for name in sorted({*doc["produced"]["topics"], *doc["fetched"]["topics"]}):
        row: dict[str, Any] = {"topic": name}
        for side in ("produced", "fetched"):
            counts = doc[side]["topics"].get(name, {"records": 0, "bytes": 0})
            row[f"{side}.records"] = counts["records"]
            row[f"{side}.records_per_second"] = rate(
                counts["records"], earlier(side, "topics", name, "records")
            )
            row[f"{side}.bytes"] = counts["bytes"]
            row[f"{side}.mib_per_second"] = rate(
                counts["bytes"], earlier(side, "topics", name, "bytes"), MIB
            )
        topics[name] = row
    groups = {
        name: {
            "group": name,
            "state": group["state"],
            "members": len(group["members"]),
            "clients": ", ".join(
                f"{member['client_id']} ({member['client_host']})" for member in group["members"]
            ),
            "lag": group["lag"],
            "partitions": ", ".join(
                f"{topic}/{index}: {at['lag']:,}"
                for topic, partitions in sorted(group["partitions"].items())
                for index, at in partitions.items()
            ),
        }
        for name, group in doc["groups"]["by_group"].items()
    }
    requests = {}
    for api, answered in doc["requests"].items():
        latency = doc["request_latency_seconds"][api]
        held = doc["request_held_seconds"].get(api)
        requests[api] = {
            "api": api,
            "requests": answered,
            "requests_per_second": rate(answered, earlier("requests", api)),
            "p50_us": latency["p50"] * 1e6,
            "p99_us": latency["p99"] * 1e6,
            "held": doc["held_requests"].get(api, 0),
            "held_p99_ms": None if held is None else held["p99"] * 1e3,
        }
    return {
        "cards": {
            "produced-records": doc["produced"]["records"],
            "produced-rate": rate(doc["produced"]["records"], earlier("produced", "records")),
            "fetched-records": doc["fetched"]["records"],
            "fetched-rate": rate(doc["fetched"]["records"], earlier("fetched", "records")),
            "requests-total": doc["requests_total"],
            "requests-rate": rate(doc["requests_total"], earlier("requests_total")),
            "connections": doc["connections"],
            "connections-total": doc["connections_total"],
            "rss": doc["rss_bytes"] / MIB,
            "peak-rss": doc["peak_rss_bytes"] / MIB,
        },
        "topics": topics,
        "groups": groups,
        "requests": requests,
        "faults": {
            str(fault["id"]): {
                "spec": fault["spec"],
                "kind": fault["kind"],
                "seconds_left": "until cleared"
                if fault["seconds_left"] is None
                else fault["seconds_left"],
            }
            for fault in faults
        },
        "applied": ", ".join(f"{kind} {count:,}" for kind, count in doc["faults"].items())
        or "none",
    }


def differences(shown: Any, expected: Any, where: str = "") -> list[str]:
    """Where the page's text differs from what it should show. Whole numbers must read
    exactly (with thousands separators); the rest are shown to a tenth, so they may differ
    by the half-tenth of that rounding, no more."""
    if isinstance(expected, dict):
        if not isinstance(shown, dict) or set(shown) != set(expected):
            return [f"{where}: shows {shown!r}, expected {expected!r}"]
        return [
            difference
            for key in expected
            for difference in differences(shown[key], expected[key], f"{where}/{key}")
        ]
    if expected is None:
        agrees = shown == NO_VALUE
    elif isinstance(expected, int):
        agrees = shown == f"{expected:,}"
    elif isinstance(expected, float):
        agrees = abs(float(shown.replace(",", "")) - expected) <= 0.05 + 1e-9 * abs(expected)
    else:
        agrees = shown == expected
    return [] if agrees else [f"{where}: shows {shown!r}, expected {expected!r}"]


class StatusPage:
    """The page in a browser tab, and the accounts documents its script received."""

    def __init__(self, page: Page, broker: RunningBroker) -> None:
        self.page = page
        self.broker = broker
        self.documents: dict[float, dict[str, Any]] = {}

    def _polled(self, uptime: float) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The document the page rendered (known by its uptime) and the one before it; the
        response's end may reach us just after the page rendered it."""
        deadline = time.monotonic() + TIMEOUT
        while uptime not in self.documents and time.monotonic() < deadline:
            for body in self.page.responses("/accounts"):
                doc = json.loads(body)
                self.documents[doc["uptime_seconds"]] = doc
            time.sleep(0.02)
        earlier = [seen for seen in self.documents if seen < uptime]
        return self.documents[uptime], self.documents[max(earlier)] if earlier else None

    def read(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """What the page shows now, checked against the document it rendered (and returned
        with it)."""
        shown = self.page.evaluate(READ_PAGE)
        doc, before = self._polled(float(shown.pop("uptime")))
        faults = [dataclasses.asdict(active) for active in self.broker.faults.active()]
        expected = what_the_page_should_show(doc, before, faults)
        assert differences(shown, expected) == []
        return shown, doc

    def wait_until(self, condition: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """Read the page once `condition` (JavaScript) holds of it."""
        self.page.wait_for(condition)
        return self.read()


def group_lag_is(lag: int) -> str:
    """JavaScript: whether the page shows the group's lag as `lag`."""
    cell = f'#groups tr[data-group="{GROUP}"] td[data-key=lag]'
    return f"document.querySelector('{cell}')?.textContent === '{lag:,}'"


def produce(producer: Producer, topic: str, records: int) -> None:
    for number in range(records):
        producer.produce(topic, b"%d" % number, partition=number % 2)
    assert producer.flush(TIMEOUT) == 0


def assert_page_shows_the_accounts(shown: dict[str, Any], broker: RunningBroker) -> None:
    """What stays put while the clients idle, as the page shows it, is the broker's."""
    accounts = broker.accounts()
    for name, topic in accounts.produced.topics.items():
        row = shown["topics"][name]
        assert (row["produced.records"], row["produced.bytes"]) == (
            f"{topic.records:,}",
            f"{topic.bytes:,}",
        )
    group = accounts.groups.by_group[GROUP]
    row = shown["groups"][GROUP]
    assert (row["state"], row["members"], row["lag"]) == (
        group.state,
        str(len(group.members)),
        f"{group.lag:,}",
    )
    assert [fault["spec"] for fault in shown["faults"].values()] == [FAULT]


def test_the_page_is_at_the_root_and_the_metrics_at_metrics_only() -> None:
    handle = status_page_handler(metrics_handler(lambda: b"metrics\n"))
    page = handle(HttpRequest(b"GET", "/", "", b""))
    assert isinstance(page, HttpResponse)
    assert (page.status, page.content_type) == (200, b"text/html; charset=utf-8")
    assert page.body == STATUS_PAGE.read_bytes()
    assert handle(HttpRequest(b"GET", "/metrics", "", b"")) == HttpResponse(
        200, b"metrics\n", CONTENT_TYPE
    )
    assert handle(HttpRequest(b"POST", "/", "", b"")).status == 405  # type: ignore[union-attr]
    assert handle(HttpRequest(b"GET", "/other", "", b"")).status == 404  # type: ignore[union-attr]
    # Nothing to fetch from elsewhere: every link and script source is the listener's own.
    html = page.body.decode()
    assert "http://" not in html and "https://" not in html
    links = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert links and all(link.startswith(("/", "data:")) for link in links)


@pytest.mark.clients
def test_the_status_page_shows_the_accounts_while_a_run_goes_on(tmp_path: Path) -> None:
    binary = find_chromium()
    if binary is None:
        pytest.skip("no headless Chromium: scripts/ensure-test-tools installs Debian's")
    profile = tmp_path / "chromium"
    profile.mkdir()
    with (
        nullbroker.start(
            partitions=2, group_initial_rebalance_delay_ms=0, workdir=tmp_path
        ) as broker,
        Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5}) as producer,
    ):
        browser = Chromium(binary, profile)
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": GROUP,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        try:
            produce(producer, "orders", 600)
            produce(producer, "clicks", 300)
            consumer.subscribe(["orders"])
            read_and_commit(consumer, 400, TIMEOUT)
            broker.faults.inject(FAULT)
            page = StatusPage(
                browser.open(f"http://{broker.http_address}/?interval={POLL_SECONDS}"), broker
            )

            # The clients idle, connected: the page shows what the broker counted.
            shown, _ = page.wait_until(group_lag_is(200))
            assert_page_shows_the_accounts(shown, broker)

            # Producing: read the page after each few records until it shows a rate.
            for _ in range(200):
                produce(producer, "orders", 50)
                shown, _ = page.read()
                orders = shown["topics"]["orders"]
                if orders["produced.records_per_second"] not in (NO_VALUE, "0.0"):
                    break
            else:
                pytest.fail("the page never showed orders being produced")
            screenshot = tmp_path / "status-page.png"
            page.page.screenshot(screenshot)
            if kept := os.environ.get("STATUS_PAGE_SCREENSHOT"):
                Path(kept).write_bytes(screenshot.read_bytes())

            # The group reads the rest: no lag left.
            produced = broker.accounts().produced.topic("orders").records
            read_and_commit(consumer, produced - 400, TIMEOUT)
            shown, _ = page.wait_until(group_lag_is(0))
            assert_page_shows_the_accounts(shown, broker)

            # The page asked the broker's listener for everything, and nothing else.
            asked = {
                event["request"]["url"]
                for event in browser.events_of(page.page.session, "Network.requestWillBeSent")
                if not event["request"]["url"].startswith("data:")
            }
            origin = f"http://{broker.http_address}/"
            assert {url.removeprefix(origin).partition("?")[0] for url in asked} == {
                "",
                "accounts",
                "faults",
                "history",
            }
        finally:
            consumer.close()
            browser.close()
