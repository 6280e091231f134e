"""Ingest into a cluster with its nodes in one process and spread over several
(`--processes`), the same load against each, rounds alternating which goes first: the
records/s, the broker's CPU per GB and its memory as PSS, per process count.

    python -m perf.cluster_scaling --processes 1,2,4 --brokers 8 --partitions 16 \\
        --load replay --clients 4 --requests 3000 --rounds 3
    python -m perf.cluster_scaling --processes 1,2,4 --brokers 8 --partitions 16 \\
        --load producers --clients 4 --records 200000 --rounds 3

Each round starts every broker afresh (`nullbroker serve --brokers N --partitions P
--processes K` for each K asked for; with `--mock`, `perf.mock_cluster --brokers N` too,
which auto-creates 4 partitions whatever `--partitions` says) and runs the load against it:

- `--load replay`: `perf.replay produce --clients C`, C processes each with a connection to
  every leader, sending pre-encoded Produce requests (one batch of 15 x 1 KiB records for
  each partition the node leads) `--requests` times per connection, 5 in flight: a load
  that costs the client little, so what bounds it is the broker (and the cores it shares);
  with `--rate R`, R requests a second per connection at most, the connections' requests
  spread evenly in time: the same load for every broker, whatever it could take;
- `--load idle`: none; the CPU each process uses in `--idle-seconds` (its supervisor's
  apart), what a cluster costs the machine between loads;
- `--load producers`: C `perf.producer_perf` processes at once (librdkafka, `--records`
  1 KiB records each, acks=all, idempotent, batch.size 16 KiB, linger 5 ms), as users load
  a cluster; records/s is the sum of theirs;
- `--load java-producers`: C of Kafka's own `kafka-producer-perf-test` at once, with the same
  producer properties; with `--transactional`, each with a `--transactional-id` of its own
  and `--transaction-duration-ms` (default 100), so that every transaction writes to every
  partition, its coordinator and most of its partitions' leaders in other processes.

The broker's CPU time is every process of its tree (the supervisor and its workers), read
from /proc just before the load and just after; CPU per GB divides it by the records' values
(records x 1 KiB). PSS (/proc/PID/smaps_rollup, each shared page counted once over the
processes that share it) is summed over the tree after the start and after the load, with
its anonymous part (Pss_Anon: the heaps, shared only within the tree; the rest, libpython
and the other mapped files, is split with every process on the machine that maps them, so
it reads smaller on a machine running other Python processes).
With `--wakeups`, `perf stat` counts nullbroker's epoll_wait calls (its wake-ups) and reads
per Produce request over the load. `other CPU` is what the rest of the machine used
meanwhile (its busy time less the broker's and the clients'): how noisy the run was.
nullbroker's summary must count exactly the records sent, or the run fails. Prints a table
of medians with ranges; --json writes every run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nullbroker.app import launcher
from nullbroker.app.launcher import ServerProcess
from perf import java_perf
from perf.compare_brokers import MOCK_READY, REPO_ROOT, ReadyServer
from perf.machine import machine_info
from perf.proc_sampler import (
    exact_cpu_seconds,
    machine_busy_seconds,
    process_tree,
    smaps_rollup_kib,
    tree_cpu_seconds,
)

PRODUCER_PROPS = ("acks=all", "enable.idempotence=true", "batch.size=16384", "linger.ms=5")
RECORD_SIZE = 1024
RECORDS_PER_BATCH = 15
LOAD_TIMEOUT_S = 600
PERF_START_S = 0.3
"""How long `perf stat` is given to attach to the broker's processes."""
SETTLE_S = 1.0
"""How long a fresh broker is left alone before its PSS is read: its workers' start-up done."""
REPLAY = "replay"
PRODUCERS = "producers"
JAVA_PRODUCERS = "java-producers"
IDLE = "idle"
MOCK = "mock"
WORKERS_LINE = re.compile(r"^processes: ")


@dataclass(frozen=True, slots=True)
class Broker:
    """One broker to run: nullbroker with `processes` processes, from this tree or from the
    source tree at `tree` (a baseline); librdkafka's mock with processes 0."""

    processes: int
    label: str = "nullbroker"
    tree: Path | None = None

    def name(self, brokers: int) -> str:
        if self.processes == 0:
            return f"mock, {brokers} brokers"
        plural = "es" if self.processes > 1 else ""
        return f"{self.label}, {brokers} nodes, {self.processes} process{plural}"


