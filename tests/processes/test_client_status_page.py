"""The status page's clients and charts with a real pushing client: Kafka 4.4.0's
kafka-producer-perf-test (default configs, throttled to run about fifteen seconds) pushes its
metrics (KIP-714) every half second to a broker with --metrics; headless Chromium
(tests/support/chromium.py) opens the page in the middle of the run. Its "Clients" row shows
what the /accounts responses its script received say (every number, as
tests/processes/test_status_page.py checks the rest of the page), its charts start before
the page was opened (GET /history), and two screenshots a few seconds apart differ where the
lines are and nowhere the page stands still.

A cluster's supervisor samples the workers' accounts summed: its /history adds up to the
records produced on every worker."""

from __future__ import annotations

import base64
import datetime
import json
import subprocess
import time
import urllib.request
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

import nullbroker
from nullbroker import RunningBroker
from perf.java_perf import BIN
from tests.ops.test_client_status_page import READ_CHARTS, READ_CLIENTS, points
from tests.processes.test_status_page import StatusPage, differences
from tests.support.chromium import Chromium, Page, find_chromium
from tests.support.kafka_tools import requires_kafka_tools

TIMEOUT = 30.0
CLIENT_ID = "perf-producer-client"
"""The perf test's producer's client id."""
TOPIC = "pushed-page"
RECORDS, THROUGHPUT = 15_000, 1000
PUSH_INTERVAL_MS = 500
NO_VALUE = "\N{EN DASH}"

KAFKA = "org.apache.kafka."
TENTHS = {
    "records_per_second": (
        "producer.record.send.rate",
        "consumer.fetch.manager.records.consumed.rate",
    ),
    "queue_time_ms": ("producer.record.queue.time.avg",),
    "request_latency_ms": (
        "producer.request.latency.avg",
        "consumer.fetch.manager.fetch.latency.avg",
        "producer.node.request.latency.avg",
        "consumer.node.request.latency.avg",
    ),
}
WHOLE = {
    "batch_size": ("producer.batch.size.avg",),
    "buffer_available": ("producer.buffer.available.bytes",),
    "lag": ("consumer.fetch.manager.records.lag.max",),
}
"""The table's pushed columns and the metrics each shows, the first one a client pushed."""


def pushed_value(instance: dict[str, Any], names: tuple[str, ...]) -> float | None:
    """What the page shows of `names` for a client instance of the accounts: its value in
    `metrics`, else the largest of its series."""
    for name in names:
        if KAFKA + name in instance["metrics"]:
            return instance["metrics"][KAFKA + name]  # type: ignore[no-any-return]
        values = [
            series["value"]
            for series in instance["series"]
            if series["name"] == KAFKA + name and series["value"] is not None
        ]
        if values:
            return max(values)
    return None


def whole(value: float | None) -> str:
    """As the page writes a whole number: rounded half away from zero, with separators."""
    if value is None:
        return NO_VALUE
    return f"{int(Decimal(value).quantize(Decimal(1), ROUND_HALF_UP)):,}"


def expected_instance(instance: dict[str, Any], clients: dict[str, Any]) -> dict[str, Any]:
    counted = clients["by_client_id"].get(instance["client_id"])
    last_push = datetime.datetime.fromisoformat(instance["last_push"])
    return {
        "ended": "greyed" if instance["ended"] else "",
        "client_id": instance["client_id"],
        "software": f"{instance['software_name']} {instance['software_version']}",
        "instance": instance["instance_id"],
        "state": instance["ended"] or "pushing",
        **{key: pushed_value(instance, names) for key, names in TENTHS.items()},
        **{key: whole(pushed_value(instance, names)) for key, names in WHOLE.items()},
        "pushes": instance["pushes"],
        "last_push": last_push.strftime("%H:%M:%S.%f")[:12],
        "produced_records": NO_VALUE if counted is None else counted["produced_records"],
        "fetched_records": NO_VALUE if counted is None else counted["fetched_records"],
    }


