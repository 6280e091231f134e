"""A real Prometheus scrapes a broker's /metrics while a producer and a consumer group run;
the queries docs/metrics.md gives (and docs/dashboard.json draws) are asked through its HTTP
query API and agree with the broker's accounts: counts exactly, once its last scrape is after
the run; `rate` and `histogram_quantile` exactly as PromQL defines them over the samples
Prometheus holds (tests/support/prometheus.py), and the quantile in the bucket where the
broker's own p99 lies."""

from __future__ import annotations

import json
import math
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from confluent_kafka import Consumer, Producer

import nullbroker
from nullbroker import Accounts, RunningBroker
from perf.java_perf import BIN
from tests.support.broker_counts import read_and_commit
from tests.support.kafka_tools import requires_kafka_tools
from tests.support.kafka_wire import FrameStream
from tests.support.prometheus import (
    Prometheus,
    Samples,
    bucket_quantile,
    find_prometheus,
    quantile_bucket,
    rate,
)
from tests.support.streams_app import StreamsApp

pytestmark = pytest.mark.clients  # confluent-kafka's producer and consumer

DOCS = Path(__file__).parents[2] / "docs"
RANGE = "1m"
RANGE_MS = 60_000
TIMEOUT = 30.0
PARTITIONS = 2
"""Two partitions a topic: `sum by (topic)` adds two rates, and a + b is b + a exactly in
floating point, so the sum is derived bit for bit whatever order Prometheus adds in."""
ORDERS, CLICKS, READ = 1000, 500, 600
ALL = {"orders": ORDERS, "clicks": CLICKS}
FIRST = {"orders": 10, "clicks": 10}
GROUP = "prometheus-readers"
STREAMS_APP, STREAMS_SOURCE = "prometheus-wordcount", "sentences"
UP = 'up{job="nullbroker"}'
"""1 for a scrape of the broker that succeeded, 0 for one that failed."""


def summed_rate(metric: str, label: str) -> str:
    return f"sum by ({label}) (rate({metric}[{RANGE}]))"


def latency_quantile(q: float, buckets: str) -> str:
    return f"histogram_quantile({q}, sum by (api, le) ({buckets}))"


LATENCY_BUCKETS = "nullbroker_request_latency_seconds_bucket"
QUERIES = {
    "produced records/s by topic": summed_rate("nullbroker_produced_records_total", "topic"),
    "produced bytes/s by topic": summed_rate("nullbroker_produced_bytes_total", "topic"),
    "fetched records/s by topic": summed_rate("nullbroker_fetched_records_total", "topic"),
    "produced records by topic": "sum by (topic) (nullbroker_produced_records_total)",
    "fetched records by topic": "sum by (topic) (nullbroker_fetched_records_total)",
    "requests/s by API": summed_rate("nullbroker_requests_total", "api"),
    "held requests/s by API": summed_rate("nullbroker_request_held_seconds_count", "api"),
    "p50 latency by API": latency_quantile(0.5, f"rate({LATENCY_BUCKETS}[{RANGE}])"),
    "p99 latency by API": latency_quantile(0.99, f"rate({LATENCY_BUCKETS}[{RANGE}])"),
    "p99 latency by API since the start": latency_quantile(0.99, LATENCY_BUCKETS),
    "held requests by API": "sum by (api) (nullbroker_request_held_seconds_count)",
    "requests by API": "sum by (api) (nullbroker_request_latency_seconds_count)",
    "request seconds by API": "sum by (api) (nullbroker_request_latency_seconds_sum)",
    "lag by group": "sum by (group) (nullbroker_group_lag)",
    "members by group": "sum by (group) (nullbroker_group_members)",
    "tasks by streams group": "sum by (group, kind) (nullbroker_streams_group_tasks)",
    "rebalances by streams group": "sum by (group) (nullbroker_streams_group_rebalances_total)",
    "open connections": "sum(nullbroker_connections)",
    "RSS": 'process_resident_memory_bytes{job="nullbroker"}',
    **{
        f"pushed {what} by client": f"{how} by (client_id) ({metric})"
        for what, (how, metric) in {
            "send rate": ("sum", "nullbroker_client_producer_record_send_rate"),
            "queue time": ("max", "nullbroker_client_producer_record_queue_time_avg"),
            "request latency": ("max", "nullbroker_client_producer_request_latency_avg"),
            "batch size": ("max", "nullbroker_client_producer_batch_size_avg"),
            "buffer available": ("min", "nullbroker_client_producer_buffer_available_bytes"),
        }.items()
    },
    "produced records/s by client id": summed_rate(
        "nullbroker_client_produced_records_total", "client_id"
    ),
    "fetched records/s by client id": summed_rate(
        "nullbroker_client_fetched_records_total", "client_id"
    ),
    **{
        f"{side} records by client id": (
            f"sum by (client_id) (nullbroker_client_{side}_records_total)"
        )
        for side in ("produced", "fetched")
    },
}
"""The queries a user would write, each checked below; the dashboard draws only these."""