def start(broker: Broker, args: argparse.Namespace, workdir: Path) -> ServerProcess:
    """A broker (processes 0: librdkafka's mock), listening."""
    processes = broker.processes
    if processes == 0:
        return ReadyServer(
            MOCK,
            [sys.executable, "-m", "perf.mock_cluster", "--brokers", str(args.brokers)],
            MOCK_READY,
            workdir / "mock.stderr",
        )
    # A baseline tree's packages come first on the path of the broker it runs.
    env = None if broker.tree is None else {**os.environ, "PYTHONPATH": str(broker.tree)}
    server = launcher.start(
        "--brokers", str(args.brokers), "--processes", str(processes),
        "--partitions", str(args.partitions),
        workdir=workdir, cwd=REPO_ROOT, env=env, metrics=False,
    )  # fmt: skip
    if processes > 1:
        try:  # its workers run once it has said so
            server.wait_for_line(WORKERS_LINE, 15.0, "its workers")
        except BaseException:
            server.end()
            raise
    return server


def tree_pss_kib(pids: list[int]) -> tuple[int, int]:
    """The tree's PSS, and the anonymous part of it (its heaps: the part that does not
    depend on which other processes on the machine map the same libraries), in KiB."""
    rollups = [smaps_rollup_kib(pid) for pid in pids]
    return sum(r["Pss"] for r in rollups), sum(r["Pss_Anon"] for r in rollups)


def replay(bootstrap: str, pid: int, args: argparse.Namespace) -> dict[str, Any]:
    """`perf.replay produce` with `--clients` processes: its numbers, with the broker's and the
    rest of the machine's CPU over its replay (its start-up and Metadata left out)."""
    done = subprocess.run(
        [
            sys.executable, "-m", "perf.replay", "produce", "--topic", "scaling",
            "--bootstrap-server", bootstrap, "--partitions", str(args.partitions),
            "--clients", str(args.clients),
            "--requests", str(args.requests), "--records-per-batch", str(RECORDS_PER_BATCH),
            "--record-size", str(RECORD_SIZE), "--rate", str(args.rate),
            "--broker-pid", str(pid), "--json",
        ],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=LOAD_TIMEOUT_S, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"perf.replay failed: {done.stderr[-2000:]}")
    result = json.loads(done.stdout)
    return {
        "records": result["records"],
        "records_per_s": result["records_per_second"],
        "broker_cpu_s": result["broker_cpu_seconds"],
        "client_cpu_s": result["client_cpu_seconds"],
        "other_cpu_s": result["other_cpu_seconds"],
        "requests": result["requests"],
        "connections": result["connections"],
    }


def producer_command(bootstrap: str, records: int, report: Path) -> list[str]:
    return [
        sys.executable, "-m", "perf.producer_perf", "--topic", "scaling",
        "--num-records", str(records), "--record-size", str(RECORD_SIZE),
        "--throughput", "-1", "--bootstrap-server", bootstrap,
        "--producer-props", *PRODUCER_PROPS, "--json", str(report),
    ]  # fmt: skip


