"""A Python twin of Kafka's kafka-producer-perf-test, on confluent-kafka (librdkafka).

Same flags (Kafka 4.2 names and the older ones), same loop (send, throttle like Kafka's
ThroughputThrottler, transactions every --transaction-duration-ms), same output lines:

    N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency.
    N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency, P ms 50th,
        P ms 95th, P ms 99th, P ms 99.9th.            (one line)

one every 5 s and one at the end. MB is 2^20 bytes. Latency runs from produce() to the
delivery report, as librdkafka measures it in microseconds (Message.latency()); unlike Kafka's
tool, which prints whole milliseconds, every latency is printed in ms with three decimals, since
against a sub-millisecond broker whole milliseconds say nothing.

Differences a user may notice, and why:
- The Java producer's defaults are applied where librdkafka's differ, so both tools send the
  same traffic: acks=all, enable.idempotence=true (when acks, retries and in-flight allow it,
  as Java 4.x decides), batch.size=16384, linger.ms=5, max.in.flight=5,
  delivery.timeout.ms=120000, buffer.memory=32 MiB, client.id=perf-producer-client. Any
  property given overrides them.
- Java property names are mapped to librdkafka's (see perf/kafka_tools.py): buffer.memory →
  queue.buffering.max.kbytes, max.request.size → message.max.bytes, receive/send.buffer.bytes
  → socket.*.buffer.bytes, compression.<codec>.level → compression.level; Java-only ones
  (serializers, partitioner.class, interceptors, ...) are dropped with a note. max.block.ms
  is honoured by the tool: how long a send waits for room in librdkafka's queue.
- Payloads: Kafka draws a fresh random A-Z payload per record. Drawing 1 KiB in Python would
  cost more than sending it, so the records cycle through up to 4096 distinct random A-Z
  payloads (64 MiB at most), cut from a random pool: the records of a batch still differ and
  compress like Kafka's.
- Delivery reports are served by a poll(0) after every send (and while throttled or waiting
  for room), so a record's latency ends when the report arrives, not at some later poll.
- --throughput 0 (Kafka: block forever) is refused.
- --json also records the tool's own CPU time while it sends (process_cpu_s, librdkafka's
  threads included; thread_cpu_s, the Python thread's alone), to tell when the client is
  the bottleneck.
"""

from __future__ import annotations

import argparse
import itertools
import random
import re
import sys
import time
import uuid
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

import confluent_kafka

from perf.kafka_tools import (
    MAPPING_HELP,
    ToolError,
    client_versions,
    divide,
    flatten_statistics,
    int_property,
    java_double,
    load_properties,
    parse_key_values,
    print_metrics,
    redacted,
    to_librdkafka,
    wrapped,
    write_json,
)

NS_PER_MS = 1_000_000
NS_PER_SEC = 1_000_000_000
MAX_SAMPLES = 500_000
DEFAULT_TRANSACTION_ID_PREFIX = "performance-producer-"
DEFAULT_TRANSACTION_DURATION_MS = 3000
DEFAULT_MAX_BLOCK_MS = 60_000
PAYLOAD_POOL_BYTES = 1 << 20
PAYLOAD_PICKS = 1 << 16
PAYLOAD_DISTINCT = 4096
PAYLOAD_MEMORY_BYTES = 64 << 20
METRICS_INTERVAL_MS = 1000
MB = 1024 * 1024

JAVA_PRODUCER_DEFAULTS: dict[str, str] = {
    "client.id": "perf-producer-client",
    "acks": "all",
    "batch.size": "16384",
    "linger.ms": "5",
    "max.in.flight.requests.per.connection": "5",
    "delivery.timeout.ms": "120000",
    "queue.buffering.max.kbytes": "32768",
}
"""Java 4.x producer defaults that librdkafka does not share (client.id is set by the tool)."""

_LETTERS = bytes(65 + i % 26 for i in range(256))


# -- statistics, as Kafka's ProducerPerformance.Stats keeps them (latencies in µs) -------------


@dataclass(slots=True)
class Window:
    """One printed interval, kept for --json."""

    records: int
    records_per_sec: float
    mb_per_sec: float
    avg_latency_ms: float
    max_latency_ms: float


