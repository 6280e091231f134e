"""A Python twin of Kafka's kafka-consumer-perf-test, on confluent-kafka (librdkafka).

Same flags (Kafka 4.2 names and the older ones) and the same output: a header and one line
(each shown here on two),

    start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
        rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    2026-01-01 12:00:00:000, 2026-01-01 12:00:01:234, 97.6563, 79.1380, 100000, 81037.2771,
        0, 1234, 79.1380, 81037.2771

or, with --show-detailed-stats, one line per --reporting-interval. MB is 2^20 bytes of keys
and values; rebalance.time.ms is the time spent joining the group; fetch.time.ms is the rest.
The run ends after --num-records/--messages records (counting, as Kafka does, every record
of the last consume() call, so a few more may be read), or --timeout ms without a record.

--assign: read every partition of --topic from the beginning (the end with --from-latest)
with assign(), without joining a group: no FindCoordinator, JoinGroup, SyncGroup or commits,
and rebalance.time.ms is 0. It measures Fetch alone, on any broker, and reads from brokers
that have no group coordinator.

--topic may name several topics separated by commas, read together (Kafka's tool takes one):
a broker that keeps only a few MiB per partition, as librdkafka's mock does, holds a
workload of hundreds of MiB only spread over many topics. --json also records the tool's own
CPU time while it reads (process_cpu_s, librdkafka's threads included; thread_cpu_s, the
Python thread's alone), to tell when the client is the bottleneck.

As with the producer twin, Java property names are mapped to librdkafka's (see
perf/kafka_tools.py); max.poll.records sets how many records one consume() call returns
(default 500, Java's). The tool sets what Kafka's does: group.id (--group),
socket.receive.buffer.bytes (--socket-buffer-size, 2 MiB), max.partition.fetch.bytes
(--fetch-size, 1 MiB), auto.offset.reset (earliest, or latest with --from-latest),
check.crcs=false and client.id=perf-consumer-client.
"""

from __future__ import annotations

import argparse
import datetime
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import confluent_kafka
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

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

MB = 1024 * 1024
POLL_TIMEOUT_S = 0.1
DEFAULT_MAX_POLL_RECORDS = 500
METADATA_TIMEOUT_S = 10.0
METRICS_INTERVAL_MS = 1000
HEADER_FIELDS = ", rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"


def now_ms() -> int:
    """Wall-clock milliseconds, as Kafka's tool reads System.currentTimeMillis()."""
    return time.time_ns() // 1_000_000


def kafka_date(ms: int) -> str:
    """Kafka's default --date-format, yyyy-MM-dd HH:mm:ss:SSS, in local time."""
    moment = datetime.datetime.fromtimestamp(ms / 1000)
    return f"{moment:%Y-%m-%d %H:%M:%S}:{ms % 1000:03d}"


def print_header(detailed: bool, out: TextIO) -> None:
    if detailed:
        print(
            "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec"
            + HEADER_FIELDS,
            file=out,
        )
    else:
        print(
            "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec"
            + HEADER_FIELDS,
            file=out,
        )


@dataclass(slots=True)
class Settings:
    """The command line, checked and turned into a librdkafka configuration."""

    topic: str
    """As given: one topic, or several separated by commas."""
    num_records: int
    timeout_ms: int
    reporting_interval_ms: int
    detailed: bool
    hide_header: bool
    assign: bool
    from_latest: bool
    batch: int
    print_metrics: bool
    config: dict[str, str]
    json_path: Path | None

    @property
    def topics(self) -> list[str]:
        return [name.strip() for name in self.topic.split(",") if name.strip()]


