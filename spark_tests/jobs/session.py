"""The SparkSession a job runs in when started from the command line: local[2] on loopback,
Python workers on this interpreter, as the test suite's session is configured."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from nullbroker import spark as pykafka

from .memory_source import MemRowsDataSource

KAFKA_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
CONNECTOR_CACHE = Path(__file__).resolve().parents[2] / ".cache" / "spark-kafka"
"""Where scripts/ensure-spark-connector (run by `make test`) puts Spark's Kafka connector: a
folder per Spark version holding `jars/`."""
EXECUTORS_WAIT = "120s"
"""How long a job on a cluster waits for the executors asked for (each is a JVM that a
worker starts: seconds on a busy machine)."""


def connector_jars() -> list[str]:
    """The jars of Spark's JVM Kafka connector for the installed pyspark, as
    scripts/ensure-spark-connector provisioned them; empty when it has not."""
    import pyspark

    folder = CONNECTOR_CACHE / pyspark.__version__
    if not (folder / "complete").is_file():
        return []
    return sorted(str(jar) for jar in (folder / "jars").glob("*.jar"))


def build_session(
    packages: Sequence[str] = (),
    jars: Sequence[str] = (),
    master: str | None = None,
    executors: int | None = None,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """`packages` (Maven coordinates) and `jars` (paths) go on the classpath, for Spark's
    JVM Kafka connector: spark-sql-kafka-0-10_2.13 of the installed Spark's version. Given
    neither, the connector scripts/ensure-spark-connector provisioned is used, if it did.
    In local[2] unless `master` names a cluster (see on_cluster); `conf`, more settings."""
    if not packages and not jars:
        jars = connector_jars()
    builder = local_builder("nullbroker-baseline", Path(tempfile.mkdtemp(prefix="spark-jobs-")))
    if master is not None:
        builder = on_cluster(builder, master, executors)
    for name, value in (conf or {}).items():
        builder = builder.config(name, value)
    if packages:
        builder = builder.config("spark.jars.packages", ",".join(packages))
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register_formats(session)
    return session


def local_builder(app_name: str, scratch: Path) -> SparkSession.Builder:
    """local[2] on loopback with Python workers on this interpreter, no UI, two shuffle
    partitions, scratch space under `scratch`."""
    # Spark's driver, executors and Python workers talk over loopback only, and every
    # Python worker runs this interpreter (the venv's, with nullbroker installed).
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    return (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.local.dir", str(scratch / "local"))
        .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
        # An empty micro-batch is planned but not run: restarts see only batches with data.
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    )


def on_cluster(
    builder: SparkSession.Builder, master: str, executors: int | None
) -> SparkSession.Builder:
    """The application on `master` (`spark://HOST:PORT`, a standalone cluster) in executors
    of one core each, `executors` of them (spark.cores.max) or one per core the cluster has.
    Given a number, the first job waits until that many have registered (up to
    EXECUTORS_WAIT): a measurement starts with every executor it is meant to have, not with
    the first one up."""
    builder = builder.master(master).config("spark.executor.cores", "1")
    if executors is not None:
        builder = (
            builder.config("spark.cores.max", str(executors))
            .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
            .config("spark.scheduler.maxRegisteredResourcesWaitingTime", EXECUTORS_WAIT)
        )
    return builder


def register_formats(spark: SparkSession) -> None:
    """`pykafka` and `memrows`; registering again replaces, so every job may call it."""
    pykafka.register(spark)
    spark.dataSource.register(MemRowsDataSource)


def jvm_kafka_missing_reason(spark: SparkSession) -> str | None:
    """Why `format("kafka")` cannot run in `spark`, or None when Spark's JVM connector is on
    the driver's classpath (looked up through the context class loader, where
    spark.jars and spark.jars.packages put it)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    try:
        jvm.java.lang.Class.forName(KAFKA_PROVIDER, False, loader)
    except Exception:  # py4j's Py4JJavaError wraps the ClassNotFoundException
        version = spark.version
        return (
            f"Spark's JVM Kafka connector ({KAFKA_PROVIDER}) is not on the classpath: "
            "scripts/ensure-spark-connector (run by `make test`) provisions "
            f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version} from Maven Central, or "
            "give it with --packages (needs Maven Central) or --jars (local jar files)"
        )
    return None
