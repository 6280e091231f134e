"""The protocol overhead of each baseline job, measured side by side in one SparkSession:
each job's rows/s through Kafka divided by the same job with its Kafka source or sink
replaced by that connector's no-network twin (the same rows, no client, no socket, no
broker): for Spark's connector (--format kafka), `range`, the rows built in the JVM, with
writes to noop; for pykafka, memrows, the same planning and Arrow batches from memory.
Rounds alternate which runs first, so the JVM's warming and the machine's other load fall on
both; the ratio reported is the median of each round's ratio.

    python -m spark_tests.jobs.overhead --start-broker --format kafka \\
        --records 1000000 --record-size 1024 --partitions 4 --rounds 5 --output overhead.json

With --against kafka, each job runs instead against nullbroker and against Apache Kafka
4.4.0, both started by the command (Kafka as perf.kafka_broker starts it: one KRaft node,
broker and controller in one JVM with -Xmx1g, its log in a temporary folder on local disk,
Kafka's defaults otherwise), the source topics on Kafka sent the very records nullbroker
serves, and the report puts side by side each broker's rows/s, its CPU seconds and its
share of the whole run's CPU (Spark's JVM, the Python workers, the broker, the driver):
what the pipeline costs when the broker costs nothing, and what it costs with a real one.

    python -m spark_tests.jobs.overhead --against kafka --format kafka \\
        --records 1000000 --record-size 1024 --partitions 4 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from perf.kafka_broker import HEAP, KAFKA_VERSION

from . import cli, cpu, generate_to_kafka, pipeline, source_to_noop, streaming_read
from .broker import fill_source, started_kafka
from .result import JobResult, median_rows_per_s
from .settings import TWINS, JobSettings

JOBS = {
    job.NAME: job.COMMAND for job in (generate_to_kafka, source_to_noop, pipeline, streaming_read)
}
NULLBROKER = "nullbroker"
KAFKA = "kafka"
AGAINST = (KAFKA,)
"""The brokers --against can start beside nullbroker."""


@dataclass(frozen=True)
class Side:
    """One side of a comparison: its label, the settings its runs use, and the broker whose
    CPU is their `broker` role (None: any broker the command started)."""

    label: str
    settings: JobSettings
    broker: str | None = None


@dataclass(frozen=True)
class Overhead:
    """One job's runs through Kafka and through its no-network twin, round by round."""

    job: str
    kafka: list[JobResult]
    twin: list[JobResult]

    def ratios(self) -> list[float]:
        return _round_ratios(self.kafka, self.twin)

    def summary(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "kafka_format": self.kafka[0].format,
            "twin_format": self.twin[0].format,
            "kafka_rows_per_s": round(median_rows_per_s(self.kafka), 1),
            "twin_rows_per_s": round(median_rows_per_s(self.twin), 1),
            "ratio": round(statistics.median(self.ratios()), 3),
            "ratios": [round(ratio, 3) for ratio in self.ratios()],
            "kafka_cpu_s": _median_cpu(self.kafka),
            "twin_cpu_s": _median_cpu(self.twin),
            "broker_share": _median_broker_share(self.kafka),
        }


@dataclass(frozen=True)
class BrokerShare:
    """One job's runs against nullbroker and against Kafka, round by round."""

    job: str
    nullbroker: list[JobResult]
    kafka: list[JobResult]

    def summary(self) -> dict[str, Any]:
        ratios = _round_ratios(self.kafka, self.nullbroker)
        return {
            "job": self.job,
            "format": self.kafka[0].format,
            "nullbroker_rows_per_s": round(median_rows_per_s(self.nullbroker), 1),
            "kafka_rows_per_s": round(median_rows_per_s(self.kafka), 1),
            "ratio": round(statistics.median(ratios), 3),
            "ratios": [round(ratio, 3) for ratio in ratios],
            "nullbroker_cpu_s": _median_cpu(self.nullbroker),
            "kafka_cpu_s": _median_cpu(self.kafka),
            "nullbroker_broker_share": _median_broker_share(self.nullbroker),
            "kafka_broker_share": _median_broker_share(self.kafka),
        }


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.against and args.bootstrap:
        raise SystemExit(f"--against {args.against} starts both brokers: leave out --bootstrap")
    args.start_broker = args.start_broker or args.against is not None
    jobs = [JOBS[name] for name in args.jobs]
    args.cpu = True  # the CPU by role says what the ratio is made of
    kafka_settings = cli.settings_of(args, args.format)
    flags = [flag for job in jobs for flag in job.broker_flags(kafka_settings)]
    if args.against:
        return against_kafka(args, jobs, kafka_settings, flags)
    with cli.job_environment(args, flags) as (spark, bootstrap):
        twin = TWINS[args.format]
        sides = [
            Side(args.format, replace(kafka_settings, bootstrap=bootstrap)),
            Side(twin, cli.settings_of(args, twin)),
        ]
        runs = run_rounds(jobs, spark, sides, args)
    overheads = [
        Overhead(job.name, runs[job.name, args.format], runs[job.name, TWINS[args.format]])
        for job in jobs
    ]
    print(markdown_table(overheads))
    print(broker_shares_text(overheads))
    if args.output:
        Path(args.output).write_text(json.dumps(report(args, overheads), indent=2) + "\n")
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