def expected_agreement(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "ended": "",
        "client_id": row["client_id"],
        "metric": row["metric"],
        "pushed": row["pushed"],
        "counted": row["counted"],
        "instances": row["instances"],
        "final": ("yes" if row["final"] else "not yet")
        + (
            f" ({row['without_closing_push']} without a closing push)"
            if row["without_closing_push"]
            else ""
        ),
        "agrees": "yes" if row["agrees"] else "no",
    }


class ClientsPage(StatusPage):
    """The status page, its clients section checked against the documents it polled."""

    def read_clients(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The clients section as shown, checked against the document it rendered (and
        returned with it)."""
        shown = self.page.evaluate(READ_CLIENTS)
        doc, _ = self._polled(float(shown["uptime"]))
        clients = doc["clients"]
        assert shown["hidden"] is (not clients["instances"])
        for rows in (shown["instances"], shown["agreement"]):
            for row in rows.values():
                row["ended"] = "greyed" if row["ended"] else ""
        expected = {
            "instances": {
                instance["instance_id"]: expected_instance(instance, clients)
                for instance in clients["instances"]
            },
            "agreement": {
                row["client_id"]: expected_agreement(row) for row in clients["agreement"]
            },
        }
        assert differences({key: shown[key] for key in ("instances", "agreement")}, expected) == []
        return shown, doc


def perf_producer(bootstrap: str, output: Path) -> subprocess.Popen[bytes]:
    """kafka-producer-perf-test with its default configs, throttled so it runs about
    RECORDS / THROUGHPUT seconds."""
    with output.open("wb") as out:
        return subprocess.Popen(
            [
                str(BIN / "kafka-producer-perf-test"),
                "--topic",
                TOPIC,
                "--num-records",
                str(RECORDS),
                "--record-size",
                "100",
                "--throughput",
                str(THROUGHPUT),
                "--producer-props",
                f"bootstrap.servers={bootstrap}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def history(broker: RunningBroker) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"http://{broker.http_address}/history", timeout=10) as answer:
        return json.loads(answer.read())["samples"]  # type: ignore[no-any-return]


def wait_for_history(broker: RunningBroker, condition: Any, what: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + TIMEOUT
    while not condition(samples := history(broker)):
        assert time.monotonic() < deadline, f"{what}: not in {TIMEOUT:g} s: {samples[-3:]}"
        time.sleep(0.1)
    return samples


def capture(page: Page, selector: str) -> bytes:
    """A PNG of what the page shows now within the element `selector`."""
    box = page.evaluate(
        f"(() => {{ const r = document.querySelector('{selector}').getBoundingClientRect(); "
        "return {x: r.x + scrollX, y: r.y + scrollY, width: r.width, height: r.height}; })()"
    )
    shot = page.browser.call(
        "Page.captureScreenshot",
        page.session,
        format="png",
        captureBeyondViewport=True,
        clip={**box, "scale": 1},
    )
    return base64.b64decode(shot["data"])


PLOT = 'figure[data-chart="{}"] rect.plot'
REGIONS = {
    "records/s": PLOT.format("records"),
    "p99 latency": PLOT.format("latency"),
    "pushed send rate": PLOT.format("client-records"),
    "pushed queue time": PLOT.format("client-queue-time"),
    "heading (never changes)": "h1",
    "a caption (never changes)": 'figure[data-chart="records"] figcaption',
}


@pytest.mark.clients
@requires_kafka_tools
def test_a_pushing_producer_has_a_row_and_moving_lines(tmp_path: Path) -> None:
    binary = find_chromium()
    if binary is None:
        pytest.skip("no headless Chromium: scripts/ensure-test-tools installs Debian's")
    profile = tmp_path / "chromium"
    profile.mkdir()
    with nullbroker.start(workdir=tmp_path, client_metrics_interval_ms=PUSH_INTERVAL_MS) as broker:
        producer = perf_producer(broker.bootstrap, tmp_path / "perf.out")
        browser = Chromium(binary, profile)
        try:
            # The page opens once the broker has seconds of the run to chart.
            wait_for_history(
                broker,
                lambda samples: sum(s["produced_records_per_second"] > 0 for s in samples) >= 3,
                "three seconds of records produced",
            )
            page = ClientsPage(browser.open(f"http://{broker.http_address}/?interval=0.25"), broker)
            page.page.wait_for("document.body?.dataset.uptime !== undefined")
            shown = page.page.wait_for(
                f"(() => {{ const read = {READ_CLIENTS}; return Object.values(read.instances)"
                f".some((row) => row.client_id === '{CLIENT_ID}' && row.state === 'pushing'"
                f" && row.records_per_second !== '{NO_VALUE}') && read; }})()",
                timeout=TIMEOUT,
            )
            shown, doc = page.read_clients()
            (row,) = (row for row in shown["instances"].values() if row["client_id"] == CLIENT_ID)
            assert row["software"] == "apache-kafka-java 4.4.0"
            assert row["produced_records"] != "0" and row["queue_time_ms"] != NO_VALUE
            page.read()  # the rest of the page is the same document's too

            # The charts began before the page: its first /history held the earlier samples.
            first_history = json.loads(next(page.page.responses("/history")))["samples"]
            first_accounts = min(page.documents)
            assert first_history and first_history[0]["uptime_seconds"] < first_accounts - 2

            # Two screenshots a few seconds apart, while the producer runs.
            before = {name: capture(page.page, selector) for name, selector in REGIONS.items()}
            page.page.screenshot(tmp_path / "before.png")
            drawn = page.page.evaluate(READ_CHARTS)
            page.page.wait_for(
                f"Number(document.body.dataset.uptime) > {float(doc['uptime_seconds']) + 3}",
                timeout=TIMEOUT,
            )
            assert producer.poll() is None, "the producer finished before the second screenshot"
            after = {name: capture(page.page, selector) for name, selector in REGIONS.items()}
            page.page.screenshot(tmp_path / "after.png")
            redrawn = page.page.evaluate(READ_CHARTS)

            changed = {name for name in REGIONS if before[name] != after[name]}
            assert changed == {"records/s", "p99 latency", "pushed send rate", "pushed queue time"}
            for chart, series in (
                ("records", "produced"),
                ("client-records", CLIENT_ID),
                ("client-queue-time", CLIENT_ID),
            ):
                assert sum(map(len, points(redrawn[chart][series]))) > sum(
                    map(len, points(drawn[chart][series]))
                ), chart

            # The run ends: the page shows the accounts as the broker has them then.
            assert producer.wait(TIMEOUT * 2) == 0, (tmp_path / "perf.out").read_text()
            page.page.wait_for(
                f"Number(document.body.dataset.uptime) > {broker.accounts().uptime_seconds}",
                timeout=TIMEOUT,
            )
            shown, doc = page.read_clients()
            assert doc["clients"]["by_client_id"][CLIENT_ID]["produced_records"] == RECORDS
        finally:
            if producer.poll() is None:
                producer.kill()
                producer.wait()
            browser.close()


@pytest.mark.clients
def test_a_clusters_history_adds_up_its_workers_records(tmp_path: Path) -> None:
    records = 2000
    with nullbroker.start(
        workdir=tmp_path, brokers=2, processes=2, partitions=2, client_metrics="off"
    ) as broker:
        wait_for_history(broker, lambda samples: samples, "a first sample")
        with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5}) as producer:
            for number in range(records):
                producer.produce("spread", b"%d" % number, partition=number % 2)
            assert producer.flush(TIMEOUT) == 0
        accounts = broker.accounts()
        partitions = accounts.produced.topic("spread").partitions
        assert accounts.produced.topic("spread").records == records and len(partitions) == 2
        after = accounts.uptime_seconds
        samples = wait_for_history(
            broker,
            lambda samples: samples and samples[-1]["uptime_seconds"] > after,
            "a sample after the records",
        )

    produced = [round(s["produced_records_per_second"] * s["seconds"]) for s in samples]
    assert sum(produced) == records
    assert any(
        s["p99_request_latency_ms"] is not None
        for s, count in zip(samples, produced, strict=True)
        if count
    )
