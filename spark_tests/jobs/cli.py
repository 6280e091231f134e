"""The command line every job shares: sizes, connector, broker, runs, output.

    python -m spark_tests.jobs.<job> --bootstrap HOST:PORT --records N --record-size S \\
        --partitions P [--format pykafka|kafka|memory|range] [--start-broker] [--runs K] [--json]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import SparkSession

from nullbroker.app.launcher import start

from . import cpu
from .broker import broker_counts
from .result import JobResult, median_rows_per_s
from .session import build_session, jvm_kafka_missing_reason
from .settings import FORMATS, NO_NETWORK, JobSettings

WARMUP_RECORDS = 100_000


@dataclass(frozen=True)
class JobCommand:
    """A job as a command: `run(spark, settings, **options(args))`, the source topic it reads
    (declared to a broker it starts with --start-broker) and any arguments of its own."""

    name: str
    description: str
    run: Callable[..., JobResult]
    source_topic: str | None = None
    options: Callable[[argparse.Namespace], dict[str, Any]] = field(default=lambda args: {})
    add_arguments: Callable[[argparse.ArgumentParser], None] = field(default=lambda parser: None)

    def broker_flags(self, settings: JobSettings) -> list[str]:
        """`nullbroker serve` flags declaring the source topic this job reads, if any."""
        if self.source_topic is None:
            return []
        return ["--source", settings.topic(self.source_topic).source_flag()]

    def run_with(
        self, spark: SparkSession, settings: JobSettings, args: argparse.Namespace
    ) -> JobResult:
        """One run with the job's own command-line options."""
        return self.run(spark, settings, **self.options(args))


def main(job: JobCommand, argv: Sequence[str] | None = None) -> int:
    args = _parser(job).parse_args(argv)
    settings = settings_of(args, args.format)
    with job_environment(args, job.broker_flags(settings)) as (spark, bootstrap):
        settings = replace(settings, bootstrap=bootstrap)
        if args.warmup:
            warm_up(job, spark, settings, args)
        results = []
        for _ in range(args.runs):
            result = measured(job, spark, settings, args)
            results.append(result)
            print(result.as_json() if args.json else result.line(), flush=True)
        if args.runs > 1:
            median = median_rows_per_s(results)
            print(
                f"{job.name} [{settings.format}]: median of {args.runs} runs {median:,.0f} rows/s"
            )
    return 0


def settings_of(args: argparse.Namespace, format: str) -> JobSettings:
    """The sizes and client settings given on the command line, through `format`."""
    if args.bootstrap is None and not args.start_broker and format not in NO_NETWORK:
        raise SystemExit(
            "give --bootstrap HOST:PORT or --start-broker (or --format memory or range)"
        )
    try:
        return JobSettings(
            records=args.records,
            record_size=args.record_size,
            partitions=args.partitions,
            format=format,
            bootstrap=args.bootstrap,
            kafka_options=tuple(kafka_setting(text) for text in args.kafka_option),
        )
    except ValueError as error:
        raise SystemExit(str(error)) from None


@contextmanager
def job_environment(
    args: argparse.Namespace, broker_flags: Sequence[str]
) -> Iterator[tuple[SparkSession, str | None]]:
    """The SparkSession jobs run in (checked to have Spark's JVM connector for --format
    kafka), and the bootstrap server (see bootstrap_server)."""
    with bootstrap_server(args, broker_flags) as bootstrap:
        spark = build_session(args.packages, args.jars, *cluster_of(args))
        try:
            if args.format == "kafka" and (reason := jvm_kafka_missing_reason(spark)):
                raise SystemExit(f"--format kafka: {reason}")
            yield spark, bootstrap
        finally:
            spark.stop()


@contextmanager
def bootstrap_server(args: argparse.Namespace, broker_flags: Sequence[str]) -> Iterator[str | None]:
    """--bootstrap's server, or that of a broker started with `broker_flags` for
    --start-broker, whose counts are printed when it stops."""
    if not args.start_broker:
        yield args.bootstrap
        return
    # `nullbroker serve --listen 127.0.0.1:0 FLAGS`, no metrics listener; what it counted is
    # printed to stderr when it stops, at the block's end.
    with start(*broker_flags, *broker_cluster_flags(args), metrics=False) as broker:
        print(f"started nullbroker on {broker.bootstrap}", file=sys.stderr)
        yield broker.bootstrap
        print(broker_counts(broker.stop()), file=sys.stderr)


