"""Faults on demand (nullbroker.cluster.faults): SPECs parsed or refused with the reason, their
effect on leadership and answers, the /faults HTTP paths and `nullbroker fault`, and real
clients through them: latency in a producer's percentiles, an idempotent producer and a
consumer group across a node going down and a leader moving."""

from __future__ import annotations

import gc
import inspect
import json
import random
import statistics
import subprocess
import time
import urllib.error
import urllib.request
import warnings
from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka import Consumer, Producer, TopicPartition
from kio.schema.errors import ErrorCode

from nullbroker.app.configuration import checked
from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.broker import Broker
from nullbroker.cluster.fault_specs import Fault, FaultSpecError
from nullbroker.cluster.faults import Faults
from nullbroker.cluster.nodes import Cluster
from nullbroker.settings import Config, ConfigError
from tests.handlers.test_handlers import produce
from tests.processes.test_cluster import GROUP_PROTOCOLS, group_consumer, read_until
from tests.support.broker_counts import (
    PROCESSES,
    metric_total,
    produced_from_metrics,
    samples,
)
from tests.support.kio_calls import (
    SESSION,
    dispatch_of,
    fetch_frame,
    record_batch,
    request_frame,
    types,
)
from tests.support.module_command import run_module


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("slow:api=Produce", "the kind must be one of latency, error, down, move"),
        ("latency:api=Produce", "give ms=MS, or p50=MS and p99=MS"),
        ("latency:api=Produce,ms=5,p50=1,p99=9", "give ms=, or p50= and p99=, not both"),
        ("latency:api=Produce,p50=9,p99=1", "p50 must be above 0 and at most p99"),
        ("latency:api=Nope,ms=5", "no Kafka API is called 'Nope'"),
        ("latency:api=Produce,ms=-5", "ms must not be negative"),
        ("latency:api=Produce,ms=x", "ms='x' is not a number"),
        ("latency:api=Produce,ms=5,colour=red", "unknown option 'colour'"),
        ("error:api=Produce,code=NO_SUCH_THING", "code='NO_SUCH_THING' is no Kafka error"),
        ("error:api=Produce,code=NONE", "code must be an error"),
        ("error:api=Metadata,code=NOT_LEADER_OR_FOLLOWER", "errors are injected into Produce"),
        ("error:api=Fetch,code=NOT_LEADER_OR_FOLLOWER,rate=2", "rate must be above 0"),
        ("down:for=5s", "give node=N"),
        ("down:node=1,for=soon", "is not a duration"),
        ("move:topic=t,partition=0", "give topic=T, partition=P and to=N"),
        ("latency:api=Produce,ms", "'ms' is not option=value"),
    ],
)
def test_a_spec_that_cannot_be_applied_is_refused_with_the_reason(spec: str, reason: str) -> None:
    with pytest.raises(FaultSpecError, match=reason):
        Fault.parse(spec)


def test_a_fault_for_a_node_the_cluster_lacks_or_for_node_0_is_refused() -> None:
    faults = Faults(Cluster(3))
    with pytest.raises(FaultSpecError, match="node=5, but the nodes are 0 to 2"):
        faults.add("down:node=5")
    with pytest.raises(FaultSpecError, match="node 0 answers the bootstrap"):
        faults.add("down:node=0")
    with pytest.raises(FaultSpecError, match="to=3, but the nodes are 0 to 2"):
        faults.add("move:topic=t,partition=0,to=3")
    with pytest.raises(FaultSpecError, match="one node leads everything"):
        Faults(Cluster(1)).add("move:topic=t,partition=0,to=0")
    assert faults.active == []


def test_start_up_faults_are_checked_with_the_other_settings() -> None:
    with pytest.raises(ConfigError, match="--fault: fault 'down:node=4'"):
        checked(Config(brokers=3, faults=("down:node=4",)))
    assert checked(Config(brokers=3, faults=("down:node=2",))).faults == ("down:node=2",)


