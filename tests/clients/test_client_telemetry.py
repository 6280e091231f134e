"""Real clients push their own metrics to nullbroker (KIP-714) and appear in its accounts: Kafka
4.4.0's producer perf test and console consumer (kafka-clients 4.4.0, which pushes by
default), and confluent_kafka's Producer and Consumer (librdkafka 2.16), each with the metric
names it pushes; the Java producer's pushed count of records sent equals the broker's count
for its client id. With --client-metrics off no client asks; --client-metrics-match asks
only the clients it selects; a broker of several processes shows them too.

Every broker here asks for a push every 500 ms, so that a client run of a few seconds pushes
several times before its closing push."""

from __future__ import annotations

import time
from collections.abc import Callable

import confluent_kafka
import pytest
from confluent_kafka import Consumer, Producer

from nullbroker.app.accounts import Accounts, PushedClient
from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from tests.support.kafka_tools import requires_kafka_tools, run_tool

pytestmark = pytest.mark.clients

INTERVAL = ("--client-metrics-interval-ms", "500")
WAIT_S = 60.0
"""How long a test waits for a client's pushes, made in the background: far longer than
they take, so that only a client that never pushes fails the test."""
POLL_S = 0.2
JAVA = ("apache-kafka-java", "4.4.0")
LIBRDKAFKA = (
    "confluent-kafka-python",
    f"{confluent_kafka.version()}-rdkafka-{confluent_kafka.libversion()[0]}",
)
PRODUCER = "org.apache.kafka.producer."
CONSUMER = "org.apache.kafka.consumer."
SEND_TOTAL = PRODUCER + "record.send.total"
CONSUMED_TOTAL = CONSUMER + "fetch.manager.records.consumed.total"
TELEMETRY_APIS = ("GetTelemetrySubscriptions", "PushTelemetry")


def only_instance(accounts: Accounts, client_id: str) -> PushedClient:
    (instance,) = accounts.clients.of(client_id)
    return instance


def producer_perf_test(bootstrap: str, records: int, throughput: int) -> str:
    """Kafka's producer perf test, its producer's configs the defaults but linger.ms: Kafka
    4.4.0's producer sends its closing push only if its I/O thread has work left when it is
    closed (Sender.run's shutdown loop waits for records and requests, not for the push),
    which a throttled run seldom leaves: a fifth of the runs lost it, their pushed count
    stopping at the last push before. A linger of a second keeps the last batch until
    close, and the closing push with it."""
    return run_tool(
        "kafka-producer-perf-test",
        "--topic", "perf",
        "--num-records", str(records),
        "--record-size", "100",
        "--throughput", str(throughput),
        "--command-property", f"bootstrap.servers={bootstrap}", "linger.ms=1000",
    )  # fmt: skip


# Kafka 4.4.0's tools (kafka-clients 4.4.0).