def warm_up(
    job: JobCommand, spark: SparkSession, settings: JobSettings, args: argparse.Namespace
) -> None:
    """The first job in a session pays for starting Python workers and for the JIT compiling
    the JVM's hot paths: a smaller run first, not reported."""
    limit = getattr(args, "warmup_records", None) or WARMUP_RECORDS
    job.run_with(spark, replace(settings, records=warmup_records(settings, limit)), args)


def measured(
    job: JobCommand,
    spark: SparkSession,
    settings: JobSettings,
    args: argparse.Namespace,
    broker: str | None = None,
) -> JobResult:
    """One run of `job`, with the machine's load (it is shared) and, with --cpu, the CPU
    seconds each role spent; `broker` names the broker the run used when two were started,
    and on a standalone cluster the application's executors count too (cpu.used)."""
    app = spark.sparkContext.applicationId
    before = cpu.snapshot(app) if args.cpu else {}
    result = job.run_with(spark, settings, args)
    details = {**result.details, "loadavg_1m": round(os.getloadavg()[0], 2)}
    if args.cpu:
        details["cpu_seconds"] = cpu.used(before, broker, app)
    return replace(result, details=details)


def positive_int(text: str) -> int:
    """An argparse type: a whole number above zero."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"wants a whole number above 0, not {text!r}")
    return value


def kafka_setting(text: str) -> tuple[str, str]:
    """`--kafka-option NAME=VALUE` as (NAME without any kafka. prefix, VALUE)."""
    name, equals, value = text.partition("=")
    if not equals or not name:
        raise SystemExit(f"--kafka-option wants NAME=VALUE, not {text!r}")
    return name.removeprefix("kafka."), value


def warmup_records(settings: JobSettings, limit: int) -> int:
    """A warm-up's rows: at most `limit` (and at most the run's), split evenly."""
    per_partition = min(settings.per_partition, limit // settings.partitions)
    return max(per_partition, 1) * settings.partitions


def _parser(job: JobCommand) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m spark_tests.jobs.{job.name}",
        description=job.description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_shared_arguments(parser)
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="pykafka",
        help="pykafka, kafka (Spark's JVM connector), memory (memrows: pykafka's no-network "
        "twin) or range (Spark's connector's: rows built in the JVM)",
    )
    parser.add_argument("--runs", type=positive_int, default=1, help="run the job this many times")
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="report CPU seconds of the JVM, Python workers, broker and driver per run",
    )
    parser.add_argument("--json", action="store_true", help="print each run as a JSON line")
    job.add_arguments(parser)
    return parser


def add_shared_arguments(parser: argparse.ArgumentParser) -> None:
    """What every job command takes: sizes, where the broker is, the warm-up, client
    settings and Spark's classpath."""
    add_broker_arguments(parser)
    add_cluster_arguments(parser)
    add_size_arguments(parser)
    parser.add_argument(
        "--no-warmup",
        dest="warmup",
        action="store_false",
        help=f"skip the unreported run of at most {WARMUP_RECORDS:,} rows before the runs",
    )
    add_warmup_records_argument(parser)
    parser.add_argument(
        "--packages",
        action="append",
        default=[],
        metavar="COORDINATES",
        help="spark.jars.packages, e.g. Spark's Kafka connector",
    )
    parser.add_argument(
        "--jars",
        action="append",
        default=[],
        metavar="PATH",
        help="spark.jars, e.g. Spark's Kafka connector and kafka-clients",
    )


def add_warmup_records_argument(parser: argparse.ArgumentParser) -> None:
    """--warmup-records: how big the unreported first run is."""
    parser.add_argument(
        "--warmup-records",
        type=positive_int,
        metavar="N",
        help=f"rows of the warm-up run (default {WARMUP_RECORDS:,}, at most the run's): on a "
        "cluster, whose executors are new JVMs for every application, the run's own size",
    )


