"""Fixtures for the PySpark tests: one SparkSession in local[2] for the whole suite (its JVM
takes seconds to start), and nullbroker processes started per test module on OS-picked
ports of 127.0.0.1, with the helpers of tests/broker_process.py."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from tests.broker_process import BrokerProcess

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Spark's driver, executors and Python workers talk over loopback only, and every Python
# worker runs the interpreter running the tests (the venv's, with nullbroker installed).
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

ADMIN_TIMEOUT_S = 30.0
StartBroker = Callable[..., BrokerProcess]


def java_missing_reason() -> str | None:
    if shutil.which("java") or os.environ.get("JAVA_HOME"):
        return None
    return "Java is missing: PySpark needs a JRE (`make test` installs openjdk-17-jre-headless)"


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """The suite's one SparkSession, with the pykafka data source registered."""
    reason = java_missing_reason()
    if reason:
        pytest.skip(reason)
    from pyspark.sql import SparkSession

    from nullbroker.spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("nullbroker-spark-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.local.dir", str(tmp_path_factory.mktemp("spark-local")))
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("spark-warehouse")))
        # An empty micro-batch is planned but not run: restarts see only batches with data.
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def start_module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartBroker]:
    """Starts `nullbroker serve` with the given flags for a whole test module; every process
    is killed at the module's end."""
    with ExitStack() as processes:

        def start(*flags: str) -> BrokerProcess:
            workdir = tmp_path_factory.mktemp("broker")
            return processes.enter_context(BrokerProcess(Path(workdir), *flags))

        yield start


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
