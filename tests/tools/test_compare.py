"""perf.compare runs end to end as its users run it (`python -m perf.compare`), on tiny
workloads: nullbroker, librdkafka's mock, franz-go's kfake and Apache Kafka start, count
exactly what the load generators (perf's Python twins, and Kafka's own Java perf tools
against the brokers the Java client works with) send and serve, the floor acknowledges every
record its producers send, and the JSON, markdown table and PNG plots come out. Asserts
structure and counts, never speed.

`make test` builds kfake (scripts/ensure-kfake) and provisions Kafka's tools and broker;
without them these tests are skipped with the reason.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from perf.kafka_broker import KAFKA_VERSION
from perf.kafka_broker import missing as kafka_missing
from tests.support.kafka_tools import requires_kafka_tools

REPO = Path(__file__).resolve().parents[2]
NAME = "tiny"
RATES = ("5000", "-1")
RECORDS = 2_000
CONSUME_TOPICS = 2
RECORDS_PER_TOPIC = 1_000
RUN_TIMEOUT_S = 300
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PLOTS = ("throughput", "latency", "rss", "cpu")
BROKERS = ("nullbroker", "mock", "kfake", "kafka", "floor")
JAVA_BROKERS = ("nullbroker", "kfake", "kafka", "floor")
INGEST_ONLY = ("floor",)
"""Producing steps only: no offsets to count by, nothing to read back."""
COUNTING = tuple(broker for broker in BROKERS if broker not in INGEST_ONLY)
JAVA_CONSUMING = tuple(broker for broker in JAVA_BROKERS if broker not in INGEST_ONLY)
FLOOR_TOPIC = "ck"
EXIT_CODES = {"nullbroker": 0, "mock": 0, "kfake": 0, "kafka": 143, "floor": 0}
"""As each exits on SIGTERM: Kafka's JVM, after its clean shutdown, with 128 + 15."""
JAVA_RECORDS = 3_000
BROKER_WARMUP_RECORDS = 1_000
# More than twice what the producer's 32 MiB queue holds: the records it queues before it
# knows the partitions, and so spreads over them, all fall in the warm-up.
ONE_BATCH_RECORDS = 100_000
QUEUED_RECORDS = 32 * 1024 * 1024 // 1024
PEERS = ("mock", "kfake", "kafka", "floor")
RATIOS = {
    "produce_unlimited_records_per_sec",
    "produce_unlimited_broker_cpu_s_per_gb",
    "one_batch_records_per_sec",
    "one_batch_broker_cpu_s_per_gb",
    "consume_records_per_sec",
    "consume_broker_cpu_s_per_gb",
    "produce_peak_rss",
    "run_peak_rss",
}
FLOOR_RATIOS = {
    "produce_unlimited_records_per_sec",
    "produce_unlimited_broker_cpu_s_per_gb",
    "java_produce_records_per_sec",
    "java_produce_broker_cpu_s_per_gb",
    "produce_peak_rss",
    "run_peak_rss",
}
JAVA_RATIOS = {
    "java_produce_records_per_sec",
    "java_produce_broker_cpu_s_per_gb",
    "java_consume_records_per_sec",
    "java_consume_broker_cpu_s_per_gb",
}
KFAKE_BUILT = list((REPO / ".cache" / "kfake").glob("*/kfake-host"))

pytestmark = [
    requires_kafka_tools,
    pytest.mark.slow,
    pytest.mark.skipif(
        not KFAKE_BUILT, reason="kfake is not built; scripts/ensure-kfake (make test) builds it"
    ),
    pytest.mark.skipif(kafka_missing() is not None, reason=str(kafka_missing())),
]


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, Any]]:
    """One tiny comparison, shared by the tests below: (results dir, stdout, JSON)."""
    results = tmp_path_factory.mktemp("results")
    command = [
        sys.executable, "-m", "perf.compare",
        "--name", NAME,
        "--rates", *RATES,
        "--records-per-step", str(RECORDS),
        "--repeats", "1",
        "--consume-topics", str(CONSUME_TOPICS),
        "--consume-records-per-topic", str(RECORDS_PER_TOPIC),
        "--java-records", str(JAVA_RECORDS),
        "--one-batch-records", str(ONE_BATCH_RECORDS),
        "--broker-warmup-records", str(BROKER_WARMUP_RECORDS),
        "--results-dir", str(results),
    ]  # fmt: skip
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return results, run.stdout, json.loads((results / f"{NAME}.json").read_text())