def against_kafka(
    args: argparse.Namespace,
    jobs: Sequence[cli.JobCommand],
    settings: JobSettings,
    flags: Sequence[str],
) -> int:
    """Each job against nullbroker (declaring the source topics) and against a Kafka the
    command starts (sent the same records first, not measured), round by round."""
    with started_kafka(settings.partitions) as kafka:
        for job in jobs:
            if job.source_topic is not None:
                shape = settings.topic(job.source_topic)
                fill_source(kafka.bootstrap, shape)
                print(f"sent Kafka {shape.name}'s {settings.records:,} records", file=sys.stderr)
        with cli.job_environment(args, flags) as (spark, bootstrap):
            sides = [
                Side(NULLBROKER, replace(settings, bootstrap=bootstrap), NULLBROKER),
                Side(KAFKA, replace(settings, bootstrap=kafka.bootstrap), KAFKA),
            ]
            runs = run_rounds(jobs, spark, sides, args)
    shares = [
        BrokerShare(job.name, runs[job.name, NULLBROKER], runs[job.name, KAFKA]) for job in jobs
    ]
    print(shares_table(shares))
    if args.output:
        report = {
            "settings": {
                **_sizes(args),
                "format": args.format,
                "against": args.against,
                **_cluster_settings(args),
            },
            "kafka": {"version": KAFKA_VERSION, "heap": HEAP, "nodes": 1, "mode": "KRaft"},
            "jobs": [share.summary() for share in shares],
            "runs": [
                {"broker": side, **json.loads(result.as_json())}
                for share in shares
                for side, results in ((NULLBROKER, share.nullbroker), (KAFKA, share.kafka))
                for result in results
            ],
        }
        Path(args.output).write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


def run_rounds(
    jobs: Sequence[cli.JobCommand],
    spark: SparkSession,
    sides: Sequence[Side],
    args: argparse.Namespace,
) -> dict[tuple[str, str], list[JobResult]]:
    """Each job's warm-up on every side (unless --no-warmup), then --rounds rounds, each
    running every job on every side, the sides taking turns to go first: (job, side
    label) → its runs in round order."""
    if args.warmup:
        for job in jobs:
            for side in sides:
                cli.warm_up(job, spark, side.settings, args)
    runs: dict[tuple[str, str], list[JobResult]] = {}
    for round_number in range(args.rounds):
        order = list(sides) if round_number % 2 == 0 else list(reversed(sides))
        for job in jobs:
            for side in order:
                result = cli.measured(job, spark, side.settings, args, side.broker)
                runs.setdefault((job.name, side.label), []).append(result)
                against = f" against {side.broker}" if side.broker else ""
                print(f"round {round_number + 1}{against}: {result.line()}", flush=True)
    return runs


def shares_table(shares: Sequence[BrokerShare]) -> str:
    """rows/s against each broker, their ratio, each broker's share of the run's CPU and
    the CPU seconds by role of a run."""
    lines = [
        "| job | rows/s, nullbroker | rows/s, Kafka | Kafka / nullbroker (median; each "
        "round) | broker's share of the run's CPU, nullbroker / Kafka | CPU s, nullbroker "
        "run | CPU s, Kafka run |",
        "|---|---:|---:|---|---|---|---|",
    ]
    for row in (share.summary() for share in shares):
        lines.append(
            f"| {row['job']} [{row['format']}] | {row['nullbroker_rows_per_s']:,.0f} | "
            f"{row['kafka_rows_per_s']:,.0f} | {_ratio_text(row)} | "
            f"**{row['nullbroker_broker_share']:.0%} / {row['kafka_broker_share']:.0%}** | "
            f"{_cpu_text(row['nullbroker_cpu_s'])} | {_cpu_text(row['kafka_cpu_s'])} |"
        )
    return "\n".join(lines)


def markdown_table(overheads: Sequence[Overhead]) -> str:
    """rows/s through each connector, the ratio, and the CPU seconds by role of a run."""
    lines = [
        "| job | Kafka rows/s | no-network twin rows/s | ratio (median; each round) | "
        "CPU s, Kafka run | CPU s, twin run |",
        "|---|---:|---:|---|---|---|",
    ]
    for row in (overhead.summary() for overhead in overheads):
        lines.append(
            f"| {row['job']} [{row['kafka_format']}] | {row['kafka_rows_per_s']:,.0f} | "
            f"{row['twin_rows_per_s']:,.0f} [{row['twin_format']}] | {_ratio_text(row)} | "
            f"{_cpu_text(row['kafka_cpu_s'])} | {_cpu_text(row['twin_cpu_s'])} |"
        )
    return "\n".join(lines)


