"""kcat (librdkafka's command-line client) against `nullbroker serve`."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from collections import defaultdict

import pytest

from nullbroker.app.pytest_plugin import StartBroker
from tests.support.broker_counts import (
    VALUE_SIZE,
    assert_contiguous_from_zero,
    assert_produced_exactly,
)

pytestmark = [
    pytest.mark.clients,
    pytest.mark.skipif(
        shutil.which("kcat") is None,
        reason="kcat is not on PATH; scripts/ensure-test-tools installs it",
    ),
]

PARTITIONS = 3
RECORDS_PER_PARTITION = 1_000
TIMEOUT = 30.0
# At verbosity 3 kcat reports every delivery on stderr.
DELIVERED = re.compile(r"Message delivered to partition (\d+) \(offset (-?\d+)\)")


def kcat(
    bootstrap: str, *arguments: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kcat", "-b", bootstrap, *arguments],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def test_kcat_produces_keyed_records_with_headers_with_contiguous_offsets_and_exact_counts(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--partitions", str(PARTITIONS))
    generator = random.Random(11)
    offsets: dict[int, list[int]] = defaultdict(list)
    for partition in range(PARTITIONS):
        # One record per line, "key:value"; hex values contain neither delimiter.
        lines = "".join(
            f"key-{partition}-{i}:{generator.randbytes(VALUE_SIZE // 2).hex()}\n"
            for i in range(RECORDS_PER_PARTITION)
        )
        result = kcat(
            broker.bootstrap,
            "-P",
            "-t",
            "logs",
            "-p",
            str(partition),
            "-K",
            ":",
            "-H",
            "source=kcat",
            "-H",
            "trace-id=4bf92f3577b34da6",
            "-X",
            "enable.idempotence=true",
            # Several batches per partition, so offsets must chain across batches.
            "-X",
            "batch.size=16384",
            "-v",
            "-v",
            "-v",
            stdin=lines,
        )
        assert result.returncode == 0, result.stderr
        assert "Delivery failed" not in result.stderr
        for found_partition, offset in DELIVERED.findall(result.stderr):
            offsets[int(found_partition)].append(int(offset))

    assert {p: len(found) for p, found in offsets.items()} == dict.fromkeys(
        range(PARTITIONS), RECORDS_PER_PARTITION
    )
    assert_contiguous_from_zero(offsets)

    families = broker.scrape()
    summary = broker.stop()
    assert_produced_exactly(
        summary,
        families,
        {("logs", p): RECORDS_PER_PARTITION for p in range(PARTITIONS)},
        VALUE_SIZE,
    )
    for counts in summary["produced"]["topics"]["logs"]["partitions"].values():
        assert counts["batches"] > 1
    assert summary["errors"] == {}
    assert summary["connections_closed_on_error"] == {}


def test_kcat_metadata_lists_the_topics_and_this_broker(nullbroker_factory: StartBroker) -> None:
    broker = nullbroker_factory("--partitions", str(PARTITIONS))
    for topic in ("alpha", "beta"):
        result = kcat(broker.bootstrap, "-P", "-t", topic, stdin="one record\n")
        assert result.returncode == 0, result.stderr

    listing = kcat(broker.bootstrap, "-L")
    assert listing.returncode == 0, listing.stderr
    assert f"broker 0 at {broker.bootstrap}" in listing.stdout
    assert "2 topics:" in listing.stdout
    for topic in ("alpha", "beta"):
        assert f'topic "{topic}" with {PARTITIONS} partitions:' in listing.stdout

    as_json = kcat(broker.bootstrap, "-L", "-J")
    assert as_json.returncode == 0, as_json.stderr
    metadata = json.loads(as_json.stdout)
    assert [b["name"] for b in metadata["brokers"]] == [broker.bootstrap]
    assert {
        topic["topic"]: sorted(p["partition"] for p in topic["partitions"])
        for topic in metadata["topics"]
    } == {"alpha": [0, 1, 2], "beta": [0, 1, 2]}

    summary = broker.stop()
    assert summary["produced"]["records"] == 2
    assert summary["errors"] == {}