class StoppedClock:
    """Stands in for the `time` module of the fault and node modules: time moves only when
    the test says, so a pause of the machine cannot end a fault early."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_a_down_node_leaves_the_cluster_until_its_time_is_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import nullbroker.cluster.faults
    import nullbroker.cluster.nodes

    clock = StoppedClock()
    for module in (nullbroker.cluster.faults, nullbroker.cluster.nodes):
        monkeypatch.setattr(module, "time", clock)
    cluster = Cluster(3)
    faults = Faults(cluster)
    before = cluster.leaders("orders", 6)
    faults.add("down:node=1,for=300ms")
    during = cluster.leaders("orders", 6)
    assert cluster.live == [0, 2] and 1 not in during
    assert all(after == was for was, after in zip(before, during, strict=True) if was != 1)
    assert cluster.leader_epoch("orders", 0) == 1
    clock.now += 0.299
    assert cluster.live == [0, 2]
    clock.now += 0.002
    assert cluster.live == [0, 1, 2]
    assert cluster.leaders("orders", 6) == before
    assert cluster.leader_epoch("orders", 0) == 2  # forward again, not back to 0
    faults.expire()
    assert faults.active == []


def test_a_moved_partition_is_led_by_its_new_node_until_cleared() -> None:
    cluster = Cluster(3)
    faults = Faults(cluster)
    own = cluster.leader("orders", 4)
    to = (own + 1) % 3
    faults.add(f"move:topic=orders,partition=4,to={to}")
    assert cluster.leaders("orders", 6)[4] == to
    assert faults.clear() == 1
    assert cluster.leaders("orders", 6)[4] == own


def test_latency_is_fixed_or_drawn_with_the_percentiles_asked_for() -> None:
    faults = Faults(Cluster(1), rng=random.Random(1))
    faults.add("latency:api=Produce,ms=20")
    assert faults.latency_s("Produce", 0) == 0.02
    assert faults.latency_s("Fetch", 0) == 0
    faults.clear()
    faults.add("latency:api=Fetch,p50=10,p99=100")
    draws = sorted(faults.latency_s("Fetch", 0) * 1000 for _ in range(20_000))
    assert 9 < statistics.median(draws) < 11
    assert 85 < draws[int(0.99 * len(draws))] < 115
    assert faults.counts["latency"] == 20_001


def test_an_error_fault_answers_its_share_of_requests() -> None:
    faults = Faults(Cluster(1), rng=random.Random(1))
    faults.add("error:api=Produce,code=NOT_LEADER_OR_FOLLOWER,rate=0.25")
    drawn = [faults.error("Produce", 0) for _ in range(20_000)]
    share = sum(code is ErrorCode.not_leader_or_follower for code in drawn) / len(drawn)
    assert 0.23 < share < 0.27
    assert faults.error("Fetch", 0) is None


# Through a broker process.


def faults_url(broker: RunningBroker) -> str:
    assert broker.metrics_url is not None
    return broker.metrics_url.rsplit("/", 1)[0] + "/faults"


def http(method: str, url: str, body: str | None = None) -> tuple[int, Any]:
    data = None if body is None else body.encode()
    request = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def fault_command(*args: str) -> subprocess.CompletedProcess[str]:
    return run_module("nullbroker", "fault", *args, timeout=30)


@pytest.mark.clients
@PROCESSES
def test_faults_come_and_go_over_http_and_through_the_fault_command(
    nullbroker_factory: StartBroker,
    processes: str,
) -> None:
    broker = nullbroker_factory("--brokers", "3", "--processes", processes)
    url = faults_url(broker)
    status, reason = http("POST", url, "down:node=7")
    assert status == 400 and "node=7, but the nodes are 0 to 2" in reason
    assert http("GET", url) == (200, [])

    status, added = http("POST", url, "latency:api=Produce,ms=5")
    assert status == 201 and added["spec"] == "latency:api=Produce,ms=5"
    address = url.removeprefix("http://").removesuffix("/faults")
    done = fault_command("add", "down:node=2,for=60s", "--http", address)
    assert done.returncode == 0 and "added fault 2: down:node=2,for=60s" in done.stdout
    listed = fault_command("list", "--http", address)
    assert listed.stdout.splitlines()[0] == "1: latency:api=Produce,ms=5"
    assert listed.stdout.splitlines()[1].startswith("2: down:node=2,for=60s (")
    refused = fault_command("add", "down:node=x", "--http", address)
    assert refused.returncode == 1 and "node='x' is not a whole number" in refused.stderr
    cleared = fault_command("clear", "--http", address)
    assert cleared.stdout.strip() == "cleared 2 faults"
    assert http("GET", url) == (200, [])
    assert metric_total(broker.scrape(), "nullbroker_faults_total") == 1  # the down


@pytest.mark.clients
@PROCESSES
def test_injected_produce_latency_shows_in_the_producers_percentiles(
    nullbroker_factory: StartBroker, tmp_path: Path, processes: str
) -> None:
    broker = nullbroker_factory(
        "--brokers", "2", "--processes", processes, "--fault", "latency:api=Produce,ms=40"
    )  # fmt: skip
    report = tmp_path / "perf.json"
    done = run_module(
        "perf.producer_perf", "--bootstrap-server", broker.bootstrap, "--topic", "slow",
        "--num-records", "400", "--record-size", "100", "--throughput", "-1",
        "--producer-props", "linger.ms=0", "--json", str(report), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(report.read_text())
    assert result["records"] == 400
    # Every Produce was answered at least 40 ms after it came: no record was acked sooner.
    assert min(result["p50_ms"], result["p99_ms"]) >= 40
    assert samples(broker.scrape(), "nullbroker_faults_total")[(("kind", "latency"),)] >= 1


def produce_through(
    broker: RunningBroker, topic: str, records: int, during: Any
) -> tuple[int, dict[int, list[int]]]:
    """Send `records` with an idempotent producer, calling `during()` halfway; the records
    acked, and each partition's acked offsets."""
    acked: dict[int, list[int]] = {}

    def delivered(error: Any, message: Any) -> None:
        assert error is None, error
        acked.setdefault(message.partition(), []).append(message.offset())

    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 2,
        "message.timeout.ms": 60_000,
    })  # fmt: skip
    for index in range(records):
        producer.produce(topic, key=str(index).encode(), value=b"v" * 50, on_delivery=delivered)
        producer.poll(0)
        if index == records // 2:
            producer.flush(30)
            during()
        if index % 200 == 0:
            time.sleep(0.01)  # spread the sending over the fault's window
    assert producer.flush(60) == 0
    return sum(len(offsets) for offsets in acked.values()), acked