@requires_kafka_tools
def test_the_java_producer_pushes_and_its_count_of_records_sent_is_the_brokers(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory(*INTERVAL)
    records = 3000
    # 1000 records/s: three seconds, several pushes before the closing one.
    producer_perf_test(broker.bootstrap, records, throughput=1000)

    accounts = broker.assert_clients_agree("perf-producer-client")
    (row,) = accounts.clients.agreement
    assert (row.client_id, row.metric, row.pushed, row.counted, row.instances, row.final) == (
        "perf-producer-client",
        SEND_TOTAL,
        records,
        records,
        1,
        True,
    )
    producer = only_instance(accounts, "perf-producer-client")
    assert (producer.software_name, producer.software_version) == JAVA
    assert producer.pushes > 1 and producer.ended == "terminated"
    assert producer.interval_ms == 500
    assert producer.metrics[SEND_TOTAL] == records
    for name in ("record.queue.time.avg", "request.latency.avg", "batch.size.avg"):
        assert producer.metrics[PRODUCER + name] > 0, name
    # Per topic too, in its own metric.
    assert [
        (series.attributes, series.value)
        for series in producer.series
        if series.name == PRODUCER + "topic.record.send.total"
    ] == [({"topic": "perf"}, records)]
    assert accounts.clients.by_client_id["perf-producer-client"].produced_records == records
    # What reading the pushes cost the broker, measured (none would be 0), well short of the
    # run's three seconds.
    assert 0 < accounts.clients.cpu_seconds < 3


@requires_kafka_tools
def test_the_java_console_consumer_pushes_the_records_it_consumed(
    nullbroker_factory: StartBroker,
) -> None:
    records = 2000
    broker = nullbroker_factory(
        *INTERVAL,
        "--source", f"src:partitions=2,records={records // 2},size=50",
        "--group-initial-rebalance-delay-ms", "0",
    )  # fmt: skip
    # More messages asked than the topic holds: the consumer reads them all, then waits at
    # the log end (pushing) until --timeout-ms ends it. Stopped by --max-messages at once
    # instead, it pushes only its closing push, which Kafka 4.4.0's consumer sends with its
    # fetch manager's counts already zero (seen here: records.consumed.total 0).
    output = run_tool(
        "kafka-console-consumer",
        "--bootstrap-server", broker.bootstrap,
        "--topic", "src", "--from-beginning", "--group", "readers",
        "--max-messages", str(2 * records), "--timeout-ms", "3000",
    )  # fmt: skip
    assert len(output.splitlines()) == records

    # Its pushes were answered before it exited.
    accounts = broker.accounts()
    consumer = only_instance(accounts, "console-consumer")
    assert (consumer.software_name, consumer.software_version) == JAVA
    assert consumer.pushes > 1
    assert consumer.resource["group_id"] == "readers"
    assert consumer.metrics[CONSUMED_TOTAL] == records
    assert [
        (series.attributes, series.value)
        for series in consumer.series
        if series.name == CONSUMED_TOTAL and series.attributes
    ] == [({"topic": "src"}, records)]
    for name in ("fetch.manager.fetch.latency.avg", "coordinator.assigned.partitions"):
        assert CONSUMER + name in consumer.metrics, name
    # What it consumed is what the broker served it, every record once.
    assert accounts.clients.by_client_id["console-consumer"].fetched_records == records
    # A consumer has no count of records sent to set beside the broker's.
    assert accounts.clients.agreement == ()


# confluent_kafka (librdkafka 2.16).


def produce(bootstrap: str, client_id: str, topic: str, records: int) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id})
    for index in range(records):
        producer.produce(topic, b"value-%d" % index)
        producer.poll(0)
    assert producer.flush(WAIT_S) == 0
    return producer


def consume(bootstrap: str, client_id: str, topic: str, records: int) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "group.id": f"{client_id}-group",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    read = 0
    deadline = time.monotonic() + WAIT_S
    while read < records and time.monotonic() < deadline:
        message = consumer.poll(POLL_S)
        if message is not None and message.error() is None:
            read += 1
    assert read == records
    return consumer


def pushed(client_id: str, times: int) -> Callable[[Accounts], bool]:
    def done(accounts: Accounts) -> bool:
        return any(i.pushes >= times for i in accounts.clients.of(client_id))

    return done


def test_confluent_kafka_producer_and_consumer_push_librdkafkas_metrics(
    nullbroker_factory: StartBroker,
) -> None:
    records = 1000
    broker = nullbroker_factory(
        *INTERVAL,
        "--source", f"src:partitions=2,records={records // 2},size=50",
        "--group-initial-rebalance-delay-ms", "0",
    )  # fmt: skip
    producer = produce(broker.bootstrap, "ck-producer", "out", records)
    consumer = consume(broker.bootstrap, "ck-consumer", "src", records)
    # librdkafka pushes only to a broker it learned of from Metadata, after its first Get.
    broker.accounts_until(pushed("ck-producer", 2), WAIT_S, what="the producer pushed twice")
    broker.accounts_until(pushed("ck-consumer", 2), WAIT_S, what="the consumer pushed twice")
    accounts = broker.accounts()
    # librdkafka's closing push is sent as the client is torn down, unwaited for: it may
    # never reach the broker, so the test does not ask for it.
    producer.close()
    consumer.close()

    sent = only_instance(accounts, "ck-producer")
    assert (sent.software_name, sent.software_version) == LIBRDKAFKA
    assert sent.pushes >= 2
    for name in (
        "record.queue.time.avg",
        "record.queue.time.max",
        "request.latency.avg",
        "node.request.latency.avg",
        "connection.creation.total",
    ):
        assert PRODUCER + name in sent.metrics, name

    read = only_instance(accounts, "ck-consumer")
    assert (read.software_name, read.software_version) == LIBRDKAFKA
    assert read.resource["group_id"] == "ck-consumer-group"
    assert read.resource["member_id"].startswith("ck-consumer-")
    for name in (
        "fetch.manager.fetch.latency.avg",
        "coordinator.assigned.partitions",
        "coordinator.rebalance.latency.total",
        "poll.idle.ratio.avg",
    ):
        assert CONSUMER + name in read.metrics, name

    # librdkafka pushes no count of records sent: the agreement lists Java producers only.
    assert SEND_TOTAL not in sent.metrics
    assert accounts.clients.agreement == ()
    with pytest.raises(AssertionError, match="no producer of client id 'ck-producer' pushed"):
        broker.assert_clients_agree("ck-producer", timeout=0)
    counts = accounts.clients.by_client_id
    assert (counts["ck-producer"].produced_records, counts["ck-consumer"].fetched_records) == (
        records,
        records,
    )


