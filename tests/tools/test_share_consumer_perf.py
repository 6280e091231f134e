"""perf.share_consumer_perf, on a tiny topic and one round: it runs Kafka 4.4.0's share-consumer
perf test against nullbroker and Kafka 4.4.0 and writes the figures perf/README.md reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perf import share_consumer_perf
from tests.support.kafka_tools import requires_kafka_tools

pytestmark = [requires_kafka_tools, pytest.mark.slow]


def test_it_measures_both_brokers_reading_the_whole_topic(tmp_path: Path) -> None:
    out = tmp_path / "share.jsonl"
    assert share_consumer_perf.main(["--records", "3000", "--rounds", "1", "--out", str(out)]) == 0
    *rounds, summary = (json.loads(line) for line in out.read_text().splitlines())
    assert {r["broker"] for r in rounds} == {"nullbroker", "kafka"}
    for measured in rounds:
        assert measured["records"] >= 3000
        assert measured["broker_cpu_s"] > 0 and measured["rss_mib_peak"] > 0
    assert set(summary["ratio_nullbroker_to_kafka"]) == {
        "records_per_sec",
        "broker_cpu_s_per_gb",
        "rss_mib_peak",
    }
