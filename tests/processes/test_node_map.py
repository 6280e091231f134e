"""A cluster over several hosts (`--node-map FILE`): the map is checked at start, and two
network namespaces made by the test, each a host with an address of its own, form one
cluster that a producer in one of them fills through both nodes, counted exactly."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from nullbroker.app.configuration import checked
from nullbroker.app.launcher import nullbroker_program
from nullbroker.cluster.node_map import read_node_map
from nullbroker.settings import Config, ConfigError

MAP = 'supervisor = "127.0.0.1:19190"\n[nodes]\n0 = "127.0.0.1:19092"\n1 = "127.0.0.1:19093"\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[nodes]\n", "needs a [nodes] table"),
        ('[nodes]\n0 = "127.0.0.1:1"\n2 = "127.0.0.1:2"\n', "node ids must be 0 to 1, got [0, 2]"),
        ('[nodes]\n0 = "127.0.0.1"\n', "node 0: expected HOST:PORT with a port"),
        ('[nodes]\n0 = "127.0.0.1:1"\n', 'needs supervisor = "HOST:PORT"'),
        (
            'supervisor = "10.0.0.9:1"\n[nodes]\n0 = "127.0.0.1:1"\n',
            "the supervisor runs on node 0's host, 127.0.0.1",
        ),
        ("nodes = [", "not TOML"),
    ],
)
def test_a_node_map_that_cannot_be_used_is_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "map.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        checked(Config(node_map=str(path)))


def test_the_node_map_gives_the_clusters_size(tmp_path: Path) -> None:
    path = tmp_path / "map.toml"
    path.write_text(MAP)
    assert checked(Config(node_map=str(path))).brokers == 2
    with pytest.raises(ConfigError, match="has 2 nodes"):
        checked(Config(node_map=str(path), brokers=3))
    with pytest.raises(ConfigError, match="each host runs one process"):
        checked(Config(node_map=str(path), brokers=2, processes="2"))


def test_a_node_map_of_before_the_rename_still_names_its_supervisor(tmp_path: Path) -> None:
    # The key was `controller` until the process that supervises the workers was named so.
    path = tmp_path / "map.toml"
    path.write_text(MAP.replace("supervisor", "controller"))
    assert read_node_map(str(path), "--node-map").supervisor == ("127.0.0.1", 19190)


# -- two hosts, as network namespaces ----------------------------------------------------

SUBNET = "10.231.7"
PRODUCER = """
import json, sys
from confluent_kafka import Producer
records = int(sys.argv[2])
acked = {}
def delivered(error, message):
    assert error is None, error
    acked.setdefault(message.partition(), []).append(message.offset())
producer = Producer({"bootstrap.servers": sys.argv[1], "enable.idempotence": True,
                     "linger.ms": 5, "message.timeout.ms": 60000})
for index in range(records):
    producer.produce("spread", key=str(index).encode(), value=b"v" * 100,
                     on_delivery=delivered)
    producer.poll(0)
assert producer.flush(60) == 0
metadata = producer.list_topics("spread", timeout=10)
print(json.dumps({
    "acked": {str(p): sorted(o) for p, o in acked.items()},
    "brokers": sorted(f"{b.host}:{b.port}" for b in metadata.brokers.values()),
    "leaders": sorted({p.leader for p in metadata.topics["spread"].partitions.values()}),
}))
"""

TRANSACTIONS = """
import json, sys
from confluent_kafka import Consumer, Producer
bootstrap, records, expected = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "across-hosts",
                     "linger.ms": 5})
producer.init_transactions(60)
for commit in (False, True):
    producer.begin_transaction()
    for index in range(records):
        producer.produce("spread", key=str(index).encode(), value=b"t" * 100)
    assert producer.flush(60) == 0
    (producer.commit_transaction if commit else producer.abort_transaction)(60)
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "across-hosts",
                     "group.protocol": "consumer", "isolation.level": "read_committed",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
consumer.subscribe(["spread"])
import time
read, deadline = 0, time.monotonic() + 60
quiet_until = deadline
while time.monotonic() < min(deadline, quiet_until):
    for message in consumer.consume(500, 0.5):
        assert message.error() is None, message.error()
        read += 1
    if read >= expected and quiet_until == deadline:
        quiet_until = time.monotonic() + 2  # then nothing more: no aborted record