class Stats:
    """Counts, latency sums and a sample of at most 500,000 latencies, printed per window
    and in total, as Kafka's tool does."""

    def __init__(
        self,
        num_records: int,
        steady_state: bool,
        reporting_interval_ms: int,
        out: TextIO,
    ) -> None:
        now = time.monotonic_ns()
        self.start = now
        self.window_start = now
        self.iteration = 0
        self.sampling = num_records // min(num_records, MAX_SAMPLES)
        self.latencies = array("q", bytes(8 * (num_records // self.sampling + 1)))
        self.index = 0
        self.count = 0
        self.bytes = 0
        self.max_latency = 0
        self.total_latency = 0
        self.window_count = 0
        self.window_max_latency = 0
        self.window_total_latency = 0
        self.window_bytes = 0
        self.reporting_interval_ns = reporting_interval_ms * NS_PER_MS
        self.steady_state = steady_state
        self.suppress_print = False
        self.out = out
        self.windows: list[Window] = []

    def record(self, latency_us: int, size: int, now_ns: int) -> None:
        self.count += 1
        self.bytes += size
        self.total_latency += latency_us
        if latency_us > self.max_latency:
            self.max_latency = latency_us
        self.window_count += 1
        self.window_bytes += size
        self.window_total_latency += latency_us
        if latency_us > self.window_max_latency:
            self.window_max_latency = latency_us
        if self.iteration % self.sampling == 0:
            self.latencies[self.index] = latency_us
            self.index += 1
        if now_ns - self.window_start >= self.reporting_interval_ns:
            if self.steady_state and self.count == self.window_count:
                print("In steady state.", file=self.out)
            if not self.suppress_print:
                self.print_window()
            self.new_window()
        self.iteration += 1

    def print_window(self) -> None:
        elapsed_s = (time.monotonic_ns() - self.window_start) / NS_PER_SEC
        window = Window(
            records=self.window_count,
            records_per_sec=divide(self.window_count, elapsed_s),
            mb_per_sec=divide(self.window_bytes / MB, elapsed_s),
            avg_latency_ms=divide(self.window_total_latency, self.window_count) / 1000,
            max_latency_ms=self.window_max_latency / 1000,
        )
        self.windows.append(window)
        print(
            f"{window.records} records sent, {java_double(window.records_per_sec, 1)} "
            f"records/sec ({java_double(window.mb_per_sec, 2)} MB/sec), "
            f"{java_double(window.avg_latency_ms, 3)} ms avg latency, "
            f"{window.max_latency_ms:.3f} ms max latency.",
            file=self.out,
            flush=True,
        )

    def new_window(self) -> None:
        self.window_start = time.monotonic_ns()
        self.window_count = 0
        self.window_max_latency = 0
        self.window_total_latency = 0
        self.window_bytes = 0

    def totals(self) -> dict[str, Any]:
        elapsed_s = (time.monotonic_ns() - self.start) / NS_PER_SEC
        size = min(self.index, len(self.latencies))
        sample = sorted(self.latencies[:size])
        # Kafka's percentile: the sorted sample at int(p * size) (a zero when nothing came).
        p50, p95, p99, p999 = (
            (sample[int(p * size)] if size else 0) / 1000 for p in (0.5, 0.95, 0.99, 0.999)
        )
        return {
            "records": self.count,
            "bytes": self.bytes,
            "elapsed_s": elapsed_s,
            "records_per_sec": divide(self.count, elapsed_s),
            "mb_per_sec": divide(self.bytes / MB, elapsed_s),
            "avg_latency_ms": divide(self.total_latency, self.count) / 1000,
            "max_latency_ms": self.max_latency / 1000,
            "p50_ms": p50,
            "p95_ms": p95,
            "p99_ms": p99,
            "p999_ms": p999,
        }

    def print_total(self) -> dict[str, Any]:
        numbers = self.totals()
        print(
            f"{numbers['records']}{' steady state' if self.steady_state else ''} records sent, "
            f"{java_double(numbers['records_per_sec'], 6)} records/sec "
            f"({java_double(numbers['mb_per_sec'], 2)} MB/sec), "
            f"{java_double(numbers['avg_latency_ms'], 3)} ms avg latency, "
            f"{numbers['max_latency_ms']:.3f} ms max latency, "
            f"{numbers['p50_ms']:.3f} ms 50th, {numbers['p95_ms']:.3f} ms 95th, "
            f"{numbers['p99_ms']:.3f} ms 99th, {numbers['p999_ms']:.3f} ms 99.9th.",
            file=self.out,
            flush=True,
        )
        return numbers

    def suppress_printing(self) -> None:
        self.suppress_print = True


# -- Kafka's ThroughputThrottler ---------------------------------------------------------------

MIN_SLEEP_NS = 2 * NS_PER_MS


class ThroughputThrottler:
    """Sleeps, on average, 1/target seconds per record sent once ahead of the target rate,
    in naps of at least 2 ms, as Kafka's ThroughputThrottler. The nap is `wait(seconds)`:
    the producer's poll(), so delivery reports are served on time while throttled."""

    def __init__(self, target: float, start_ms: int, wait: Callable[[float], object]) -> None:
        self.start_ms = start_ms
        self.target = target
        self.sleep_time_ns = int(NS_PER_SEC / target) if target > 0 else sys.maxsize
        self.sleep_deficit_ns = 0
        self.wait = wait

    def should_throttle(self, amount_so_far: int, send_start_ms: int) -> bool:
        if self.target < 0:
            return False
        elapsed_s = (send_start_ms - self.start_ms) / 1000
        return elapsed_s > 0 and amount_so_far / elapsed_s > self.target

    def throttle(self) -> None:
        self.sleep_deficit_ns += self.sleep_time_ns
        if self.sleep_deficit_ns < MIN_SLEEP_NS:
            return
        start = time.monotonic_ns()
        remaining = self.sleep_deficit_ns
        # Bounded by time: each pass ends with less of the deficit left.
        while remaining > 0:
            self.wait(remaining / NS_PER_SEC)
            remaining = self.sleep_deficit_ns - (time.monotonic_ns() - start)
        self.sleep_deficit_ns = 0


# -- payloads ----------------------------------------------------------------------------------


def random_payloads(record_size: int, seed: int = 0) -> Iterator[bytes]:
    """Endless random A-Z payloads of `record_size` bytes, cycling through up to 4096
    distinct ones (64 MiB at most) cut from a random pool at random offsets: records of a batch
    differ and compress like Kafka's, which draws every payload afresh, a cost Python cannot
    afford per record."""
    generator = random.Random(seed)
    pool = generator.randbytes(PAYLOAD_POOL_BYTES + record_size).translate(_LETTERS)
    distinct = max(1, min(PAYLOAD_DISTINCT, PAYLOAD_MEMORY_BYTES // record_size))
    offsets = (generator.randrange(PAYLOAD_POOL_BYTES) for _ in range(distinct))
    return itertools.cycle([pool[offset : offset + record_size] for offset in offsets])


def file_payloads(payloads: Sequence[bytes], seed: int = 0) -> Iterator[bytes]:
    """Payloads drawn at random from the file's, as Kafka does (indices pre-drawn)."""
    generator = random.Random(seed)
    picks = [generator.randrange(len(payloads)) for _ in range(PAYLOAD_PICKS)]
    return (payloads[index] for index in itertools.cycle(picks))


def monotonic_payloads() -> Iterator[bytes]:
    return (str(value).encode() for value in itertools.count())


def read_payload_file(path: Path, delimiter: str, out: TextIO) -> list[bytes]:
    """The file split at `delimiter` (a regular expression, as Java's Scanner takes it)."""
    print(f"Reading payloads from: {path.resolve()}", file=out)
    if not path.is_file() or path.stat().st_size == 0:
        raise ToolError("File does not exist or empty file provided.")
    text = path.read_text(encoding="utf-8")
    payloads = [piece.encode() for piece in re.split(delimiter, text) if piece]
    print(f"Number of messages read: {len(payloads)}", file=out)
    if not payloads:
        raise ToolError("File does not exist or empty file provided.")
    return payloads


# -- configuration -----------------------------------------------------------------------------


@dataclass(slots=True)
class Settings:
    """The command line, checked and turned into a librdkafka configuration."""

    topic: str
    num_records: int
    warmup_records: int
    payloads: Iterator[bytes]
    record_size: int | None
    throughput: float
    config: dict[str, str]
    max_block_ms: int
    transactional: bool
    transaction_duration_ms: int
    print_metrics: bool
    reporting_interval_ms: int
    json_path: Path | None


def producer_config(props: dict[str, str], warn: TextIO) -> dict[str, str]:
    """librdkafka config: Java's defaults where librdkafka's differ, then the given props."""
    given = to_librdkafka(props, warn)
    config = dict(JAVA_PRODUCER_DEFAULTS)
    if "enable.idempotence" not in given:
        # Java 4.x turns idempotence on by default only when nothing conflicts with it.
        acks = given.get("acks", config["acks"]).strip().lower()
        in_flight = given.get("max.in.flight.requests.per.connection", "5").strip()
        config["enable.idempotence"] = str(
            acks in ("all", "-1")
            and in_flight.isdigit()
            and int(in_flight) <= 5
            and given.get("retries", "1").strip() != "0"
        ).lower()
    if "transactional.id" in given and "delivery.timeout.ms" not in given:
        # librdkafka refuses a delivery timeout longer than the transaction timeout
        # (Java's default 60 s): keep deliveries within a transaction's life.
        config["delivery.timeout.ms"] = given.get("transaction.timeout.ms", "60000")
    config.update(given)
    return config


def settings(args: argparse.Namespace, out: TextIO, warn: TextIO) -> Settings:
    """Check the flags as Kafka's ConfigPostProcessor does; ToolError for what is wrong."""
    if args.num_records <= 0:
        raise ToolError("--num-records should be greater than zero")
    warmup = max(args.warmup_records, 0)
    if warmup >= args.num_records:
        raise ToolError(
            "The value for --warmup-records must be strictly fewer than the number of records "
            "in the test, --num-records."
        )
    if args.record_size is not None and args.record_size <= 0:
        raise ToolError("--record-size should be greater than zero")
    if args.throughput == 0 or (args.throughput < 0 and args.throughput != -1):
        raise ToolError("--throughput must be a positive rate (records/sec) or -1 for unlimited")
    if args.transaction_duration_ms is not None and args.transaction_duration_ms <= 0:
        raise ToolError("--transaction-duration-ms should be greater than zero")
    if args.reporting_interval <= 0:
        raise ToolError("--reporting-interval must be greater than 0")

    if args.command_config is not None and args.producer_config is not None:
        raise ToolError("--producer.config and --command-config cannot be given together")
    props: dict[str, str] = {}
    config_file = args.command_config or args.producer_config
    if config_file is not None:
        props.update(load_properties(config_file))
    props.update(parse_key_values(args.producer_props + args.command_property))
    if args.bootstrap_server:
        props["bootstrap.servers"] = args.bootstrap_server
    if not props.get("bootstrap.servers"):
        raise ToolError(
            "no broker to send to: give --bootstrap-server, or bootstrap.servers with "
            "--command-property or in --producer.config"
        )
    max_block_ms = int_property(props, "max.block.ms", DEFAULT_MAX_BLOCK_MS)

    transactional = (
        args.transaction_duration_ms is not None
        or args.transactional_id is not None
        or "transactional.id" in props
    )
    if transactional:
        props["transactional.id"] = (
            args.transactional_id
            or props.get("transactional.id")
            or f"{DEFAULT_TRANSACTION_ID_PREFIX}{uuid.uuid4()}"
        )
    if args.print_metrics:
        props.setdefault("statistics.interval.ms", str(METRICS_INTERVAL_MS))

    if args.record_size is not None:
        payloads = random_payloads(args.record_size)
    elif args.payload_file is not None:
        delimiter = "\n" if args.payload_delimiter == "\\n" else args.payload_delimiter
        payloads = file_payloads(read_payload_file(args.payload_file, delimiter, out))
    else:
        payloads = monotonic_payloads()

    return Settings(
        topic=args.topic,
        num_records=args.num_records,
        warmup_records=warmup,
        payloads=payloads,
        record_size=args.record_size,
        throughput=args.throughput,
        config=producer_config(props, warn),
        max_block_ms=max_block_ms,
        transactional=transactional,
        transaction_duration_ms=args.transaction_duration_ms or DEFAULT_TRANSACTION_DURATION_MS,
        print_metrics=args.print_metrics,
        reporting_interval_ms=args.reporting_interval,
        json_path=args.json,
    )


# -- the run -----------------------------------------------------------------------------------


def now_ms() -> int:
    return time.monotonic_ns() // NS_PER_MS


class Run:
    """One perf test: the producer, its statistics and its failures."""

    stats: Stats
    """Every record's; made by execute() just before the first send, as Kafka's tool does."""

    def __init__(self, plan: Settings, out: TextIO, warn: TextIO) -> None:
        self.plan = plan
        self.out = out
        self.warn = warn
        self.failures = 0
        self.statistics: str | None = None
        self.statistics_at = 0
        self.steady: Stats | None = None
        config: dict[str, Any] = dict(plan.config)
        if plan.print_metrics:
            config["stats_cb"] = self._on_statistics
        self.producer = confluent_kafka.Producer(config)

    def _on_statistics(self, statistics: str) -> None:
        self.statistics = statistics
        self.statistics_at = time.monotonic_ns()

    def _delivered(self, error: confluent_kafka.KafkaError | None, message: Any) -> None:
        if error is not None:
            self._failed(f"delivery failed: {error}")
            return
        self.stats.record(int(message.latency() * 1e6), len(message), time.monotonic_ns())

    def _delivered_steady(self, error: confluent_kafka.KafkaError | None, message: Any) -> None:
        if error is not None:
            self._failed(f"delivery failed: {error}")
            return
        latency_us, size, now = int(message.latency() * 1e6), len(message), time.monotonic_ns()
        self.stats.record(latency_us, size, now)
        assert self.steady is not None
        self.steady.record(latency_us, size, now)

    def _failed(self, why: str) -> None:
        # Kafka prints each failure's stack trace and does not count the record as sent.
        self.failures += 1
        print(f"producer_perf: {why}", file=self.warn)

    def _send_when_room(self, payload: bytes, on_delivery: Callable[..., None]) -> None:
        """Retry a produce() that found librdkafka's queue full, for up to max.block.ms, as
        Java's send() blocks."""
        producer, topic = self.producer, self.plan.topic
        deadline = time.monotonic() + self.plan.max_block_ms / 1000
        while True:
            producer.poll(0.01)  # serving delivery reports frees room
            try:
                producer.produce(topic, payload, on_delivery=on_delivery)
                return
            except BufferError:
                if time.monotonic() >= deadline:
                    self._failed(
                        f"record not sent: no room in the queue within max.block.ms "
                        f"({self.plan.max_block_ms} ms)"
                    )
                    return

    def execute(self) -> None:
        plan, producer = self.plan, self.producer
        # Java's initTransactions() and commitTransaction() block up to max.block.ms too.
        block_s = plan.max_block_ms / 1000
        if plan.transactional:
            producer.init_transactions(block_s)
        if plan.warmup_records > 0:
            print(
                f"Warmup first {plan.warmup_records} records. Steady state results will print "
                "after the complete test summary.",
                file=self.out,
            )
        self.stats = Stats(plan.num_records, False, plan.reporting_interval_ms, self.out)
        throttler = ThroughputThrottler(plan.throughput, now_ms(), producer.poll)
        # The loop does per record only what the flags need: every microsecond spent here is
        # a microsecond the producer is not measured.
        throttled, transactional = plan.throughput > 0, plan.transactional
        timed = throttled or transactional
        warmup_ends = plan.warmup_records if plan.warmup_records > 0 else -1
        on_delivery = self._delivered
        next_payload, produce, poll = plan.payloads.__next__, producer.produce, producer.poll
        topic = plan.topic
        transaction_size = 0
        transaction_start_ms = send_start_ms = 0
        for i in range(plan.num_records):
            payload = next_payload()
            if transactional and transaction_size == 0:
                producer.begin_transaction()
                transaction_start_ms = now_ms()
            if timed:
                send_start_ms = now_ms()
            if i == warmup_ends:
                self.steady = Stats(
                    plan.num_records - plan.warmup_records,
                    True,
                    plan.reporting_interval_ms,
                    self.out,
                )
                self.stats.suppress_printing()
                on_delivery = self._delivered_steady
            try:
                produce(topic, payload, on_delivery=on_delivery)
            except BufferError:
                self._send_when_room(payload, on_delivery)
            # Serve delivery reports now: latency is measured when they are served.
            poll(0)
            transaction_size += 1
            if (
                transactional
                and plan.transaction_duration_ms <= send_start_ms - transaction_start_ms
            ):
                producer.commit_transaction(block_s)
                transaction_size = 0
            if throttled and throttler.should_throttle(i, send_start_ms):
                throttler.throttle()
        if plan.transactional and transaction_size:
            producer.commit_transaction(block_s)
        self._flush()

    def _flush(self) -> None:
        """Wait for every delivery report, at most delivery.timeout.ms and a margin."""
        timeout_s = int(self.plan.config.get("delivery.timeout.ms", "120000")) / 1000 + 10
        left = self.producer.flush(timeout_s)
        if left:
            self._failed(f"{left} records still unacknowledged after {timeout_s:.0f} s")

    def fresh_metrics(self) -> dict[str, float | int]:
        """librdkafka's statistics emitted after the last delivery (waits one interval)."""
        flushed_at = time.monotonic_ns()
        interval_s = int(self.plan.config["statistics.interval.ms"]) / 1000
        deadline = time.monotonic() + 2 * interval_s + 1
        while self.statistics_at < flushed_at and time.monotonic() < deadline:
            self.producer.poll(0.05)
        return flatten_statistics(self.statistics) if self.statistics else {}


def run(plan: Settings, out: TextIO = sys.stdout, warn: TextIO = sys.stderr) -> dict[str, Any]:
    """Send the records, print Kafka's lines, and return the numbers for --json."""
    perf = Run(plan, out, warn)
    cpu_start, thread_start = time.process_time(), time.thread_time()
    perf.execute()
    cpu_s, thread_s = time.process_time() - cpu_start, time.thread_time() - thread_start
    totals = perf.stats.print_total()
    steady = perf.steady.print_total() if perf.steady is not None else None
    if plan.print_metrics:
        print_metrics(perf.fresh_metrics(), out)
    return {
        "tool": "producer_perf",
        "client": client_versions(),
        "topic": plan.topic,
        "num_records": plan.num_records,
        "record_size": plan.record_size,
        "target_throughput": plan.throughput,
        **totals,
        "failed": perf.failures,
        "process_cpu_s": cpu_s,
        "thread_cpu_s": thread_s,
        "steady_state": steady,
        "windows": [asdict(window) for window in perf.stats.windows]
        if perf.steady is None
        else [asdict(window) for window in perf.steady.windows],
        "config": redacted(plan.config),
    }


# -- command line ------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="python -m perf.producer_perf",
        description=wrapped(
            "kafka-producer-perf-test on confluent-kafka: send --num-records records to "
            "--topic, print a line every 5 s and a summary with latency percentiles. "
            "Latency is produce() to delivery report, in ms with decimals. Transactions are "
            "used when --transactional-id, --transaction-duration-ms or transactional.id is "
            "given."
        ),
        epilog=(
            "example (1 KiB records, unthrottled):\n"
            "  .venv/bin/python -m perf.producer_perf --bootstrap-server 127.0.0.1:9092 \\\n"
            "      --topic perf --num-records 1000000 --record-size 1024 --throughput -1 \\\n"
            "      --command-property linger.ms=5 batch.size=16384\n\n"
            + wrapped(
                "The Java producer's defaults are applied where librdkafka's differ: "
                + ", ".join(f"{key}={value}" for key, value in JAVA_PRODUCER_DEFAULTS.items())
                + ", enable.idempotence=true unless acks, retries or in-flight requests "
                "rule it out. max.block.ms bounds the wait for room in librdkafka's queue."
            )
            + "\n\n"
            + wrapped(MAPPING_HELP)
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument("--topic", required=True, metavar="TOPIC", help="produce to this topic")
    command.add_argument(
        "--num-records",
        required=True,
        type=int,
        metavar="NUM-RECORDS",
        help="number of records to produce",
    )
    payload = command.add_mutually_exclusive_group(required=True)
    payload.add_argument(
        "--record-size",
        type=int,
        metavar="RECORD-SIZE",
        help="record size in bytes (random A-Z values)",
    )
    payload.add_argument(
        "--payload-file",
        type=Path,
        metavar="PAYLOAD-FILE",
        help="UTF-8 file of payloads, split at --payload-delimiter; one is picked at random "
        "per record",
    )
    payload.add_argument(
        "--payload-monotonic",
        action="store_true",
        help="payload is the record's number (0, 1, 2, ...)",
    )
    command.add_argument(
        "--payload-delimiter",
        default="\\n",
        metavar="PAYLOAD-DELIMITER",
        help="regular expression splitting --payload-file (default: new line)",
    )
    command.add_argument(
        "--throughput",
        required=True,
        type=float,
        metavar="THROUGHPUT",
        help="throttle to about THROUGHPUT records/sec; -1 for no throttling",
    )
    command.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,...]",
        help="the broker(s) to connect to (overrides bootstrap.servers from properties)",
    )
    command.add_argument(
        "--command-property",
        nargs="+",
        default=[],
        action="extend",
        metavar="PROP=VALUE",
        help="producer properties (Kafka 4.2 name); they override --producer.config",
    )
    command.add_argument(
        "--producer-props",
        nargs="+",
        default=[],
        action="extend",
        metavar="PROP=VALUE",
        help="the same as --command-property (the name before Kafka 4.2)",
    )
    command.add_argument(
        "--command-config",
        type=Path,
        metavar="CONFIG-FILE",
        help="producer properties file (Kafka 4.2 name)",
    )
    command.add_argument(
        "--producer.config",
        dest="producer_config",
        type=Path,
        metavar="CONFIG-FILE",
        help="the same as --command-config (the name before Kafka 4.2)",
    )
    command.add_argument(
        "--warmup-records",
        type=int,
        default=0,
        metavar="WARMUP-RECORDS",
        help="records to leave out of a second, steady-state summary line (default 0)",
    )
    command.add_argument(
        "--transactional-id",
        metavar="TRANSACTIONAL-ID",
        help="send in transactions with this id (default when transactions are on: "
        f"{DEFAULT_TRANSACTION_ID_PREFIX}<uuid>)",
    )
    command.add_argument(
        "--transaction-duration-ms",
        type=int,
        metavar="TRANSACTION-DURATION",
        help="commit each transaction after this many ms (default "
        f"{DEFAULT_TRANSACTION_DURATION_MS} when transactions are on)",
    )
    command.add_argument(
        "--print-metrics",
        action="store_true",
        help="print librdkafka's statistics at the end, as Kafka's tool prints its metrics",
    )
    command.add_argument(
        "--reporting-interval",
        type=int,
        default=5000,
        metavar="MS",
        help="ms between progress lines (default 5000, Kafka's fixed interval)",
    )
    command.add_argument(
        "--json",
        type=Path,
        metavar="PATH",
        help="also write the final numbers (and each window's) as JSON to PATH",
    )
    return command


def main(argv: Sequence[str] | None = None) -> int:
    command = parser()
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments:
        command.print_help()
        return 0
    args = command.parse_args(arguments)
    try:
        plan = settings(args, sys.stdout, sys.stderr)
    except ToolError as error:
        command.error(str(error))
    try:
        result = run(plan)
    except confluent_kafka.KafkaException as error:
        print(f"producer_perf: error: {error}", file=sys.stderr)
        return 1
    if plan.json_path is not None:
        write_json(plan.json_path, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
