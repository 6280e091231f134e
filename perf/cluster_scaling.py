"""Ingest into a three-node cluster with its nodes in one process and spread over several,
against librdkafka's mock with three brokers: the same client, the same topic layout, rounds
alternating which broker goes first.

    python -m perf.cluster_scaling --processes 1,2 --records 150000 --rounds 3

Each round starts every broker afresh (`nullbroker serve --brokers 3 --partitions 4
--processes P` for each P asked for, and `perf.mock_cluster --brokers 3`, which auto-creates 4
partitions), runs `perf.producer_perf` (1 KiB records, acks=all, idempotent, batch.size 16 KiB,
linger 5 ms) against it, and reads from /proc the CPU time the broker used while the
producer ran: every process of it (the supervisor and its workers). nullbroker's summary
must count exactly the records sent, or the run fails. Prints a table of medians with
ranges; --json writes every run.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nullbroker.app.launcher import ServerProcess, start_broker
from perf.compare_brokers import MOCK_READY, REPO_ROOT, ReadyServer
from perf.proc_sampler import cpu_seconds

PRODUCER_PROPS = ("acks=all", "enable.idempotence=true", "batch.size=16384", "linger.ms=5")
PARTITIONS = 4
NODES = 3
MOCK = "mock, 3 brokers"
WORKER_PIDS = re.compile(r"\(pid (\d+)\)")
WORKERS_LINE = re.compile(r"^processes: ")


def nullbroker_name(processes: int) -> str:
    return f"nullbroker, 3 nodes, {processes} process" + ("es" if processes > 1 else "")


def start(name: str, processes: int, workdir: Path) -> tuple[ServerProcess, list[int]]:
    """A broker and the pids of every process it runs in."""
    if name == MOCK:
        mock = ReadyServer(
            name,
            [sys.executable, "-m", "perf.mock_cluster", "--brokers", str(NODES)],
            MOCK_READY,
            workdir / "mock.stderr",
        )
        return mock, [mock.pid]
    broker = start_broker(
        "--brokers", str(NODES), "--processes", str(processes),
        "--partitions", str(PARTITIONS),
        workdir=workdir, cwd=REPO_ROOT,
    )  # fmt: skip
    pids = [broker.pid]
    if processes > 1:
        try:
            line = broker.wait_for_line(WORKERS_LINE, 15.0)
        except BaseException:
            broker.end()
            raise
        pids += [int(pid) for pid in WORKER_PIDS.findall(line)]
    return broker, pids


def run_once(name: str, processes: int, records: int, workdir: Path) -> dict[str, Any]:
    workdir.mkdir(parents=True)
    server, pids = start(name, processes, workdir)
    try:
        report = workdir / "producer.json"
        before = sum(cpu_seconds(pid) for pid in pids)
        done = subprocess.run(
            [
                sys.executable, "-m", "perf.producer_perf", "--topic", "scaling",
                "--num-records", str(records), "--record-size", "1024", "--throughput", "-1",
                "--bootstrap-server", server.bootstrap,
                "--producer-props", *PRODUCER_PROPS, "--json", str(report),
            ],
            cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        broker_cpu = sum(cpu_seconds(pid) for pid in pids) - before
    finally:
        server.end()
    if done.returncode != 0:
        raise RuntimeError(f"perf.producer_perf against {name} failed: {done.stderr[-2000:]}")
    result = json.loads(report.read_text())
    run = {
        "broker": name,
        "records": result["records"],
        "records_per_s": result["records_per_sec"],
        "broker_cpu_s": round(broker_cpu, 3),
        "client_cpu_s": result.get("process_cpu_s"),
        "p50_ms": result["p50_ms"],
        "p99_ms": result["p99_ms"],
    }
    if name != MOCK:
        counted = json.loads((workdir / "summary.json").read_text())["produced"]["records"]
        if counted != records:
            raise RuntimeError(f"{name} counted {counted} records of {records}")
        run["counted"] = counted
    return run


def table(runs: list[dict[str, Any]], names: list[str]) -> str:
    def cell(values: list[float], digits: int = 0) -> str:
        middle = statistics.median(values)
        low, high = min(values), max(values)
        return f"{middle:,.{digits}f} ({low:,.{digits}f} to {high:,.{digits}f})"

    rows = [
        "| broker | records/s | broker CPU s | client CPU s | p50 / p99 ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in names:
        mine = [run for run in runs if run["broker"] == name]
        client = [run["client_cpu_s"] for run in mine if run["client_cpu_s"] is not None]
        rows.append(
            f"| {name} ({len(mine)} runs) | {cell([r['records_per_s'] for r in mine])} "
            f"| {cell([r['broker_cpu_s'] for r in mine], 2)} "
            f"| {cell(client, 2) if client else '—'} "
            f"| {statistics.median(r['p50_ms'] for r in mine):.0f} / "
            f"{statistics.median(r['p99_ms'] for r in mine):.0f} |"
        )
    return "\n".join(rows)


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="python -m perf.cluster_scaling",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument(
        "--processes",
        default="1,2",
        help="nullbroker's --processes values to run, comma-separated (default 1,2)",
    )
    command.add_argument("--records", type=int, default=150_000, help="records a run")
    command.add_argument("--rounds", type=int, default=3, help="runs of each broker")
    command.add_argument("--no-mock", action="store_true", help="leave librdkafka's mock out")
    command.add_argument("--json", type=Path, help="write every run here")
    return command


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    counts = [int(value) for value in args.processes.split(",") if value.strip()]
    configurations = [(nullbroker_name(count), count) for count in counts]
    if not args.no_mock:
        configurations.append((MOCK, 0))
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="cluster-scaling-") as scratch:
        for round_number in range(args.rounds):
            # Rotate who goes first, so no broker always meets the machine warmer.
            shift = round_number % len(configurations)
            for name, processes in configurations[shift:] + configurations[:shift]:
                workdir = Path(scratch) / f"{round_number}-{len(runs)}"
                run = run_once(name, processes, args.records, workdir)
                runs.append(run)
                print(
                    f"round {round_number + 1}: {name}: {run['records_per_s']:,.0f} records/s, "
                    f"broker CPU {run['broker_cpu_s']:.2f} s",
                    flush=True,
                )
    print()
    print(table(runs, [name for name, _ in configurations]))
    if args.json is not None:
        args.json.write_text(json.dumps({"records": args.records, "runs": runs}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
