"""Apache Kafka's own perf tools, kafka-producer-perf-test and kafka-consumer-perf-test, as
perf.compare runs them (scripts/kafka-bin, provisioned by scripts/ensure-kafka-tools), and
what they print turned into the figures perf.producer_perf and perf.consumer_perf write.

The Java tools have no warm-up option (4.1): their rates cover the whole run, the client's
connecting and the JVM's JIT included, but not the JVM's start. Their latencies are whole
milliseconds.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from perf.machine import REPO_ROOT

BIN = REPO_ROOT / "scripts" / "kafka-bin"
CACHE = REPO_ROOT / ".cache" / "kafka-tools"
LIB = CACHE / "4.4.0" / "lib"
PROGRAMS = REPO_ROOT / "perf" / "java"
"""The perf tools' own Java programs, compiled against Kafka 4.4.0's jars when first run."""
MIB = 1024 * 1024
CONSUMER_TIMEOUT_MS = 10_000
PRODUCER_FINAL = re.compile(
    r"^(?P<records>\d+) records sent, (?P<records_per_sec>[\d.]+) records/sec "
    r"\((?P<mb_per_sec>[\d.]+) MB/sec\), (?P<avg_latency_ms>[\d.]+) ms avg latency, "
    r"(?P<max_latency_ms>[\d.]+) ms max latency, (?P<p50_ms>\d+) ms 50th, "
    r"(?P<p95_ms>\d+) ms 95th, (?P<p99_ms>\d+) ms 99th, (?P<p999_ms>\d+) ms 99.9th\.$",
    re.MULTILINE,
)
CONSUMER_HEADER = "start.time, end.time, data.consumed.in.MB"
CONSUMER_TIMED_OUT = "Exiting before consuming the expected number of messages"


def missing() -> str | None:
    """Why the Java tools cannot run here, or None when they can."""
    if shutil.which("java") is None:
        return "java is not on PATH (scripts/ensure-test-tools installs it)"
    if not list(CACHE.glob("*/complete")):
        return "Kafka's tools are not provisioned (scripts/ensure-kafka-tools, or make kafka-tools)"
    return None


def producer_command(
    bootstrap: str,
    topic: str,
    records: int,
    record_size: int,
    props: tuple[str, ...],
    throughput: int = -1,
) -> list[str]:
    """kafka-producer-perf-test with the producer properties given, at most `throughput`
    records a second (-1, the default: unthrottled)."""
    return [
        str(BIN / "kafka-producer-perf-test"),
        "--topic", topic,
        "--num-records", str(records),
        "--record-size", str(record_size),
        "--throughput", str(throughput),
        "--producer-props", f"bootstrap.servers={bootstrap}", *props,
    ]  # fmt: skip


COMPILE_TIMEOUT = 180.0


def compiled(source: Path, lib: Path, cache: Path) -> Path:
    """The folder of `source`'s classes, compiled against the jars in `lib` into a folder of
    `cache` named by the source's digest: a changed source is compiled again, an unchanged
    one never (the perf tools' programs here, the tests' through tests/support/java_classes)."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:12]
    classes = cache / digest
    if not (classes / f"{source.stem}.class").exists():
        building = classes.with_name(f"{digest}.{os.getpid()}")
        subprocess.run(
            ["javac", "-cp", f"{lib}/*", "-d", str(building), str(source)],
            check=True, timeout=COMPILE_TIMEOUT,
        )  # fmt: skip
        # Built aside and moved in whole, as another process may be building it too.
        if classes.exists():
            shutil.rmtree(building)
        else:
            building.replace(classes)
    return classes


def java_program_command(name: str, *args: str) -> list[str]:
    """`java` running perf/java/`name`.java's class with Kafka 4.4.0's jars and the flags
    kafka-run-class gives the tools (scripts/kafka-bin), compiled into .cache at first use."""
    classes = compiled(PROGRAMS / f"{name}.java", LIB, REPO_ROOT / ".cache" / "perf-java")
    return [
        "java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp", f"{LIB}/*:{classes}", name, *args,
    ]  # fmt: skip


def consumer_command(bootstrap: str, topic: str, records: int) -> list[str]:
    """kafka-consumer-perf-test reading `records` of `topic` from the start, in a group of
    its own (the tool's default)."""
    return [
        str(BIN / "kafka-consumer-perf-test"),
        "--bootstrap-server", bootstrap,
        "--topic", topic,
        "--messages", str(records),
        "--timeout", str(CONSUMER_TIMEOUT_MS),
    ]  # fmt: skip


def parse_producer(output: str, record_size: int) -> dict[str, Any]:
    """The producer perf test's final summary line as perf.producer_perf's JSON fields."""
    finals = list(PRODUCER_FINAL.finditer(output))
    if not finals:
        raise ValueError("kafka-producer-perf-test printed no final summary line")
    fields = finals[-1].groupdict()
    records = int(fields.pop("records"))
    figures: dict[str, Any] = {key: float(value) for key, value in fields.items()}
    rate = figures["records_per_sec"]
    return {
        "tool": "kafka-producer-perf-test",
        "records": records,
        "bytes": records * record_size,
        "elapsed_s": records / rate if rate else 0.0,
        **figures,
    }


def parse_consumer(output: str) -> dict[str, Any]:
    """The consumer perf test's result line as perf.consumer_perf's JSON fields: the rates
    over its fetch time (rebalance.time.ms, joining its group, left out)."""
    lines = [line for line in output.splitlines() if line.strip()]
    header = next((i for i, line in enumerate(lines) if line.startswith(CONSUMER_HEADER)), None)
    if header is None or header + 1 >= len(lines):
        raise ValueError("kafka-consumer-perf-test printed no result line")
    names = [name.strip() for name in lines[header].split(",")]
    values = dict(zip(names, (v.strip() for v in lines[header + 1].split(",")), strict=True))
    fetch_ms = float(values["fetch.time.ms"])
    return {
        "tool": "kafka-consumer-perf-test",
        "records": int(values["data.consumed.in.nMsg"]),
        "bytes": round(float(values["data.consumed.in.MB"]) * MIB),
        "elapsed_s": fetch_ms / 1000,
        "records_per_sec": float(values["fetch.nMsg.sec"]),
        "mb_per_sec": float(values["fetch.MB.sec"]),
        "rebalance_ms": float(values["rebalance.time.ms"]),
        "timed_out": CONSUMER_TIMED_OUT in output,
    }
