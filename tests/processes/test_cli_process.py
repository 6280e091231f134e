"""`nullbroker serve` as a process: its help, flag errors, console line, /metrics, signals."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from codec import native
from nullbroker.app.launcher import nullbroker_program
from nullbroker.app.pytest_plugin import StartBroker
from tests.support.broker_counts import metric_total, random_values, samples

pytestmark = pytest.mark.every_connection_loop

TIMEOUT = 30.0
SERVE_FLAGS = (
    "--listen",
    "--advertise",
    "--partitions",
    "--no-auto-create",
    "--verify-crc",
    "--max-frame-bytes",
    "--metrics",
    "--summary-json",
    "--report-interval",
    "--config",
)
CONSOLE_LINE = re.compile(
    r"^(?P<records>\d+\.\d) records/sec \(\d+\.\d\d MB/sec\) produced, "
    r"(?P<fetched>\d+\.\d) records/sec \(\d+\.\d\d MB/sec\) fetched, \d+\.\d requests/sec, "
    r"(?P<p50>\d+) us p50, (?P<p99>\d+) us p99 request latency, "
    r"(?P<held>\d+) held( \(p99 (?P<held_p99>\d+) ms\))?, (?P<connections>\d+) connections, "
    r"\d+\.\d MiB RSS\.$"
)
SUMMARY_KEYS = {
    "produced",
    "requests",
    "requests_total",
    "errors",
    "connections_closed_on_error",
    "connections_total",
    "uptime_seconds",
    "peak_rss_bytes",
}


def run_cli(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*nullbroker_program(), *arguments],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def test_serve_help_explains_every_flag_and_the_shutdown_signals() -> None:
    result = run_cli("serve", "--help")
    assert result.returncode == 0, result.stderr
    for flag in SERVE_FLAGS:
        assert flag in result.stdout, flag
    assert "SIGTERM" in result.stdout
    assert "port 0" in result.stdout


@pytest.mark.parametrize(
    ("flag", "value", "names"),
    [
        ("--partitions", "0", "partitions"),
        ("--partitions", "abc", "--partitions"),
        ("--listen", "nonsense", "--listen"),
        ("--metrics", "nowhere", "--metrics"),
        ("--report-interval", "0", "--report-interval"),
        ("--max-frame-bytes", "10", "--max-frame-bytes"),
        ("--partitions", "many", "--partitions"),
    ],
)
def test_bad_flag_value_exits_2_with_a_one_line_error_naming_it(
    flag: str, value: str, names: str
) -> None:
    result = run_cli("serve", "--listen", "127.0.0.1:0", flag, value)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("nullbroker"), result.stderr
    assert names in lines[0] and value in lines[0], result.stderr


def test_console_line_reports_rates_latency_connections_and_rss_while_traffic_flows(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--partitions", "2", "--report-interval", "0.5")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    values = random_values(200)
    # A line reporting records, not one from an interval that saw only Metadata.
    with_records = re.compile(r"^(?!0\.0 )" + CONSOLE_LINE.pattern.removeprefix("^"))
    try:
        # Keep records flowing until such a line shows up; bounded in rounds, and each
        # round's flush and wait are bounded in time.
        line = None
        for _ in range(50):
            for i, value in enumerate(values):
                producer.produce("console", value=value, partition=i % 2)
            assert producer.flush(TIMEOUT) == 0
            line = broker.find_line(with_records, timeout=0.2)
            if line is not None:
                break
        assert line is not None, broker.stdout_lines
    finally:
        producer.close()
    match = CONSOLE_LINE.match(line)
    assert match is not None and int(match["connections"]) >= 1
    summary = broker.stop()
    # Every console line has the documented shape; the address lines come first.
    lines = broker.stdout_lines
    assert lines[0].startswith("nullbroker listening on ")
    assert lines[1].startswith("metrics on http://")
    assert all(CONSOLE_LINE.match(found) for found in lines[2:]), lines
    assert summary["produced"]["records"] % len(values) == 0


def test_metrics_endpoint_serves_process_metrics_and_the_open_connection_count(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory()
    families = broker.scrape()
    assert metric_total(families, "process_resident_memory_bytes") > 0
    assert metric_total(families, "nullbroker_connections") == 0
    assert samples(families, "nullbroker_produced_records_total") == {}

    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT):
        broker.scrape_until(lambda families: metric_total(families, "nullbroker_connections") == 1)
    broker.scrape_until(lambda families: metric_total(families, "nullbroker_connections") == 0)
    summary = broker.stop()
    assert summary["connections_total"] == 1
    assert summary["requests_total"] == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_with_connected_clients_exits_0_and_writes_the_summary(
    nullbroker_factory: StartBroker, signum: signal.Signals
) -> None:
    broker = nullbroker_factory("--partitions", "2")
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all"}
    )
    host, port = broker.bootstrap.rsplit(":", 1)
    # An idle TCP client and one that has sent only part of a request: neither may hold
    # the broker up at shutdown.
    idle = socket.create_connection((host, int(port)), timeout=TIMEOUT)
    partial = socket.create_connection((host, int(port)), timeout=TIMEOUT)
    try:
        partial.sendall(b"\x00\x00\x01\x00\x00\x12")
        for i, value in enumerate(random_values(300)):
            producer.produce("shutdown", value=value, partition=i % 2)
        assert producer.flush(TIMEOUT) == 0
        broker.scrape_until(lambda families: metric_total(families, "nullbroker_connections") >= 3)
        # The producer is still connected when the signal arrives.
        summary = broker.stop(signum=signum)
    finally:
        idle.close()
        partial.close()
        producer.close()

    assert summary.keys() >= SUMMARY_KEYS
    assert summary["produced"]["records"] == 300
    assert summary["produced"]["topics"]["shutdown"]["partitions"]["0"]["records"] == 150
    assert summary["produced"]["topics"]["shutdown"]["partitions"]["1"]["records"] == 150
    assert summary["connections_total"] >= 3
    assert summary["requests_total"] == sum(summary["requests"].values())
    assert summary["uptime_seconds"] > 0
    assert summary["peak_rss_bytes"] > 0


def assert_one_line_exit_2(result: subprocess.CompletedProcess[str], *naming: str) -> None:
    """A start-up mistake: exit code 2, nothing on stdout, one line on stderr (no
    traceback) naming the setting as the user typed it."""
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("nullbroker: "), result.stderr
    for text in naming:
        assert text in lines[0], result.stderr


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port some other process already listens on."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


def test_a_listen_port_in_use_is_one_line_naming_the_flag(busy_port: int) -> None:
    address = f"127.0.0.1:{busy_port}"
    result = run_cli("serve", "--listen", address)
    assert_one_line_exit_2(result, "--listen", address, "Address already in use")


def test_a_listen_port_in_use_named_by_the_environment_names_the_variable(busy_port: int) -> None:
    address = f"127.0.0.1:{busy_port}"
    result = subprocess.run(
        [*nullbroker_program(), "serve"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        env={**os.environ, "NULLBROKER_LISTEN": address},
    )
    assert_one_line_exit_2(result, "NULLBROKER_LISTEN", address)


def test_a_host_that_does_not_resolve_is_one_line_naming_the_flag() -> None:
    # .invalid never resolves (RFC 2606); nothing is sent anywhere.
    result = run_cli("serve", "--listen", "no-such-host.invalid:0")
    assert_one_line_exit_2(result, "--listen", "cannot resolve host 'no-such-host.invalid'")


def test_a_busy_metrics_port_is_one_line_naming_the_flag(busy_port: int) -> None:
    address = f"127.0.0.1:{busy_port}"
    result = run_cli("serve", "--listen", "127.0.0.1:0", "--metrics", address)
    assert_one_line_exit_2(result, "--metrics", address)


def test_an_unwritable_summary_json_is_refused_at_start_not_after_the_run(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "no-such-folder" / "summary.json"
    result = run_cli("serve", "--listen", "127.0.0.1:0", "--summary-json", str(missing))
    assert_one_line_exit_2(result, "--summary-json", str(missing), "No such file or directory")
    # The check leaves nothing behind in a folder it can write to.
    assert list(tmp_path.iterdir()) == []


def test_the_summary_is_readable_by_others_as_the_umask_allows(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory()
    broker.stop()
    mode = broker.summary_path.stat().st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask
    # No temporary file is left beside it.
    assert sorted(path.name for path in broker.workdir.iterdir()) == [
        "nullbroker.stderr",
        "summary.json",
    ]


def test_the_start_log_names_the_code_that_serves_produce(nullbroker_factory: StartBroker) -> None:
    # In CI the C modules must be built (setup.py makes them required there) and be what the
    # broker serves with: a build that quietly fell back to Python would be measured as ours.
    from nullbroker.workers.run import hot_path

    broker = nullbroker_factory()
    deadline = time.monotonic() + TIMEOUT
    while "Produce is served by" not in broker.stderr_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    (line,) = [line for line in broker.stderr_text().splitlines() if "Produce is served by" in line]
    if not native.switched_on():
        assert line.endswith("Produce is served by pure Python (NULLBROKER_NATIVE=off)"), line
        return
    if hot_path() != "C (the decoders, the Produce lane and the connection's reader)":
        pytest.skip(f"the C modules were not built: {hot_path()}")
    assert line.endswith(
        "Produce is served by C (the decoders, the Produce lane and the connection's reader)"
    ), line
