"""What the tests of nullbroker as a process share, beside the plugin's fixtures that start it
(`nullbroker_factory`: nullbroker.app.pytest_plugin, over nullbroker.start): the PROCESSES
parametrization, /metrics read (`RunningBroker.scrape`'s families) per partition and API,
the exact accounting a producer's records must meet in the summary and /metrics alike, and
the clients' small routines (values that do not compress, a consumer read and committed).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import Consumer
from prometheus_client.metrics_core import Metric

VALUE_SIZE = 100


PROCESSES = pytest.mark.parametrize("processes", ["1", "2"], ids=["one-process", "two-processes"])
"""For tests of a cluster: its nodes in one process, and spread over two (--processes)."""


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


def read_and_commit(consumer: Consumer, records: int, timeout: float) -> None:
    """Have a confluent-kafka consumer hand out exactly `records` records (it fetches ahead:
    what it read is what was handed out), then commit where it stands, synchronously."""
    read = 0
    deadline = time.monotonic() + timeout
    while read < records and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None:
            assert message.error() is None, message.error()
            read += 1
    assert read == records, f"read {read} of {records} records in {timeout:g} s"
    consumer.commit(asynchronous=False)


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
