"""perf/kfake_host, franz-go's kfake as a broker process of its own (built by
scripts/ensure-kfake, as `make test` does): it says where it listens and which kfake it is,
serves a real client, and exits 0 when told to stop or when its parent is gone."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.support.orphans import assert_exits_once_orphaned

REPO = Path(__file__).resolve().parents[2]
READY = re.compile(r"^kfake listening on 127\.0\.0\.1:(\d+) \(kfake (\S+), 3 partitions per ")
TIMEOUT_S = 30.0


def built() -> Path | None:
    found = sorted((REPO / ".cache" / "kfake").glob("*/kfake-host"))
    return found[-1] if found else None


pytestmark = pytest.mark.skipif(
    built() is None, reason="kfake is not built; scripts/ensure-kfake (make test) builds it"
)


def pinned_version() -> str:
    """The kfake version perf/kfake_host/go.mod requires."""
    go_mod = (REPO / "perf" / "kfake_host" / "go.mod").read_text()
    match = re.search(r"github\.com/twmb/franz-go/pkg/kfake (\S+)", go_mod)
    assert match is not None
    return match[1]


def test_it_prints_its_address_and_version_serves_metadata_and_stops_on_sigterm() -> None:
    binary = built()
    assert binary is not None
    host = subprocess.Popen(
        [str(binary), "-partitions", "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert host.stdout is not None
        line = host.stdout.readline().rstrip("\n")
        match = READY.match(line)
        assert match, line
        assert match[2] == pinned_version()
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{match[1]}"})
        # Topics are created on first use, with the partition count asked for.
        metadata = admin.list_topics("made-on-use", timeout=TIMEOUT_S)
        assert len(metadata.topics["made-on-use"].partitions) == 3
    finally:
        host.send_signal(signal.SIGTERM)
        code = host.wait(TIMEOUT_S)
    assert code == 0


def test_it_exits_once_the_process_that_started_it_is_gone() -> None:
    binary = built()
    assert binary is not None
    # Its parent lives a second: long enough for the host to look at who its parent is.
    assert_exits_once_orphaned([str(binary)], "kfake-host", parent_lives_s=1.0)
