"""perf.compare's plots (matplotlib, Agg: no display needed), one PNG each:

- `<name>-throughput.png`: records/s reached against the target rate, per broker, with
  kafka-producer-perf-test's unthrottled runs beside;
- `<name>-latency.png`: average, p50, p99 and p99.9 latency against the target rate;
- `<name>-rss.png`: each broker's RSS over the whole run, phases shaded;
- `<name>-cpu.png`: broker CPU s/GB and CPU cores used (broker and client) per step kind,
  the Java tools' steps included.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: files only, whatever the environment's display
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from perf.compare_summary import brokers_of, find_row
from perf.report_md import rate_label

COLOURS = {
    "nullbroker": "tab:blue",
    "mock": "tab:orange",
    "kfake": "tab:green",
    "kafka": "tab:red",
    "floor": "tab:grey",
}
OTHER_COLUMNS = (
    ("one-batch", -1, "one batch"),
    ("consume", None, "consume"),
    ("java-produce", -1, "Java produce"),
    ("java-consume", None, "Java consume"),
)
"""The CPU plot's rows after the produce rates, where the run had them: (phase, target,
label)."""
DPI = 110
LOG_SPREAD = 10
"""An axis of RSS or CPU per GB is logarithmic when one broker's figure is this many times
another's (Kafka's JVM is thirty times the size of the rest: on a linear axis they are flat)."""


def _scale(axes: Axes, values: Sequence[float], label: str) -> None:
    """A linear axis from zero, or a logarithmic one when `values` spread over LOG_SPREAD."""
    if values and max(values) > LOG_SPREAD * min(values):
        axes.set_yscale("log")
        axes.set_ylabel(f"{label}, log")
    else:
        axes.set_ylabel(label)
        axes.set_ylim(bottom=0)


def _targets(result: Mapping[str, Any]) -> list[float]:
    return list(result["settings"]["rates"])


def _save(figure: Figure, path: Path) -> str:
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    plt.close(figure)
    return path.name


def _value(row: Mapping[str, Any] | None, key: str) -> float:
    """A figure to plot; NaN (a gap in the line) where there is none."""
    value = row[key] if row is not None else None
    return math.nan if value is None else float(value)


def _produce_values(result: Mapping[str, Any], broker: str, key: str) -> list[float]:
    rows = result["summary"]
    return [_value(find_row(rows, "produce", broker, target), key) for target in _targets(result)]


def throughput(result: Mapping[str, Any], path: Path) -> str:
    targets = _targets(result)
    positions = range(len(targets))
    figure, axes = plt.subplots(figsize=(8, 4.8))
    unlimited = targets.index(-1) if -1 in targets else len(targets) - 1
    for broker in brokers_of(result):
        values = _produce_values(result, broker, "records_per_sec")
        axes.plot(positions, values, "o-", color=COLOURS[broker], label=f"{broker} (median)")
        for step in result["steps"]:
            if step["phase"] == "produce" and step["broker"] == broker:
                x = targets.index(step["target"])
                axes.plot(x, step["figures"]["records_per_sec"], ".", color=COLOURS[broker])
        # Beside the unlimited rate: the other unthrottled producers.
        for phase, shift, marker, what in (
            ("one-batch", -0.15, "D", "one batch a request"),
            ("java-produce", 0.15, "*", "kafka-producer-perf-test (Java)"),
        ):
            row = find_row(result["summary"], phase, broker, -1)
            if row is not None:
                axes.plot(
                    unlimited + shift,
                    _value(row, "records_per_sec"),
                    marker,
                    markersize=11 if marker == "*" else 7,
                    color=COLOURS[broker],
                    label=f"{broker}: {what}",
                )
    throttled = [(i, t) for i, t in enumerate(targets) if t > 0]
    axes.plot(
        [i for i, _ in throttled], [t for _, t in throttled], "k:", label="target", linewidth=1
    )
    axes.set_xticks(list(positions), [rate_label(t) for t in targets])
    axes.set_yscale("log")
    axes.set_xlabel("target rate (records/s)")
    axes.set_ylabel("records/s reached (log; dots: each run)")
    axes.set_title(f"Producing 1 KiB records: throughput ({result['name']})")
    axes.grid(alpha=0.3, which="both")
    axes.legend()
    return _save(figure, path)


def latency(result: Mapping[str, Any], path: Path) -> str:
    targets = _targets(result)
    positions = list(range(len(targets)))
    figure, grid = plt.subplots(2, 2, figsize=(10, 7), sharex=True)
    titles = (
        ("avg_latency_ms", "average"),
        ("p50_ms", "p50"),
        ("p99_ms", "p99"),
        ("p999_ms", "p99.9"),
    )
    for axes, (key, title) in zip(grid.flat, titles, strict=True):
        for broker in brokers_of(result):
            values = _produce_values(result, broker, key)
            axes.plot(positions, values, "o-", color=COLOURS[broker], label=broker)
        axes.set_yscale("log")
        axes.set_title(f"{title} latency")
        axes.set_ylabel("ms (log)")
        axes.set_xticks(positions, [rate_label(t) for t in targets], rotation=30)
        axes.grid(alpha=0.3, which="both")
    grid.flat[0].legend()
    figure.suptitle("Produce latency against target rate, produce() to delivery report")
    return _save(figure, path)


def rss(result: Mapping[str, Any], path: Path) -> str:
    figure, axes = plt.subplots(figsize=(10, 4.8))
    for broker in brokers_of(result):
        samples = result["samples"].get(broker, [])
        axes.plot(
            [s["t"] for s in samples],
            [s["rss_kib"] / 1024 for s in samples],
            color=COLOURS[broker],
            label=broker,
            linewidth=1,
        )
    shades = (
        ("broker-warmup", "#f0e0c0"),
        ("fill", "0.85"),
        ("consume", "0.7"),
        ("java-produce", "#d8e8d8"),
        ("java-consume", "#b8d8b8"),
    )
    for phase, colour in shades:
        spans = [s["window"] for s in result["steps"] if s["phase"] == phase]
        for span in spans:
            axes.axvspan(span["start_s"], span["end_s"], color=colour, alpha=0.5, linewidth=0)
    axes.set_xlabel(
        "seconds since the run started (sand: warming the brokers up; grey: filling, then "
        "consuming; green: Java tools)"
    )
    samples = [series for series in result["samples"].values() if series]
    peaks = [max(sample["rss_kib"] for sample in series) for series in samples]
    _scale(axes, peaks, "RSS (MiB)")
    axes.set_title("Broker RSS over the run")
    axes.grid(alpha=0.3)
    axes.legend()
    return _save(figure, path)


def cpu(result: Mapping[str, Any], path: Path) -> str:
    targets = _targets(result)
    rows = result["summary"]
    columns = [
        (phase, target, label)
        for phase, target, label in OTHER_COLUMNS
        if any(row["phase"] == phase for row in rows)
    ]
    labels = [rate_label(t) for t in targets] + [label for _, _, label in columns]
    positions = list(range(len(labels)))
    brokers = brokers_of(result)
    width = 0.8 / len(brokers)
    offsets = [(index - (len(brokers) - 1) / 2) * width for index in range(len(brokers))]
    figure, (per_gb, cores) = plt.subplots(2, 1, figsize=(11, 8.5), sharex=True)
    for offset, broker in zip(offsets, brokers, strict=True):
        others = [find_row(rows, phase, broker, target) for phase, target, _ in columns]
        series = _produce_values(result, broker, "broker_cpu_s_per_gb")
        series += [_value(row, "broker_cpu_s_per_gb") for row in others]
        per_gb.bar(
            [p + offset for p in positions],
            [0.0 if math.isnan(value) else value for value in series],
            width,
            color=COLOURS[broker],
            label=broker,
        )
        for key, style, who in (
            ("broker_cores", "o-", "broker"),
            ("client_cores", "s--", "its client"),
            ("client_thread_cores", "^:", "its client's Python thread"),
        ):
            values = _produce_values(result, broker, key)
            values += [_value(row, key) for row in others]
            cores.plot(positions, values, style, color=COLOURS[broker], label=f"{broker}: {who}")
    per_gb_values = [row["broker_cpu_s_per_gb"] for row in rows]
    _scale(per_gb, [value for value in per_gb_values if value], "broker CPU s per GB")
    per_gb.set_title(
        "Broker CPU per GB ingested (by target rate, one batch a request, Java produce) and "
        "served (consume)"
    )
    per_gb.grid(alpha=0.3, axis="y")
    per_gb.legend()
    cores.axhline(1.0, color="k", linewidth=0.8, linestyle=":")
    cores.set_ylabel("CPU cores used")
    cores.set_title("CPU cores during each step (a Python thread saturates at 1.0)")
    cores.set_xticks(positions, labels, rotation=20)
    cores.set_xlabel(
        "target rate (records/s), then one batch a request, the consumers and Kafka's Java "
        "perf tools"
    )
    cores.grid(alpha=0.3)
    # Below the axes: inside, it hides the lines it explains.
    cores.legend(fontsize="small", ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.3))
    return _save(figure, path)


def write_all(result: Mapping[str, Any], directory: Path, name: str) -> Sequence[str]:
    """Every plot, as PNG files next to the result; returns their file names."""
    makers = (("throughput", throughput), ("latency", latency), ("rss", rss), ("cpu", cpu))
    return [make(result, directory / f"{name}-{kind}.png") for kind, make in makers]
