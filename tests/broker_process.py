"""Run nullbroker as its users do: `nullbroker serve` in a subprocess, on ports the OS picks.

`BrokerProcess` parses the addresses the broker prints, collects its console lines, scrapes
`/metrics`, and stops it with SIGTERM (asserting exit code 0) to read the summary JSON. Used
as a context manager it always kills the process, whatever the test did.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

START_TIMEOUT = 15.0
STOP_TIMEOUT = 20.0
LISTENING = re.compile(r"^nullbroker listening on (?P<host>[^\s:]+):(?P<port>\d+)$")
METRICS = re.compile(r"^metrics on (?P<url>http://\S+/metrics)$")
VALUE_SIZE = 100


PROCESSES = pytest.mark.parametrize("processes", ["1", "2"], ids=["one-process", "two-processes"])
"""For tests of a cluster: its nodes in one process, and spread over two (--processes)."""


def nullbroker_command() -> list[str]:
    """The installed `nullbroker` script next to the running interpreter (the venv's)."""
    script = Path(sys.executable).with_name("nullbroker")
    if script.exists():
        return [str(script)]
    found = shutil.which("nullbroker")
    if found is None:
        raise RuntimeError("the nullbroker command is not installed")
    return [found]


class BrokerProcess:
    """One `nullbroker serve` process with --listen and --metrics on port 0."""

    def __init__(self, workdir: Path, *flags: str, metrics: bool = True) -> None:
        self.workdir = workdir
        self.summary_path = workdir / "summary.json"
        self.stderr_path = workdir / "nullbroker.stderr"
        command = [
            *nullbroker_command(),
            "serve",
            # --listeners, where a test gives it, says where instead.
            *(["--listen", "127.0.0.1:0"] if "--listeners" not in flags else []),
            "--summary-json",
            str(self.summary_path),
            *(["--metrics", "127.0.0.1:0"] if metrics else []),
            *flags,
        ]
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - closed in kill()
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            bufsize=1,
        )
        self._lines: list[str] = []
        self._changed = threading.Condition()
        # A thread drains stdout so the broker never blocks on a full pipe, and so tests
        # can wait for console lines printed while they drive traffic.
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()
        self._serves_metrics = metrics
        self.bootstrap = ""
        self.metrics_url: str | None = None

    def __enter__(self) -> Self:
        try:
            match = LISTENING.match(self.wait_for_line(LISTENING, START_TIMEOUT))
            assert match is not None
            self.bootstrap = f"{match['host']}:{match['port']}"
            if self._serves_metrics:
                found = METRICS.match(self.wait_for_line(METRICS, START_TIMEOUT))
                assert found is not None
                self.metrics_url = found["url"]
        except BaseException:
            self.kill()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.kill()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                self._lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    @property
    def stdout_lines(self) -> list[str]:
        with self._changed:
            return list(self._lines)

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_for_line(self, pattern: re.Pattern[str], timeout: float) -> str:
        """The first stdout line matching `pattern`, waiting up to `timeout` seconds."""
        line = self.find_line(pattern, timeout)
        if line is None:
            raise AssertionError(
                f"no stdout line matching {pattern.pattern!r} within {timeout} s "
                f"(exit code {self.process.poll()}); stdout: {self.stdout_lines!r}; "
                f"stderr: {self.stderr_text()!r}"
            )
        return line

    def find_line(self, pattern: re.Pattern[str], timeout: float) -> str | None:
        """The first stdout line matching `pattern`, or None if none came within `timeout`
        seconds (or the broker exited without printing one)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self._lines:
                    if pattern.search(line):
                        return line
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._reader.is_alive():
                    return None
                self._changed.wait(min(remaining, 0.1))

    def scrape(self, timeout: float = 5.0) -> list[Metric]:
        """GET /metrics and parse it as Prometheus text."""
        assert self.metrics_url is not None, "the broker was started without --metrics"
        with urllib.request.urlopen(self.metrics_url, timeout=timeout) as response:
            assert response.status == 200
            text = response.read().decode()
        return list(text_string_to_metric_families(text))

    def scrape_until(
        self, ready: Callable[[list[Metric]], bool], timeout: float = 10.0
    ) -> list[Metric]:
        """Scrape until `ready(families)` holds, for what the broker does after a client
        considers it done (acks=0 records still in the socket, connections closing)."""
        deadline = time.monotonic() + timeout
        while True:
            families = self.scrape()
            if ready(families):
                return families
            if time.monotonic() >= deadline:
                raise AssertionError(f"/metrics did not reach the expected state in {timeout} s")
            time.sleep(0.05)

    def stop(
        self, timeout: float = STOP_TIMEOUT, signum: signal.Signals = signal.SIGTERM
    ) -> dict[str, Any]:
        """SIGTERM (or SIGINT), as a service manager or Ctrl-C would; the broker must exit 0
        and write its summary, which is returned parsed."""
        self.process.send_signal(signum)
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"nullbroker did not exit within {timeout} s of {signum.name}; "
                f"stderr: {self.stderr_text()!r}"
            ) from None
        assert code == 0, f"nullbroker exited with {code}; stderr: {self.stderr_text()!r}"
        self._reader.join(timeout)
        summary: dict[str, Any] = json.loads(self.summary_path.read_text())
        return summary

    def kill(self) -> None:
        """Make sure the process is gone (teardown after a failure, or after stop())."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=STOP_TIMEOUT)
        if self.process.stdout is not None:
            self._reader.join(STOP_TIMEOUT)
            self.process.stdout.close()
        self._stderr.close()