@pytest.mark.clients
@PROCESSES
def test_an_idempotent_producer_counts_every_record_once_across_down_and_move(
    nullbroker_factory: StartBroker,
    processes: str,
) -> None:
    broker = nullbroker_factory("--brokers", "3", "--processes", processes, "--partitions", "6")
    url = faults_url(broker)
    records = 6000

    def faults() -> None:
        assert http("POST", url, "down:node=1,for=2s")[0] == 201
        assert http("POST", url, "move:topic=spread,partition=0,to=2")[0] == 201

    count, acked = produce_through(broker, "spread", records, faults)
    assert count == records
    produced = produced_from_metrics(broker.scrape())
    assert sum(counts.records for counts in produced.values()) == records
    for partition, offsets in acked.items():
        # Each acked once at its own offset; the log holds exactly what was acked.
        assert sorted(offsets) == list(range(len(offsets)))
        assert produced[("spread", partition)].records == len(offsets)
    applied = samples(broker.scrape(), "nullbroker_faults_total")
    assert applied[(("kind", "down"),)] == 1 and applied[(("kind", "move"),)] == 1
    # The producer was connected to node 1 when it went down: its connection was reset.
    assert applied[(("kind", "connections_reset"),)] >= 1


@pytest.mark.clients
@PROCESSES
@GROUP_PROTOCOLS
def test_a_group_consumer_resumes_from_its_commits_after_its_coordinator_goes_down(
    nullbroker_factory: StartBroker,
    processes: str,
    protocol: str,
) -> None:
    broker = nullbroker_factory(
        "--brokers", "3", "--processes", processes, "--group-initial-rebalance-delay-ms", "0",
        "--source", "clicks:partitions=6,records=400,size=20",
    )  # fmt: skip
    # A group coordinated by node 1, which can go down (node 0 stays up); its coordinator
    # is then node 2, which with two processes is the other process's.
    group = "consumers"
    assert Cluster(3).coordinator(group) == 1
    down = 1

    def consume(until: int, seen: set[tuple[int, int]]) -> None:
        consumer = group_consumer(broker, group, "clicks", protocol)
        try:
            read_until(consumer, until, seen)
            consumer.commit(asynchronous=False)
        finally:
            consumer.close()

    first: set[tuple[int, int]] = set()
    consume(1200, first)
    assert http("POST", faults_url(broker), f"down:node={down},for=3s")[0] == 201
    rest: set[tuple[int, int]] = set()
    consume(2400 - len(first), rest)
    everything = first | rest
    assert everything == {(p, o) for p in range(6) for o in range(400)}
    # Resumed from the commits: nothing read before the commit was read again.
    assert not first & rest
    admin = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        committed = admin.committed([TopicPartition("clicks", p) for p in range(6)], 10)
    finally:
        admin.close()
    assert [tp.offset for tp in committed] == [400] * 6