def report(args: argparse.Namespace, overheads: Sequence[Overhead]) -> dict[str, Any]:
    return {
        "settings": {
            **_sizes(args),
            "kafka_format": args.format,
            "twin_format": TWINS[args.format],
            **_cluster_settings(args),
        },
        "jobs": [overhead.summary() for overhead in overheads],
        "runs": [
            json.loads(result.as_json())
            for overhead in overheads
            for result in (*overhead.kafka, *overhead.twin)
        ],
    }


def broker_shares_text(overheads: Sequence[Overhead]) -> str:
    """`broker CPU share of the Kafka runs (median): generate_to_kafka 0.21, ...`."""
    shares = [
        f"{row['job']} {row['broker_share']:.2f}"
        if row["broker_share"] is not None
        else f"{row['job']} not measured"
        for row in (overhead.summary() for overhead in overheads)
    ]
    return f"broker CPU share of the Kafka runs (median): {', '.join(shares)}"


def _median_broker_share(results: Sequence[JobResult]) -> float | None:
    """The broker's part of each run's CPU, the median over the runs; None when the broker
    ran elsewhere (--bootstrap) and its CPU was not measured."""
    shares = [cpu.broker_share(result.details["cpu_seconds"]) for result in results]
    measured = [share for share in shares if share is not None]
    return round(statistics.median(measured), 3) if measured else None


def _cluster_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Where the jobs ran (a standalone master and its executors, or local[2]) and the
    broker --start-broker started (nodes, processes)."""
    return {
        "master": args.master or "local[2]",
        "executors": args.executors,
        "brokers": args.brokers,
        "broker_processes": args.processes,
    }


def _sizes(args: argparse.Namespace) -> dict[str, int]:
    return {
        "records": args.records,
        "record_size": args.record_size,
        "partitions": args.partitions,
        "rounds": args.rounds,
    }


def _round_ratios(
    numerators: Sequence[JobResult], denominators: Sequence[JobResult]
) -> list[float]:
    """Each round's rows/s of one side over the other's."""
    return [
        top.rows_per_s / bottom.rows_per_s
        for top, bottom in zip(numerators, denominators, strict=True)
        if bottom.rows_per_s
    ]


def _median_cpu(results: Sequence[JobResult]) -> dict[str, float]:
    """Each role's median CPU seconds over the runs (roles not measured left out)."""
    per_role: dict[str, list[float]] = {}
    for result in results:
        for role, seconds in result.details["cpu_seconds"].items():
            if seconds is not None:
                per_role.setdefault(role, []).append(seconds)
    return {role: round(statistics.median(seconds), 2) for role, seconds in per_role.items()}


def _ratio_text(row: Mapping[str, Any]) -> str:
    """`**0.62** (0.48, 0.62, 0.80)`: the median ratio, then each round's."""
    each = ", ".join(f"{ratio:.2f}" for ratio in row["ratios"])
    return f"**{row['ratio']:.2f}** ({each})"


def _cpu_text(seconds: Mapping[str, float]) -> str:
    return ", ".join(f"{role} {value:.2f}" for role, value in seconds.items() if value)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m spark_tests.jobs.overhead",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cli.add_shared_arguments(parser)
    parser.add_argument(
        "--format",
        choices=list(TWINS),
        default="kafka",
        help="the Kafka connector measured: kafka (Spark's own, the default; against range, "
        "rows built in the JVM) or pykafka (against memrows)",
    )
    parser.add_argument(
        "--jobs",
        nargs="+",
        choices=list(JOBS),
        default=list(JOBS),
        metavar="JOB",
        help=f"which jobs (default: all of {', '.join(JOBS)})",
    )
    parser.add_argument(
        "--rounds",
        type=cli.positive_int,
        default=5,
        help="runs of each job through each connector",
    )
    parser.add_argument(
        "--against",
        choices=AGAINST,
        help="run each job against nullbroker and against Apache Kafka 4.4.0, both started "
        "here (Kafka: one KRaft node, -Xmx1g, its log on local disk; its source topics sent "
        "the records nullbroker serves first), instead of against the no-network twin, and "
        "report each broker's share of the run's CPU side by side (needs Java and "
        "scripts/ensure-kafka-tools' jars)",
    )
    parser.add_argument("--output", metavar="PATH", help="write the report as JSON here")
    streaming_read.COMMAND.add_arguments(parser)
    return parser


if __name__ == "__main__":
    sys.exit(main())
