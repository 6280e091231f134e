"""The streaming query the cluster tests break: every record of a source topic, read by
Spark's Kafka connector in micro-batches on a standalone cluster, written as (partition,
offset) to a parquet file sink. The connector's offsets in the checkpoint and the file
sink's log make the output exactly once, however often Spark retries a task or runs a
batch again.

    python -m spark_tests.cluster.cluster_stream --master spark://127.0.0.1:PORT --bootstrap B \\
        --topic T --partitions 4 --max-offsets 20000 [--pause-at 5000] --output DIR

Prints a JSON line as each micro-batch completes (`{"batch": 3, "rows": 20000}`: the test
times its faults by them), and a last one with the application's executors (`{"executors":
3, "active": 2, "failed_tasks": 2}`); exits 0 once every record there when it started is
written (trigger availableNow), 1 if the query failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from spark_tests.jobs.session import build_session
from spark_tests.jobs.timeline import scala_list

QUERY_TIMEOUT_S = 240.0
PAUSE_MS = 1000
POLL_S = 0.05


def start(spark: SparkSession, args: argparse.Namespace) -> StreamingQuery:
    records = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("assign", json.dumps({args.topic: list(range(args.partitions))}))
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(args.max_offsets))
        .load()
    )
    return (
        records.select("partition", "offset", paused(args.pause_at).alias("paused"))
        .writeStream.format("parquet")
        .option("path", str(args.output / "data"))
        .option("checkpointLocation", str(args.output / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )


def paused(offsets: Sequence[int]) -> Column:
    """PAUSE_MS of sleep in the executor at the records of these offsets (in every
    partition), so that a fault can land while the tasks that read them run; a column of
    nulls (written with the rows, so that Spark cannot leave it out)."""
    if not offsets:
        return F.lit(None).cast("string")
    sleep = F.expr(f"reflect('java.lang.Thread', 'sleep', cast({PAUSE_MS} as bigint))")
    return F.when(F.col("offset").isin(*offsets), sleep)


def report_batches(query: StreamingQuery, timeout_s: float) -> None:
    """A line per completed micro-batch, in order, until the query ends."""
    deadline = time.monotonic() + timeout_s
    printed = -1
    while True:
        active = query.isActive  # before the progress: a batch that ends the query is printed
        for progress in query.recentProgress:
            if progress.batchId > printed:
                print(json.dumps({"batch": progress.batchId, "rows": progress.numInputRows}))
                printed = progress.batchId
        sys.stdout.flush()
        if not active:
            return
        if time.monotonic() > deadline:
            query.stop()
            raise TimeoutError(f"the query did not finish within {timeout_s:g} s")
        time.sleep(POLL_S)


def executors(spark: SparkSession) -> dict[str, int]:
    """The application's executors, those lost included, and its failed task attempts (a
    task that ran on an executor lost is one), from Spark's status store."""
    context = spark.sparkContext
    status = context._jsc.sc().statusStore()  # type: ignore[union-attr]
    every = scala_list(status.executorList(False))
    workers = [summary for summary in every if summary.id() != "driver"]
    no_quantiles = context._gateway.new_array(context._jvm.double, 0)  # type: ignore[union-attr]
    stages = scala_list(status.stageList(None, False, False, no_quantiles, None))
    return {
        "executors": len(workers),
        "active": sum(1 for summary in workers if summary.isActive()),
        "failed_tasks": sum(stage.numFailedTasks() for stage in stages),
    }


def written(spark: SparkSession, output: Path) -> list[list[int]]:
    """Every (partition, offset) the file sink holds, read back as Spark reads a sink's folder
    (its log names the files committed: a killed task's file is not among them), sorted."""
    rows = spark.read.parquet(str(output / "data")).select("partition", "offset").collect()
    return sorted([row.partition, row.offset] for row in rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--master", required=True)
    parser.add_argument("--executors", type=int, default=2)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--max-offsets", type=int, required=True)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument(
        "--pause-at",
        type=int,
        action="append",
        default=[],
        help=f"an offset whose record waits {PAUSE_MS} ms in the executor (repeatable)",
    )
    args = parser.parse_args(argv)
    spark = build_session(master=args.master, executors=args.executors)
    try:
        query = start(spark, args)
        report_batches(query, QUERY_TIMEOUT_S)
        print(json.dumps(executors(spark)), flush=True)
        if query.exception() is not None:
            print(f"the query failed: {query.exception()}", file=sys.stderr)
            return 1
        print(json.dumps({"written": written(spark, args.output)}), flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
