"""One Spark task's read, outside Spark: where a pykafka read's time goes. On one partition
of a source topic, side by side and interleaved, with CPU per row of this process (its
librdkafka threads included):

- `consume`: confluent-kafka's consume() alone, a Message object per record (the client's
  floor, with pykafka's consumer settings);
- `pykafka`: what a pykafka task does, consume() and Arrow batches of Spark's schema;
- `memrows`: the same Arrow batches from memory, as memrows makes them.

    python -m spark_tests.jobs.task_read --start-broker --records 400000 --record-size 1024
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence

import pyarrow as pa
from confluent_kafka import Consumer, TopicPartition

from nullbroker.spark.consumer import BATCH_ROWS, cyclic_gc_paused, read_range
from nullbroker.spark.offsets import OffsetRange
from nullbroker.spark.options import parse_read_options

from .broker import check_source
from .cli import add_broker_arguments, bootstrap_server, kafka_setting, positive_int
from .memory_source import MemoryTopic
from .settings import TopicShape

TOPIC = "task-read"
STAGES = ("consume", "pykafka", "memrows")
Stage = Callable[[], int]  # reads the partition's records, returns how many


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    shape = TopicShape(TOPIC, 1, args.records, args.record_size)
    with bootstrap_server(args, ["--source", shape.source_flag()]) as bootstrap:
        if bootstrap is None:
            raise SystemExit("give --bootstrap HOST:PORT or --start-broker")
        check_source(bootstrap, shape)
        stages = _stages(bootstrap, shape, dict(kafka_setting(text) for text in args.kafka_option))
        seconds: dict[str, list[tuple[float, float]]] = {name: [] for name in STAGES}
        for round_number in range(args.rounds):
            order = STAGES if round_number % 2 == 0 else tuple(reversed(STAGES))
            for name in order:
                seconds[name].append(_timed(stages[name], args.records))
    for name in STAGES:
        wall = statistics.median(w for w, _ in seconds[name])
        cpu = statistics.median(c for _, c in seconds[name])
        print(
            f"{name:8s} {args.records / wall:>11,.0f} rows/s  {cpu / args.records * 1e6:5.2f} µs "
            f"CPU/row  (median of {args.rounds}; {args.record_size} B values)",
            flush=True,
        )
    return 0


def _stages(bootstrap: str, shape: TopicShape, client: dict[str, str]) -> dict[str, Stage]:
    options = parse_read_options(
        {
            "kafka.bootstrap.servers": bootstrap,
            "assign": f'{{"{TOPIC}":[0]}}',
            **{f"kafka.{name}": value for name, value in client.items()},
        }
    )
    whole = OffsetRange(TOPIC, 0, 0, shape.records)
    memory = MemoryTopic(TOPIC, 1, shape.records, shape.size, shape.key_size, start_ms=0)

    def consume() -> int:
        """As pykafka's task consumes, without building batches."""
        consumer = Consumer(options.consumer_config(shape.records))
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        read = 0
        try:
            while read < shape.records:
                with cyclic_gc_paused():
                    read += len(consumer.consume(min(BATCH_ROWS, shape.records - read), 1.0))
        finally:
            consumer.close()
        return read

    def rows(batches: Iterator[pa.RecordBatch]) -> int:
        return sum(batch.num_rows for batch in batches)

    return {
        "consume": consume,
        "pykafka": lambda: rows(read_range(whole, options)),
        "memrows": lambda: rows(memory.batches(whole)),
    }


def _timed(stage: Stage, records: int) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    read = stage()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if read != records:
        raise SystemExit(f"read {read} records, not {records}")
    return wall, cpu


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m spark_tests.jobs.task_read",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_broker_arguments(parser)
    parser.add_argument("--records", type=positive_int, default=400_000, help="records to read")
    parser.add_argument(
        "--record-size", type=positive_int, default=1024, help="value bytes per record"
    )
    parser.add_argument("--rounds", type=positive_int, default=5, help="runs of each stage")
    return parser


if __name__ == "__main__":
    sys.exit(main())
