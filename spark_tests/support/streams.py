"""Helpers for the streaming tests: what each micro-batch delivered, and bounded waits for
queries and for a growing topic."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery

QUERY_TIMEOUT_S = 120.0
WAIT_TIMEOUT_S = 60.0

Position = tuple[int, int]  # (partition, offset)


class BatchLog:
    """What each micro-batch delivered, by batch id: a batch Spark runs again after a restart
    (planned but not committed before the stop) must deliver the same records."""

    def __init__(self) -> None:
        self.batches: dict[int, list[Position]] = {}

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        rows = sorted((row.partition, row.offset) for row in frame.collect())
        if batch_id in self.batches:
            assert rows == self.batches[batch_id], f"batch {batch_id} differs when run again"
        self.batches[batch_id] = rows

    def positions(self) -> list[Position]:
        return sorted(position for rows in self.batches.values() for position in rows)

    def end_offsets(self) -> dict[int, int]:
        ends: dict[int, int] = {}
        for partition, offset in self.positions():
            ends[partition] = max(ends.get(partition, 0), offset + 1)
        return ends


def into_log(
    frame: DataFrame, log: BatchLog, checkpoint: Path, **trigger: object
) -> StreamingQuery:
    return (
        frame.select("partition", "offset")
        .writeStream.foreachBatch(log)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger)  # type: ignore[arg-type]
        .start()
    )


def run_until_done(query: StreamingQuery) -> None:
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), "the query did not finish in time"
    finally:
        query.stop()


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def contiguous(ranges: dict[int, range]) -> list[Position]:
    return [(partition, offset) for partition, r in ranges.items() for offset in r]