def settings(args: argparse.Namespace, warn: TextIO) -> Settings:
    """Check the flags as Kafka's ConsumerPerfOptions does; ToolError for what is wrong."""
    if (args.messages is None) == (args.num_records is None):
        raise ToolError("exactly one of --num-records and --messages is required")
    num_records = args.messages if args.messages is not None else args.num_records
    if args.reporting_interval <= 0:
        raise ToolError("Reporting interval must be greater than 0.")
    if args.timeout < 0:
        raise ToolError("--timeout must not be negative")
    if args.consumer_config is not None and args.command_config is not None:
        raise ToolError("--consumer.config and --command-config cannot be given together")

    props: dict[str, str] = {}
    config_file = args.command_config or args.consumer_config
    if config_file is not None:
        props.update(load_properties(config_file))
    props.update(parse_key_values(args.command_property))
    batch = int_property(props, "max.poll.records", DEFAULT_MAX_POLL_RECORDS)
    if batch <= 0:
        raise ToolError("max.poll.records must be greater than 0")
    # What Kafka's tool sets over the properties, whatever they say.
    props.update(
        {
            "bootstrap.servers": args.bootstrap_server,
            "group.id": args.group,
            "receive.buffer.bytes": str(args.socket_buffer_size),
            "max.partition.fetch.bytes": str(args.fetch_size),
            "auto.offset.reset": "latest" if args.from_latest else "earliest",
            "check.crcs": "false",
        }
    )
    props.setdefault("client.id", "perf-consumer-client")
    if args.assign:
        # No group to commit to: committing would look for a coordinator for nothing.
        props.setdefault("enable.auto.commit", "false")
    if args.print_metrics:
        props.setdefault("statistics.interval.ms", str(METRICS_INTERVAL_MS))
    return Settings(
        topic=args.topic,
        num_records=num_records,
        timeout_ms=args.timeout,
        reporting_interval_ms=args.reporting_interval,
        detailed=args.show_detailed_stats,
        hide_header=args.hide_header,
        assign=args.assign,
        from_latest=args.from_latest,
        batch=batch,
        print_metrics=args.print_metrics,
        config=to_librdkafka(props, warn),
        json_path=args.json,
    )


