"""perf.compare's numbers: each step's derived figures, the medians over repeats, what
limited each row, and the ratios of nullbroker to each other broker. Pure functions of the
result JSON, so a saved result can be summarised, tabled and plotted again without running
anything.

Units: MB is 2^20 bytes (as Kafka's perf tools print it); GB in CPU s/GB is 10^9 bytes of
record keys and values (what the client sent or read, the same on both brokers); "cores"
are CPU seconds per second of the client's measured run.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from perf.compare_brokers import ALL_BROKERS, NULLBROKER

GB = 1_000_000_000
KIB_PER_MIB = 1024
SATURATED = 0.9
"""A process using this share of a core, or the machine this share of all its cores, is
taken as the limit of a run that missed its target rate."""
TARGET_MET = 0.95
PHASES = ("produce", "one-batch", "consume", "java-produce", "java-consume")
"""The measured phases, in the order the tables show them."""
UNMEASURED = ("broker-warmup", "fill")
"""Steps that only prepare: the brokers' warm-up, the consumers' topics filled."""
LATENCIES = ("avg_latency_ms", "max_latency_ms", "p50_ms", "p95_ms", "p99_ms", "p999_ms")
MEDIAN_KEYS = (
    "records_per_sec",
    "mb_per_sec",
    *LATENCIES,
    "broker_cpu_s_per_gb",
    "broker_peak_rss_mib",
    "broker_cores",
    "client_cores",
    "client_thread_cores",
    "other_cores",
)


def derive(step: Mapping[str, Any], cores: int) -> dict[str, Any]:
    """One step's figures: throughput and latency as the client measured them, the broker's
    CPU per GB and share of a core, the client's share of a core, and what other processes
    on the machine took meanwhile."""
    client = step["client"]
    # The producer's steady state when it had a warm-up: the table's throughput and latency.
    measured = client.get("steady_state") or client
    elapsed = client.get("elapsed_s") or 0.0
    wall = step["wall_s"] or 0.0
    bytes_moved = client.get("bytes", 0)
    broker_cpu = step["broker_cpu_s"]
    others = step["machine_busy_s"] - broker_cpu - step["client_total_cpu_s"]
    # A Java tool's CPU covers its whole process, JVM start included: per second of that.
    client_span = client.get("process_wall_s") or elapsed
    figures = {
        "records_per_sec": measured.get("records_per_sec", 0.0),
        "mb_per_sec": measured.get("mb_per_sec", 0.0),
        **{key: measured.get(key) for key in LATENCIES},
        "broker_cpu_s_per_gb": broker_cpu / (bytes_moved / GB) if bytes_moved else None,
        "broker_peak_rss_mib": step["broker_peak_rss_kib"] / KIB_PER_MIB,
        "broker_cores": broker_cpu / elapsed if elapsed else None,
        "client_cores": client.get("process_cpu_s", 0.0) / client_span if client_span else None,
        "client_thread_cores": client["thread_cpu_s"] / elapsed
        if elapsed and "thread_cpu_s" in client
        else None,
        "other_cores": max(0.0, others) / wall if wall else None,
    }
    figures["limit"] = limit(step.get("target"), figures, cores)
    return figures


def limit(target: float | None, figures: Mapping[str, Any], cores: int) -> str:
    """What held a run back: `target` when it reached its rate, else the saturated party
    (`broker`; `client` when the load generator's Python thread was, since it sends or reads
    every record; `cores` when all the machine's cores were busy), else `-` (none saturated:
    round trips set the rate, with at most 5 requests in flight)."""
    if target is not None and target > 0 and figures["records_per_sec"] >= TARGET_MET * target:
        return "target"
    busy = sum(figures[key] or 0.0 for key in ("broker_cores", "client_cores", "other_cores"))
    if (figures["broker_cores"] or 0.0) >= SATURATED:
        return "broker"
    if (figures["client_thread_cores"] or 0.0) >= SATURATED:
        return "client"
    if busy >= SATURATED * cores:
        return "cores"
    return "-"


def _median(values: Iterable[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def summarise(steps: list[Mapping[str, Any]], cores: int) -> list[dict[str, Any]]:
    """One row per (phase, broker, target) of the measured phases: the medians over
    repeats, in run order (produce by target rate, unlimited last; then consume; then the
    Java tools')."""
    groups: dict[tuple[str, str, float | None], list[dict[str, Any]]] = {}
    for step in steps:
        if step["phase"] in UNMEASURED:
            continue
        key = (step["phase"], step["broker"], step.get("target"))
        groups.setdefault(key, []).append(step["figures"])
    rows = []
    for (phase, broker, target), figures in groups.items():
        row: dict[str, Any] = {
            "phase": phase,
            "broker": broker,
            "target": target,
            "repeats": len(figures),
        }
        for name in MEDIAN_KEYS:
            row[name] = _median(f.get(name) for f in figures)
        row["limit"] = limit(target, row, cores)
        rows.append(row)
    return sorted(rows, key=_row_order)


def _row_order(row: Mapping[str, Any]) -> tuple[int, int, float]:
    target = row["target"]
    rate = float("inf") if target is None or target <= 0 else float(target)
    return (PHASES.index(row["phase"]), ALL_BROKERS.index(row["broker"]), rate)


def brokers_of(result: Mapping[str, Any]) -> list[str]:
    """The brokers a result measured, in table order."""
    return [name for name in ALL_BROKERS if name in result["brokers"]]


def find_row(
    rows: Iterable[Mapping[str, Any]], phase: str, broker: str, target: float | None
) -> Mapping[str, Any] | None:
    for row in rows:
        if (row["phase"], row["broker"], row["target"]) == (phase, broker, target):
            return row
    return None


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


RATIO_ROWS = {
    "produce_unlimited": ("produce", -1),
    "one_batch": ("one-batch", -1),
    "consume": ("consume", None),
    "java_produce": ("java-produce", -1),
    "java_consume": ("java-consume", None),
}
"""The rows compared: name → (phase, target)."""


def ratios(
    rows: Sequence[Mapping[str, Any]], peak_rss_kib: Mapping[str, int]
) -> dict[str, dict[str, float | None]]:
    """nullbroker / each other broker: records/s and broker CPU s/GB producing unthrottled,
    consuming, and the same through Kafka's Java tools where both ran them; peak RSS (over
    the produce phase, and over the whole run)."""

    def produce_peak(broker: str) -> float:
        return max(
            (
                row["broker_peak_rss_mib"] or 0.0
                for row in rows
                if row["broker"] == broker and row["phase"] in ("produce", "one-batch")
            ),
            default=0.0,
        )

    found: dict[str, dict[str, float | None]] = {}
    for peer in ALL_BROKERS:
        if peer == NULLBROKER or peer not in peak_rss_kib:
            continue
        values: dict[str, float | None] = {}
        for name, (phase, target) in RATIO_ROWS.items():
            ours, theirs = (find_row(rows, phase, who, target) for who in (NULLBROKER, peer))
            if ours is None or theirs is None:
                continue  # not run against this peer (the Java tools and the mock)
            for key in ("records_per_sec", "broker_cpu_s_per_gb"):
                values[f"{name}_{key}"] = ratio(ours[key], theirs[key])
        values["produce_peak_rss"] = ratio(produce_peak(NULLBROKER), produce_peak(peer))
        values["run_peak_rss"] = ratio(peak_rss_kib.get(NULLBROKER), peak_rss_kib.get(peer))
        found[peer] = values
    return found


RATIO_LABELS = {
    "produce_unlimited_records_per_sec": "records/s, producing unthrottled (higher: ours faster)",
    "produce_unlimited_broker_cpu_s_per_gb": "broker CPU s/GB ingested, unthrottled (lower: "
    "ours cheaper)",
    "one_batch_records_per_sec": "records/s, producing one batch a request (higher: ours faster)",
    "one_batch_broker_cpu_s_per_gb": "broker CPU s/GB ingested, one batch a request (lower: "
    "ours cheaper)",
    "consume_records_per_sec": "records/s, consuming (higher: ours faster)",
    "consume_broker_cpu_s_per_gb": "broker CPU s/GB served (lower: ours cheaper)",
    "java_produce_records_per_sec": "records/s, kafka-producer-perf-test (higher: ours faster)",
    "java_produce_broker_cpu_s_per_gb": "broker CPU s/GB ingested from "
    "kafka-producer-perf-test (lower: ours cheaper)",
    "java_consume_records_per_sec": "records/s, kafka-consumer-perf-test (higher: ours faster)",
    "java_consume_broker_cpu_s_per_gb": "broker CPU s/GB served to kafka-consumer-perf-test "
    "(lower: ours cheaper)",
    "produce_peak_rss": "peak RSS while producing (lower: ours lighter)",
    "run_peak_rss": "peak RSS over the whole run, VmHWM (lower: ours lighter)",
}


def ratio_lines(by_peer: Mapping[str, Mapping[str, float | None]]) -> list[str]:
    """The ratios as printed: `nullbroker/<peer> <value>x  <what>`."""
    return [
        f"{'nullbroker/' + peer:<16} {'n/a' if value is None else f'{value:.2f}x':>7}  "
        f"{RATIO_LABELS[key]}"
        for peer, values in by_peer.items()
        for key, value in values.items()
    ]
