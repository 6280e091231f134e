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
AWAIT_POLL_S = 0.02

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
    if settings.bootstrap and settings.networked:
        check_source(settings.bootstrap, shape)
    limit = max_offsets or max(settings.records // DEFAULT_BATCHES, 1)
    expected_batches = -(-settings.records // limit)
    if expected_batches > PROGRESS_KEPT:
        raise ValueError(
            f"{expected_batches} micro-batches: Spark reports only the last {PROGRESS_KEPT}; "
            "raise max_offsets"
        )
    connector = Connector.for_settings(settings)
    frame = connector.read_stream(spark, shape, limit)
    with tempfile.TemporaryDirectory(prefix="streaming-read-") as checkpoint:
        started = time.perf_counter()
        query = _start(frame, Path(checkpoint), on_batch, connector.endless)
        try:
            if connector.endless:
                _await_batches(query, expected_batches, timeout_s)
            elif not query.awaitTermination(timeout_s):
                raise TimeoutError(f"{NAME}: the query did not finish within {timeout_s} s")
        finally:
            query.stop()
        seconds = time.perf_counter() - started
        batches = _batches(query)[:expected_batches]
    rows = sum(batch["rows"] for batch in batches)
    return JobResult.of(NAME, settings, rows, seconds, _latency(batches, limit))


def _start(
    frame: DataFrame, checkpoint: Path, on_batch: OnBatch | None, endless: bool
) -> StreamingQuery:
    """availableNow: every record there when the query starts, then stop. A source without
    end (range's rate-micro-batch, which availableNow gives a single batch) runs batch after
    batch at once instead, until _await_batches stops it."""
    writer = frame.writeStream.option("checkpointLocation", str(checkpoint))
    writer = writer.foreachBatch(on_batch) if on_batch else writer.format("noop")
    if endless:
        return writer.trigger(processingTime="0 seconds").start()
    return writer.trigger(availableNow=True).start()


def _await_batches(query: StreamingQuery, count: int, timeout_s: float) -> None:
    """Until `count` micro-batches have finished (a batch reports its progress when done)."""
    deadline = time.monotonic() + timeout_s
    while True:
        progress = query.lastProgress
        if progress is not None and progress["batchId"] >= count - 1:
            return
        if query.exception() is not None or not query.isActive:
            raise RuntimeError(f"{NAME}: the query stopped early: {query.exception()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{NAME}: {count} micro-batches took over {timeout_s} s")
        time.sleep(AWAIT_POLL_S)


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