def test_with_client_metrics_off_librdkafka_never_asks(nullbroker_factory: StartBroker) -> None:
    # The same steps against a broker asking and one not: the producer runs against the
    # second as long as it took to push twice to the first.
    took = 0.0
    for setting, asks in (("*", True), ("off", False)):
        broker = nullbroker_factory("--client-metrics", setting, *INTERVAL)
        started = time.monotonic()
        producer = produce(broker.bootstrap, "ck-producer", "out", 100)
        if asks:
            broker.accounts_until(
                pushed("ck-producer", 2), WAIT_S, what="the producer pushed twice"
            )
            took = time.monotonic() - started
        else:
            while time.monotonic() < started + took:
                producer.poll(POLL_S)
        producer.close()
        accounts = broker.accounts()
        if asks:
            assert all(accounts.requests[api] > 0 for api in TELEMETRY_APIS)
        else:
            assert not set(TELEMETRY_APIS) & set(accounts.requests)
            assert accounts.clients.instances == ()
            assert accounts.requests["Produce"] > 0


@requires_kafka_tools
def test_with_client_metrics_off_the_java_producer_never_asks(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--client-metrics", "off", *INTERVAL)
    producer_perf_test(broker.bootstrap, 2000, throughput=1000)
    accounts = broker.accounts()
    assert accounts.requests["Produce"] > 0
    assert not set(TELEMETRY_APIS) & set(accounts.requests)
    assert accounts.clients.instances == ()
    assert accounts.clients.by_client_id["perf-producer-client"].produced_records == 2000


def test_client_metrics_match_asks_only_the_clients_it_selects(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--client-metrics-match", "client_id=chosen-.*", *INTERVAL)
    chosen = produce(broker.bootstrap, "chosen-1", "out", 100)
    other = produce(broker.bootstrap, "other-1", "out", 100)
    # Both ask; the other is given an empty subscription (every five minutes), the chosen
    # one every metric: by its third push the other would have pushed had it been asked.
    accounts = broker.accounts_until(
        pushed("chosen-1", 3), WAIT_S, what="the chosen client pushed thrice"
    )
    assert accounts.requests["GetTelemetrySubscriptions"] >= 2
    assert [instance.client_id for instance in accounts.clients.instances] == ["chosen-1"]
    assert accounts.requests["PushTelemetry"] == accounts.clients.instances[0].pushes
    chosen.close()
    other.close()


@requires_kafka_tools
def test_a_broker_of_several_processes_shows_the_pushing_client(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory(
        "--brokers", "2", "--processes", "2", "--partitions", "2", *INTERVAL
    )
    records = 3000
    producer_perf_test(broker.bootstrap, records, throughput=1000)
    # The producer pushes to one node, its records go to both: the supervisor's accounts
    # hold every worker's.
    accounts = broker.assert_clients_agree("perf-producer-client")
    producer = only_instance(accounts, "perf-producer-client")
    assert (producer.software_name, producer.software_version) == JAVA
    assert producer.pushes > 1 and producer.metrics[SEND_TOTAL] == records
    assert accounts.clients.by_client_id["perf-producer-client"].produced_records == records
    assert {node for (topic, _), node in leaders(broker).items() if topic == "perf"} == {0, 1}


def leaders(broker: RunningBroker) -> dict[tuple[str, int], int]:
    """Each partition's leader, as Metadata says."""
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=WAIT_S)
    return {
        (topic.topic, partition.id): partition.leader
        for topic in metadata.topics.values()
        for partition in topic.partitions.values()
    }
