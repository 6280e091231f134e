"""A Spark job through Spark's own Kafka connector (format("kafka"), spark-sql-kafka-0-10 4.2,
which runs kafka-clients 3.9.2) on local[2] shows up in nullbroker's accounts as the clients
it runs (KIP-714): the executors' producers and consumers push their metrics, with no change
to the job, and the producers' pushed count of records sent is the broker's.

Spark keeps its producers open between tasks (its producer cache closes one only after
spark.kafka.producer.cache.timeout, ten minutes), so they make no closing push while the
test runs: what is exactly true is that, once each has pushed after the write, the records
sent that the executors' producers pushed add up to the rows written, and for each client
id to what the broker appended for it."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from nullbroker.app.accounts import Accounts, PushedClient
from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker

pytestmark = pytest.mark.usefixtures("kafka_connector")

ROWS = 2000
PARTITIONS = 4
WAIT_S = 120.0
"""How long the test waits for the executors' clients to push: far longer than they take
(an interval of 500 ms), so that only clients that never push fail it."""
SEND_TOTAL = "org.apache.kafka.producer.record.send.total"
CONSUMED_TOTAL = "org.apache.kafka.consumer.fetch.manager.records.consumed.total"


@pytest.fixture
def broker(nullbroker_factory: StartBroker) -> RunningBroker:
    return nullbroker_factory(
        "--partitions", str(PARTITIONS), "--client-metrics-interval-ms", "500"
    )  # fmt: skip


def kafka_clients_3_9(instance: PushedClient) -> bool:
    return instance.software_name == "apache-kafka-java" and instance.software_version.startswith(
        "3.9."
    )


def producers(accounts: Accounts) -> list[PushedClient]:
    return [i for i in accounts.clients.instances if SEND_TOTAL in i.metrics]


def consumers(accounts: Accounts) -> list[PushedClient]:
    return [i for i in accounts.clients.instances if CONSUMED_TOTAL in i.metrics]


def served_ids(accounts: Accounts) -> set[str]:
    """The client ids the broker served records to."""
    return {c for c, counts in accounts.clients.by_client_id.items() if counts.fetched_records}


def sent_all(accounts: Accounts) -> bool:
    """The producers' pushes account for every row, each as the broker counted it."""
    rows = accounts.clients.agreement
    return sum(row.pushed for row in rows) == ROWS and all(row.agrees for row in rows)


def test_a_spark_jobs_producers_and_consumers_push_their_metrics(
    spark: SparkSession, broker: RunningBroker
) -> None:
    (
        spark.range(ROWS)
        .selectExpr(
            "cast(id as string) as key",
            "cast(rpad(cast(id as string), 64, '.') as binary) as value",
        )
        .write.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", "pushed")
        .save()
    )
    read = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", "pushed")
        # Each Fetch held for fetch.max.wait.ms (min bytes never reached) and answered with
        # a batch or so: every task reads for longer than its consumer's first push takes
        # (a consumer pushes only while it polls, and a task's consumer then waits idle in
        # Spark's pool).
        .option("kafka.fetch.min.bytes", str(1 << 20))
        .option("kafka.fetch.max.wait.ms", "300")
        .option("kafka.max.partition.fetch.bytes", "1024")
        .load()
    )
    assert read.count() == ROWS

    accounts = broker.accounts_until(
        lambda a: sent_all(a) and bool(consumers(a)),
        WAIT_S,
        what=f"the producers pushed {ROWS} records sent, and a consumer pushed",
    )
    written = producers(accounts)
    assert written and all(kafka_clients_3_9(instance) for instance in written)
    assert sum(instance.metrics[SEND_TOTAL] for instance in written) == ROWS
    for instance in written:
        assert instance.pushes >= 1 and instance.ended == ""
        for name in ("record.queue.time.avg", "request.latency.avg", "batch.size.avg"):
            assert f"org.apache.kafka.producer.{name}" in instance.metrics, name
    # Each executor producer's client id: its pushed count is the broker's count for it.
    rows = accounts.clients.agreement
    assert {row.client_id for row in rows} == {instance.client_id for instance in written}
    for row in rows:
        assert (row.pushed, row.final) == (row.counted, False)
        assert row.counted == accounts.clients.by_client_id[row.client_id].produced_records
    assert sum(row.counted for row in rows) == ROWS

    # Each task's consumer (a client id of its own) pushes while its task polls; what it
    # pushed it consumed is at most what the broker served it, and every row was served.
    read_by = consumers(accounts)
    print(
        f"{len(written)} producer(s) pushed {[i.pushes for i in written]} times, "
        f"{len(read_by)} of {len(served_ids(accounts))} consumers pushed"
    )
    assert all(kafka_clients_3_9(instance) for instance in read_by)
    served = accounts.clients.by_client_id
    for instance in read_by:
        assert "org.apache.kafka.consumer.fetch.manager.fetch.latency.avg" in instance.metrics
        assert 0 <= instance.metrics[CONSUMED_TOTAL] <= served[instance.client_id].fetched_records
    assert sum(counts.fetched_records for counts in served.values()) == ROWS