@pytest.mark.clients
def test_clients_retry_injected_errors_and_still_count_and_read_exactly(
    nullbroker_factory: StartBroker, tmp_path: Path
) -> None:
    config = tmp_path / "faults.toml"
    config.write_text(
        '[[fault]]\nkind = "error"\napi = "Produce"\ncode = "NOT_LEADER_OR_FOLLOWER"\n'
        'rate = 0.2\n\n[[fault]]\nspec = "error:api=Fetch,code=NOT_LEADER_OR_FOLLOWER,rate=0.2"\n'
    )
    broker = nullbroker_factory(
        "--config", str(config), "--partitions", "3",
        "--source", "clicks:partitions=3,records=2000,size=20",
    )  # fmt: skip
    count, acked = produce_through(broker, "spread", 3000, lambda: None)
    assert count == 3000
    assert all(sorted(offsets) == list(range(len(offsets))) for offsets in acked.values())

    reader = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "retry",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })  # fmt: skip
    reader.assign([TopicPartition("clicks", p, 0) for p in range(3)])
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + 60
    try:
        while len(seen) < 6000 and time.monotonic() < deadline:
            message = reader.poll(0.5)
            if message is not None and message.error() is None:
                seen.append((message.partition(), message.offset()))
    finally:
        reader.close()
    assert sorted(seen) == [(p, o) for p in range(3) for o in range(2000)]
    applied = samples(broker.scrape(), "nullbroker_faults_total")
    assert applied[(("kind", "error"),)] > 0


def test_a_throttle_owes_time_for_the_bytes_over_its_quota() -> None:
    faults = Faults(Cluster(2))
    faults.add("throttle:produce-mbps=1,node=1")
    megabyte = 1 << 20
    assert faults.throttle_ms("Produce", 1, megabyte) == 0  # a second's bytes in hand
    owed = faults.throttle_ms("Produce", 1, megabyte)  # the next second's, at once
    assert 990 <= owed <= 1000
    assert faults.throttle_ms("Produce", 0, 10 * megabyte) == 0  # another node
    assert faults.throttle_ms("Fetch", 1, 10 * megabyte) == 0  # no fetch quota given
    assert faults.counts["throttle"] == 1
    with pytest.raises(FaultSpecError, match="give produce-mbps=MB/S, fetch-mbps=MB/S"):
        Fault.parse("throttle:node=1")


