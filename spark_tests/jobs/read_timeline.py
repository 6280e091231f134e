"""The connector's read taken apart: `source_to_noop` through Spark's connector and through
`range` (the same rows built in the JVM), run after run side by side in one SparkSession,
with each run's task timeline from Spark's status store (spark_tests/jobs/timeline.py) and
what the broker did meanwhile: against nullbroker, the Fetches it held at the log end and
for how long, and the ListOffsets and Fetch requests it answered and its time on them;
against Apache Kafka 4.4.0 (--broker kafka: perf/kafka_broker.py, sent first the very
records nullbroker serves, as overhead --against kafka does), the timeline alone, to set
beside nullbroker's.

    python -m spark_tests.jobs.read_timeline --broker nullbroker --records 1000000 --runs 3
    python -m spark_tests.jobs.read_timeline --broker kafka --records 1000000 --runs 3
        [--master spark://HOST:PORT --executors 2] [--kafka-option fetch.max.wait.ms=10]
        [--tasks]  (every task's line, not only the medians)

Rounds alternate which format runs first; the ratio is the median of each round's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession

from nullbroker.app.launcher import start

from . import cli, client_log, source_to_noop
from .broker import fill_source
from .result import JobResult
from .session import build_session
from .settings import JobSettings
from .timeline import Timeline, job_group

FETCH_MAX_WAIT_MS = 500  # the Java consumer's default
# The broker's counters a run moves, by (metric, api): what the connector asked of it.
BROKER_COUNTERS = (
    ("nullbroker_request_held_seconds_count", "Fetch"),
    ("nullbroker_request_held_seconds_sum", "Fetch"),
    ("nullbroker_requests_total", "Fetch"),
    ("nullbroker_request_latency_seconds_sum", "Fetch"),
    ("nullbroker_requests_total", "ListOffsets"),
    ("nullbroker_request_latency_seconds_sum", "ListOffsets"),
)


@dataclass(frozen=True)
class Run:
    result: JobResult
    timeline: Timeline
    broker: dict[str, float]
    clients: dict[str, Any] = field(default_factory=dict)
    load: float = field(default_factory=lambda: round(os.getloadavg()[0], 2))

    def summary(self) -> dict[str, Any]:
        return {
            "format": self.result.format,
            "rows": self.result.rows,
            "seconds": round(self.result.seconds, 3),
            "rows_per_s": round(self.result.rows_per_s),
            **self.timeline.summary(),
            "loadavg_1m": self.load,
            **({"broker": self.broker} if self.broker else {}),
            **({"clients": self.clients} if self.clients else {}),
        }

    def text(self, tasks: bool) -> str:
        row = self.summary()
        line = (
            f"{self.result.line()}\n  tasks: {row['tasks']}, median {row['task_ms_median']:.0f}"
            f" ms (cpu {row['task_cpu_ms_median']:.0f}, wait {row['task_wait_ms_median']:.0f},"
            f" gc {row['task_gc_ms_median']:.0f}); jobs' span {row['span_ms']} ms, slots busy "
            f"{row['slots_busy']:.0%}; load {self.load}"
        )
        if self.broker:
            line += "\n  broker: " + broker_text(self.broker)
        if self.clients:
            line += "\n  clients: " + client_log.summary_text(self.clients)
        if tasks:
            line += "\n" + self.timeline.text()
        return line


def broker_text(counts: dict[str, float]) -> str:
    held, held_s = counts["held_fetches"], counts["held_seconds"]
    return (
        f"{held:.0f} Fetches held ({held_s:.2f} s in all), {counts['fetches']:.0f} Fetches "
        f"({counts['fetch_ms']:.0f} ms of broker time), {counts['list_offsets']:.0f} ListOffsets"
        f" ({counts['list_offsets_ms']:.0f} ms)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        twin = JobSettings(args.records, args.record_size, args.partitions, "range")
    except ValueError as error:
        raise SystemExit(str(error)) from None
    options = tuple(cli.kafka_setting(text) for text in args.kafka_option)
    settings = replace(twin, format="kafka", kafka_options=options)
    conf = {}
    if args.client_log:
        args.client_log.mkdir(parents=True, exist_ok=True)
        conf = client_log.session_conf(args.client_log)
    with started(args, settings) as (bootstrap, metrics_url):
        spark = build_session(master=args.master, executors=args.executors, conf=conf)
        try:
            kafka = replace(settings, bootstrap=bootstrap)
            if args.broker == "kafka":
                fill_source(bootstrap, settings.topic(source_to_noop.TOPIC))
            slots = args.executors or 2
            limit = args.warmup_records or cli.WARMUP_RECORDS
            for warm in (kafka, twin):  # the JIT warmed, not reported
                source_to_noop.run(spark, replace(warm, records=cli.warmup_records(warm, limit)))
            rounds = []
            for number in range(args.runs):
                order = (kafka, twin) if number % 2 == 0 else (twin, kafka)
                runs = {
                    s.format: measured(spark, s, metrics_url, slots, args.client_log) for s in order
                }
                rounds.append(runs)
                for run in runs.values():
                    print(f"round {number + 1}: {run.text(args.tasks)}", flush=True)
        finally:
            spark.stop()
    summary = summarize(args, rounds)
    print(json.dumps(summary) if args.json else summary_text(summary))
    if args.output:
        runs = [run.summary() for round_runs in rounds for run in round_runs.values()]
        args.output.write_text(json.dumps({"summary": summary, "runs": runs}, indent=2) + "\n")
    return 0


@contextmanager
def started(args: argparse.Namespace, settings: JobSettings) -> Iterator[tuple[str, str | None]]:
    """(bootstrap, /metrics URL) of the broker read from: a nullbroker serving the source
    topic, or Apache Kafka with none (fill_source writes it)."""
    if args.broker == "kafka":
        from perf.kafka_broker import KafkaBroker

        with (
            tempfile.TemporaryDirectory(prefix="read-timeline-kafka-") as workdir,
            KafkaBroker(Path(workdir)) as kafka,
        ):
            yield kafka.bootstrap, None
        return
    flags = source_to_noop.COMMAND.broker_flags(settings) + cli.broker_cluster_flags(args)
    with start(*flags) as broker:
        yield broker.bootstrap, broker.metrics_url


def measured(
    spark: SparkSession,
    settings: JobSettings,
    metrics_url: str | None,
    slots: int,
    log_folder: Path | None,
) -> Run:
    before = broker_counters(metrics_url) if settings.networked else {}
    log_from = client_log.log_size(log_folder) if log_folder else 0
    with job_group(spark) as group:
        result = source_to_noop.run(spark, settings)
    after = broker_counters(metrics_url) if settings.networked else {}
    clients = {}
    if log_folder and settings.networked:
        wait_ms = float(dict(settings.kafka_options).get("fetch.max.wait.ms", FETCH_MAX_WAIT_MS))
        clients = client_log.summary(client_log.requests(log_folder, log_from), wait_ms)
    return Run(result, Timeline.of(spark, group, slots), broker_delta(before, after), clients)


def broker_counters(metrics_url: str | None) -> dict[tuple[str, str], float]:
    if metrics_url is None:
        return {}
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, sample.labels.get("api", "")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if (sample.name, sample.labels.get("api", "")) in BROKER_COUNTERS
    }


def broker_delta(
    before: dict[tuple[str, str], float], after: dict[tuple[str, str], float]
) -> dict[str, float]:
    if not after:
        return {}

    def moved(key: tuple[str, str]) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)

    return {
        "held_fetches": moved(BROKER_COUNTERS[0]),
        "held_seconds": round(moved(BROKER_COUNTERS[1]), 3),
        "fetches": moved(BROKER_COUNTERS[2]),
        "fetch_ms": round(moved(BROKER_COUNTERS[3]) * 1000, 1),
        "list_offsets": moved(BROKER_COUNTERS[4]),
        "list_offsets_ms": round(moved(BROKER_COUNTERS[5]) * 1000, 1),
    }


def summarize(args: argparse.Namespace, rounds: list[dict[str, Run]]) -> dict[str, Any]:
    """Medians over the rounds of each format's figures, and of each round's ratio."""

    def median_of(format: str, key: str) -> float:
        return statistics.median(float(r[format].summary()[key]) for r in rounds)

    ratios = [r["kafka"].result.rows_per_s / r["range"].result.rows_per_s for r in rounds]
    keys = ("rows_per_s", "task_ms_median", "task_cpu_ms_median", "task_wait_ms_median")
    summary: dict[str, Any] = {
        "broker": args.broker,
        "master": args.master or "local[2]",
        "executors": args.executors,
        "kafka_options": dict(cli.kafka_setting(text) for text in args.kafka_option),
        "ratio": round(statistics.median(ratios), 3),
        "ratios": [round(ratio, 3) for ratio in ratios],
        **{
            f"{format}_{key}": median_of(format, key)
            for format in ("kafka", "range")
            for key in keys
        },
    }
    for side in ("broker", "clients"):
        for key in getattr(rounds[0]["kafka"], side):
            summary[f"{side}_{key}"] = statistics.median(
                getattr(r["kafka"], side)[key] for r in rounds
            )
    return summary


def summary_text(summary: dict[str, Any]) -> str:
    ratios = ", ".join(f"{ratio:.2f}" for ratio in summary["ratios"])
    text = (
        f"source_to_noop against {summary['broker']} on {summary['master']}, medians: "
        f"kafka {summary['kafka_rows_per_s']:,.0f} rows/s, range "
        f"{summary['range_rows_per_s']:,.0f} rows/s, ratio {summary['ratio']:.2f} ({ratios}); "
        f"a task: kafka {_task_text(summary, 'kafka')}, range {_task_text(summary, 'range')}"
    )
    if "broker_held_fetches" in summary:
        counts = {key.removeprefix("broker_"): value for key, value in summary.items()}
        text += "\nthe broker, per run: " + broker_text(counts)
    if "clients_consumers" in summary:
        counts = {key.removeprefix("clients_"): value for key, value in summary.items()}
        text += "\nthe consumers, per run: " + client_log.summary_text(counts)
    return text


def _task_text(summary: dict[str, Any], format: str) -> str:
    return (
        f"{summary[f'{format}_task_ms_median']:.0f} ms (cpu "
        f"{summary[f'{format}_task_cpu_ms_median']:.0f}, wait "
        f"{summary[f'{format}_task_wait_ms_median']:.0f})"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m spark_tests.jobs.read_timeline",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cli.add_size_arguments(parser)
    cli.add_warmup_records_argument(parser)
    cli.add_kafka_option_argument(parser)
    cli.add_broker_cluster_arguments(parser)
    cli.add_cluster_arguments(parser)
    parser.add_argument(
        "--broker",
        choices=("nullbroker", "kafka"),
        default="nullbroker",
        help="read from a nullbroker started here (default) or from Apache Kafka 4.4.0",
    )
    parser.add_argument("--runs", type=cli.positive_int, default=3, help="rounds (default 3)")
    parser.add_argument("--tasks", action="store_true", help="print every task of every run")
    parser.add_argument(
        "--client-log",
        type=Path,
        metavar="FOLDER",
        help="log every Kafka request of the consumers (kafka-clients at DEBUG, which slows "
        "them) to FOLDER and say where they waited: Fetches held, ListOffsets behind a Fetch",
    )
    parser.add_argument("--json", action="store_true", help="the summary as JSON")
    parser.add_argument(
        "--output", type=Path, metavar="PATH", help="write the summary and every run as JSON here"
    )
    return parser


if __name__ == "__main__":
    sys.exit(main())
