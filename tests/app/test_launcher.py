"""nullbroker.app.launcher: `nullbroker serve` started, its addresses read, its failures reported
with the broker's own words, and never a process left behind."""

from __future__ import annotations

import os
import re
import signal
import socket
import sys
import tempfile
import urllib.request
from pathlib import Path

import pytest

from nullbroker.app.launcher import ServerError, start

TIMEOUT = 10.0


def host_port(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port)


def assert_gone(pid: int) -> None:
    """No process has `pid` any more: it exited and was reaped, not left a zombie."""
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def children() -> set[int]:
    """This process's children, zombies included (Linux's /proc lists them by thread)."""
    found: set[int] = set()
    for listing in Path("/proc/self/task").glob("*/children"):
        found.update(int(pid) for pid in listing.read_text().split())
    return found


@pytest.fixture
def own_temporary_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the launcher makes the folders of brokers given none: a folder of the test's."""
    folder = tmp_path / "temporary"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def test_the_broker_listens_where_it_says_and_stops_with_its_summary() -> None:
    with start("--partitions", "2", metrics=False) as broker:
        assert re.fullmatch(r"127\.0\.0\.1:\d+", broker.bootstrap)
        assert broker.nodes == (broker.bootstrap,)
        assert broker.metrics_url is None
        with socket.create_connection(host_port(broker.bootstrap), timeout=TIMEOUT):
            pass
        summary = broker.stop()
        assert summary["connections_total"] == 1
        assert not broker.killed and broker.process.returncode == 0
        workdir = broker.workdir
        assert workdir.is_dir()
    assert_gone(broker.pid)
    # The folder it made for itself goes with it.
    assert not workdir.exists()


def test_every_node_and_the_metrics_url_are_reported() -> None:
    with start("--brokers", "3") as broker:
        assert len(broker.nodes) == 3 and broker.nodes[0] == broker.bootstrap
        assert len(set(broker.nodes)) == 3
        for address in broker.nodes:
            with socket.create_connection(host_port(address), timeout=TIMEOUT):
                pass
        assert broker.metrics_url is not None
        with urllib.request.urlopen(broker.metrics_url, timeout=TIMEOUT) as response:
            assert response.status == 200
        assert broker.stop(signal.SIGINT)["requests_total"] == 0


def test_a_bad_flag_is_reported_with_the_brokers_message(own_temporary_folders: Path) -> None:
    before = children()
    with pytest.raises(ServerError) as raised:
        start("--no-such-flag", metrics=False)
    message = str(raised.value)
    assert "exited with 2" in message
    assert "unrecognized arguments: --no-such-flag" in message
    assert children() <= before
    assert list(own_temporary_folders.iterdir()) == []


def test_a_broker_that_exits_before_listening_is_reported(tmp_path: Path) -> None:
    unwritable = tmp_path / "no-such-folder" / "summary.json"
    before = children()
    with pytest.raises(
        ServerError, match="did not say where it listens: it exited with 2"
    ) as raised:
        start("--summary-json", str(unwritable), metrics=False)
    # The broker's own one-line reason, from its stderr.
    assert f"--summary-json {unwritable}: cannot write there" in str(raised.value)
    assert children() <= before


def test_a_server_that_says_nothing_is_killed_at_the_start_timeout(tmp_path: Path) -> None:
    silent = "import sys, time; print('starting', file=sys.stderr, flush=True); time.sleep(60)"
    before = children()
    with pytest.raises(
        ServerError, match="did not say where it listens: it printed none in 1 s"
    ) as raised:
        start(
            workdir=tmp_path,
            program=[sys.executable, "-c", silent],
            start_timeout=1.0,
            metrics=False,
        )
    assert "starting" in str(raised.value)  # its stderr, quoted
    assert children() <= before


def test_leaving_the_block_stops_the_broker_cleanly(tmp_path: Path) -> None:
    with start(workdir=tmp_path, metrics=False) as broker:
        pass
    assert broker.process.returncode == 0 and not broker.killed
    assert_gone(broker.pid)
    # A clean stop writes the summary; the folder given is the caller's and stays.
    assert broker.summary()["requests_total"] == 0
    assert sorted(path.name for path in tmp_path.iterdir()) == ["nullbroker.stderr", "summary.json"]


def test_a_broker_that_ignores_the_signal_is_killed_and_reported(tmp_path: Path) -> None:
    with start(workdir=tmp_path, metrics=False) as broker:
        broker.process.send_signal(signal.SIGSTOP)  # a broker that hangs, deaf to SIGTERM
        with pytest.raises(ServerError, match=r"did not exit within 0\.5 s of SIGTERM"):
            broker.stop(timeout=0.5)
        assert broker.killed
    assert_gone(broker.pid)
