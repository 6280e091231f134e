"""The job commands as a user runs them: `python -m spark_tests.jobs.<job> --start-broker`
and the side-by-side overhead report, each a process with its own SparkSession and broker.
What they print is checked against what the broker counted."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from perf.kafka_broker import KAFKA_VERSION
from perf.kafka_broker import missing as kafka_missing
from spark_tests.conftest import java_missing_reason
from spark_tests.jobs.session import connector_jars
from tests.support.module_command import REPO, run_module

RECORDS = 8_000
KAFKA_DELIVERY_TIMEOUT_MS = 480_000  # within COMMAND_TIMEOUT_S
COMMAND_TIMEOUT_S = 600
BROKER_COUNTS = re.compile(r"the broker counted ([\d,]+) records produced, ([\d,]+) fetched")

pytestmark = pytest.mark.skipif(
    java_missing_reason() is not None, reason=str(java_missing_reason())
)


def job_process(module: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """`python -m spark_tests.jobs.<module> FLAGS` from the repository root, finished."""
    return run_module(f"spark_tests.jobs.{module}", *flags, timeout=COMMAND_TIMEOUT_S)


def run_job(module: str, *flags: str) -> subprocess.CompletedProcess[str]:
    done = job_process(module, *flags)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def broker_counts(stderr: str) -> tuple[int, int]:
    match = BROKER_COUNTS.search(stderr)
    assert match, stderr[-3000:]
    produced, fetched = (int(group.replace(",", "")) for group in match.groups())
    return produced, fetched


SIZES = ("--records", str(RECORDS), "--record-size", "100", "--partitions", "4")


def test_a_job_command_starts_its_broker_and_prints_each_run() -> None:
    done = run_job("pipeline", "--start-broker", *SIZES, "--runs", "2", "--no-warmup", "--json")

    runs = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [run["rows"] for run in runs] == [RECORDS, RECORDS]
    assert all(run["output_rows"] == 26 for run in runs)
    assert re.search(r"pipeline \[pykafka\]: median of 2 runs [\d,]+ rows/s", done.stdout)
    # Two runs read the source topic's every record and wrote 26 aggregates each.
    assert broker_counts(done.stderr) == (2 * 26, 2 * RECORDS)


def test_a_job_command_imports_no_test_code() -> None:
    # A job is a user's command: it starts its broker through nullbroker.app.launcher, not the
    # tests' helpers, which import pytest. (pytest itself may still come in here: where
    # hypothesis is installed, kio imports it, and it imports trio.testing.)
    code = (
        "import sys, spark_tests.jobs.cli\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'tests'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"


def test_the_overhead_report_runs_each_job_through_kafka_and_memrows(tmp_path: Path) -> None:
    output = tmp_path / "overhead.json"
    done = run_job(
        "overhead",
        "--start-broker",
        "--format",
        "pykafka",
        *SIZES,
        "--jobs",
        "generate_to_kafka",
        "source_to_noop",
        "--rounds",
        "2",
        "--no-warmup",
        "--output",
        str(output),
    )

    report = json.loads(output.read_text())
    runs = [(run["job"], run["format"], run["rows"]) for run in report["runs"]]
    assert sorted(runs) == sorted(
        (job, format, RECORDS)
        for job in ("generate_to_kafka", "source_to_noop")
        for format in ("pykafka", "memory")
        for _ in range(2)
    )
    for job in report["jobs"]:
        assert job["ratio"] > 0 and len(job["ratios"]) == 2
        assert job["kafka_cpu_s"]["python_workers"] > 0
        assert f"| {job['job']} [pykafka] |" in done.stdout
    # Only the Kafka runs reached the broker: two writes and two reads of RECORDS each.
    assert broker_counts(done.stderr) == (2 * RECORDS, 2 * RECORDS)


def test_the_overhead_report_runs_each_job_against_nullbroker_and_a_kafka_it_starts(
    tmp_path: Path,
) -> None:
    if (reason := kafka_missing()) is not None:
        pytest.skip(reason)
    if not connector_jars():
        pytest.skip("Spark's Kafka connector is not provisioned (scripts/ensure-spark-connector)")
    output = tmp_path / "against.json"
    done = run_job(
        "overhead", "--against", "kafka", "--format", "kafka", *SIZES,
        "--jobs", "generate_to_kafka", "source_to_noop",
        "--rounds", "1", "--no-warmup", "--output", str(output),
        # A loaded machine once kept Kafka from acknowledging a batch within the Java
        # producer's default 120 s: the run gets the time it needs (measured, not asserted).
        "--kafka-option", f"delivery.timeout.ms={KAFKA_DELIVERY_TIMEOUT_MS}",
        "--kafka-option", f"request.timeout.ms={KAFKA_DELIVERY_TIMEOUT_MS // 2}",
    )  # fmt: skip

    report = json.loads(output.read_text())
    assert report["settings"]["against"] == "kafka"
    assert report["kafka"]["version"] == KAFKA_VERSION
    runs = sorted((run["job"], run["broker"], run["rows"]) for run in report["runs"])
    assert runs == sorted(
        (job, broker, RECORDS)
        for job in ("generate_to_kafka", "source_to_noop")
        for broker in ("nullbroker", "kafka")
    )
    for run in report["runs"]:
        # Each run's broker role is the broker it used; the other one is counted apart.
        assert run["cpu_seconds"]["broker"] > 0 and "idle_broker" in run["cpu_seconds"]
    for job in report["jobs"]:
        assert 0 < job["nullbroker_broker_share"] < 1 and 0 < job["kafka_broker_share"] < 1
        assert job["ratio"] > 0 and len(job["ratios"]) == 1
        assert f"| {job['job']} [kafka] |" in done.stdout
    assert "round 1 against kafka: source_to_noop [kafka]" in done.stdout
    # nullbroker was written to and read once; Kafka holds the write and the source topic
    # it was sent before the runs, the same records nullbroker serves.
    assert broker_counts(done.stderr) == (RECORDS, RECORDS)
    held = f"Kafka holds, by topic: baseline-generated {RECORDS:,}, baseline-source {RECORDS:,}"
    assert held in done.stderr


def test_a_job_command_without_a_broker_says_what_to_give() -> None:
    done = job_process("source_to_noop", *SIZES)

    assert done.returncode != 0
    assert "give --bootstrap HOST:PORT or --start-broker" in done.stderr


def test_the_overhead_report_compares_sparks_connector_with_rows_built_in_the_jvm(
    tmp_path: Path,
) -> None:
    if not connector_jars():
        pytest.skip("Spark's Kafka connector is not provisioned (scripts/ensure-spark-connector)")
    output = tmp_path / "overhead.json"
    done = run_job(
        "overhead", "--start-broker", *SIZES,
        "--jobs", "source_to_noop", "streaming_read",
        "--max-offsets-per-trigger", str(RECORDS // 4),
        "--rounds", "1", "--no-warmup", "--output", str(output),
    )  # fmt: skip

    report = json.loads(output.read_text())
    assert report["settings"]["kafka_format"] == "kafka"  # the default
    runs = sorted((run["job"], run["format"], run["rows"]) for run in report["runs"])
    assert runs == sorted(
        (job, format, RECORDS)
        for job in ("source_to_noop", "streaming_read")
        for format in ("kafka", "range")
    )
    for job in report["jobs"]:
        assert job["twin_format"] == "range" and job["ratio"] > 0
        assert f"| {job['job']} [kafka] |" in done.stdout
    # Only the connector's runs reached the broker: two reads of RECORDS each.
    assert broker_counts(done.stderr) == (0, 2 * RECORDS)


def test_the_nexmark_command_runs_each_query_over_the_topic_it_declares() -> None:
    done = run_job("nexmark", "--start-broker", "--events", "20000", "--partitions", "2", "--json")
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [result["job"] for result in results] == [
        f"nexmark_{query}" for query in ("q0", "q1", "q2", "q3", "q5", "q7")
    ]
    assert all(result["events"] == 20_000 and result["events_per_s"] > 0 for result in results)
    assert results[0]["result_rows"] == 20_000 * 46 // 50  # q0: every bid


def test_the_latency_command_reports_percentiles_of_what_came_back() -> None:
    done = run_job("e2e_latency", "--start-broker", "--records", "300", "--rate", "300", "--json")
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["records"] == 300
    assert result["p50_ms"] <= result["p99_ms"] <= result["max_ms"]


@pytest.mark.parametrize("broker", ["nullbroker", "kafka"])
def test_the_read_timeline_reads_the_same_rows_through_the_connector_and_range(
    broker: str, tmp_path: Path
) -> None:
    if broker == "kafka" and (reason := kafka_missing()) is not None:
        pytest.skip(reason)
    if not connector_jars():
        pytest.skip("Spark's Kafka connector is not provisioned (scripts/ensure-spark-connector)")
    output = tmp_path / "timeline.json"
    run_job(
        "read_timeline", "--broker", broker, *SIZES, "--runs", "1",
        "--warmup-records", "1000", "--output", str(output),
    )  # fmt: skip

    report = json.loads(output.read_text())
    assert sorted((run["format"], run["rows"]) for run in report["runs"]) == [
        ("kafka", RECORDS),
        ("range", RECORDS),
    ]
    # One task a partition read through the connector, each with its timeline.
    connector = next(run for run in report["runs"] if run["format"] == "kafka")
    assert connector["tasks"] >= 4 and connector["task_ms_median"] > 0
    assert report["summary"]["broker"] == broker and report["summary"]["ratio"] > 0
    if broker == "nullbroker":
        # What the connector asked of the broker meanwhile: its Fetches and ListOffsets.
        assert connector["broker"]["fetches"] > 0 and connector["broker"]["list_offsets"] > 0
    else:
        assert "broker" not in connector  # Kafka is not asked for its counters