def producers(
    bootstrap: str, pids: list[int], args: argparse.Namespace, workdir: Path
) -> dict[str, Any]:
    """`--clients` `perf.producer_perf` processes at once: their records/s summed, and the
    broker's and the rest of the machine's CPU from their start to the last one's end."""
    reports = [workdir / f"producer-{index}.json" for index in range(args.clients)]
    children_before = _children_cpu_seconds()
    busy_before, before = machine_busy_seconds(), tree_cpu_seconds(pids)
    running = [
        subprocess.Popen(
            producer_command(bootstrap, args.records, report),
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for report in reports
    ]
    failures = []
    for process in running:
        _, stderr = process.communicate(timeout=LOAD_TIMEOUT_S)
        if process.returncode != 0:
            failures.append(stderr[-2000:])
    broker_cpu = tree_cpu_seconds(pids) - before
    busy = machine_busy_seconds() - busy_before
    # The producers' whole CPU, start-up included, is theirs, not other work's.
    clients_cpu = _children_cpu_seconds() - children_before
    if failures:
        raise RuntimeError(f"perf.producer_perf failed: {failures[0]}")
    results = [json.loads(report.read_text()) for report in reports]
    return {
        "records": sum(result["records"] for result in results),
        "records_per_s": round(sum(result["records_per_sec"] for result in results)),
        "broker_cpu_s": broker_cpu,
        "client_cpu_s": round(sum(result["process_cpu_s"] for result in results), 3),
        "other_cpu_s": max(busy - broker_cpu - clients_cpu, 0.0),
        "p50_ms": statistics.median(result["p50_ms"] for result in results),
        "p99_ms": max(result["p99_ms"] for result in results),
    }


def java_producers(bootstrap: str, pids: list[int], args: argparse.Namespace) -> dict[str, Any]:
    """`--clients` kafka-producer-perf-test processes at once (transactional with
    `--transactional`): their records/s summed, and the CPU as for `producers`."""
    commands = []
    for index in range(args.clients):
        command = java_perf.producer_command(
            bootstrap, "scaling", args.records, RECORD_SIZE, PRODUCER_PROPS
        )
        if args.transactional:
            command += [
                "--transactional-id", f"scaling-{index}",
                "--transaction-duration-ms", str(args.transaction_duration_ms),
            ]  # fmt: skip
        commands.append(command)
    children_before = _children_cpu_seconds()
    busy_before, before = machine_busy_seconds(), tree_cpu_seconds(pids)
    running = [
        subprocess.Popen(
            command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for command in commands
    ]
    outputs, failures = [], []
    for process in running:
        stdout, stderr = process.communicate(timeout=LOAD_TIMEOUT_S)
        if process.returncode != 0:
            failures.append(stderr[-2000:])
        outputs.append(stdout)
    broker_cpu = tree_cpu_seconds(pids) - before
    busy = machine_busy_seconds() - busy_before
    clients_cpu = _children_cpu_seconds() - children_before
    if failures:
        raise RuntimeError(f"kafka-producer-perf-test failed: {failures[0]}")
    results = [java_perf.parse_producer(output, RECORD_SIZE) for output in outputs]
    return {
        "records": sum(result["records"] for result in results),
        "records_per_s": round(sum(result["records_per_sec"] for result in results)),
        "broker_cpu_s": broker_cpu,
        "client_cpu_s": round(clients_cpu, 3),
        "other_cpu_s": max(busy - broker_cpu - clients_cpu, 0.0),
        "p50_ms": statistics.median(result["p50_ms"] for result in results),
        "p99_ms": max(result["p99_ms"] for result in results),
    }


def _children_cpu_seconds() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


class WakeUps:
    """`perf stat` counting the broker's wake-ups (epoll_wait calls) and reads over the
    load, every process of its tree: how many requests each wake-up finds."""

    EVENTS = ("syscalls:sys_enter_epoll_wait", "syscalls:sys_enter_read")

    def __init__(self, pids: list[int]) -> None:
        processes = ",".join(map(str, pids))
        self._perf = subprocess.Popen(
            ["perf", "stat", "-x", ",", "-e", ",".join(self.EVENTS), "-p", processes],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(PERF_START_S)  # attached before the load begins

    def counts(self) -> dict[str, int]:
        """Stop counting: the wake-ups and reads counted."""
        self._perf.send_signal(signal.SIGINT)
        _, report = self._perf.communicate(timeout=30)
        counted = syscalls_counted(report)
        if set(counted) != {"epoll_wait", "read"}:
            raise RuntimeError(f"perf stat counted no syscalls (root, tracepoints?): {report}")
        return counted


def syscalls_counted(report: str) -> dict[str, int]:
    """The counts of `perf stat -x ,` by syscall name: `1234,,syscalls:sys_enter_read,...`
    gives {"read": 1234}."""
    counted = {}
    for line in report.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[0].strip().isdigit() and "sys_enter_" in fields[2]:
            counted[fields[2].rpartition("sys_enter_")[2]] = int(fields[0])
    return counted


def run_once(broker: Broker, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    workdir.mkdir(parents=True)
    name = broker.name(args.brokers)
    server = start(broker, args, workdir)
    try:
        time.sleep(SETTLE_S)
        pids = process_tree(server.pid)
        pss_started = tree_pss_kib(pids)
        wake_ups = WakeUps(pids) if args.wakeups and broker.processes else None
        if args.load == REPLAY:
            load = replay(server.bootstrap, server.pid, args)
        elif args.load == JAVA_PRODUCERS:
            load = java_producers(server.bootstrap, pids, args)
        else:
            load = producers(server.bootstrap, pids, args, workdir)
        counted_calls = wake_ups.counts() if wake_ups is not None else None
        pss_loaded = tree_pss_kib(pids)
    finally:
        server.end()
    gigabytes = load["records"] * RECORD_SIZE / 1e9
    run = {
        "broker": name,
        "processes": len(pids),
        **load,
        "broker_cpu_s": round(load["broker_cpu_s"], 3),
        "broker_cpu_s_per_gb": round(load["broker_cpu_s"] / gigabytes, 3),
        "other_cpu_s": round(load["other_cpu_s"], 2),
        "pss_started_mib": round(pss_started[0] / 1024, 1),
        "pss_loaded_mib": round(pss_loaded[0] / 1024, 1),
        "pss_anon_loaded_mib": round(pss_loaded[1] / 1024, 1),
    }
    if broker.processes:
        summary = json.loads((workdir / "summary.json").read_text())
        counted = summary["produced"]["records"]
        if counted != load["records"]:
            raise RuntimeError(f"{name} counted {counted} records of {load['records']}")
        run["counted"] = counted
        if counted_calls is not None:
            produce_requests = summary["requests"]["Produce"]
            run["wake_ups_per_request"] = round(counted_calls["epoll_wait"] / produce_requests, 3)
            run["reads_per_request"] = round(counted_calls["read"] / produce_requests, 3)
    return run


def idle_once(broker: Broker, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """A broker left alone for `--idle-seconds`: the CPU each of its processes used."""
    workdir.mkdir(parents=True)
    server = start(broker, args, workdir)
    try:
        time.sleep(SETTLE_S)
        pids = process_tree(server.pid)
        before = {pid: exact_cpu_seconds(pid) for pid in pids}
        time.sleep(args.idle_seconds)
        used = {
            pid: (exact_cpu_seconds(pid) - before[pid]) / args.idle_seconds * 1e3 for pid in pids
        }
    finally:
        server.end()
    workers = [used[pid] for pid in pids if pid != server.pid or len(pids) == 1]
    return {
        "broker": broker.name(args.brokers),
        "processes": len(pids),
        "cpu_ms_per_s": round(sum(used.values()), 3),
        "supervisor_cpu_ms_per_s": round(used[server.pid], 3) if len(pids) > 1 else None,
        "workers_cpu_ms_per_s": [round(value, 3) for value in workers],
    }


def idle_table(runs: list[dict[str, Any]], names: list[str]) -> str:
    rows = [
        "| broker | CPU ms a second, every process | the supervisor's | each worker's |",
        "|---|---:|---:|---:|",
    ]
    for name in names:
        mine = [run for run in runs if run["broker"] == name]
        supervisor = [run["supervisor_cpu_ms_per_s"] for run in mine]
        workers = [value for run in mine for value in run["workers_cpu_ms_per_s"]]
        every_process = statistics.median(run["cpu_ms_per_s"] for run in mine)
        rows.append(
            f"| {name} ({len(mine)} runs) | {every_process:.2f} "
            f"| {'—' if None in supervisor else f'{statistics.median(supervisor):.2f}'} "
            f"| {statistics.median(workers):.2f} |"
        )
    return "\n".join(rows)


def describe(run: dict[str, Any]) -> str:
    if "cpu_ms_per_s" in run:
        return f"{run['broker']}: {run['cpu_ms_per_s']:.2f} ms of CPU a second, idle"
    return (
        f"{run['broker']}: {run['records_per_s']:,.0f} records/s, "
        f"broker CPU {run['broker_cpu_s']:.2f} s ({run['broker_cpu_s_per_gb']:.2f} s/GB), "
        f"PSS {run['pss_loaded_mib']} MiB, other CPU {run['other_cpu_s']:.2f} s"
    )


def table(runs: list[dict[str, Any]], names: list[str]) -> str:
    def cell(values: list[float], digits: int = 0) -> str:
        middle = statistics.median(values)
        low, high = min(values), max(values)
        return f"{middle:,.{digits}f} ({low:,.{digits}f} to {high:,.{digits}f})"

    rows = [
        "| broker | records/s | broker CPU s/GB | PSS after start / load, MiB "
        "| of which anonymous | client CPU s | other CPU s | p50 / p99 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    counted_wake_ups = any("wake_ups_per_request" in run for run in runs)
    for name in names:
        mine = [run for run in runs if run["broker"] == name]
        latency = (
            f"{statistics.median(r['p50_ms'] for r in mine):.0f} / "
            f"{statistics.median(r['p99_ms'] for r in mine):.0f}"
            if all("p50_ms" in r for r in mine)
            else "—"
        )
        rows.append(
            f"| {name} ({len(mine)} runs) | {cell([r['records_per_s'] for r in mine])} "
            f"| {cell([r['broker_cpu_s_per_gb'] for r in mine], 2)} "
            f"| {statistics.median(r['pss_started_mib'] for r in mine):.1f} / "
            f"{cell([r['pss_loaded_mib'] for r in mine], 1)} "
            f"| {statistics.median(r['pss_anon_loaded_mib'] for r in mine):.1f} "
            f"| {cell([r['client_cpu_s'] for r in mine], 2)} "
            f"| {cell([r['other_cpu_s'] for r in mine], 2)} | {latency} |"
            + (_wake_ups_cell(mine) if counted_wake_ups else "")
        )
    if counted_wake_ups:
        rows[0] += " wake-ups / reads per request |"
        rows[1] += "---:|"
    return "\n".join(rows)


def _wake_ups_cell(runs: list[dict[str, Any]]) -> str:
    counted = [run for run in runs if "wake_ups_per_request" in run]
    if not counted:
        return " — |"
    wake_ups = statistics.median(run["wake_ups_per_request"] for run in counted)
    reads = statistics.median(run["reads_per_request"] for run in counted)
    return f" {wake_ups:.2f} / {reads:.2f} |"


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
    command.add_argument("--brokers", type=int, default=3, help="nodes (default 3)")
    command.add_argument("--partitions", type=int, default=4, help="of the topic (default 4)")
    command.add_argument(
        "--load",
        choices=(REPLAY, PRODUCERS, JAVA_PRODUCERS, IDLE),
        default=PRODUCERS,
        help="default producers; idle: no load, the CPU each process uses for --idle-seconds",
    )
    command.add_argument(
        "--transactional",
        action="store_true",
        help="--load java-producers: each producer transactional, a --transactional-id of its own",
    )
    command.add_argument(
        "--transaction-duration-ms",
        type=int,
        default=100,
        help="--transactional: how long each transaction stays open (default 100)",
    )
    command.add_argument("--idle-seconds", type=float, default=30.0, help="--load idle")
    command.add_argument("--clients", type=int, default=1, help="client processes at once")
    command.add_argument(
        "--records", type=int, default=150_000, help="records per producer (--load producers)"
    )
    command.add_argument(
        "--requests", type=int, default=2_000, help="requests per connection (--load replay)"
    )
    command.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="--load replay: requests a second per connection at most, the connections' "
        "requests spread evenly in time (default: as fast as answered)",
    )
    command.add_argument("--rounds", type=int, default=3, help="runs of each broker")
    command.add_argument(
        "--mock", action="store_true", help="librdkafka's mock too (4 partitions a topic)"
    )
    command.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="LABEL=PATH",
        help="also run each process count with the broker of the source tree at PATH (its C "
        "extensions built in place), named LABEL: before and after, side by side",
    )
    command.add_argument(
        "--wakeups",
        action="store_true",
        help="count nullbroker's wake-ups (epoll_wait) and reads per Produce request with "
        "`perf stat` (root, or perf_event_paranoid allowing tracepoints)",
    )
    command.add_argument("--json", type=Path, help="write every run here")
    return command


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    counts = [int(value) for value in args.processes.split(",") if value.strip()]
    trees = [Broker(count) for count in counts]
    for baseline in args.tree:
        label, _, path = baseline.partition("=")
        trees += [Broker(count, label, Path(path).resolve()) for count in counts]
    brokers = [*trees, Broker(0)] if args.mock else trees
    names = [broker.name(args.brokers) for broker in brokers]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="cluster-scaling-") as scratch:
        for round_number in range(args.rounds):
            # Rotate who goes first, so no broker always meets the machine warmer.
            shift = round_number % len(brokers)
            for broker in brokers[shift:] + brokers[:shift]:
                workdir = Path(scratch) / f"{round_number}-{len(runs)}"
                measure = idle_once if args.load == IDLE else run_once
                run = measure(broker, args, workdir)
                run["round"] = round_number + 1
                runs.append(run)
                print(f"round {round_number + 1}: {describe(run)}", flush=True)
    print()
    print((idle_table if args.load == IDLE else table)(runs, names))
    if args.json is not None:
        settings = {key: value for key, value in vars(args).items() if key != "json"}
        document = {"settings": settings, "machine": machine_info(), "runs": runs}
        args.json.write_text(json.dumps(document, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
