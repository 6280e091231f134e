"""CPU seconds spent by this process and its descendants during a run, by role: the Spark
JVM, its Python workers, a broker started with --start-broker (nullbroker) or --against
kafka (Apache Kafka's JVM), and the driver itself; on a standalone cluster of this machine
(--master), also the application's executors, JVMs that the cluster's workers started, and
their Python workers. On a machine whose cores the whole
pipeline shares, this says where a run's time went."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from perf.proc_sampler import cpu_seconds

ROLES = ("jvm", "python_workers", "broker", "driver")
IDLE_BROKER = "idle_broker"
"""A started broker the run did not use (with --against kafka both run the whole time)."""
BROKERS = ("nullbroker", "kafka")
"""The brokers a job command starts, told apart by their command lines."""
EXECUTORS = "executors"
"""The role of an application's executor JVMs on a cluster (in local mode they are threads of
the driver's JVM)."""


def snapshot(app_id: str | None = None) -> dict[int, tuple[str, float]]:
    """Every live descendant of this process (and itself), and of the executors of Spark
    application `app_id` on this machine: pid → (role, CPU seconds), a broker's role being
    which broker it is (see BROKERS)."""
    parents: dict[int, int] = {}
    stats: dict[int, tuple[str, float]] = {}
    executors = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            parents[pid] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stats[pid] = (_role(pid, command), cpu_seconds(pid))
        except OSError:
            continue  # it exited while we looked
        if app_id is not None and _executor_of(command, app_id):
            executors.add(pid)
            stats[pid] = (EXECUTORS, stats[pid][1])
    roots = {os.getpid(), *executors}
    ours = {pid for pid in stats if any(_descends(pid, root, parents) for root in roots)}
    return {pid: stats[pid] for pid in ours}


def used(
    before: Mapping[int, tuple[str, float]],
    broker: str | None = None,
    app_id: str | None = None,
) -> dict[str, float | None]:
    """CPU seconds by role since `before` (processes started since count from zero; ones
    that exited since are lost, which the long-lived JVM, workers and broker are not).
    `broker` names the broker the run used (one of BROKERS): another one started is
    counted apart, as IDLE_BROKER; None counts every broker as the run's. `app_id` counts
    that Spark application's executors on a standalone cluster of this machine (snapshot).

    The broker's is None, not measured, when no broker is among this process's
    descendants (one reached with --bootstrap runs elsewhere): a 0.00 would read as a
    broker that cost nothing."""
    totals = dict.fromkeys(ROLES, 0.0)
    roles_seen = set()
    for pid, (kind, seconds) in snapshot(app_id).items():
        role = kind
        if kind in BROKERS:
            role = "broker" if broker in (None, kind) else IDLE_BROKER
        previous = before.get(pid)
        totals[role] = totals.get(role, 0.0) + seconds - (previous[1] if previous else 0.0)
        roles_seen.add(role)
    measured: dict[str, float | None] = {
        role: round(seconds, 2) for role, seconds in totals.items()
    }
    if "broker" not in roles_seen:
        measured["broker"] = None
    return measured


def broker_share(seconds: Mapping[str, float | None]) -> float | None:
    """The broker's part of all the CPU a run measured (an idle broker's left out), or None
    when the broker's was not measured (it ran elsewhere)."""
    broker = seconds.get("broker")
    total = sum(
        value for role, value in seconds.items() if value is not None and role != IDLE_BROKER
    )
    if broker is None or total <= 0:
        return None
    return broker / total


def cpu_text(seconds: Mapping[str, float | None]) -> str:
    """`jvm 1.20, python_workers 3.40, broker not measured, driver 0.10`."""
    return ", ".join(
        f"{role} {value:.2f}" if value is not None else f"{role} not measured"
        for role, value in seconds.items()
    )


def _role(pid: int, command: str) -> str:
    if pid == os.getpid():
        return "driver"
    if "nullbroker" in command and " serve" in command:
        return "nullbroker"
    if " kafka.Kafka " in command:  # Kafka's JVM (perf.kafka_broker), before Spark's
        return "kafka"
    if "java" in command.split(" ", 1)[0]:
        return "jvm"
    return "python_workers"


def _executor_of(command: str, app_id: str) -> bool:
    return "CoarseGrainedExecutorBackend" in command and f" --app-id {app_id} " in f"{command} "


def _descends(pid: int, ancestor: int, parents: Mapping[int, int]) -> bool:
    for _ in range(64):  # process trees are shallow; the bound guards against pid reuse loops
        if pid == ancestor:
            return True
        pid = parents.get(pid, 0)
        if pid <= 1:
            return False
    return False
