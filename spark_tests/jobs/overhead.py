"""The protocol overhead of each baseline job, measured side by side in one SparkSession:
each job's rows/s through Kafka divided by the same job with its Kafka source or sink
replaced by that connector's no-network twin (the same rows, no client, no socket, no
broker): for Spark's connector (--format kafka), `range`, the rows built in the JVM, with
writes to noop; for pykafka, memrows, the same planning and Arrow batches from memory.
Rounds alternate which runs first, so the JVM's warming and the machine's other load fall on
both; the ratio reported is the median of each round's ratio.

    python -m spark_tests.jobs.overhead --start-broker --format kafka \\
        --records 1000000 --record-size 1024 --partitions 4 --rounds 5 --output overhead.json
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

from . import cli, cpu, generate_to_kafka, pipeline, source_to_noop, streaming_read
from .result import JobResult, median_rows_per_s
from .settings import TWINS

JOBS = {
    job.NAME: job.COMMAND for job in (generate_to_kafka, source_to_noop, pipeline, streaming_read)
}


@dataclass(frozen=True)
class Overhead:
    """One job's runs through Kafka and through its no-network twin, round by round."""

    job: str
    kafka: list[JobResult]
    twin: list[JobResult]

    def ratios(self) -> list[float]:
        return [
            k.rows_per_s / t.rows_per_s
            for k, t in zip(self.kafka, self.twin, strict=True)
            if t.rows_per_s
        ]

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


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    jobs = [JOBS[name] for name in args.jobs]
    args.cpu = True  # the CPU by role says what the ratio is made of
    kafka_settings = cli.settings_of(args, args.format)
    flags = [flag for job in jobs for flag in job.broker_flags(kafka_settings)]
    with cli.job_environment(args, flags) as (spark, bootstrap):
        twin = TWINS[args.format]
        by_format = {
            args.format: replace(kafka_settings, bootstrap=bootstrap),
            twin: cli.settings_of(args, twin),
        }
        if args.warmup:
            for job in jobs:
                for settings in by_format.values():
                    cli.warm_up(job, spark, settings, args)
        runs: dict[tuple[str, str], list[JobResult]] = {}
        for round_number in range(args.rounds):
            order = list(by_format) if round_number % 2 == 0 else list(reversed(by_format))
            for job in jobs:
                for format in order:
                    result = cli.measured(job, spark, by_format[format], args)
                    runs.setdefault((job.name, format), []).append(result)
                    print(f"round {round_number + 1}: {result.line()}", flush=True)
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


def markdown_table(overheads: Sequence[Overhead]) -> str:
    """rows/s through each connector, the ratio, and the CPU seconds by role of a run."""
    lines = [
        "| job | Kafka rows/s | no-network twin rows/s | ratio (median; each round) | "
        "CPU s, Kafka run | CPU s, twin run |",
        "|---|---:|---:|---|---|---|",
    ]
    for overhead in overheads:
        row = overhead.summary()
        each = ", ".join(f"{ratio:.2f}" for ratio in row["ratios"])
        lines.append(
            f"| {row['job']} [{row['kafka_format']}] | {row['kafka_rows_per_s']:,.0f} | "
            f"{row['twin_rows_per_s']:,.0f} [{row['twin_format']}] | "
            f"**{row['ratio']:.2f}** ({each}) | "
            f"{_cpu_text(row['kafka_cpu_s'])} | {_cpu_text(row['twin_cpu_s'])} |"
        )
    return "\n".join(lines)


def report(args: argparse.Namespace, overheads: Sequence[Overhead]) -> dict[str, Any]:
    return {
        "settings": {
            "records": args.records,
            "record_size": args.record_size,
            "partitions": args.partitions,
            "rounds": args.rounds,
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


def _median_cpu(results: Sequence[JobResult]) -> dict[str, float]:
    """Each role's median CPU seconds over the runs (roles not measured left out)."""
    per_role: dict[str, list[float]] = {}
    for result in results:
        for role, seconds in result.details["cpu_seconds"].items():
            if seconds is not None:
                per_role.setdefault(role, []).append(seconds)
    return {role: round(statistics.median(seconds), 2) for role, seconds in per_role.items()}


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
    parser.add_argument("--output", metavar="PATH", help="write the report as JSON here")
    streaming_read.COMMAND.add_arguments(parser)
    return parser


if __name__ == "__main__":
    sys.exit(main())