class Run:
    """One perf test: the consumer, what it read, and its time in group rebalances."""

    def __init__(self, plan: Settings, out: TextIO, warn: TextIO) -> None:
        self.plan = plan
        self.out = out
        self.warn = warn
        self.join_ms = 0
        self.join_ms_in_round = 0
        self.join_start_ms = 0
        self.assigned: set[tuple[str, int]] = set()
        self.statistics: str | None = None
        self.statistics_at = 0
        config: dict[str, Any] = dict(plan.config)
        if plan.print_metrics:
            config["stats_cb"] = self._on_statistics
        self.consumer = confluent_kafka.Consumer(config)

    def _on_statistics(self, statistics: str) -> None:
        self.statistics = statistics
        self.statistics_at = time.monotonic_ns()

    # Kafka's ConsumerPerfRebListener: time from (re)joining to the first assignment.
    def _on_assign(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        if not self.assigned:
            elapsed = now_ms() - self.join_start_ms
            self.join_ms += elapsed
            self.join_ms_in_round += elapsed
        self.assigned.update((tp.topic, tp.partition) for tp in partitions)

    def _on_revoke(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        self.assigned.difference_update((tp.topic, tp.partition) for tp in partitions)
        if not self.assigned:
            self.join_start_ms = now_ms()

    def _assign_all(self) -> None:
        """Every partition of the topics, from the beginning (or the end), no group."""
        offset = OFFSET_END if self.plan.from_latest else OFFSET_BEGINNING
        assignment: list[TopicPartition] = []
        for name in self.plan.topics:
            metadata = self.consumer.list_topics(name, timeout=METADATA_TIMEOUT_S)
            topic = metadata.topics.get(name)
            if topic is None or topic.error is not None or not topic.partitions:
                why = topic.error if topic is not None and topic.error else "no partitions"
                raise ToolError(f"cannot assign topic {name}: {why}")
            assignment.extend(
                TopicPartition(name, partition, offset) for partition in topic.partitions
            )
        self.consumer.assign(assignment)

    def consume(self, start_ms: int) -> tuple[int, int]:
        """Read until --num-records, or --timeout ms without a record; (records, bytes)."""
        plan, consumer = self.plan, self.consumer
        self.join_start_ms = start_ms
        if plan.assign:
            self._assign_all()
        else:
            consumer.subscribe(plan.topics, on_assign=self._on_assign, on_revoke=self._on_revoke)
        records = bytes_read = last_records = last_bytes = 0
        current_ms = now_ms()
        last_report_ms = last_consumed_ms = current_ms
        batch, consume = plan.batch, consumer.consume
        # Bounded: each pass either reads records (at most --num-records in all) or moves
        # the clock towards --timeout.
        while records < plan.num_records and current_ms - last_consumed_ms <= plan.timeout_ms:
            messages = consume(batch, POLL_TIMEOUT_S)
            current_ms = now_ms()
            if not messages:
                continue
            last_consumed_ms = current_ms
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                        continue
                    if (
                        not plan.assign
                        and error.code() == confluent_kafka.KafkaError._UNSUPPORTED_FEATURE
                    ):
                        raise ToolError(
                            f"{error.str()}: the broker cannot run a consumer group; "
                            "read without one with --assign"
                        )
                    raise confluent_kafka.KafkaException(error)
                records += 1
                key = message.key()
                bytes_read += len(message) + (len(key) if key is not None else 0)
            if current_ms - last_report_ms >= plan.reporting_interval_ms:
                if plan.detailed:
                    self._print_progress(
                        bytes_read, last_bytes, records, last_records, last_report_ms, current_ms
                    )
                self.join_ms_in_round = 0
                last_report_ms, last_records, last_bytes = current_ms, records, bytes_read
        if records < plan.num_records:
            print(
                "WARNING: Exiting before consuming the expected number of records: timeout "
                f"({plan.timeout_ms} ms) exceeded. You can use the --timeout option to increase "
                "the timeout.",
                file=self.out,
            )
        return records, bytes_read

    def _print_progress(
        self,
        bytes_read: int,
        last_bytes: int,
        records: int,
        last_records: int,
        start_ms: int,
        end_ms: int,
    ) -> None:
        elapsed_ms = end_ms - start_ms
        interval_mb = (bytes_read - last_bytes) / MB
        fetch_ms = elapsed_ms - self.join_ms_in_round
        fetch_mb_per_sec = 0.0 if fetch_ms <= 0 else 1000 * interval_mb / fetch_ms
        fetch_records_per_sec = 0.0 if fetch_ms <= 0 else 1000 * (records - last_records) / fetch_ms
        print(
            f"{kafka_date(end_ms)}, 0, {bytes_read / MB:.4f}, "
            f"{java_double(divide(1000 * interval_mb, elapsed_ms), 4)}, {records}, "
            f"{java_double(divide(records - last_records, elapsed_ms) * 1000, 4)}, "
            f"{self.join_ms_in_round}, {fetch_ms}, {fetch_mb_per_sec:.4f}, "
            f"{fetch_records_per_sec:.4f}",
            file=self.out,
            flush=True,
        )

    def fresh_metrics(self) -> dict[str, float | int]:
        """librdkafka's statistics emitted after the run (waits one interval at most)."""
        ended_at = time.monotonic_ns()
        interval_s = int(self.plan.config["statistics.interval.ms"]) / 1000
        deadline = time.monotonic() + 2 * interval_s + 1
        while self.statistics_at < ended_at and time.monotonic() < deadline:
            self.consumer.poll(0.05)
        return flatten_statistics(self.statistics) if self.statistics else {}


def run(plan: Settings, out: TextIO = sys.stdout, warn: TextIO = sys.stderr) -> dict[str, Any]:
    """Consume, print Kafka's lines, and return the numbers for --json."""
    if not plan.hide_header:
        print_header(plan.detailed, out)
    perf = Run(plan, out, warn)
    try:
        start_ms = now_ms()
        cpu_start, thread_start = time.process_time(), time.thread_time()
        records, bytes_read = perf.consume(start_ms)
        end_ms = now_ms()
        cpu_s, thread_s = time.process_time() - cpu_start, time.thread_time() - thread_start
        metrics = perf.fresh_metrics() if plan.print_metrics else {}
    finally:
        perf.consumer.close()
    elapsed_s = (end_ms - start_ms) / 1000
    fetch_ms = end_ms - start_ms - perf.join_ms
    mb = bytes_read / MB
    numbers: dict[str, Any] = {
        "start_time": kafka_date(start_ms),
        "end_time": kafka_date(end_ms),
        "mb": mb,
        "mb_per_sec": divide(mb, elapsed_s),
        "records": records,
        "records_per_sec": divide(records, elapsed_s),
        "rebalance_time_ms": perf.join_ms,
        "fetch_time_ms": fetch_ms,
        "fetch_mb_per_sec": divide(mb, fetch_ms / 1000),
        "fetch_records_per_sec": divide(records, fetch_ms / 1000),
    }
    if not plan.detailed:
        print(
            f"{numbers['start_time']}, {numbers['end_time']}, {mb:.4f}, "
            f"{java_double(numbers['mb_per_sec'], 4)}, {records}, "
            f"{java_double(numbers['records_per_sec'], 4)}, {perf.join_ms}, {fetch_ms}, "
            f"{java_double(numbers['fetch_mb_per_sec'], 4)}, "
            f"{java_double(numbers['fetch_records_per_sec'], 4)}",
            file=out,
            flush=True,
        )
    if plan.print_metrics:
        print_metrics(metrics, out)
    return {
        "tool": "consumer_perf",
        "client": client_versions(),
        "topic": plan.topic,
        "num_records": plan.num_records,
        "mode": "assign" if plan.assign else "subscribe",
        **numbers,
        "bytes": bytes_read,
        "elapsed_s": elapsed_s,
        "timed_out": records < plan.num_records,
        "process_cpu_s": cpu_s,
        "thread_cpu_s": thread_s,
        "config": redacted(plan.config),
    }


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="python -m perf.consumer_perf",
        description=wrapped(
            "kafka-consumer-perf-test on confluent-kafka: read --num-records records from "
            "--topic and print the throughput. Joins group --group with subscribe(), or with "
            "--assign reads every partition without a group (the way to measure a broker "
            "without a group coordinator)."
        ),
        epilog=(
            "example (a synthetic source topic, read without a group):\n"
            "  .venv/bin/nullbroker serve \\\n"
            "      --source perf-src:partitions=4,records=250000,size=1024 &\n"
            "  .venv/bin/python -m perf.consumer_perf --bootstrap-server 127.0.0.1:9092 \\\n"
            "      --topic perf-src --num-records 1000000 --assign\n\n"
            + wrapped(
                "As Kafka's tool, it sets group.id, socket.receive.buffer.bytes "
                "(--socket-buffer-size), max.partition.fetch.bytes (--fetch-size), "
                "auto.offset.reset, check.crcs=false and client.id=perf-consumer-client; "
                "max.poll.records sets the records per consume() call (default 500)."
            )
            + "\n\n"
            + wrapped(MAPPING_HELP)
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT[,...]",
        help="REQUIRED: the broker(s) to connect to",
    )
    command.add_argument(
        "--topic",
        required=True,
        metavar="TOPIC[,TOPIC...]",
        help="the topic to read, or several separated by commas (read together)",
    )
    command.add_argument(
        "--num-records",
        type=int,
        metavar="COUNT",
        help="the number of records to read (Kafka 4.2 name)",
    )
    command.add_argument(
        "--messages",
        type=int,
        metavar="COUNT",
        help="the same as --num-records (the name before Kafka 4.2)",
    )
    command.add_argument(
        "--group",
        default=f"perf-consumer-{random.randrange(100_000)}",
        metavar="GID",
        help="the group id (default perf-consumer-<random>)",
    )
    command.add_argument(
        "--assign",
        action="store_true",
        help="assign all partitions of --topic instead of subscribing: no group join, no "
        "commits; measures Fetch alone (and reads from brokers without a group coordinator)",
    )
    command.add_argument(
        "--from-latest",
        action="store_true",
        help="with no committed offset, start at the log end instead of the beginning",
    )
    command.add_argument(
        "--timeout",
        type=int,
        nargs="?",
        const=10_000,
        default=10_000,
        metavar="MS",
        help="the longest time in ms without a record before giving up (default 10000)",
    )
    command.add_argument(
        "--command-property",
        nargs="+",
        default=[],
        action="extend",
        metavar="PROP=VALUE",
        help="consumer properties; they override --command-config / --consumer.config",
    )
    command.add_argument(
        "--command-config",
        type=Path,
        metavar="CONFIG-FILE",
        help="consumer properties file (Kafka 4.2 name)",
    )
    command.add_argument(
        "--consumer.config",
        dest="consumer_config",
        type=Path,
        metavar="CONFIG-FILE",
        help="the same as --command-config (the name before Kafka 4.2)",
    )
    command.add_argument(
        "--fetch-size",
        type=int,
        default=1024 * 1024,
        metavar="BYTES",
        help="max.partition.fetch.bytes (default 1048576)",
    )
    command.add_argument(
        "--socket-buffer-size",
        type=int,
        default=2 * 1024 * 1024,
        metavar="BYTES",
        help="TCP receive buffer size (default 2097152)",
    )
    command.add_argument(
        "--print-metrics",
        action="store_true",
        help="print librdkafka's statistics at the end, as Kafka's tool prints its metrics",
    )
    command.add_argument(
        "--show-detailed-stats",
        action="store_true",
        help="print a line per --reporting-interval instead of one at the end",
    )
    command.add_argument(
        "--reporting-interval",
        type=int,
        default=5000,
        metavar="MS",
        help="ms between --show-detailed-stats lines (default 5000)",
    )
    command.add_argument("--hide-header", action="store_true", help="do not print the header line")
    command.add_argument(
        "--json", type=Path, metavar="PATH", help="also write the final numbers as JSON to PATH"
    )
    return command


def main(argv: Sequence[str] | None = None) -> int:
    command = parser()
    args = command.parse_args(argv)
    try:
        plan = settings(args, sys.stderr)
    except ToolError as error:
        command.error(str(error))
    try:
        result = run(plan)
    except (ToolError, confluent_kafka.KafkaException) as error:
        print(f"consumer_perf: error: {error}", file=sys.stderr)
        return 1
    if plan.json_path is not None:
        write_json(plan.json_path, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
