"""The perf tools behave as documented: their output lines, JSON files and flag errors.

Smoke runs only (few iterations, small record counts): these tests assert formats and exact
counts, never speed. The producer and consumer twins run as their users run them, as
`python -m perf....` processes against a `nullbroker serve` process.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kio.serial import entity_reader

from codec.apis import request_schema
from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from perf import cluster_scaling, codec_bench, consumer_perf, producer_perf
from perf.frames import fixed_set
from perf.kafka_tools import ToolError, load_properties, parse_key_values
from tests.support.broker_counts import metric_total, per_partition, samples
from tests.support.kafka_tools import requires_kafka_tools
from tests.support.module_command import run_module
from tests.support.vectors import by_file, frame_bytes

TOOL_TIMEOUT = 60

NUMBER = r"\d+\.\d+"
ROW = re.compile(
    r"^(?P<api>\w+) +(?P<dir>req|resp) +(?P<version>\d+) (?P<client>\S+) +(?P<bytes>\d+) +"
    r"(?P<ours>[\d,]+) +(?P<kio>[\d,]+) +(?P<ratio>\d+\.\d\d)x  (?P<file>\S+)$"
)
SUMMARY = re.compile(
    rf"^summary: kio/ours geometric mean {NUMBER}x over (?P<frames>\d+) frames \(target >= 2x\); "
    rf"Produce request decode \+ response encode "
    rf"(?:{NUMBER}x over (?P<pairs>\d+) pairs|n/a \(no Produce request with its response "
    r"selected\)) \(target >= 5x\)$"
)
WINDOW = re.compile(
    rf"^(?P<records>\d+) records sent, {NUMBER} records/sec \({NUMBER} MB/sec\), "
    rf"{NUMBER} ms avg latency, {NUMBER} ms max latency\.$"
)
TOTAL = re.compile(
    rf"^(?P<records>\d+)(?P<steady> steady state)? records sent, \d+\.\d{{6}} records/sec "
    rf"\({NUMBER} MB/sec\), {NUMBER} ms avg latency, {NUMBER} ms max latency, "
    rf"{NUMBER} ms 50th, {NUMBER} ms 95th, {NUMBER} ms 99th, {NUMBER} ms 99\.9th\.$"
)
CONSUMER_HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
DETAILED_HEADER = (
    "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
DATE = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
FLOAT4 = r"(?:\d+\.\d{4}|Infinity|NaN)"
CONSUMER_LINE = re.compile(
    rf"^{DATE}, {DATE}, (?P<mb>\d+\.\d{{4}}), {FLOAT4}, (?P<records>\d+), {FLOAT4}, "
    rf"(?P<rebalance>\d+), (?P<fetch_ms>\d+), {FLOAT4}, {FLOAT4}$"
)
DETAILED_LINE = re.compile(
    rf"^{DATE}, 0, \d+\.\d{{4}}, {FLOAT4}, (?P<records>\d+), {FLOAT4}, \d+, -?\d+, "
    r"\d+\.\d{4}, \d+\.\d{4}$"
)
METRIC_LINE = re.compile(r"^\w+:[\w.-]+:\{client-id=[^}]*\} +: \S+$")


def run_tool(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m perf.<module> args...` from the repository root, as the docs say."""
    return run_module(f"perf.{module}", *args, timeout=TOOL_TIMEOUT)


# -- codec_bench ------------------------------------------------------------------------------