Run = tuple[Prometheus, RunningBroker, Accounts, int]


@pytest.fixture(scope="module")
def run(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Prometheus, RunningBroker, Accounts, int]]:
    """A broker scraped by Prometheus every half second through a run of a producer and a
    consumer group: Prometheus, the broker, its accounts once the clients closed, and the
    time to evaluate queries at (ms since the epoch): that of a scrape after the run, once
    a later scrape is in."""
    binary = find_prometheus()
    if binary is None:
        pytest.skip("no prometheus: scripts/ensure-test-tools installs Debian's package")
    folder = tmp_path_factory.mktemp("prometheus")
    with nullbroker.start(
        partitions=PARTITIONS, group_initial_rebalance_delay_ms=0, workdir=folder
    ) as broker:
        prometheus = Prometheus(binary, folder, [broker.http_address])
        try:
            with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5}) as producer:
                # The topics' series start before their records: a rate needs two samples
                # that differ, and the whole run may fit between two scrapes.
                produce(producer, FIRST)
                first = wait_for_scrape_after(prometheus, round(time.time() * 1000))
                produce(producer, {topic: n - FIRST[topic] for topic, n in ALL.items()})
            consume(broker.bootstrap)
            accounts = quiet_accounts(broker)
            # At a successful scrape's time, the last sample of every series is that
            # scrape's (a failed one after it would mark them stale); and only once a later
            # scrape is in, so that no sample up to then can still arrive.
            at = wait_for_scrape_after(prometheus, round(time.time() * 1000))
            wait_for_scrape_after(prometheus, at)
            assert at - first < RANGE_MS, "the run outlasts the queries' range"
            yield prometheus, broker, accounts, at
        finally:
            prometheus.close()


PERF_RECORDS = 5000
"""Records kafka-producer-perf-test sends, a thousand a second: time for a few pushes."""
PERF_CLIENT_ID = "perf-producer-client"
"""kafka-producer-perf-test's producer's client id."""
PUSHED = {
    "pushed send rate by client": "nullbroker_client_producer_record_send_rate",
    "pushed queue time by client": "nullbroker_client_producer_record_queue_time_avg",
    "pushed request latency by client": "nullbroker_client_producer_request_latency_avg",
    "pushed batch size by client": "nullbroker_client_producer_batch_size_avg",
    "pushed buffer available by client": "nullbroker_client_producer_buffer_available_bytes",
}
"""The dashboard's queries of what a producer pushed (KIP-714), and the series each reads."""