def steps_of(result: dict[str, Any], phase: str, broker: str) -> list[dict[str, Any]]:
    return [s for s in result["steps"] if s["phase"] == phase and s["broker"] == broker]


def test_the_json_records_settings_machine_steps_samples_and_medians(
    compared: tuple[Path, str, dict[str, Any]],
) -> None:
    _, _, result = compared
    assert result["name"] == NAME
    assert result["command"].startswith("python -m perf.compare --name tiny")
    assert result["settings"]["rates"] == [5000.0, -1.0]
    assert result["settings"]["repeats"] == 1
    for key in ("cpu_model", "cores", "kernel", "python", "client", "date", "nullbroker_commit"):
        assert result["machine"][key], key
    assert "librdkafka" in result["machine"]["client"]
    assert result["settings"]["brokers"] == list(BROKERS)
    assert result["brokers"]["kfake"]["version"].startswith("v")
    kafka = result["brokers"]["kafka"]
    assert (kafka["version"], kafka["heap"], kafka["child_processes"]) == (
        KAFKA_VERSION,
        "-Xmx1g",
        0,
    )
    assert "process.roles=broker,controller" in kafka["server_properties"]
    assert "num.partitions=4" in kafka["server_properties"]
    for broker in BROKERS:
        assert result["brokers"][broker]["exit_code"] == EXIT_CODES[broker]
        assert (
            result["brokers"][broker]["peak_rss_kib"]
            >= result["brokers"][broker]["idle_rss_kib"]
            > 0
        )
        samples = result["samples"][broker]
        assert samples and all(s["rss_kib"] > 0 for s in samples)
        assert [s["t"] for s in samples] == sorted(s["t"] for s in samples)
        assert len(steps_of(result, "produce", broker)) == len(RATES)
        counting = 1 if broker in COUNTING else 0
        assert len(steps_of(result, "one-batch", broker)) == counting
        assert len(steps_of(result, "fill", broker)) == CONSUME_TOPICS * counting
        assert len(steps_of(result, "consume", broker)) == counting
        assert len(steps_of(result, "java-produce", broker)) == (broker in JAVA_BROKERS)
        assert len(steps_of(result, "java-consume", broker)) == (broker in JAVA_CONSUMING)
    for step in result["steps"]:
        assert step["count_ok"], step
        assert step["broker_cpu_s"] >= 0 and step["wall_s"] > 0
        assert step["window"]["start_s"] <= step["window"]["end_s"]
        assert step["broker_peak_rss_kib"] > 0
        assert step["figures"]["limit"] in ("target", "client", "broker", "cores", "-")
    rows = {(row["phase"], row["broker"], row["target"]): row for row in result["summary"]}
    assert set(rows) == {
        *(("produce", broker, float(rate)) for broker in BROKERS for rate in RATES),
        *(("one-batch", broker, -1) for broker in COUNTING),
        *(("consume", broker, None) for broker in COUNTING),
        *(("java-produce", broker, -1) for broker in JAVA_BROKERS),
        *(("java-consume", broker, None) for broker in JAVA_CONSUMING),
    }
    for row in rows.values():
        assert row["repeats"] == 1 and row["records_per_sec"] > 0
    # The brokers' warm-up, before the first step, is in no row.
    assert result["steps"][0]["phase"] == "broker-warmup"
    assert set(result["ratios"]) == set(PEERS)
    assert set(result["ratios"]["mock"]) == RATIOS
    assert set(result["ratios"]["kfake"]) == RATIOS | JAVA_RATIOS
    assert set(result["ratios"]["kafka"]) == RATIOS | JAVA_RATIOS
    assert set(result["ratios"]["floor"]) == FLOOR_RATIOS


