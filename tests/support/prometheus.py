"""A real Prometheus (Debian's `prometheus` package) scraping brokers, for tests: its own
configuration and storage in a folder of the test's, its web listener on 127.0.0.1 on a
port the OS picks (read back from its log), asked through its HTTP query API.

Beside it, PromQL's `rate` and `histogram_quantile` as Prometheus 2.42 computes them
(promql/functions.go `extrapolatedRate`, promql/quantile.go `bucketQuantile`), so that a
test can derive what a query must return from the very samples Prometheus holds.
"""

from __future__ import annotations

import datetime
import json
import math
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

STARTUP_TIMEOUT = 30.0
LISTENING = re.compile(r'msg="Listening on" address=(\S+)')

Samples = list[tuple[int, float]]
"""A series' samples: (timestamp in ms, value), oldest first."""


def find_prometheus() -> str | None:
    return shutil.which("prometheus")


class Prometheus:
    """One Prometheus process scraping `targets` (HOST:PORT, path /metrics) every
    `interval`, as job `job`; stopped by `close()`."""

    def __init__(
        self,
        binary: str,
        folder: Path,
        targets: Sequence[str],
        interval: str = "500ms",
        job: str = "nullbroker",
    ) -> None:
        config = folder / "prometheus.yml"
        # JSON is YAML: the configuration needs no YAML writer.
        config.write_text(
            json.dumps(
                {
                    "global": {"scrape_interval": interval, "scrape_timeout": interval},
                    "scrape_configs": [
                        {"job_name": job, "static_configs": [{"targets": list(targets)}]}
                    ],
                }
            )
        )
        self.log_path = folder / "prometheus.log"
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={folder / 'data'}",
                    "--web.listen-address=127.0.0.1:0",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + STARTUP_TIMEOUT
        self.address = self._wait_for_address(deadline)
        self._wait_until_ready(deadline)

    def _wait_for_address(self, deadline: float) -> str:
        while time.monotonic() < deadline:
            found = LISTENING.search(self.log_path.read_text(errors="replace"))
            if found:
                return found.group(1)
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.close()
        raise RuntimeError(f"prometheus did not say where it listens:\n{self.log_tail()}")

    def _wait_until_ready(self, deadline: float) -> None:
        """Until /-/ready says so: it listens before its storage is open, and answers
        queries 503 until then."""
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://{self.address}/-/ready", timeout=5):
                    return
            except urllib.error.HTTPError as error:
                if error.code != 503:
                    raise
            time.sleep(0.05)
        self.close()
        raise RuntimeError(f"prometheus was not ready in {STARTUP_TIMEOUT:g} s:\n{self.log_tail()}")

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def query(self, expression: str, at_ms: int | None = None) -> tuple[str, list[Any]]:
        """An instant query's result type and result (at `at_ms`, milliseconds since the
        epoch, else now)."""
        parameters = {"query": expression}
        if at_ms is not None:
            parameters["time"] = rfc3339(at_ms)
        url = f"http://{self.address}/api/v1/query?{urllib.parse.urlencode(parameters)}"
        with urllib.request.urlopen(url, timeout=10) as response:
            answer = json.load(response)
        assert answer["status"] == "success", answer
        return answer["data"]["resultType"], answer["data"]["result"]

    def vector(self, expression: str, at_ms: int | None = None) -> dict[tuple[str, ...], float]:
        """An instant vector's values, keyed by their labels' values in label-name order (the
        target's labels left out)."""
        kind, result = self.query(expression, at_ms)
        assert kind == "vector", (expression, kind)
        return {_key(entry["metric"]): float(entry["value"][1]) for entry in result}

    def matrix(self, expression: str, at_ms: int | None = None) -> dict[tuple[str, ...], Samples]:
        """A range selector's raw samples per series (`name[1m]`), keyed by their labels'
        values in label-name order (the metric's name and the target's labels left out)."""
        kind, result = self.query(expression, at_ms)
        assert kind == "matrix", (expression, kind)
        return {
            _key(entry["metric"]): [
                (round(float(stamp) * 1000), float(value)) for stamp, value in entry["values"]
            ]
            for entry in result
        }

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=STARTUP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def rfc3339(at_ms: int) -> str:
    """A time as the query API reads it to the millisecond: a time in seconds as a decimal
    number would go through a float, and can come back a millisecond early."""
    seconds, milliseconds = divmod(at_ms, 1000)
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{milliseconds:03d}Z"