def test_codec_bench_prints_a_row_per_frame_and_writes_the_json_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "codec.json"
    argv = ["--api", "Produce,heartbeat", "--iterations", "3", "--repeats", "2"]
    assert codec_bench.main([*argv, "--json", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    selected = [f for f in fixed_set() if f.api in ("Produce", "Heartbeat")]

    assert (
        lines[0]
        == f"round trip: {len(selected)} frames byte-identical through codec and through kio"
    )
    assert lines[2] == codec_bench.TABLE_HEADER
    rows = [ROW.match(line) for line in lines[3:-1]]
    assert all(rows), lines[3:-1]
    assert [row["file"] for row in rows if row] == [frame.file for frame in selected]
    summary = SUMMARY.match(lines[-1])
    assert summary is not None, lines[-1]
    assert int(summary["frames"]) == len(selected)
    produce_requests_with_responses = sum(
        1
        for frame in selected
        if frame.api == "Produce"
        and frame.direction == "request"
        and any(other.file == frame.file.replace("-request", "-response") for other in selected)
    )
    assert int(summary["pairs"]) == produce_requests_with_responses == 12

    document = json.loads(out.read_text())
    assert [entry["file"] for entry in document["frames"]] == [frame.file for frame in selected]
    for entry, frame in zip(document["frames"], selected, strict=True):
        assert set(entry) == {
            "file",
            "client",
            "api",
            "version",
            "direction",
            "ns_per_op",
            "kio_ns_per_op",
        }
        assert (entry["client"], entry["api"], entry["version"], entry["direction"]) == (
            frame.client,
            frame.api,
            frame.version,
            frame.direction,
        )
        assert entry["ns_per_op"] > 0 and entry["kio_ns_per_op"] > 0
    assert document["summary"]["frames"] == len(selected)


def test_codec_bench_without_produce_pairs_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert codec_bench.main(["--api", "CreateTopics", "--iterations", "1", "--repeats", "1"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    match = SUMMARY.match(last)
    assert match is not None and match["pairs"] is None, last


def test_every_frame_of_the_set_round_trips_byte_for_byte() -> None:
    for frame in fixed_set():
        codec_bench.check_roundtrip(frame)


def test_the_round_trip_check_catches_a_frame_that_does_not_come_back() -> None:
    frames = {frame.file: frame for frame in fixed_set()}
    for file in ("java-4.0/007-Produce-v10-request.bin", "java-4.0/007-Produce-v10-response.bin"):
        tampered = dataclasses.replace(frames[file], data=frames[file].data + b"\x00")
        with pytest.raises(codec_bench.RoundTripError, match=re.escape(file)):
            codec_bench.check_roundtrip(tampered)


def test_a_produce_response_with_fields_the_broker_never_sets_is_refused() -> None:
    # As recorded, the mock's answer carries a log append time (1234 ms): codec's Produce
    # encoder never writes one, so the set holds it with -1, and the raw one must not pass.
    file = "java-4.0/007-Produce-v10-response.bin"
    normalised = next(frame for frame in fixed_set() if frame.file == file)
    assert "log append time set to -1" in normalised.note
    recorded = dataclasses.replace(normalised, data=frame_bytes(file))
    with pytest.raises(codec_bench.RoundTripError, match="fields the broker never sets"):
        codec_bench.check_roundtrip(recorded)


def test_a_hand_written_decoders_view_is_written_back_as_kios_entity() -> None:
    frame = next(f for f in fixed_set() if f.file == "java-4.0/007-Produce-v10-request.bin")
    schema = request_schema(frame.api_key, frame.version)
    view = codec_bench.readonly(frame.data)
    _header, header_size = entity_reader(schema.__header_schema__)(view, 0)
    entity, _ = entity_reader(schema)(view, header_size)
    # The shape of codec.produce's view: kio's names, timeout in ms, records as memoryviews.
    lookalike = SimpleNamespace(
        transactional_id=entity.transactional_id,
        acks=entity.acks,
        timeout_ms=int(entity.timeout.total_seconds() * 1000),
        topic_data=tuple(
            SimpleNamespace(
                name=topic.name,
                topic_id=None,
                partition_data=tuple(
                    SimpleNamespace(index=p.index, records=memoryview(p.records))
                    for p in topic.partition_data
                ),
            )
            for topic in entity.topic_data
        ),
    )
    assert codec_bench.as_kio_entity(schema, lookalike) == entity
    assert codec_bench.as_kio_entity(schema, entity) is entity


def test_codec_bench_refuses_to_time_a_frame_that_does_not_round_trip(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frames = fixed_set()
    broken = dataclasses.replace(frames[0], data=frames[0].data + b"\x00")
    monkeypatch.setattr(codec_bench, "fixed_set", lambda: [broken, *frames[1:]])
    with pytest.raises(codec_bench.RoundTripError):
        codec_bench.main(["--iterations", "1", "--repeats", "1"])


def test_the_frame_set_covers_what_the_issue_lists() -> None:
    frames = fixed_set()
    apis = {frame.api for frame in frames}
    assert {
        "ApiVersions",
        "Metadata",
        "Produce",
        "Fetch",
        "FindCoordinator",
        "JoinGroup",
        "SyncGroup",
        "Heartbeat",
        "LeaveGroup",
        "OffsetCommit",
        "OffsetFetch",
        "ListOffsets",
        "InitProducerId",
        "CreateTopics",
    } <= apis
    entries = by_file()
    codecs = {
        codec
        for frame in frames
        if frame.api == "Produce" and frame.direction == "request" and frame.client != "built"
        for codec in entries[frame.file]["produce"]["compression"]
    }
    assert codecs == {"none", "gzip", "snappy", "lz4", "zstd"}
    built = {frame.file for frame in frames if frame.client == "built"}
    assert built == {
        "built/CreateTopics-v7-request.bin",
        "built/CreateTopics-v7-response.bin",
        "built/Produce-1-record-v10-request.bin",
        "built/Produce-1-record-v10-response.bin",
    }
    fetch_responses = [f for f in frames if f.api == "Fetch" and f.direction == "response"]
    assert max(len(frame.data) for frame in fetch_responses) > 16 * 1024


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--api", "Nope"], "unknown API nope; the frame set has "),
        (["--iterations", "0"], "must be a positive integer"),
        (["--repeats", "-1"], "must be a positive integer"),
    ],
)
def test_codec_bench_flag_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        codec_bench.main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_codec_bench_lists_the_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert codec_bench.main(["--list", "--api", "CreateTopics"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [
        "built/CreateTopics-v7-request.bin",
        "built/CreateTopics-v7-response.bin",
    ]
    assert all("not recorded: built with kio" in line for line in lines)


# -- producer_perf ----------------------------------------------------------------------------


def produced_records(broker: RunningBroker) -> int:
    return int(metric_total(broker.scrape(), "nullbroker_produced_records_total"))


def test_producer_perf_prints_kafkas_lines_and_every_record_reaches_the_broker(
    nullbroker_factory: StartBroker, tmp_path: Path
) -> None:
    broker = nullbroker_factory()
    out = tmp_path / "producer.json"
    result = run_tool(
        "producer_perf",
        "--bootstrap-server", broker.bootstrap,
        "--topic", "perf",
        "--num-records", "1500",
        "--record-size", "100",
        "--throughput", "5000",
        "--reporting-interval", "100",
        "--warmup-records", "300",
        "--json", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "Warmup first 300 records. Steady state results will print after the complete test summary."
    )
    assert "In steady state." in lines
    windows = [WINDOW.match(line) for line in lines if line.endswith("max latency.")]
    assert windows and all(windows), lines
    total, steady = TOTAL.match(lines[-2]), TOTAL.match(lines[-1])
    assert total is not None and steady is not None, lines[-2:]
    assert (total["records"], total["steady"]) == ("1500", None)
    assert (steady["records"], steady["steady"]) == ("1200", " steady state")
    assert set(lines) - {lines[0], "In steady state.", lines[-2], lines[-1]} == {
        line for line in lines if WINDOW.match(line)
    }

    document = json.loads(out.read_text())
    assert document["records"] == 1500 and document["bytes"] == 1500 * 100
    assert document["failed"] == 0
    assert document["steady_state"]["records"] == 1200
    for key in ("records_per_sec", "mb_per_sec", "avg_latency_ms", "max_latency_ms"):
        assert document[key] > 0
    assert 0 < document["p50_ms"] <= document["p95_ms"] <= document["p99_ms"]
    assert document["p99_ms"] <= document["p999_ms"] <= document["max_latency_ms"]
    assert document["windows"] and set(document["windows"][0]) == {
        "records",
        "records_per_sec",
        "mb_per_sec",
        "avg_latency_ms",
        "max_latency_ms",
    }
    # The Java producer's defaults, in librdkafka's names.
    assert document["config"]["enable.idempotence"] == "true"
    assert document["config"]["batch.size"] == "16384"
    assert produced_records(broker) == 1500


def test_producer_perf_reads_payload_files_and_prints_metrics(
    nullbroker_factory: StartBroker, tmp_path: Path
) -> None:
    broker = nullbroker_factory()
    payloads = tmp_path / "payloads.txt"
    payloads.write_text("alpha|beta|gamma\n")
    config = tmp_path / "producer.properties"
    config.write_text(f"# as Kafka's tools read them\nbootstrap.servers={broker.bootstrap}\n")
    out = tmp_path / "producer.json"
    result = run_tool(
        "producer_perf",
        "--producer.config", str(config),
        "--topic", "payloads",
        "--num-records", "60",
        "--payload-file", str(payloads),
        "--payload-delimiter", r"\||\n",
        "--throughput", "-1",
        "--producer-props", "acks=1", "statistics.interval.ms=100",
        "--print-metrics",
        "--json", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"Reading payloads from: {payloads.resolve()}"
    assert lines[1] == "Number of messages read: 3"
    total = TOTAL.match(lines[2])
    assert total is not None and total["records"] == "60", lines[2]
    assert lines[3] == ""
    assert re.match(r"^Metric Name +Value$", lines[4])
    metrics = lines[5:]
    assert metrics and all(METRIC_LINE.match(line) for line in metrics), metrics[:5]
    assert any(line.startswith("client:txmsgs:") for line in metrics)

    document = json.loads(out.read_text())
    assert document["records"] == 60
    assert 60 * len("beta") <= document["bytes"] <= 60 * len("alpha")
    # acks=1 turns the Java default of idempotence off, as in Java 4.x.
    assert document["config"]["enable.idempotence"] == "false"
    assert produced_records(broker) == 60


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--num-records", "5", "--record-size", "1", "--throughput", "-1"], "--topic"),
        (
            ["--topic", "t", "--num-records", "5", "--record-size", "1", "--payload-monotonic",
             "--throughput", "-1"],
            "not allowed with argument",
        ),
        (["--topic", "t", "--num-records", "5", "--throughput", "-1"], "one of the arguments"),
        (
            ["--topic", "t", "--num-records", "0", "--record-size", "1", "--throughput", "-1",
             "--bootstrap-server", "127.0.0.1:1"],
            "--num-records should be greater than zero",
        ),
        (
            ["--topic", "t", "--num-records", "5", "--record-size", "1", "--throughput", "-1",
             "--warmup-records", "5", "--bootstrap-server", "127.0.0.1:1"],
            "--warmup-records must be strictly fewer",
        ),
        (
            ["--topic", "t", "--num-records", "5", "--record-size", "0", "--throughput", "-1",
             "--bootstrap-server", "127.0.0.1:1"],
            "--record-size should be greater than zero",
        ),
        (
            ["--topic", "t", "--num-records", "5", "--record-size", "1", "--throughput", "0",
             "--bootstrap-server", "127.0.0.1:1"],
            "--throughput must be a positive rate",
        ),
        (
            ["--topic", "t", "--num-records", "5", "--record-size", "1", "--throughput", "-1"],
            "no broker to send to",
        ),
        (
            ["--topic", "t", "--num-records", "5", "--record-size", "1", "--throughput", "-1",
             "--command-property", "bootstrap.servers"],
            "Invalid property: bootstrap.servers",
        ),
        (
            ["--topic", "t", "--num-records", "5", "--record-size", "1", "--throughput", "-1",
             "--bootstrap-server", "127.0.0.1:1", "--transaction-duration-ms", "0"],
            "--transaction-duration-ms should be greater than zero",
        ),
    ],
)  # fmt: skip
def test_producer_perf_flag_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        producer_perf.main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_producer_perf_without_arguments_prints_its_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert producer_perf.main([]) == 0
    assert "kafka-producer-perf-test on confluent-kafka" in capsys.readouterr().out


def test_java_producer_properties_are_mapped_to_librdkafka() -> None:
    config = producer_perf.producer_config(
        {
            "bootstrap.servers": "127.0.0.1:1",
            "buffer.memory": "1048577",
            "max.request.size": "2000000",
            "receive.buffer.bytes": "-1",
            "compression.zstd.level": "3",
            "key.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
            "linger.ms": "0",
        },
        warn=sys.stderr,
    )
    assert config["queue.buffering.max.kbytes"] == "1025"
    assert config["message.max.bytes"] == "2000000"
    assert config["socket.receive.buffer.bytes"] == "0"
    assert config["compression.level"] == "3"
    assert "key.serializer" not in config
    assert config["linger.ms"] == "0"
    assert config["enable.idempotence"] == "true"
    assert config["client.id"] == "perf-producer-client"


def test_properties_files_and_key_values_parse_as_kafkas_tools_read_them(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "# comment\n! also a comment\n\nacks = all\nlinger.ms: 5\nsasl.jaas.config=a=b\n"
    )
    assert load_properties(path) == {"acks": "all", "linger.ms": "5", "sasl.jaas.config": "a=b"}
    assert parse_key_values(["a=1", "b=x=y"]) == {"a": "1", "b": "x=y"}
    with pytest.raises(ToolError, match="Invalid property: nope"):
        parse_key_values(["nope"])


def test_the_throttler_paces_like_kafkas() -> None:
    naps: list[float] = []
    throttler = producer_perf.ThroughputThrottler(1000.0, 0, naps.append)
    assert not throttler.should_throttle(0, 0)  # no time has passed yet
    assert throttler.should_throttle(2000, 1000)  # 2000 records in 1 s is above 1000/s
    assert not throttler.should_throttle(999, 1000)
    throttler.throttle()  # 1 ms owed: below Kafka's 2 ms minimum nap
    assert naps == []
    throttler.throttle()  # 2 ms owed: nap (through the producer's poll)
    assert naps and naps[0] == pytest.approx(0.002, abs=1e-6)
    assert throttler.sleep_deficit_ns == 0
    assert not producer_perf.ThroughputThrottler(-1, 0, naps.append).should_throttle(10**9, 1)


# -- consumer_perf ----------------------------------------------------------------------------


def consume(broker: RunningBroker, tmp_path: Path, *args: str) -> tuple[list[str], dict[str, Any]]:
    out = tmp_path / "consumer.json"
    result = run_tool(
        "consumer_perf", "--bootstrap-server", broker.bootstrap, "--json", str(out), *args
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines(), json.loads(out.read_text())


def test_consumer_perf_reads_every_record_of_a_source_topic(
    nullbroker_factory: StartBroker, tmp_path: Path
) -> None:
    broker = nullbroker_factory(
        "--source", "bounded:partitions=2,records=500,size=100,key-size=4",
        "--source", "live:partitions=1,rate=2000,size=10",
    )  # fmt: skip
    lines, document = consume(
        broker,
        tmp_path,
        "--topic",
        "bounded",
        "--messages",
        "1000",
        "--assign",
        # Generous: a loaded CI machine must not turn into a timed-out read.
        "--timeout",
        "60000",
    )
    assert lines[0] == CONSUMER_HEADER
    line = CONSUMER_LINE.match(lines[1])
    assert line is not None, lines
    assert len(lines) == 2
    assert (line["records"], line["rebalance"]) == ("1000", "0")
    assert line["mb"] == f"{1000 * 104 / 2**20:.4f}"
    assert document["records"] == 1000 and document["bytes"] == 1000 * (100 + 4)
    assert document["mode"] == "assign" and document["timed_out"] is False
    assert set(document) >= {
        "start_time", "end_time", "mb", "mb_per_sec", "records", "records_per_sec",
        "rebalance_time_ms", "fetch_time_ms", "fetch_mb_per_sec", "fetch_records_per_sec",
    }  # fmt: skip

    # Past the end of a bounded topic: the warning, and the records that were there. The
    # timeout is idle time after the last record: long enough that a loaded machine's slow
    # fetch of the second partition is not taken for the end (300 ms once was).
    lines, document = consume(
        broker, tmp_path, "--topic", "bounded", "--num-records", "1001", "--assign",
        "--timeout", "3000", "--hide-header",
    )  # fmt: skip
    assert lines[0].startswith("WARNING: Exiting before consuming the expected number of records")
    assert "timeout (3000 ms) exceeded" in lines[0]
    match = CONSUMER_LINE.match(lines[1])
    assert match is not None and match["records"] == "1000", lines
    assert document["timed_out"] is True

    # A growing topic from its end: a progress line per interval.
    lines, document = consume(
        broker, tmp_path, "--topic", "live", "--num-records", "400", "--assign",
        "--from-latest", "--show-detailed-stats", "--reporting-interval", "50",
    )  # fmt: skip
    assert lines[0] == DETAILED_HEADER
    progress = [DETAILED_LINE.match(line) for line in lines[1:]]
    assert progress and all(progress), lines
    # As Kafka's tool, the last poll's records all count, even past --num-records.
    assert 400 <= document["records"] < 400 + consumer_perf.DEFAULT_MAX_POLL_RECORDS


def test_consumer_perf_subscribe_joins_a_group_and_reads_every_record(
    nullbroker_factory: StartBroker, tmp_path: Path
) -> None:
    broker = nullbroker_factory("--source", "bounded:partitions=2,records=500,size=100")
    lines, document = consume(
        broker, tmp_path, "--topic", "bounded", "--num-records", "1000", "--group", "perf-g"
    )
    line = CONSUMER_LINE.match(lines[1])
    assert line is not None and line["records"] == "1000", lines
    assert document["mode"] == "subscribe" and document["records"] == 1000


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--topic", "t", "--num-records", "1"], "--bootstrap-server"),
        (["--bootstrap-server", "h:1", "--topic", "t"], "exactly one of --num-records"),
        (
            ["--bootstrap-server", "h:1", "--topic", "t", "--num-records", "1", "--messages", "1"],
            "exactly one of --num-records",
        ),
        (
            ["--bootstrap-server", "h:1", "--topic", "t", "--num-records", "1",
             "--reporting-interval", "0"],
            "Reporting interval must be greater than 0.",
        ),
        (
            ["--bootstrap-server", "h:1", "--topic", "t", "--num-records", "1",
             "--command-property", "oops"],
            "Invalid property: oops",
        ),
    ],
)  # fmt: skip
def test_consumer_perf_flag_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        consumer_perf.main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


# -- replay -----------------------------------------------------------------------------------


def test_replay_produce_counts_every_request_and_reports_the_brokers_cpu(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--partitions", "2")
    result = run_tool(
        "replay", "produce",
        "--bootstrap-server", broker.bootstrap,
        "--topic", "replayed",
        "--requests", "300",
        "--in-flight", "7",
        "--partitions", "2",
        "--records-per-batch", "5",
        "--record-size", "100",
        "--broker-pid", str(broker.process.pid),
        "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert (document["workload"], document["requests"], document["records"]) == (
        "produce",
        300,
        300 * 2 * 5,
    )
    # The same request 300 times: a multiple of its size, which holds the 3000 values.
    assert document["bytes"] % 300 == 0 and document["bytes"] > 300 * 2 * 5 * 100
    assert document["broker_cpu_seconds"] >= 0 and "broker_cpu_seconds_per_gb" in document
    assert produced_records(broker) == 3000
    produced = samples(broker.scrape(), "nullbroker_produced_records_total")
    assert sorted(produced.values()) == [1500, 1500]


def test_replay_produce_from_several_processes_writes_through_every_leader_of_a_cluster(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--brokers", "3", "--partitions", "5", "--processes", "2")
    result = run_tool(
        "replay", "produce",
        "--bootstrap-server", broker.bootstrap,
        "--topic", "spread",
        "--partitions", "5",
        "--clients", "2",
        "--requests", "40",
        "--records-per-batch", "3",
        "--record-size", "50",
        "--broker-pid", str(broker.process.pid),
        "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    # Every node leads some of the 5 partitions: a connection from each client to each.
    assert (document["clients"], document["connections"], document["broker_processes"]) == (
        2,
        6,
        3,
    )
    assert (document["requests"], document["records"]) == (2 * 3 * 40, 2 * 40 * 5 * 3)
    assert document["client_cpu_seconds"] > 0 and document["broker_cpu_seconds"] >= 0
    # Each Produce went to its partitions' leader: none refused, every record counted once.
    assert per_partition(broker.scrape(), "nullbroker_produced_records_total") == {
        ("spread", partition): 2 * 40 * 3 for partition in range(5)
    }
    produce_requests = samples(broker.scrape(), "nullbroker_node_requests_total")
    assert len(produce_requests) == 3 and sum(produce_requests.values()) >= 2 * 3 * 40
    # Paced: request n of a connection is not sent before n / rate seconds have passed.
    paced = run_tool(
        "replay", "produce", "--bootstrap-server", broker.bootstrap, "--topic", "spread",
        "--partitions", "5", "--clients", "2", "--requests", "20", "--rate", "200",
        "--records-per-batch", "3", "--record-size", "50", "--json",
    )  # fmt: skip
    assert paced.returncode == 0, paced.stderr
    document = json.loads(paced.stdout)
    assert document["requests"] == 2 * 3 * 20 and document["seconds"] >= 19 / 200
    assert per_partition(broker.scrape(), "nullbroker_produced_records_total") == {
        ("spread", partition): 2 * 40 * 3 + 2 * 20 * 3 for partition in range(5)
    }


def test_replay_fetch_reads_every_partition_to_the_requested_offset(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--source", "words:partitions=3,records=5000,size=200")
    result = run_tool(
        "replay", "fetch",
        "--bootstrap-server", broker.bootstrap,
        "--topic", "words",
        "--partitions", "3",
        "--records", "5000",
        "--partition-max-bytes", "65536",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    line = result.stdout.strip()
    assert line.startswith("workload fetch, requests "), line
    fields = dict(part.split(" ", 1) for part in line.split(", "))
    # 5000 records of ~200 bytes per partition in 64 KiB slices: many requests, not one.
    assert int(fields["requests"]) > 5000 * 200 // 65536
    served = samples(broker.scrape(), "nullbroker_fetched_records_total")
    assert sorted(served.values()) == [5000, 5000, 5000]
    assert int(fields["bytes"]) > 3 * 5000 * 200


def test_replay_flag_errors() -> None:
    result = run_tool("replay", "fetch", "--bootstrap-server", "127.0.0.1:1")
    assert result.returncode == 2 and "--topic" in result.stderr
    result = run_tool("replay")
    assert result.returncode == 2 and "produce" in result.stderr


def test_wakeup_cost_times_round_trips_on_one_cpu_and_on_two() -> None:
    result = run_tool("wakeup_cost", "--round-trips", "200", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert set(document) <= {"one CPU", "two CPUs"} and "one CPU" in document
    assert all(numbers["wall_us"] > 0 for numbers in document.values())


def test_soak_samples_the_brokers_memory_under_load_and_stops_by_itself(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    result = run_tool(
        "soak", "--minutes", "0.05", "--sample-seconds", "0.25", "--fetch", "--json", str(out)
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(out.read_text())
    assert document["produce_requests"] > 0 and document["fetch_passes"] > 0
    samples = document["samples"]
    assert len(samples) >= 4 and all(rss > 0 for _, rss in samples)
    assert [t for t, _ in samples] == sorted(t for t, _ in samples)
    assert document["rss_peak_kib"] == max(rss for _, rss in samples)
    assert result.stdout.startswith("minutes 0.05, fetch True, produce_requests ")


@pytest.mark.clients
def test_idle_connections_cost_kilobytes_not_a_receive_buffer_each() -> None:
    done = run_module("perf.idle_connections", "--connections", "200", "--json", timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["connections"] == 200
    assert result["rss_with_connections_kib"] > result["rss_before_kib"]
    # A 256 KiB receive buffer each would be 50 MiB; a memory bound, not a time.
    assert result["kib_per_connection"] < 64


def test_cluster_scaling_reads_the_syscalls_perf_stat_counted() -> None:
    report = (
        "\n 3030,,syscalls:sys_enter_epoll_wait,4005017,100.00,,\n"
        "6021,,syscalls:sys_enter_read,4005017,100.00,,\n<not counted>,,cycles,0,0.00,,\n"
    )
    assert cluster_scaling.syscalls_counted(report) == {"epoll_wait": 3030, "read": 6021}


@pytest.mark.clients
def test_cluster_scaling_runs_each_process_count_and_checks_the_count(tmp_path: Path) -> None:
    out = tmp_path / "scaling.json"
    done = run_tool(
        "cluster_scaling", "--processes", "1,2", "--load", "producers", "--clients", "2",
        "--records", "2000", "--rounds", "1", "--json", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    runs = json.loads(out.read_text())["runs"]
    assert [(run["broker"], run["processes"]) for run in runs] == [
        ("nullbroker, 3 nodes, 1 process", 1), ("nullbroker, 3 nodes, 2 processes", 3),
    ]  # fmt: skip
    assert all(run["records"] == run["counted"] == 4000 for run in runs)
    assert all(run["broker_cpu_s"] >= 0 and run["pss_loaded_mib"] > 0 for run in runs)
    assert "| nullbroker, 3 nodes, 2 processes (1 runs) |" in done.stdout


@pytest.mark.clients
def test_soak_with_connections_holds_them_and_counts_the_producers_exactly(
    tmp_path: Path,
) -> None:
    out = tmp_path / "soak-connections.json"
    result = run_tool(
        "soak", "--minutes", "0.1", "--connections", "60", "--producers", "2",
        "--consumers", "2", "--sample-seconds", "0.5", "--json", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads(out.read_text())
    assert document["connections"] >= 60 and document["idle_connections"] > 0
    assert document["records_acked"] == document["records_counted"] > 0
    assert document["records_consumed"] > 0 and document["p99_request_latency_us"] > 0
    assert len(document["samples"]) >= 4


@pytest.mark.clients
def test_source_formats_reads_each_kind_whole_and_reports_its_memory() -> None:
    done = run_tool(
        "source_formats", "--rounds", "1",
        "--kind", "letters=src:partitions=2,records=2000,size=100",
        "--kind", "json=src:partitions=2,records=2000,format=json,"
        "schema=perf/schemas/order_event.json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    runs = [json.loads(line) for line in done.stdout.splitlines()]
    assert [run["kind"] for run in runs] == ["letters", "json"]
    for run in runs:
        assert run["peak_rss_mib"] >= run["idle_rss_mib"] > 0
        assert run["consumer_records_per_s"] > 0 and run["replay_records_per_s"] > 0


def test_a_one_batch_step_of_perf_compare_warms_up_past_what_the_producer_queues() -> None:
    from perf.compare import warmup_records

    # A tenth of a measured step; none for a fill.
    assert warmup_records("produce", 200_000, 1024) == 20_000
    assert warmup_records("fill", 200_000, 1024) == 0
    # One batch a request: the 32 MiB queue's worth of 1 KiB records, at most half a step.
    assert warmup_records("one-batch", 200_000, 1024) == 32_768
    assert warmup_records("one-batch", 20_000, 1024) == 10_000
    assert warmup_records("one-batch", 1_000_000, 1024) == 100_000


def test_perf_compare_names_a_one_batch_step_whose_records_spread_past_its_warm_up() -> None:
    from perf.report_md import _spread_steps

    def step(ok: bool, spread: int) -> dict[str, Any]:
        return {
            "phase": "one-batch",
            "broker": "mock",
            "repeat": 1,
            "records": 50,
            "spread_records": spread,
            "one_batch_ok": ok,
        }

    assert _spread_steps({"steps": [step(True, 3)]}) == []
    lines = _spread_steps({"steps": [step(True, 3), step(False, 32)]})
    assert lines[0].startswith("**Not one batch a request throughout**")
    assert "- mock, run 2: 32 of 50 records reached other partitions" in lines


@requires_kafka_tools
def test_the_one_jvm_load_sends_every_producers_records_to_its_own_topic() -> None:
    """perf.telemetry_cost --one-jvm's producers (perf/java/ManyProducers.java, compiled
    against Kafka 4.4.0's jars): each sends its records to a topic of its own, under a client
    id of its own, and closes."""
    from nullbroker import start
    from perf.java_perf import java_program_command

    with start() as broker:
        command = java_program_command("ManyProducers", broker.bootstrap, "3", "2000", "50", "t")
        subprocess.run(command, check=True, timeout=TOOL_TIMEOUT, capture_output=True)
        for index in range(3):
            accounts = broker.assert_produced(f"t-{index}", records=2000)
    assert {
        client_id: counts.produced_records
        for client_id, counts in accounts.clients.by_client_id.items()
        if client_id.startswith("t-")
    } == {"t-producer-0": 2000, "t-producer-1": 2000, "t-producer-2": 2000}


@requires_kafka_tools
def test_the_telemetry_cost_runs_each_side_as_it_says(tmp_path: Path) -> None:
    """perf.telemetry_cost --with-unpushed: a round runs the three sides, each with a broker
    of its own and every record counted; only the side that pushes asks for a subscription
    (the unpushed side's producers are told not to push, the off side's broker does not
    advertise the APIs), and the JSON holds each round's ratios of both kinds."""
    output = tmp_path / "cost.json"
    done = run_module(
        "perf.telemetry_cost",
        "--producers", "1", "--records", "300000", "--rounds", "1",
        "--warmup", "0.5", "--with-unpushed", "--json", str(output),
        timeout=3 * TOOL_TIMEOUT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    document = json.loads(output.read_text())
    runs = {run["side"]: run for run in document["runs"]}
    assert sorted(runs) == ["off", "pushing", "unpushed"]
    assert {side: run["subscription_requests"] > 0 for side, run in runs.items()} == {
        "pushing": True,
        "off": False,
        "unpushed": False,
    }
    assert runs["off"]["pushes"] == runs["unpushed"]["pushes"] == 0
    assert set(document["paired_ratios"]) == {
        "steady",
        "whole",
        "steady, unpushed / off",
        "whole, unpushed / off",
    }
    assert "unpushed (the broker as when pushing, the clients not)" in done.stdout