def test_every_broker_counts_every_record_sent(
    compared: tuple[Path, str, dict[str, Any]],
) -> None:
    _, _, result = compared
    for step in steps_of(result, "produce", "floor"):
        # The floor keeps no offsets: every record the client sent, acknowledged.
        assert step["records"] == step["client"]["records"] == RECORDS
        assert step["broker_counted"] is None and step["client"]["failed"] == 0
        assert step["topic"] == FLOOR_TOPIC
    floor = result["brokers"]["floor"]
    assert floor["topic"] == FLOOR_TOPIC and floor["unanswered"] == []
    assert floor["served"]["produce"] > 0
    assert floor["served"]["bytes_read"] > (len(RATES) * RECORDS + JAVA_RECORDS) * 1024
    for broker in COUNTING:
        for step in steps_of(result, "produce", broker):
            # The growth of the topic's log-end offsets over the step, on either broker.
            assert step["records"] == step["client"]["records"] == RECORDS
            assert step["broker_counted"] == RECORDS
            assert step["client"]["failed"] == 0
        for step in steps_of(result, "fill", broker):
            assert step["broker_counted"] == RECORDS_PER_TOPIC
        (warmup,) = steps_of(result, "broker-warmup", broker)
        assert warmup["client"]["records"] == warmup["broker_counted"] == BROKER_WARMUP_RECORDS
        (one_batch,) = steps_of(result, "one-batch", broker)
        assert one_batch["client"]["records"] == one_batch["broker_counted"] == ONE_BATCH_RECORDS
        # The step's records on one partition, but for those queued before the producer knew
        # the partitions, within the warm-up: one batch a request.
        counts = sorted(one_batch["partition_records"].values())
        assert len(counts) == 4 and sum(counts[:-1]) == one_batch["spread_records"]
        assert one_batch["one_batch_ok"] and one_batch["spread_records"] <= QUEUED_RECORDS
        assert f"--warmup-records {QUEUED_RECORDS}" in one_batch["client_command"]
        assert "sticky.partitioning.linger.ms=900000" in one_batch["client_command"]
    summary = result["nullbroker_summary"]["produced"]["topics"]
    assert summary["compare-produce"]["records"] == RECORDS * len(RATES)
    assert summary["compare-one-batch"]["records"] == ONE_BATCH_RECORDS
    for index in range(CONSUME_TOPICS):
        assert summary[f"compare-consume-{index}"]["records"] == RECORDS_PER_TOPIC
    assert summary["compare-java"]["records"] == JAVA_RECORDS
    assert summary["compare-broker-warmup"]["records"] == BROKER_WARMUP_RECORDS
    assert result["checks"]["nullbroker"]["produced_ok"]


def test_kafkas_java_perf_tools_are_counted_exactly_on_nullbroker_kfake_and_kafka(
    compared: tuple[Path, str, dict[str, Any]],
) -> None:
    _, _, result = compared
    (floor,) = steps_of(result, "java-produce", "floor")
    # Every record acknowledged (the tool counts no other), into the floor's one topic.
    assert floor["client"]["records"] == JAVA_RECORDS and floor["broker_counted"] is None
    assert f"kafka-producer-perf-test --topic {FLOOR_TOPIC} " in floor["client_command"]
    for broker in JAVA_CONSUMING:
        (produced,) = steps_of(result, "java-produce", broker)
        assert produced["client"]["tool"] == "kafka-producer-perf-test"
        # Its final line, and the growth of the topic's log-end offsets over the step.
        assert produced["client"]["records"] == produced["broker_counted"] == JAVA_RECORDS
        assert produced["client_command"].startswith(
            "scripts/kafka-bin/kafka-producer-perf-test --topic compare-java"
        )
        (consumed,) = steps_of(result, "java-consume", broker)
        assert consumed["client"]["tool"] == "kafka-consumer-perf-test"
        assert consumed["client"]["records"] == JAVA_RECORDS == consumed["broker_counted"]
        assert not consumed["client"]["timed_out"]
        assert consumed["figures"]["client_thread_cores"] is None
        assert consumed["figures"]["client_cores"] > 0


def test_consumers_read_back_what_the_mock_kfake_and_kafka_stored_and_nullbroker_served(
    compared: tuple[Path, str, dict[str, Any]],
) -> None:
    _, _, result = compared
    stored = CONSUME_TOPICS * RECORDS_PER_TOPIC
    (mock,) = steps_of(result, "consume", "mock")
    assert mock["broker_counted"] == stored  # the mock still holds every record filled
    assert mock["client"]["records"] == stored
    assert not mock["client"]["timed_out"]
    for keeps_all in ("kfake", "kafka"):
        (step,) = steps_of(result, "consume", keeps_all)
        assert step["broker_counted"] == step["client"]["records"] == stored
    (ours,) = steps_of(result, "consume", "nullbroker")
    assert ours["client"]["records"] == stored
    checks = result["checks"]["nullbroker"]
    assert checks["consumer_read"] == stored + JAVA_RECORDS
    assert checks["fetched_ok"] and checks["fetched_records"] >= stored + JAVA_RECORDS