@pytest.fixture(scope="module")
def clients_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Prometheus, Accounts, int, int]]:
    """A broker scraped by Prometheus while Kafka 4.4.0's producer perf test (throttled to
    run a few seconds) pushes its metrics every half second and a confluent-kafka group
    reads some of its records: Prometheus, the accounts once both have gone, the time of a
    scrape while the producer pushed (its series are in /metrics only while it runs), and
    that of a scrape after the run (as `run`'s)."""
    binary = find_prometheus()
    if binary is None:
        pytest.skip("no prometheus: scripts/ensure-test-tools installs Debian's package")
    folder = tmp_path_factory.mktemp("prometheus-clients")
    with nullbroker.start(workdir=folder, client_metrics_interval_ms=500) as broker:
        prometheus = Prometheus(binary, folder, [broker.http_address])
        output = folder / "perf.out"
        with output.open("wb") as out:
            perf = subprocess.Popen(
                [
                    str(BIN / "kafka-producer-perf-test"),
                    "--topic",
                    "pushed",
                    "--num-records",
                    str(PERF_RECORDS),
                    "--record-size",
                    "100",
                    "--throughput",
                    "1000",
                    "--producer-props",
                    f"bootstrap.servers={broker.bootstrap}",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            pushing = wait_for_scrape_with(prometheus, PUSHED["pushed send rate by client"])
            assert perf.wait(TIMEOUT * 2) == 0, output.read_text()
            consumer = Consumer(
                {
                    "bootstrap.servers": broker.bootstrap,
                    "group.id": "pushed-readers",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                }
            )
            try:
                consumer.subscribe(["pushed"])
                read_and_commit(consumer, READ, TIMEOUT)
            finally:
                consumer.close()
            accounts = quiet_accounts(broker)
            at = wait_for_scrape_after(prometheus, round(time.time() * 1000))
            wait_for_scrape_after(prometheus, at)
            yield prometheus, accounts, pushing, at
        finally:
            if perf.poll() is None:
                perf.kill()
                perf.wait()
            prometheus.close()


def wait_for_scrape_with(prometheus: Prometheus, metric: str) -> int:
    """The time of a successful scrape that found `metric` above zero."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        at = wait_for_scrape_after(prometheus, round(time.time() * 1000))
        if any(value > 0 for value in prometheus.vector(metric, at).values()):
            return at
    raise AssertionError(f"no scrape with {metric} above zero in {TIMEOUT} s")


@pytest.fixture(scope="module")
def streams_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Prometheus, Accounts, int]]:
    """A broker scraped by Prometheus while a streams group's one member (raw heartbeats:
    tests/support/streams_app.py) joins and is given WordCount's four tasks: Prometheus, the
    accounts once it has gone, and the time of a scrape after it (as `run`'s). Apart from
    `run`, whose topics and groups it would add to."""
    binary = find_prometheus()
    if binary is None:
        pytest.skip("no prometheus: scripts/ensure-test-tools installs Debian's package")
    folder = tmp_path_factory.mktemp("prometheus-streams")
    with nullbroker.start(partitions=PARTITIONS, workdir=folder) as broker:
        prometheus = Prometheus(binary, folder, [broker.http_address])
        try:
            trio.run(run_word_count, broker.bootstrap)
            accounts = quiet_accounts(broker)
            at = wait_for_scrape_after(prometheus, round(time.time() * 1000))
            wait_for_scrape_after(prometheus, at)
            yield prometheus, accounts, at
        finally:
            prometheus.close()


async def run_word_count(bootstrap: str) -> None:
    """STREAMS_APP's member joins (the group makes its internal topics) and heartbeats once
    more, to be given every task; then its connection closes, the member staying in the
    group until its session times out."""
    host, port = bootstrap.rsplit(":", 1)
    connection = FrameStream(await trio.open_tcp_stream(host, int(port)))
    try:
        app = StreamsApp(connection.request, STREAMS_APP, STREAMS_SOURCE)
        await app.create_source()
        await app.configure()
        await app.join("thread-1")
        given = await app.beat("thread-1")
        assert sum(len(task.partitions) for task in given.active_tasks) == 2 * PARTITIONS
    finally:
        await connection.aclose()


def wait_for_scrape_after(prometheus: Prometheus, moment_ms: int) -> int:
    """The time (ms since the epoch) of the broker's last scrape, once it is after
    `moment_ms` and succeeded."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        # timestamp() of the selector itself: of anything computed (`up == 1`), it would
        # give the query's time.
        scraped = prometheus.vector('timestamp(up{job="nullbroker"})')
        if scraped:
            latest = round(max(scraped.values()) * 1000)
            if latest > moment_ms and prometheus.vector(UP, latest) == {(): 1.0}:
                return latest
        time.sleep(0.1)
    raise AssertionError(f"no scrape after {moment_ms} in {TIMEOUT} s:\n{prometheus.log_tail()}")


def produce(producer: Producer, records: dict[str, int]) -> None:
    for topic, count in records.items():
        for number in range(count):
            producer.produce(topic, b"%d" % number, partition=number % PARTITIONS)
    assert producer.flush(TIMEOUT) == 0


def consume(bootstrap: str) -> None:
    """A group reads READ of the orders and commits: the rest is its lag."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe(["orders"])
        read_and_commit(consumer, READ, TIMEOUT)
    finally:
        consumer.close()


def quiet_accounts(broker: RunningBroker) -> Accounts:
    """The accounts once every client has gone: nothing changes after them."""
    deadline = time.monotonic() + TIMEOUT
    while (accounts := broker.accounts()).connections and time.monotonic() < deadline:
        time.sleep(0.05)
    assert accounts.connections == 0
    return accounts


def by_first_label(values: dict[tuple[str, ...], float]) -> dict[str, float]:
    return {key[0]: value for key, value in values.items()}


def rates_by(prometheus: Prometheus, metric: str, label_index: int, at: int) -> dict[str, float]:
    """`sum by (label) (rate(metric[RANGE]))` derived from the samples: each series' rate,
    added up by the label at `label_index` of its (sorted) labels."""
    sums: dict[str, float] = {}
    for key, samples in prometheus.matrix(f"{metric}[{RANGE}]", at).items():
        series_rate = rate(samples, at, RANGE_MS)
        if series_rate is not None:
            label = key[label_index]
            sums[label] = sums[label] + series_rate if label in sums else series_rate
    return sums


def histograms(prometheus: Prometheus, at: int) -> dict[str, dict[float, Samples]]:
    """The latency histogram's bucket samples of the range, by API and upper bound."""
    by_api: dict[str, dict[float, Samples]] = defaultdict(dict)
    for (api, le), samples in prometheus.matrix(
        f"nullbroker_request_latency_seconds_bucket[{RANGE}]", at
    ).items():
        by_api[api][float(le)] = samples
    return by_api


def same(shown: dict[str, float], derived: dict[str, float]) -> bool:
    """Equal, NaN included (a quantile of no observations)."""
    return set(shown) == set(derived) and all(
        shown[key] == derived[key] or (math.isnan(shown[key]) and math.isnan(derived[key]))
        for key in shown
    )


def test_counts_per_topic_are_the_accounts_exactly(run: Run) -> None:
    prometheus, _, accounts, at = run
    produced = by_first_label(prometheus.vector(QUERIES["produced records by topic"], at))
    fetched = by_first_label(prometheus.vector(QUERIES["fetched records by topic"], at))
    assert produced == {"orders": ORDERS, "clicks": CLICKS}
    assert produced == {name: topic.records for name, topic in accounts.produced.topics.items()}
    assert fetched == {name: topic.records for name, topic in accounts.fetched.topics.items()}
    assert fetched["orders"] >= READ


def test_rates_per_topic_are_promqls_rate_of_the_samples_ending_at_the_accounts(run: Run) -> None:
    prometheus, _, accounts, at = run
    for name, metric, traffic in (
        ("produced records/s by topic", "nullbroker_produced_records_total", accounts.produced),
        ("fetched records/s by topic", "nullbroker_fetched_records_total", accounts.fetched),
    ):
        shown = by_first_label(prometheus.vector(QUERIES[name], at))
        # Labels sorted: partition, topic.
        assert shown == rates_by(prometheus, metric, 1, at), name
        assert shown["orders"] > 0
        # The samples rated are the broker's counts: the last of each is the accounts'.
        for (partition, topic), samples in prometheus.matrix(f"{metric}[{RANGE}]", at).items():
            assert samples[-1][1] == traffic.partition(topic, int(partition)).records
    bytes_rate = by_first_label(prometheus.vector(QUERIES["produced bytes/s by topic"], at))
    assert bytes_rate == rates_by(prometheus, "nullbroker_produced_bytes_total", 1, at)


def test_request_rates_and_counts_are_the_accounts(run: Run) -> None:
    prometheus, _, accounts, at = run
    requests = by_first_label(prometheus.vector(QUERIES["requests/s by API"], at))
    assert requests == rates_by(prometheus, "nullbroker_requests_total", 0, at)
    held = by_first_label(prometheus.vector(QUERIES["held requests/s by API"], at))
    assert held == rates_by(prometheus, "nullbroker_request_held_seconds_count", 0, at)
    held_counts = by_first_label(prometheus.vector(QUERIES["held requests by API"], at))
    assert held_counts == dict(accounts.held_requests)
    assert set(held) <= set(held_counts)
    counts = by_first_label(prometheus.vector(QUERIES["requests by API"], at))
    seconds = by_first_label(prometheus.vector(QUERIES["request seconds by API"], at))
    assert counts == {api: latency.count for api, latency in accounts.request_latency.items()}
    assert seconds == {api: latency.sum for api, latency in accounts.request_latency.items()}
    assert counts == dict(accounts.requests)


def test_latency_quantiles_are_histogram_quantile_of_the_samples(run: Run) -> None:
    prometheus, _, _, at = run
    buckets = histograms(prometheus, at)
    for name, q in (("p50 latency by API", 0.5), ("p99 latency by API", 0.99)):
        shown = by_first_label(prometheus.vector(QUERIES[name], at))
        derived = {}
        for api, series in buckets.items():
            rated = [
                (bound, series_rate)
                for bound, samples in series.items()
                if (series_rate := rate(samples, at, RANGE_MS)) is not None
            ]
            if rated:
                derived[api] = bucket_quantile(q, rated)
        assert same(shown, derived), name
        assert shown["Produce"] > 0


def test_the_p99_since_the_start_is_in_the_bucket_of_the_brokers_own_p99(run: Run) -> None:
    """The broker reads its p99 from finer buckets than it exposes (10 a decade, against 3):
    each exposed bucket is a union of its own, so both quantiles lie in the exposed bucket
    where the 99th percentile's rank falls. Closer than that, a histogram cannot tell."""
    prometheus, _, accounts, at = run
    shown = by_first_label(prometheus.vector(QUERIES["p99 latency by API since the start"], at))
    for api, series in histograms(prometheus, at).items():
        last = [(bound, samples[-1][1]) for bound, samples in series.items()]
        assert shown[api] == bucket_quantile(0.99, last), api
        lower, upper = quantile_bucket(0.99, last)
        assert lower <= accounts.request_latency[api].p99 <= upper, api
        assert lower <= shown[api] <= upper, api


def test_groups_connections_and_memory_are_the_brokers(run: Run) -> None:
    prometheus, broker, accounts, at = run
    lag = by_first_label(prometheus.vector(QUERIES["lag by group"], at))
    members = by_first_label(prometheus.vector(QUERIES["members by group"], at))
    assert (
        lag
        == {GROUP: ORDERS - READ}
        == {name: group.lag for name, group in accounts.groups.by_group.items()}
    )
    assert (
        members
        == {GROUP: 0}
        == {name: len(group.members) for name, group in accounts.groups.by_group.items()}
    )
    assert prometheus.vector(QUERIES["open connections"], at) == {(): accounts.connections}
    # RSS moves between any two reads; a peak bounds every one, and the broker reads its
    # own after the scrape.
    (rss,) = prometheus.vector(QUERIES["RSS"], at).values()
    assert 0 < rss <= broker.accounts().peak_rss_bytes


def test_streams_groups_tasks_and_rebalances_are_the_brokers(
    streams_run: tuple[Prometheus, Accounts, int],
) -> None:
    prometheus, accounts, at = streams_run
    streams = accounts.groups.by_group[STREAMS_APP].streams
    assert streams is not None
    tasks = prometheus.vector(QUERIES["tasks by streams group"], at)
    # Labels in name order: group, kind.
    assert (
        tasks
        == {(STREAMS_APP, "active"): 2 * PARTITIONS, (STREAMS_APP, "standby"): 0,
            (STREAMS_APP, "warmup"): 0}
        == {(STREAMS_APP, "active"): streams.active_tasks,
            (STREAMS_APP, "standby"): streams.standby_tasks,
            (STREAMS_APP, "warmup"): streams.warmup_tasks}
    )  # fmt: skip
    # Two assignments: at the join (nothing to assign until its internal topics exist), and
    # once they do.
    rebalances = by_first_label(prometheus.vector(QUERIES["rebalances by streams group"], at))
    assert rebalances == {STREAMS_APP: 2} == {STREAMS_APP: streams.rebalances}


ClientsRun = tuple[Prometheus, Accounts, int, int]


@requires_kafka_tools
def test_what_a_producer_pushed_is_its_series_by_client_id(clients_run: ClientsRun) -> None:
    prometheus, _, pushing, _ = clients_run
    for query, metric in PUSHED.items():
        # Labels in name order: client_id, client_instance_id, client_software_name, name.
        (series,) = prometheus.vector(metric, pushing).items()
        (client_id, _, software, name), value = series
        assert (client_id, software) == (PERF_CLIENT_ID, "apache-kafka-java/4.4.0"), query
        assert name == "org.apache.kafka." + metric.removeprefix("nullbroker_client_").replace(
            "_", "."
        ), query
        # One instance: the aggregation by client id is its one series.
        shown = by_first_label(prometheus.vector(QUERIES[query], pushing))
        assert same(shown, {PERF_CLIENT_ID: value}), query
    sent = prometheus.vector(QUERIES["pushed send rate by client"], pushing)[(PERF_CLIENT_ID,)]
    available = prometheus.vector(QUERIES["pushed buffer available by client"], pushing)
    assert sent > 0 and 0 < available[(PERF_CLIENT_ID,)] <= 32 * 1024 * 1024  # buffer.memory


@requires_kafka_tools
def test_records_by_client_id_are_the_brokers_counts(clients_run: ClientsRun) -> None:
    prometheus, accounts, _, at = clients_run
    counted = accounts.clients.by_client_id
    produced = by_first_label(prometheus.vector(QUERIES["produced records by client id"], at))
    fetched = by_first_label(prometheus.vector(QUERIES["fetched records by client id"], at))
    # A client id is in a series once the broker counted records for it that way.
    assert produced == {
        client: counts.produced_records
        for client, counts in counted.items()
        if counts.produced_records
    }
    assert fetched == {
        client: counts.fetched_records
        for client, counts in counted.items()
        if counts.fetched_records
    }
    assert produced[PERF_CLIENT_ID] == PERF_RECORDS and fetched["rdkafka"] >= READ
    for name, metric in (
        ("produced records/s by client id", "nullbroker_client_produced_records_total"),
        ("fetched records/s by client id", "nullbroker_client_fetched_records_total"),
    ):
        shown = by_first_label(prometheus.vector(QUERIES[name], at))
        assert shown == rates_by(prometheus, metric, 0, at), name
    assert (
        by_first_label(prometheus.vector(QUERIES["produced records/s by client id"], at))[
            PERF_CLIENT_ID
        ]
        > 0
    )


def test_every_query_of_the_dashboard_is_tested_and_documented() -> None:
    dashboard = json.loads((DOCS / "dashboard.json").read_text())
    drawn = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    assert drawn and set(drawn) <= set(QUERIES.values())
    documented = (DOCS / "metrics.md").read_text()
    assert [query for query in QUERIES.values() if query not in documented] == []
