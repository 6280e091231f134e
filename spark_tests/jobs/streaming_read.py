"""Job (d), streaming: a source topic read in micro-batches of at most maxOffsetsPerTrigger
rows (trigger availableNow: every record there when the query starts, then stop) into the
`noop` sink. Reports rows/s over the query's wall time and each micro-batch's latency
(StreamingQueryProgress: triggerExecution ms, input rows).

    nullbroker serve --source 'baseline-stream:partitions=4,records=250000,size=1024,key-size=8'
    python -m spark_tests.jobs.streaming_read --bootstrap 127.0.0.1:9092 \\
        --records 1000000 --record-size 1024 --partitions 4 --max-offsets-per-trigger 100000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from . import cli
from .broker import check_source
from .connector import Connector
from .result import JobResult
from .session import register_formats
from .settings import JobSettings

NAME = "streaming_read"
TOPIC = "baseline-stream"
DEFAULT_BATCHES = 10
QUERY_TIMEOUT_S = 1800.0
# Spark keeps this many progress reports per query (spark.sql.streaming.numRecentProgressUpdates).
PROGRESS_KEPT = 100

OnBatch = Callable[[DataFrame, int], None]


def run(
    spark: SparkSession,
    settings: JobSettings,
    topic: str = TOPIC,
    max_offsets: int | None = None,
    on_batch: OnBatch | None = None,
    timeout_s: float = QUERY_TIMEOUT_S,
) -> JobResult:
    """Stream `topic` from its start into noop, or into `on_batch` (foreachBatch) when
    given; `max_offsets` defaults to a tenth of the records. The rows counted are the
    micro-batches' input rows as Spark reports them."""
    register_formats(spark)
    shape = settings.topic(topic)
    if settings.bootstrap and settings.format != "memory":
        check_source(settings.bootstrap, shape)
    limit = max_offsets or max(settings.records // DEFAULT_BATCHES, 1)
    expected_batches = -(-settings.records // limit)
    if expected_batches > PROGRESS_KEPT:
        raise ValueError(
            f"{expected_batches} micro-batches: Spark reports only the last {PROGRESS_KEPT}; "
            "raise max_offsets"
        )
    frame = Connector.for_settings(settings).read_stream(spark, shape, limit)
    with tempfile.TemporaryDirectory(prefix="streaming-read-") as checkpoint:
        started = time.perf_counter()
        query = _start(frame, Path(checkpoint), on_batch)
        try:
            if not query.awaitTermination(timeout_s):
                raise TimeoutError(f"{NAME}: the query did not finish within {timeout_s} s")
        finally:
            query.stop()
        seconds = time.perf_counter() - started
        batches = _batches(query)
    rows = sum(batch["rows"] for batch in batches)
    return JobResult.of(NAME, settings, rows, seconds, _latency(batches, limit))


def _start(frame: DataFrame, checkpoint: Path, on_batch: OnBatch | None) -> StreamingQuery:
    writer = frame.writeStream.option("checkpointLocation", str(checkpoint))
    writer = writer.foreachBatch(on_batch) if on_batch else writer.format("noop")
    return writer.trigger(availableNow=True).start()


def _batches(query: StreamingQuery) -> list[dict[str, int]]:
    """One entry per micro-batch: its id, input rows and triggerExecution ms."""
    by_id = {
        progress.batchId: {
            "batch": progress.batchId,
            "rows": progress.numInputRows,
            "ms": progress.durationMs.get("triggerExecution", 0),
        }
        for progress in query.recentProgress
    }
    return [by_id[batch] for batch in sorted(by_id)]


def _latency(batches: list[dict[str, int]], limit: int) -> dict[str, Any]:
    milliseconds = [batch["ms"] for batch in batches] or [0]
    return {
        "max_offsets_per_trigger": limit,
        "micro_batches": len(batches),
        "batch_ms_median": statistics.median(milliseconds),
        "batch_ms_max": max(milliseconds),
        "batches": batches,
    }


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-offsets-per-trigger",
        type=int,
        default=None,
        help=f"rows per micro-batch at most (default: records / {DEFAULT_BATCHES})",
    )


COMMAND = cli.JobCommand(
    name=NAME,
    description=__doc__,
    run=run,
    options=lambda args: {"max_offsets": args.max_offsets_per_trigger},
    source_topic=TOPIC,
    add_arguments=_add_arguments,
)

if __name__ == "__main__":
    sys.exit(cli.main(COMMAND))
