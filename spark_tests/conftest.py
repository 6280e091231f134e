"""Fixtures for the PySpark tests: one SparkSession in local[2] for the whole suite (its JVM
takes seconds to start), one Spark standalone cluster for the tests that run jobs on one,
and the helpers the tests of nullbroker processes share (started per test module on OS-picked
ports of 127.0.0.1 by the plugin's `nullbroker_module_factory`)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from nullbroker.app.launcher import RunningBroker
from tests.support.broker_counts import produced_from_metrics

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_tests.jobs.standalone import StandaloneCluster

ADMIN_TIMEOUT_S = 30.0
WORKERS = 2  # one core each: the machine has two


def java_missing_reason() -> str | None:
    if shutil.which("java") or os.environ.get("JAVA_HOME"):
        return None
    return "Java is missing: PySpark needs Java (`make test` installs openjdk-17-jdk-headless)"


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """The suite's one SparkSession, with the pykafka data source registered and Spark's JVM
    Kafka connector on its classpath when scripts/ensure-spark-connector provisioned it."""
    reason = java_missing_reason()
    if reason:
        pytest.skip(reason)
    from nullbroker.spark import register
    from spark_tests.jobs.session import connector_jars, local_builder

    scratch = tmp_path_factory.mktemp("spark")
    builder = local_builder("nullbroker-spark-tests", scratch)
    if jars := connector_jars():
        builder = builder.config("spark.jars", ",".join(jars))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """The suite's one Spark standalone cluster: a master and two workers of one core and
    1 GiB, each its own JVM (spark_tests/jobs/standalone.py), started when a test first asks
    for it. Their logs, and every executor's, stay in pytest's temporary folder. Tests ask
    for `cluster`, which replaces a worker a test killed."""
    reason = java_missing_reason()
    if reason:
        pytest.skip(reason)
    from spark_tests.jobs.standalone import StandaloneCluster

    with StandaloneCluster(tmp_path_factory.mktemp("standalone"), workers=WORKERS) as cluster:
        yield cluster


@pytest.fixture
def cluster(standalone: StandaloneCluster) -> StandaloneCluster:
    """The session's standalone cluster with its two workers: one a test killed is replaced
    before the next test starts."""
    standalone.ensure_workers(WORKERS)
    return standalone


def produced_records(broker: RunningBroker, topic: str) -> dict[int, int]:
    """Records the broker was sent for `topic`, per partition."""
    return {
        partition: counts.records
        for (name, partition), counts in produced_from_metrics(broker.scrape()).items()
        if name == topic
    }


def log_offsets(bootstrap: str, topic: str, partitions: int, which: str) -> dict[int, int]:
    """Each partition's earliest or latest offset, as the broker reports them (ListOffsets)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    spec = OffsetSpec.earliest() if which == "earliest" else OffsetSpec.latest()
    futures = admin.list_offsets(
        {TopicPartition(topic, p): spec for p in range(partitions)},
        request_timeout=ADMIN_TIMEOUT_S,
    )
    return {tp.partition: future.result().offset for tp, future in futures.items()}


def delete_records(bootstrap: str, topic: str, partition: int, before: int) -> int:
    """DeleteRecords: the partition's log then starts at `before`; returns the new log start."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records(
        [TopicPartition(topic, partition, before)], request_timeout=ADMIN_TIMEOUT_S
    )
    (future,) = futures.values()
    low_watermark: int = future.result().low_watermark
    return low_watermark


@pytest.fixture(scope="module")
def connector_provisioned() -> None:
    """Skips a module whose job commands (Spark applications of their own, given the jars)
    need Spark's JVM Kafka connector when scripts/ensure-spark-connector has not provisioned
    it; unlike `kafka_connector`, it starts no SparkSession."""
    from spark_tests.jobs.session import connector_jars

    if not connector_jars():
        pytest.skip("Spark's Kafka connector is not provisioned (scripts/ensure-spark-connector)")


@pytest.fixture(scope="module")
def kafka_connector(spark: SparkSession) -> None:
    """Skips a module whose tests need Spark's JVM Kafka connector when it is missing."""
    from spark_tests.jobs.session import jvm_kafka_missing_reason

    if reason := jvm_kafka_missing_reason(spark):
        pytest.skip(reason)