@pytest.mark.clients
def test_a_producer_over_its_quota_is_throttled_and_still_counted_exactly(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--fault", "throttle:produce-mbps=1")
    throttled: list[int] = []

    def statistics_of(text: str) -> None:
        for node in json.loads(text)["brokers"].values():
            throttled.append(node["throttle"]["max"])

    producer = Producer({
        "bootstrap.servers": broker.bootstrap, "linger.ms": 5,
        "statistics.interval.ms": 200, "stats_cb": statistics_of,
    })  # fmt: skip
    records = 3000
    for _ in range(records):
        producer.produce("quota", value=b"q" * 1000)
        producer.poll(0)
    assert producer.flush(60) == 0
    time.sleep(0.5)
    producer.poll(0.5)
    produced = produced_from_metrics(broker.scrape())
    assert sum(counts.records for counts in produced.values()) == records
    # librdkafka saw the throttle_time_ms the broker answered with.
    assert max(throttled, default=0) > 0
    assert samples(broker.scrape(), "nullbroker_faults_total")[(("kind", "throttle"),)] > 0


@pytest.mark.clients
def test_a_consumer_over_its_fetch_quota_is_throttled_and_reads_exactly(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory(
        "--fault", "throttle:fetch-mbps=1", "--source", "big:partitions=1,records=3000,size=1000"
    )
    throttled: list[int] = []

    def statistics_of(text: str) -> None:
        for node in json.loads(text)["brokers"].values():
            throttled.append(node["throttle"]["max"])

    reader = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "quota",
        "statistics.interval.ms": 200, "stats_cb": statistics_of,
    })  # fmt: skip
    reader.assign([TopicPartition("big", 0, 0)])
    seen: set[tuple[int, int]] = set()
    try:
        read_until(reader, 3000, seen)
        reader.poll(0.5)  # one more statistics report
    finally:
        reader.close()
    assert seen == {(0, offset) for offset in range(3000)}
    assert max(throttled, default=0) > 0


@pytest.mark.parametrize("api", ["Metadata", "Fetch"], ids=["answer made", "answer held"])
def test_a_client_leaving_during_a_latency_fault_leaves_no_coroutine_unawaited(api: str) -> None:
    # The delayed answer once wrapped the answer in a coroutine before sleeping, and did not
    # close a held one: a client leaving during the sleep left it unawaited, and Python
    # warned when it was collected (here, when trio's run ends).
    broker = Broker(Config())
    produce(broker, "t", 0, record_batch(1))
    broker.faults.add(f"latency:api={api},ms=60000")
    if api == "Metadata":
        frame = request_frame(
            3,
            12,
            types(3, 12).MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
        )
    else:
        frame = fetch_frame("t", 1, max_wait_ms=60_000)

    async def client_leaves() -> None:
        answer = dispatch_of(broker).answer(frame, SESSION)
        assert inspect.isawaitable(answer), "the latency fault must delay the answer"
        with trio.move_on_after(0.05):  # the client leaves: its task is cancelled
            await answer

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trio.run(client_leaves)
        gc.collect()
    assert [str(w.message) for w in caught if w.category is RuntimeWarning] == []


@pytest.mark.clients
def test_a_consumer_across_a_leader_move_validates_its_position_and_reads_exactly(
    nullbroker_factory: StartBroker,
) -> None:
    """A leader moved by a fault bumps the leader epoch: librdkafka's consumer, fetching
    with the epoch it knew, is fenced (FENCED_LEADER_EPOCH), refreshes its metadata and
    validates its position with OffsetForLeaderEpoch (KIP-320) before it reads on from
    the new leader, as against Kafka; every record is read once."""
    broker = nullbroker_factory(
        "--brokers", "3", "--source", "clicks:partitions=6,records=400,size=20",
    )  # fmt: skip
    # Small fetches and a short queue: the consumer has more to fetch after the moves.
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": "epochs",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "fetch.message.max.bytes": 1024, "queued.min.messages": 10,
        "queued.max.messages.kbytes": 1,
    })  # fmt: skip
    consumer.subscribe(["clicks"])
    try:
        seen: set[tuple[int, int]] = set()
        read_until(consumer, 1200, seen)
        for partition in range(6):
            to = (Cluster(3).leader("clicks", partition) + 1) % 3
            spec = f"move:topic=clicks,partition={partition},to={to}"
            assert http("POST", faults_url(broker), spec)[0] == 201
        read_until(consumer, 2400, seen)
    finally:
        consumer.close()
    assert seen == {(p, o) for p in range(6) for o in range(400)}
    requests = samples(broker.scrape(), "nullbroker_requests_total")
    validated = sum(
        v for labels, v in requests.items() if ("api", "OffsetForLeaderEpoch") in labels
    )
    assert validated >= 1
    errors = samples(broker.scrape(), "nullbroker_errors_total")
    assert sum(v for labels, v in errors.items() if ("error", "fenced_leader_epoch") in labels)
