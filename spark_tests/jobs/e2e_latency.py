"""End-to-end latency through Spark: a confluent-kafka producer writes each record's send
time into its value at a steady rate, Spark's own Kafka connector reads the records back in
a streaming query (`readStream`, micro-batches as fast as they go, `foreachBatch` in the
driver), and a record's latency is the time the driver holds it minus the time it was sent.
The broker must keep what it was sent: start it with `--retain BYTES` (without, Fetch serves
synthetic records and the job stops, saying so).

    nullbroker serve --retain 67108864
    python -m spark_tests.jobs.e2e_latency --bootstrap 127.0.0.1:9092 --records 5000 --rate 1000

Reported: records sent and received (each once, or the job fails), latency percentiles in
ms (p50, p90, p99, max) and the rows/s Spark received over the run.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from typing import Any

from confluent_kafka import Producer
from pyspark.sql import DataFrame, SparkSession

from . import cli
from .broker import ensure_topic

RETAIN_BYTES = 64 * 1024 * 1024
WAIT_S = 120.0


class LatencyError(RuntimeError):
    """The records read back are not the records sent: the job's numbers would mislead."""


def run(
    spark: SparkSession, bootstrap: str, records: int, rate: float, partitions: int = 1
) -> dict[str, Any]:
    """Send `records` at `rate` records/s into a new topic while Spark reads it; the
    latencies of what Spark read back."""
    topic = f"e2e-latency-{uuid.uuid4().hex[:8]}"
    ensure_topic(bootstrap, topic, partitions)
    arrived: list[tuple[bytes, int]] = []

    def hold(frame: DataFrame, batch_id: int) -> None:
        values = [row.value for row in frame.select("value").collect()]
        now = time.time_ns()
        arrived.extend((bytes(value), now) for value in values)

    with tempfile.TemporaryDirectory(prefix="e2e-latency-") as checkpoint:
        query = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
            .writeStream.foreachBatch(hold)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="0 seconds")
            .start()
        )
        try:
            _wait(lambda: query.lastProgress is not None, "the streaming query's first batch")
            started = time.perf_counter()
            _send(bootstrap, topic, records, rate)
            _wait(lambda: len(arrived) >= records, f"{records} records read back")
            seconds = time.perf_counter() - started
        finally:
            query.stop()
    return _summary(arrived, records, seconds)


def _send(bootstrap: str, topic: str, records: int, rate: float) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    started = time.perf_counter()
    for index in range(records):
        pause = started + index / rate - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        producer.produce(topic, value=b"%d:%d" % (index, time.time_ns()))
        producer.poll(0)
    if producer.flush(30.0):
        raise LatencyError("the producer could not deliver every record within 30 s")


def _wait(done: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        if time.monotonic() > deadline:
            raise LatencyError(f"waited {WAIT_S:.0f} s for {what}")
        time.sleep(0.01)


def _summary(arrived: list[tuple[bytes, int]], records: int, seconds: float) -> dict[str, Any]:
    latencies_ms = []
    seen = set()
    for value, held_ns in arrived:
        try:
            index, sent_ns = map(int, value.split(b":"))
        except ValueError:
            raise LatencyError(
                f"read back {value[:20]!r}, not a record this job sent: start the broker "
                "with --retain BYTES so that Fetch serves what was produced"
            ) from None
        if index in seen:
            raise LatencyError(f"record {index} was read back twice")
        seen.add(index)
        latencies_ms.append((held_ns - sent_ns) / 1e6)
    if len(seen) != records:
        raise LatencyError(f"sent {records} records, read back {len(seen)}")
    cuts = statistics.quantiles(latencies_ms, n=100, method="inclusive")
    return {
        "job": "e2e_latency",
        "records": records,
        "rows_per_s": round(records / seconds),
        "p50_ms": round(cuts[49], 1),
        "p90_ms": round(cuts[89], 1),
        "p99_ms": round(cuts[98], 1),
        "max_ms": round(max(latencies_ms), 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = cli.connector_job_parser(
        "e2e_latency",
        __doc__ or "",
        "a broker started with --retain BYTES",
        f"start a nullbroker --retain {RETAIN_BYTES} on a free port of 127.0.0.1",
    )
    parser.add_argument("--records", type=int, default=5_000, help="records (default 5,000)")
    parser.add_argument("--rate", type=float, default=1_000, help="records/s (default 1,000)")
    parser.add_argument("--partitions", type=int, default=1, help="partitions (default 1)")
    args = parser.parse_args(argv)
    flags = ["--retain", str(RETAIN_BYTES)]
    with cli.connector_session(args, flags, "e2e_latency") as (spark, bootstrap):
        try:
            result = run(spark, bootstrap, args.records, args.rate, args.partitions)
        except LatencyError as error:
            raise SystemExit(f"e2e_latency: {error}") from None
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"e2e_latency: {result['records']:,} records at {args.rate:g}/s through Spark: "
            f"p50 {result['p50_ms']} ms, p90 {result['p90_ms']} ms, p99 {result['p99_ms']} ms, "
            f"max {result['max_ms']} ms; {result['rows_per_s']:,} rows/s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