consumer.commit(asynchronous=False)
consumer.close()
print(json.dumps({"read": read}))
"""
"""A transaction across the hosts' leaders (its markers sent between hosts through the
supervisor), one aborted and one committed, then a KIP-848 consumer reading committed."""


def _namespaces_unavailable() -> str | None:
    if sys.platform != "linux":
        return "network namespaces are Linux's"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    if shutil.which("ip") is None:
        return "no `ip` command (Debian's iproute2)"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture
def two_hosts() -> Iterator[tuple[str, str]]:
    """Two network namespaces joined by a veth pair, at SUBNET.1 and SUBNET.2; removed after."""
    reason = _namespaces_unavailable()
    if reason is not None:
        pytest.skip(reason)
    tag = uuid.uuid4().hex[:6]
    first, second = f"nb-a-{tag}", f"nb-b-{tag}"
    try:
        _ip("netns", "add", first)
    except subprocess.CalledProcessError as error:
        pytest.skip(f"cannot make a network namespace here: {error.stderr.decode().strip()}")
    try:
        _ip("netns", "add", second)
        _ip("link", "add", f"va{tag}", "netns", first, "type", "veth",
            "peer", "name", f"vb{tag}", "netns", second)  # fmt: skip
        for namespace, device, address in ((first, f"va{tag}", 1), (second, f"vb{tag}", 2)):
            _ip("-n", namespace, "addr", "add", f"{SUBNET}.{address}/24", "dev", device)
            _ip("-n", namespace, "link", "set", device, "up")
            _ip("-n", namespace, "link", "set", "lo", "up")
        yield first, second
    finally:
        for namespace in (first, second):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, timeout=30)


@pytest.mark.clients
def test_two_hosts_form_one_cluster_and_count_exactly(
    two_hosts: tuple[str, str], tmp_path: Path
) -> None:
    first, second = two_hosts
    node_map = tmp_path / "map.toml"
    node_map.write_text(
        f'supervisor = "{SUBNET}.1:9190"\n[nodes]\n0 = "{SUBNET}.1:9092"\n1 = "{SUBNET}.2:9092"\n'
    )
    summary = tmp_path / "summary.json"
    serve = [*nullbroker_program(), "serve", "--node-map", str(node_map), "--partitions", "4"]
    logs = [open(tmp_path / f"host-{n}.log", "wb") for n in (1, 2)]  # noqa: SIM115
    hosts = [
        subprocess.Popen(
            ["ip", "netns", "exec", first, *serve, "--summary-json", str(summary)],
            stdout=logs[0], stderr=subprocess.STDOUT,
        ),
        subprocess.Popen(
            ["ip", "netns", "exec", second, *serve], stdout=logs[1], stderr=subprocess.STDOUT
        ),
    ]  # fmt: skip
    try:
        records = 4000
        done = subprocess.run(
            ["ip", "netns", "exec", first, sys.executable, "-c", PRODUCER,
             f"{SUBNET}.1:9092", str(records)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        host_logs = [(tmp_path / f"host-{n}.log").read_text(errors="replace") for n in (1, 2)]
        assert done.returncode == 0, (done.stderr, host_logs)
        result = json.loads(done.stdout)
        assert result["brokers"] == [f"{SUBNET}.1:9092", f"{SUBNET}.2:9092"]
        assert result["leaders"] == [0, 1]  # partitions led on both hosts
        acked = result["acked"]
        assert sum(len(offsets) for offsets in acked.values()) == records
        assert all(offsets == list(range(len(offsets))) for offsets in acked.values())
        assert "the cluster is complete" in host_logs[0]
        assert "joined as worker 1" in host_logs[1]
        # Transactions and the new group protocol across the hosts as across processes.
        done = subprocess.run(
            ["ip", "netns", "exec", first, sys.executable, "-c", TRANSACTIONS,
             f"{SUBNET}.1:9092", "500", str(records + 500)],
            capture_output=True, text=True, timeout=240, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-4000:]
        # The idempotent records and the committed transaction's, not the aborted one's.
        assert json.loads(done.stdout) == {"read": records + 500}
    finally:
        hosts[0].send_signal(signal.SIGTERM)
        assert hosts[0].wait(timeout=30) == 0
        # The other host's worker ends when its supervisor does.
        assert hosts[1].wait(timeout=30) == 0
        for log in logs:
            log.close()
    counted = json.loads(summary.read_text())
    assert counted["produced"]["topics"]["spread"]["records"] == records + 2 * 500
    assert set(counted["produced"]["topics"]["spread"]["partitions"]) == {"0", "1", "2", "3"}
