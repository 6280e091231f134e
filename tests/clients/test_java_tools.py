"""Apache Kafka 4.1.1's own tools against nullbroker, counts checked against the broker's.

These are the Java AdminClient, consumer and producer that Spark's connector and Kafka's
perf tests use, so each failure here is one a Java user would meet: the admin tools
describe topics with DescribeTopicPartitions (null ELR lists were a NullPointerException),
kafka-configs --alter needs IncrementalAlterConfigs, the Java consumer reads lz4 only as
independent blocks and closes its fetch session with an empty Fetch.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from nullbroker.app.launcher import RunningBroker
from nullbroker.app.pytest_plugin import StartBroker
from tests.support.broker_counts import (
    fetch_kinds,
    fetched_from_metrics,
    produced_from_metrics,
    samples,
)
from tests.support.kafka_tools import requires_kafka_tools, run_tool

pytestmark = [pytest.mark.clients, requires_kafka_tools]

RECORDS = 3000  # per partition of a source topic
FETCH_MAX_WAIT_MS = 300_000
"""Far longer than the console consumer takes to start, read and close even on a loaded
machine, so that a close that waited it out cannot be mistaken for a slow one."""


def source(name: str, partitions: int = 2, compression: str = "none") -> str:
    return f"{name}:partitions={partitions},records={RECORDS},size=200,compression={compression}"


def consumer_perf_rows(output: str) -> dict[str, str]:
    """kafka-consumer-perf-test's header and values lines, as a dict."""
    lines = [line for line in output.splitlines() if line.strip()]
    header = next(index for index, line in enumerate(lines) if line.startswith("start.time"))
    names = [name.strip() for name in lines[header].split(",")]
    values = [value.strip() for value in lines[header + 1].split(",")]
    return dict(zip(names, values, strict=True))


