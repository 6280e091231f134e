"""Job (c), a typical pipeline: Kafka → parse → aggregate → Kafka. Each event's key is parsed
as a user id and its value's first letter as a category; events are counted per category
(events, value bytes, distinct users, first and last timestamp) and the aggregates written
as JSON to an output topic. rows/s counts the events read.

    nullbroker serve --source 'baseline-events:partitions=4,records=250000,size=1024,key-size=8'
    python -m spark_tests.jobs.pipeline --bootstrap 127.0.0.1:9092 \\
        --records 1000000 --record-size 1024 --partitions 4
"""

from __future__ import annotations

import sys
import time

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from . import cli
from .broker import check_source, ensure_topic
from .connector import Connector
from .result import JobResult
from .session import register_formats
from .settings import JobSettings

NAME = "pipeline"
TOPIC = "baseline-events"
OUTPUT_TOPIC = "baseline-aggregates"


def parsed(events: DataFrame) -> DataFrame:
    """Fields from the bytes, with built-in functions only (no Python per row)."""
    return events.select(
        F.substring("value", 1, 1).cast("string").alias("category"),
        F.length("value").alias("bytes"),
        F.col("key").cast("string").cast("int").alias("user"),
        "timestamp",
    )


def aggregated(fields: DataFrame) -> DataFrame:
    return fields.groupBy("category").agg(
        F.count(F.lit(1)).alias("events"),
        F.sum("bytes").alias("bytes"),
        F.approx_count_distinct("user").alias("users"),
        F.min("timestamp").alias("first"),
        F.max("timestamp").alias("last"),
    )


def as_records(aggregates: DataFrame) -> DataFrame:
    """Kafka records: the category as key, the aggregate as JSON value."""
    return aggregates.select(
        F.col("category").cast("binary").alias("key"),
        F.to_json(F.struct(*aggregates.columns)).cast("binary").alias("value"),
    )


def run(
    spark: SparkSession,
    settings: JobSettings,
    topic: str = TOPIC,
    output_topic: str = OUTPUT_TOPIC,
) -> JobResult:
    """Read `settings.records` events of `topic`, write their aggregates to `output_topic`
    (one partition); details hold how many aggregate records were written."""
    register_formats(spark)
    shape = settings.topic(topic)
    if settings.bootstrap and settings.networked:
        check_source(settings.bootstrap, shape)
        ensure_topic(settings.bootstrap, output_topic, 1)
    connector = Connector.for_settings(settings)
    read = Observation(f"{NAME}-in")
    started = time.perf_counter()
    events = connector.read(spark, shape).observe(read, F.count(F.lit(1)).alias("rows"))
    output = as_records(aggregated(parsed(events)))
    # The aggregates (one per category) are collected, then written: Spark reports an
    # observation only for a query run by an action, and the JVM connector's batch write runs
    # its input query itself, so an observation under that write would never be reported.
    aggregates = output.collect()
    connector.write(spark.createDataFrame(aggregates, output.schema), output_topic)
    seconds = time.perf_counter() - started
    details = {"output_topic": output_topic, "output_rows": len(aggregates)}
    return JobResult.of(NAME, settings, read.get["rows"], seconds, details)


COMMAND = cli.JobCommand(NAME, __doc__, run, source_topic=TOPIC)

if __name__ == "__main__":
    sys.exit(cli.main(COMMAND))
