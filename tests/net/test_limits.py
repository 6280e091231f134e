"""Connection limits, as Kafka's: silent connections are closed after --idle-timeout-ms
(connections.max.idle.ms), one address gets at most --max-connections-per-ip
(max.connections.per.ip: the next is closed at once), and beyond --max-connections
(max.connections) new connections wait to be served until one closes."""

from __future__ import annotations

import resource
import socket
import struct
import time

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest

from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from tests.support.broker_counts import metric_total, samples
from tests.support.kafka_wire import request_frame, size_prefix
from tests.support.kio_calls import fetch_frame

API_VERSIONS = size_prefix(
    request_frame(ApiVersionsRequest(client_software_name="limits", client_software_version="1"), 1)
)


def connect(broker: RunningBroker) -> socket.socket:
    host, port = broker.bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def answered(sock: socket.socket, within: float = 10.0) -> bool:
    """Send ApiVersions; whether a whole answer came within `within` seconds (False if
    the connection was closed or nothing came)."""
    sock.settimeout(within)
    try:
        sock.sendall(API_VERSIONS)
        header = sock.recv(4, socket.MSG_WAITALL)
        if len(header) < 4:
            return False
        body = sock.recv(struct.unpack(">i", header)[0], socket.MSG_WAITALL)
        return bool(body)
    except (TimeoutError, ConnectionError):
        return False


def two_served(broker: RunningBroker) -> tuple[socket.socket, socket.socket]:
    """Two connections, each answered once."""
    first, second = connect(broker), connect(broker)
    assert answered(first) and answered(second)
    return first, second


def closed_by_broker(sock: socket.socket, within: float) -> bool:
    """Whether the broker closes the connection within `within` seconds."""
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.mark.clients
@pytest.mark.every_connection_loop
def test_a_silent_connection_is_closed_and_a_talking_one_is_not(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--idle-timeout-ms", "400")
    silent, talking = two_served(broker)
    started = time.monotonic()
    while time.monotonic() - started < 1.5:  # nearly four timeouts of talking
        assert answered(talking)
        time.sleep(0.1)
    assert closed_by_broker(silent, within=5)
    assert answered(talking)
    families = list(broker.scrape())
    assert metric_total(families, "nullbroker_connections_closed_idle_total") == 1
    talking.close()


@pytest.mark.clients
def test_one_address_gets_its_quota_and_the_next_connection_is_closed(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--max-connections-per-ip", "2")
    _, second = two_served(broker)
    third = connect(broker)
    assert closed_by_broker(third, within=5)
    second.close()
    deadline = time.monotonic() + 10
    while True:  # its slot frees once the broker has seen it close
        fourth = connect(broker)
        if answered(fourth, within=2) or time.monotonic() > deadline:
            break
        fourth.close()
    assert answered(fourth)
    refused = samples(broker.scrape(), "nullbroker_connections_refused_total")
    assert refused[(("limit", "max_connections_per_ip"),)] >= 1
    assert "(--max-connections-per-ip)" in broker.stderr_text()


@pytest.mark.clients
@pytest.mark.every_connection_loop
def test_beyond_max_connections_a_client_waits_until_one_closes(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--max-connections", "2", metrics=False)
    first, second = two_served(broker)
    waiting = connect(broker)  # the kernel accepts; the broker does not serve it yet
    assert not answered(waiting, within=1)
    first.close()
    waiting.settimeout(10)
    header = waiting.recv(4, socket.MSG_WAITALL)  # the answer to the request sent above
    assert len(header) == 4
    assert answered(second)


@pytest.mark.clients
@pytest.mark.every_connection_loop
def test_a_held_request_is_waiting_not_idle(nullbroker_factory: StartBroker) -> None:
    # A source topic that grows by nothing: a Fetch at its end is held for its max wait.
    broker = nullbroker_factory(
        "--idle-timeout-ms", "300", "--source", "still:partitions=1,records=0,size=10"
    )  # fmt: skip
    sock = connect(broker)
    sock.settimeout(10)
    started = time.monotonic()
    sock.sendall(size_prefix(fetch_frame("still", 0, max_wait_ms=2000)))
    header = sock.recv(4, socket.MSG_WAITALL)
    assert len(header) == 4, "closed while its Fetch was held"
    assert time.monotonic() - started >= 1.5  # held for its max wait, several timeouts
    sock.recv(struct.unpack(">i", header)[0], socket.MSG_WAITALL)
    assert closed_by_broker(sock, within=5)  # then silent: closed


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


@pytest.mark.clients
@pytest.mark.every_connection_loop
def test_a_client_that_stops_reading_is_not_answered_faster_than_it_reads(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--source", "big:partitions=1,records=100000,size=1024")
    before = rss_kib(broker.process.pid)
    sock = connect(broker)
    sock.settimeout(0.5)
    fetch = size_prefix(fetch_frame("big", 0, max_wait_ms=0))  # about 1 MiB of records each
    sent = 0
    deadline = time.monotonic() + 5
    while sent < 2000 and time.monotonic() < deadline:  # 2 GiB of answers, if it answered all
        try:
            sock.sendall(fetch)
            sent += 1
        except TimeoutError:
            break  # the broker stopped reading: its answers wait for us
    time.sleep(1)
    grown_mib = (rss_kib(broker.process.pid) - before) / 1024
    served = metric_total(broker.scrape(), "nullbroker_fetched_bytes_total") / 2**20
    sock.close()
    # Answered only as far as the socket buffers take them, and held no more than that.
    assert served < 200 and grown_mib < 64, (sent, served, grown_mib)


@pytest.mark.clients
def test_two_thousand_idle_connections_cost_at_most_2_kib_each() -> None:
    """Issue 13's figure: an idle plain-TCP connection holds no task and no buffer of its
    own (the host loop serves it between requests), only its socket and a few objects."""
    from perf.idle_connections import measure

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2 * IDLE_CONNECTIONS + 200  # the clients' ends here and the broker's
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"the open-files limit ({hard}) is below {wanted}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    try:
        result = measure(IDLE_CONNECTIONS)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert result["kib_per_connection"] <= 2, result


IDLE_CONNECTIONS = 2000
