"""End-to-end latency through Spark (spark_tests/jobs/e2e_latency.py): records written with
their send time, read back by Spark's connector from a broker that keeps them (--retain),
each exactly once; against a broker that keeps nothing the job stops and says why."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from nullbroker.app.pytest_plugin import StartBroker
from spark_tests.jobs import e2e_latency

RECORDS = 600
RATE = 400.0


pytestmark = pytest.mark.usefixtures("kafka_connector")


def test_spark_reads_back_every_record_sent_and_reports_its_latency(
    spark: SparkSession, nullbroker_module_factory: StartBroker
) -> None:
    broker = nullbroker_module_factory("--retain", str(e2e_latency.RETAIN_BYTES))
    result = e2e_latency.run(spark, broker.bootstrap, RECORDS, RATE, partitions=2)

    # run() raises unless every record came back once, as sent.
    assert result["records"] == RECORDS
    assert 0 < result["p50_ms"] <= result["p90_ms"] <= result["p99_ms"] <= result["max_ms"]
    assert result["rows_per_s"] > 0


def test_a_broker_that_keeps_nothing_is_named_as_the_reason(
    spark: SparkSession, nullbroker_module_factory: StartBroker
) -> None:
    broker = nullbroker_module_factory()
    with pytest.raises(e2e_latency.LatencyError, match="--retain BYTES"):
        e2e_latency.run(spark, broker.bootstrap, 50, RATE)