@dataclass(frozen=True, slots=True)
class Produced:
    """What the broker counted for one partition."""

    records: int
    bytes: int
    batches: int


PartitionKey = tuple[str, int]


def samples(families: Iterable[Metric], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The values of every sample called `name`, keyed by their sorted labels."""
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in families
        for sample in family.samples
        if sample.name == name
    }


def metric_total(families: Iterable[Metric], name: str) -> float:
    return sum(samples(families, name).values())


def per_partition(families: Iterable[Metric], name: str) -> dict[PartitionKey, int]:
    """The samples called `name`, keyed by their topic and partition labels."""
    return {
        (labels["topic"], int(labels["partition"])): int(value)
        for labels, value in ((dict(key), value) for key, value in samples(families, name).items())
    }


def fetch_kinds(families: Iterable[Metric]) -> dict[str, int]:
    """Fetch requests by kind (sessionless, full, incremental: KIP-227)."""
    return {
        dict(labels)["kind"]: int(value)
        for labels, value in samples(families, "nullbroker_fetch_requests_total").items()
    }


def fetched_from_metrics(families: Iterable[Metric]) -> dict[PartitionKey, int]:
    """Records served by Fetch, per topic-partition."""
    return per_partition(families, "nullbroker_fetched_records_total")


def produced_from_metrics(families: Iterable[Metric]) -> dict[PartitionKey, Produced]:
    families = list(families)
    per_kind = {
        kind: per_partition(families, f"nullbroker_produced_{kind}_total")
        for kind in ("records", "bytes", "batches")
    }
    keys = set(per_kind["records"]) | set(per_kind["bytes"]) | set(per_kind["batches"])
    return {
        key: Produced(
            per_kind["records"].get(key, 0),
            per_kind["bytes"].get(key, 0),
            per_kind["batches"].get(key, 0),
        )
        for key in keys
    }


def produced_from_summary(summary: Mapping[str, Any]) -> dict[PartitionKey, Produced]:
    return {
        (topic, int(partition)): Produced(counts["records"], counts["bytes"], counts["batches"])
        for topic, entry in summary["produced"]["topics"].items()
        for partition, counts in entry["partitions"].items()
    }


def requests_from_metrics(families: Iterable[Metric]) -> dict[str, int]:
    return {
        dict(labels)["api"]: int(value)
        for labels, value in samples(families, "nullbroker_requests_total").items()
    }


def assert_produced_exactly(
    summary: Mapping[str, Any],
    families: list[Metric],
    expected_records: Mapping[PartitionKey, int],
    value_size: int,
) -> None:
    """The broker counted exactly `expected_records` per partition, in its summary and its
    /metrics alike (scraped after the clients closed, so nothing changed in between).

    Partitions missing from `expected_records` must have counted no records: a topic's
    partitions all appear in the accounts once it exists.
    """
    from_summary = produced_from_summary(summary)
    from_metrics = produced_from_metrics(families)
    assert from_metrics == from_summary

    records = {key: counts.records for key, counts in from_summary.items() if counts.records}
    assert records == {key: n for key, n in expected_records.items() if n}

    total_records = sum(expected_records.values())
    produced = summary["produced"]
    assert produced["records"] == total_records
    assert produced["bytes"] == sum(counts.bytes for counts in from_summary.values())
    assert produced["batches"] == sum(counts.batches for counts in from_summary.values())
    # Record batches carry at least their values, plus headers: the bytes counted are the
    # batches' own size, not a per-record estimate.
    assert produced["bytes"] > total_records * value_size
    for topic, entry in produced["topics"].items():
        partitions = [counts for (name, _), counts in from_summary.items() if name == topic]
        assert entry["records"] == sum(counts.records for counts in partitions)
        assert entry["bytes"] == sum(counts.bytes for counts in partitions)
        assert entry["batches"] == sum(counts.batches for counts in partitions)
    for counts in from_summary.values():
        # A batch holds at least one record, and an empty partition has no batches.
        assert counts.batches <= counts.records
        assert (counts.batches == 0) == (counts.records == 0) == (counts.bytes == 0)

    assert requests_from_metrics(families) == summary["requests"]
    assert sum(summary["requests"].values()) == summary["requests_total"]
    latency_counts = {
        dict(labels)["api"]: int(value)
        for labels, value in samples(families, "nullbroker_request_latency_seconds_count").items()
    }
    assert latency_counts == summary["requests"]


def assert_contiguous_from_zero(offsets: Mapping[int, list[int]]) -> None:
    """Each partition's delivered offsets are 0, 1, 2, … with no gap and no repeat."""
    for partition, delivered in offsets.items():
        assert sorted(delivered) == list(range(len(delivered))), f"partition {partition}"


def random_values(count: int, size: int = VALUE_SIZE, seed: int = 7) -> list[bytes]:
    """`count` distinct random values: they do not compress (repeated ones would, across a
    batch), so batch bytes exceed records x value size even with compression on. Seeded,
    so a failure reproduces."""
    generator = random.Random(seed)
    return [generator.randbytes(size) for _ in range(count)]