def test_the_markdown_table_has_a_row_per_broker_and_rate(
    compared: tuple[Path, str, dict[str, Any]],
) -> None:
    results, _, _ = compared
    page = (results / f"{NAME}.md").read_text()
    assert "| broker | target rate | records/s | MB/s | avg ms | max ms | p50 ms | p95 ms |" in page
    for broker in BROKERS:
        for rate in ("5,000", "unlimited"):
            assert f"| {broker} | {rate} | " in page
    one_batch = page.split("### One batch a request")[1].split("## Consuming")[0]
    for broker in BROKERS:
        assert (f"| {broker} | unlimited | " in one_batch) == (broker in COUNTING)
    assert "Not one batch a request throughout" not in one_batch
    assert "## Consuming" in page and "## nullbroker / mock" in page
    assert "## nullbroker / kfake" in page and "## Kafka's Java perf tools" in page
    assert (
        "## nullbroker / kafka" in page
        and f"Kafka is Apache Kafka {KAFKA_VERSION}, one KRaft node" in page
    )
    assert "## nullbroker / floor" in page and f"`{FLOOR_TOPIC}`" in page
    java_producers = page.split("### kafka-producer-perf-test")[1].split("### kafka-consumer")[0]
    java_consumers = page.split("### kafka-consumer-perf-test")[1].split("## nullbroker /")[0]
    for broker in JAVA_BROKERS:
        assert f"| {broker} | " in java_producers
        assert (f"| {broker} | " in java_consumers) == (broker in JAVA_CONSUMING)
    assert "| mock | " not in page.split("## Kafka's Java perf tools")[1]
    for kind in PLOTS:
        assert f"]({NAME}-{kind}.png)" in page


def test_the_plots_are_png_images(compared: tuple[Path, str, dict[str, Any]]) -> None:
    results, _, result = compared
    assert result["plots"] == [f"{NAME}-{kind}.png" for kind in PLOTS]
    for kind in PLOTS:
        data = (results / f"{NAME}-{kind}.png").read_bytes()
        assert data.startswith(PNG_SIGNATURE)
        length, chunk, width, height = struct.unpack(">I4sII", data[8:24])
        assert (length, chunk) == (13, b"IHDR") and width > 0 and height > 0


def test_it_prints_the_ratios_and_what_it_wrote(compared: tuple[Path, str, dict[str, Any]]) -> None:
    results, stdout, _ = compared
    lines = stdout.splitlines()
    assert sum(line.startswith("nullbroker/mock ") for line in lines) == len(RATIOS)
    java_peer = len(RATIOS | JAVA_RATIOS)
    assert sum(line.startswith("nullbroker/kfake ") for line in lines) == java_peer
    assert sum(line.startswith("nullbroker/kafka ") for line in lines) == java_peer
    assert sum(line.startswith("nullbroker/floor ") for line in lines) == len(FLOOR_RATIOS)
    assert any(line.startswith("client-bound rows: ") for line in lines)
    assert f"wrote {results / (NAME + '.md')}" in lines


def test_render_only_derives_the_same_table_again_from_the_saved_json(
    compared: tuple[Path, str, dict[str, Any]], tmp_path: Path
) -> None:
    results, _, result = compared
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / f"{NAME}.json").write_text((results / f"{NAME}.json").read_text())
    command = [sys.executable, "-m", "perf.compare", "--name", NAME, "--render-only"]
    run = subprocess.run(
        [*command, "--results-dir", str(copy)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    assert run.returncode == 0, run.stderr
    assert (copy / f"{NAME}.md").read_text() == (results / f"{NAME}.md").read_text()
    assert json.loads((copy / f"{NAME}.json").read_text())["summary"] == result["summary"]
    for kind in PLOTS:
        assert (copy / f"{NAME}-{kind}.png").read_bytes().startswith(PNG_SIGNATURE)