TARGET_LABELS = ("__name__", "instance", "job")
"""Left out of the keys: every series here is the one target's."""


def _key(metric: dict[str, str]) -> tuple[str, ...]:
    return tuple(value for name, value in sorted(metric.items()) if name not in TARGET_LABELS)


def rate(samples: Samples, at_ms: int, range_ms: int) -> float | None:
    """`rate(series[range])` evaluated at `at_ms` over these samples (those of the range), as
    Prometheus 2.42's extrapolatedRate computes it for a counter; None where it gives no
    value (fewer than two samples)."""
    if len(samples) < 2:
        return None
    (first_t, first_v), (last_t, last_v) = samples[0], samples[-1]
    result = last_v - first_v
    previous = first_v
    for _, value in samples[1:]:
        if value < previous:  # a counter reset: it counted `previous` before it
            result += previous
        previous = value
    range_start = at_ms - range_ms
    duration_to_start = (first_t - range_start) / 1000
    duration_to_end = (at_ms - last_t) / 1000
    sampled_interval = (last_t - first_t) / 1000
    average_between_samples = sampled_interval / (len(samples) - 1)
    if result > 0 and first_v >= 0:
        # A counter is never negative: extrapolate no further back than its zero point.
        duration_to_zero = sampled_interval * (first_v / result)
        if duration_to_zero < duration_to_start:
            duration_to_start = duration_to_zero
    threshold = average_between_samples * 1.1
    extrapolate_to = sampled_interval
    extrapolate_to += (
        duration_to_start if duration_to_start < threshold else average_between_samples / 2
    )
    extrapolate_to += (
        duration_to_end if duration_to_end < threshold else average_between_samples / 2
    )
    factor = extrapolate_to / sampled_interval
    factor /= range_ms / 1000
    return result * factor


def bucket_quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """`histogram_quantile(q, …)` over one histogram's buckets, (upper bound, cumulative
    count), as Prometheus 2.42's bucketQuantile computes it."""
    buckets = sorted(buckets)
    if not buckets or not math.isinf(buckets[-1][0]):
        return math.nan
    coalesced: list[list[float]] = []
    for bound, count in buckets:  # the same bound twice: one bucket
        if coalesced and coalesced[-1][0] == bound:
            coalesced[-1][1] += count
        else:
            coalesced.append([bound, count])
    highest = coalesced[0][1]
    for bucket in coalesced[1:]:  # cumulative counts never go down
        highest = max(highest, bucket[1])
        bucket[1] = highest
    if len(coalesced) < 2:
        return math.nan
    observations = coalesced[-1][1]
    if observations == 0:
        return math.nan
    rank = q * observations
    index = next(
        (i for i in range(len(coalesced) - 1) if coalesced[i][1] >= rank), len(coalesced) - 1
    )
    if index == len(coalesced) - 1:
        return coalesced[-2][0]
    if index == 0 and coalesced[0][0] <= 0:
        return coalesced[0][0]
    start, end, count = 0.0, coalesced[index][0], coalesced[index][1]
    if index > 0:
        start = coalesced[index - 1][0]
        count -= coalesced[index - 1][1]
        rank -= coalesced[index - 1][1]
    return start + (end - start) * (rank / count)


def quantile_bucket(q: float, buckets: list[tuple[float, float]]) -> tuple[float, float]:
    """The bounds (lower, upper] of the bucket in which `bucket_quantile` places the
    quantile: all the histogram can say of where it lies."""
    buckets = sorted(buckets)
    rank = q * buckets[-1][1]
    for index, (bound, count) in enumerate(buckets):
        if count >= rank:
            return (buckets[index - 1][0] if index else 0.0), bound
    return buckets[-2][0], buckets[-1][0]