def test_kafka_topics_creates_describes_lists_alters_and_deletes(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory()
    server = ("--bootstrap-server", broker.bootstrap)
    run_tool("kafka-topics", *server, "--create", "--topic", "orders", "--partitions", "3")
    assert "orders" in run_tool("kafka-topics", *server, "--list").split()
    described = run_tool("kafka-topics", *server, "--describe", "--topic", "orders")
    assert "PartitionCount: 3" in described
    assert len(re.findall(r"Partition: \d+\s+Leader: 0\s+Replicas: 0\s+Isr: 0", described)) == 3
    run_tool("kafka-topics", *server, "--alter", "--topic", "orders", "--partitions", "5")
    described = run_tool("kafka-topics", *server, "--describe", "--topic", "orders")
    assert "PartitionCount: 5" in described
    run_tool("kafka-topics", *server, "--delete", "--topic", "orders")
    assert "orders" not in run_tool("kafka-topics", *server, "--list").split()


def test_kafka_get_offsets_reports_each_partitions_log_end(nullbroker_factory: StartBroker) -> None:
    broker = nullbroker_factory("--source", source("clicks", partitions=3))
    output = run_tool(
        "kafka-get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", "clicks"
    )
    assert sorted(output.split()) == [f"clicks:{p}:{RECORDS}" for p in range(3)]


def test_kafka_configs_alters_a_topic_and_describes_it_and_the_broker(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--partitions", "2")
    server = ("--bootstrap-server", broker.bootstrap)
    run_tool("kafka-topics", *server, "--create", "--topic", "cfg")
    topic = ("--entity-type", "topics", "--entity-name", "cfg")
    run_tool("kafka-configs", *server, "--alter", *topic, "--add-config", "retention.ms=1000")
    assert "retention.ms=1000" in run_tool("kafka-configs", *server, "--describe", *topic)
    run_tool("kafka-configs", *server, "--alter", *topic, "--delete-config", "retention.ms")
    assert "retention.ms" not in run_tool("kafka-configs", *server, "--describe", *topic)
    brokers = ("--entity-type", "brokers", "--entity-name", "0")
    assert "num.partitions=2" in run_tool("kafka-configs", *server, "--describe", *brokers, "--all")


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd", "snappy", "gzip"])
def test_kafka_consumer_perf_test_reads_a_source_topic_to_its_end_exactly(
    nullbroker_factory: StartBroker, compression: str
) -> None:
    broker = nullbroker_factory(
        "--source",
        source("src", compression=compression),
        "--group-initial-rebalance-delay-ms",
        "0",
    )
    consumer_perf_reads(broker.bootstrap, 2 * RECORDS)
    fetched = fetched_from_metrics(broker.scrape())
    assert fetched == {("src", 0): RECORDS, ("src", 1): RECORDS}


def test_a_java_consumer_reads_exactly_every_record_through_an_incremental_fetch_session(
    nullbroker_factory: StartBroker,
) -> None:
    # 4 MB a partition: several fetches of max.partition.fetch.bytes (1 MiB) each, all but
    # the first incremental, naming only the partitions whose offsets moved.
    records = 20 * RECORDS
    broker = nullbroker_factory(
        "--source", f"src:partitions=2,records={records},size=200",
        "--group-initial-rebalance-delay-ms", "0",
    )  # fmt: skip
    consumer_perf_reads(broker.bootstrap, 2 * records)
    families = broker.scrape()
    assert fetched_from_metrics(families) == {("src", 0): records, ("src", 1): records}
    kinds = fetch_kinds(families)
    print(f"Java consumer's Fetch requests: {kinds}")
    assert kinds.get("full", 0) >= 1 and kinds.get("incremental", 0) > kinds["full"]
    summary = broker.stop()
    assert not {"fetch_session_id_not_found", "invalid_fetch_session_epoch"} & set(
        summary["errors"]
    )


def consumer_perf_reads(bootstrap: str, messages: int) -> None:
    """kafka-consumer-perf-test reads `messages` records of topic src, and says so."""
    output = run_tool(
        "kafka-consumer-perf-test",
        "--bootstrap-server", bootstrap,
        "--topic", "src",
        "--messages", str(messages),
        "--timeout", "60000",
    )  # fmt: skip
    assert consumer_perf_rows(output)["data.consumed.in.nMsg"] == str(messages)


def test_kafka_consumer_groups_resets_committed_offsets_to_earliest(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory(
        "--source", source("src"), "--group-initial-rebalance-delay-ms", "0"
    )
    server = ("--bootstrap-server", broker.bootstrap)
    run_tool(
        "kafka-consumer-perf-test", *server, "--topic", "src", "--group", "readers",
        "--messages", str(2 * RECORDS), "--timeout", "60000",
    )  # fmt: skip
    group = ("--group", "readers")
    assert "readers" in run_tool("kafka-consumer-groups", *server, "--list").split()
    assert committed(run_tool("kafka-consumer-groups", *server, "--describe", *group)) == {
        0: RECORDS,
        1: RECORDS,
    }
    reset = run_tool(
        "kafka-consumer-groups", *server, "--reset-offsets", "--to-earliest", "--execute",
        *group, "--topic", "src",
    )  # fmt: skip
    assert "readers" in reset
    assert committed(run_tool("kafka-consumer-groups", *server, "--describe", *group)) == {
        0: 0,
        1: 0,
    }
    run_tool("kafka-consumer-groups", *server, "--delete", *group)
    assert "readers" not in run_tool("kafka-consumer-groups", *server, "--list").split()


def committed(described: str) -> dict[int, int]:
    """Partition -> CURRENT-OFFSET from kafka-consumer-groups --describe."""
    offsets = {}
    for line in described.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == "src" and fields[2].isdigit():
            offsets[int(fields[2])] = int(fields[3])
    return offsets


def test_a_java_consumer_closes_without_waiting_out_fetch_max_wait(
    nullbroker_factory: StartBroker,
) -> None:
    # Reading to the log end leaves a Fetch held there; closing, the consumer sends a Fetch
    # for no partition to end its session. Were that held too, close() would take the whole
    # fetch.max.wait.ms (it took 31 s before the broker answered it at once).
    broker = nullbroker_factory("--source", source("src"))
    started = time.monotonic()
    run_tool(
        "kafka-console-consumer",
        "--bootstrap-server", broker.bootstrap,
        "--topic", "src", "--partition", "0", "--offset", "0",
        "--max-messages", str(RECORDS),
        "--consumer-property", f"fetch.max.wait.ms={FETCH_MAX_WAIT_MS}",
        "--consumer-property", f"request.timeout.ms={FETCH_MAX_WAIT_MS + 30_000}",
    )  # fmt: skip
    seconds = time.monotonic() - started
    print(f"Java console consumer read {RECORDS} records and closed in {seconds:.1f} s")
    assert seconds < FETCH_MAX_WAIT_MS / 1000 / 2
    assert fetched_from_metrics(broker.scrape())[("src", 0)] == RECORDS


def test_kafka_producer_perf_test_with_its_defaults_is_counted_exactly(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--partitions", "3")
    output = run_tool(
        "kafka-producer-perf-test",
        "--topic", "perf", "--num-records", "20000", "--record-size", "100",
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={broker.bootstrap}",
    )  # fmt: skip
    final = output.strip().splitlines()[-1]
    assert final.startswith("20000 records sent"), output
    produced = produced_from_metrics(broker.scrape())
    assert sum(counts.records for counts in produced.values()) == 20000
    summary = broker.stop()
    # acks=all and idempotence are the Java producer's defaults: it asked for a producer id.
    assert summary["requests"].get("InitProducerId", 0) >= 1
    assert summary["connections_closed_on_error"] == {}


def test_kafka_producer_perf_test_with_a_transactional_id_is_counted_exactly(
    nullbroker_factory: StartBroker,
) -> None:
    broker: RunningBroker = nullbroker_factory("--partitions", "4")
    output = run_tool(
        "kafka-producer-perf-test", "--topic", "txn", "--num-records", "20000",
        "--record-size", "100", "--throughput", "-1", "--transactional-id", "perf-txn",
        "--transaction-duration-ms", "100",
        "--producer-props", f"bootstrap.servers={broker.bootstrap}",
    )  # fmt: skip
    assert output.strip().splitlines()[-1].startswith("20000 records sent"), output
    families = list(broker.scrape())
    produced = produced_from_metrics(families)
    assert sum(counts.records for counts in produced.values()) == 20000
    transactions = samples(families, "nullbroker_transactions_total")
    assert transactions[(("outcome", "committed"),)] >= 1
    assert (("outcome", "aborted"),) not in transactions
    records = samples(families, "nullbroker_transactional_records_total")
    assert records[(("outcome", "committed"),)] == 20000
    # Kafka's own consumer, read_committed, reads every record past the markers.
    read = run_tool(
        "kafka-console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", "txn",
        "--from-beginning", "--isolation-level", "read_committed", "--max-messages", "20000",
        "--timeout-ms", "120000",
    )  # fmt: skip
    assert len(read.splitlines()) == 20000, read[-500:]
    # Transactions v2 (KIP-890, transaction.version=2 finalized): from epoch 0 at
    # InitProducerId, one bump per commit, and partitions join by Produce alone.
    described = run_tool(
        "kafka-transactions", "--bootstrap-server", broker.bootstrap, "describe",
        "--transactional-id", "perf-txn",
    )  # fmt: skip
    header, row = described.strip().splitlines()[-2:]
    fields = dict(zip(header.split(), row.split(), strict=False))
    assert int(fields["ProducerEpoch"]) == transactions[(("outcome", "committed"),)]
    summary = broker.stop()
    assert summary["requests"]["EndTxn"] == transactions[(("outcome", "committed"),)]
    assert "AddPartitionsToTxn" not in summary["requests"]
    assert set(summary["errors"]) <= {"member_id_required"}  # the consumer's group join


def json_events(output: str) -> list[dict[str, Any]]:
    """The JSON lines the verifiable tools print, one event each."""
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def test_kafka_verifiable_producer_gets_every_record_acked_at_a_distinct_offset(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory("--partitions", "3")
    events = json_events(
        run_tool(
            "kafka-verifiable-producer",
            "--bootstrap-server",
            broker.bootstrap,
            "--topic",
            "verified",
            "--max-messages",
            "900",
        )
    )
    acks = [event for event in events if event["name"] == "producer_send_success"]
    placed = {(event["partition"], event["offset"]) for event in acks}
    assert len(acks) == len(placed) == 900
    final = next(event for event in events if event["name"] == "tool_data")
    assert final["sent"] == final["acked"] == 900
    produced = produced_from_metrics(broker.scrape())
    assert {partition: counts.records for (_, partition), counts in produced.items()} == {
        partition: sum(1 for p, _ in placed if p == partition) for partition in range(3)
    }


def test_kafka_verifiable_consumer_in_a_group_consumes_and_commits(
    nullbroker_factory: StartBroker,
) -> None:
    broker = nullbroker_factory(
        "--source", source("src"), "--group-initial-rebalance-delay-ms", "0"
    )
    events = json_events(
        run_tool(
            "kafka-verifiable-consumer",
            "--bootstrap-server",
            broker.bootstrap,
            "--topic",
            "src",
            "--group-id",
            "verifiers",
            "--max-messages",
            str(2 * RECORDS),
        )
    )
    consumed = sum(event["count"] for event in events if event["name"] == "records_consumed")
    assert consumed == 2 * RECORDS
    commits = [event for event in events if event["name"] == "offsets_committed"]
    assert commits and all(event["success"] for event in commits)
    last_committed = {
        offset["partition"]: offset["offset"] for event in commits for offset in event["offsets"]
    }
    assert last_committed == {0: RECORDS, 1: RECORDS}


def test_kafka_delete_records_moves_the_log_start(
    nullbroker_factory: StartBroker, tmp_path: Path
) -> None:
    broker = nullbroker_factory("--source", source("src"))
    plan = tmp_path / "delete.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": "src", "partition": 0, "offset": 100}]})
    )
    output = run_tool(
        "kafka-delete-records", "--bootstrap-server", broker.bootstrap,
        "--offset-json-file", str(plan),
    )  # fmt: skip
    assert "low_watermark: 100" in output
    earliest = run_tool(
        "kafka-get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", "src",
        "--time", "-2",
    )  # fmt: skip
    assert sorted(earliest.split()) == ["src:0:100", "src:1:0"]