def add_size_arguments(parser: argparse.ArgumentParser) -> None:
    """--records, --record-size and --partitions: what a job reads or writes."""
    parser.add_argument("--records", type=int, default=1_000_000, help="rows in all")
    parser.add_argument("--record-size", type=int, default=1024, help="value bytes per row")
    parser.add_argument("--partitions", type=int, default=4, help="topic partitions")


def add_broker_arguments(parser: argparse.ArgumentParser) -> None:
    """--bootstrap or --start-broker, and the client settings (--kafka-option)."""
    parser.add_argument("--bootstrap", metavar="HOST:PORT", help="the Kafka bootstrap server")
    parser.add_argument(
        "--start-broker",
        action="store_true",
        help="start `nullbroker serve` on a free port of 127.0.0.1 with the topics needed",
    )
    add_kafka_option_argument(parser)
    add_broker_cluster_arguments(parser)


def add_kafka_option_argument(parser: argparse.ArgumentParser) -> None:
    """--kafka-option NAME=VALUE, repeatable: client settings every executor's clients get."""
    parser.add_argument(
        "--kafka-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a Kafka client setting, passed as option kafka.NAME (repeatable)",
    )


def add_broker_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """--brokers and --processes: the broker --start-broker starts as a cluster."""
    parser.add_argument(
        "--brokers",
        type=positive_int,
        default=1,
        help="with --start-broker: nodes of the broker started (nullbroker's --brokers)",
    )
    parser.add_argument(
        "--processes",
        type=positive_int,
        default=1,
        help="with --start-broker: processes serving them (nullbroker's --processes)",
    )


def broker_cluster_flags(args: argparse.Namespace) -> list[str]:
    """The `nullbroker serve` flags of --brokers and --processes, none when not given."""
    flags = []
    if getattr(args, "brokers", 1) > 1:
        flags += ["--brokers", str(args.brokers)]
    if getattr(args, "processes", 1) > 1:
        flags += ["--processes", str(args.processes)]
    return flags


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """--master and --executors: where the job's SparkSession runs."""
    parser.add_argument(
        "--master",
        metavar="spark://HOST:PORT",
        help="run on this Spark standalone cluster (python -m spark_tests.jobs.standalone "
        "starts one) instead of local[2]",
    )
    parser.add_argument(
        "--executors",
        type=positive_int,
        help="with --master: this many one-core executors (spark.cores.max), waited for "
        "before the first job; default one per core the cluster has",
    )


def cluster_of(args: argparse.Namespace) -> tuple[str | None, int | None]:
    """(--master, --executors), or (None, None) for local[2]."""
    master = getattr(args, "master", None)
    if master is None and getattr(args, "executors", None) is not None:
        raise SystemExit("--executors needs --master")
    return master, getattr(args, "executors", None)


def connector_job_parser(
    module: str, description: str, bootstrap_help: str, start_help: str
) -> argparse.ArgumentParser:
    """The parser of a job that reads through Spark's connector only and has flags of its
    own: --bootstrap HOST:PORT or --start-broker, one of them required."""
    parser = argparse.ArgumentParser(
        prog=f"python -m spark_tests.jobs.{module}",
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--bootstrap", metavar="HOST:PORT", help=bootstrap_help)
    where.add_argument("--start-broker", action="store_true", help=start_help)
    parser.add_argument("--json", action="store_true", help="results as JSON objects")
    add_cluster_arguments(parser)
    add_broker_cluster_arguments(parser)
    return parser


@contextmanager
def connector_session(
    args: argparse.Namespace, broker_flags: Sequence[str], job: str
) -> Iterator[tuple[SparkSession, str]]:
    """A SparkSession with Spark's connector and --bootstrap's server, or that of a broker
    started with `broker_flags` for --start-broker; the command stops, saying why, when the
    connector is missing."""
    with bootstrap_server(args, broker_flags) as bootstrap:
        assert bootstrap is not None  # connector_job_parser requires one or the other
        spark = build_session((), (), *cluster_of(args))
        try:
            if reason := jvm_kafka_missing_reason(spark):
                raise SystemExit(f"{job} reads through Spark's connector: {reason}")
            yield spark, bootstrap
        finally:
            spark.stop()
