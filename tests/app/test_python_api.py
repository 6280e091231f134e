"""The Python API (`nullbroker.start`, nullbroker.app.launcher's RunningBroker): settings as
keywords read by the broker's own table, the accounts as typed objects, faults, and
assertions on the counts that say where they differ."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

import nullbroker
from nullbroker.app.accounts import (
    Accounts,
    Counts,
    Mismatch,
    TopicCounts,
    Traffic,
    expect_counts,
)
from nullbroker.app.configuration import load
from nullbroker.app.launcher import RunningBroker, ServerError
from nullbroker.broker import Broker
from nullbroker.ops.report import summary
from nullbroker.settings import Config
from nullbroker.sources.synthetic import SourceSpec
from tests.support.kio_calls import SESSION, answered, dispatch_of, fetch_frame
from tests.support.module_command import run_checked

TIMEOUT = 20.0


def produce(bootstrap: str, topic: str, partitions: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, records in partitions.items():
        for number in range(records):
            producer.produce(topic, b"%d" % number, partition=partition)
    assert producer.flush(TIMEOUT) == 0


def test_the_package_names_the_api_without_loading_it() -> None:
    # The broker process and every pytest run (the plugin) import the package.
    code = "import sys, nullbroker; print(sorted(m for m in sys.modules if 'nullbroker.' in m))"
    loaded = run_checked([sys.executable, "-c", code], timeout=TIMEOUT)
    assert loaded.strip() == "[]"
    assert nullbroker.start is nullbroker.app.launcher.start
    assert nullbroker.RunningBroker is RunningBroker
    with pytest.raises(AttributeError, match="no attribute 'Broker'"):
        nullbroker.Broker  # noqa: B018 - the attribute's lookup is what is tested


def test_keyword_settings_reach_the_broker_as_its_own_table_reads_them() -> None:
    from nullbroker.app.launcher import _variables

    variables = _variables(
        {
            "auto_create": False,
            "verify_crc": True,
            "partitions": 4,
            "report_interval": 0.5,
            "sources": ["a:partitions=2,records=10", "b:records=5"],
            "faults": ("latency:api=Produce,ms=5",),
            "summary_json": Path("/tmp/x.json"),
        }
    )
    config = load({}, environ=variables)
    assert (config.auto_create, config.verify_crc, config.partitions) == (False, True, 4)
    assert config.report_interval == 0.5 and config.summary_json == "/tmp/x.json"
    assert [source.name for source in config.sources] == ["a", "b"]
    assert config.faults == ("latency:api=Produce,ms=5",)


def test_start_runs_the_cluster_the_keywords_describe(tmp_path: Path) -> None:
    with nullbroker.start(
        brokers=3, processes=2, sources=["clicks:partitions=2,records=100"], workdir=tmp_path
    ) as broker:
        assert len(broker.nodes) == 3 and broker.bootstrap == broker.nodes[0]
        assert broker.find_line(re.compile(r"^processes: 2 workers"), 5.0)
        accounts = broker.accounts()
        assert set(accounts.produced.topic("clicks").partitions) == {0, 1}
        assert accounts.produced.records == 0 and accounts.connections == 0
    assert (tmp_path / "summary.json").exists()


def test_a_mistaken_setting_is_reported_in_the_brokers_words() -> None:
    with pytest.raises(ServerError, match="NULLBROKER_PARTITONS: unknown setting"):
        nullbroker.start(partitons=2)
    with pytest.raises(ServerError, match="NULLBROKER_PARTITIONS: 'many' is not a valid integer"):
        nullbroker.start(partitions="many")


@pytest.mark.clients
def test_accounts_reset_and_faults_of_a_running_broker() -> None:
    with nullbroker.start(partitions=2) as broker:
        produce(broker.bootstrap, "orders", {0: 30, 1: 20})
        accounts = broker.assert_produced("orders", records={0: 30, 1: 20})
        assert accounts.produced.partition("orders", 1).records == 20
        assert accounts.produced.topic("orders").batches == accounts.requests["Produce"] >= 2
        assert broker.reset().produced.records == 50
        assert broker.accounts().produced.topic("orders").records == 0

        fault = broker.faults.inject("latency:api=Produce,ms=5")
        assert (fault.id, fault.kind, fault.seconds_left) == (1, "latency", None)
        assert broker.faults.active() == [fault]
        with pytest.raises(
            nullbroker.OperatorHttpError, match="node=7, but the nodes are 0 to 0"
        ) as refused:
            broker.faults.inject("down:node=7")
        assert refused.value.status == 400
        produce(broker.bootstrap, "orders", {0: 1})
        assert broker.accounts().faults == {"latency": 1}
        assert broker.faults.clear() == 1 and broker.faults.active() == []
    # Stopped, and its temporary folder gone: its accounts are the summary it wrote.
    assert broker.accounts().produced.topic("orders").records == 1
    assert broker.accounts().faults == {"latency": 1}


@pytest.mark.clients
def test_an_assertion_on_counts_says_where_they_differ_and_fails_at_once_when_over() -> None:
    with nullbroker.start(partitions=3) as broker:
        produce(broker.bootstrap, "orders", {0: 1000, 2: 998})
        with pytest.raises(AssertionError) as short:
            broker.assert_produced("orders", records={0: 1000, 2: 1000}, timeout=0.2)
        assert str(short.value) == (
            "nullbroker counted otherwise (waited 0.2 s):\n"
            "  topic orders partition 2: expected 1,000 records produced, counted 998"
        )
        # Over already: it fails at once, and says it did not wait (no "(waited ...)"). Asked
        # to wait up to ten minutes, it returns within half of that even on a loaded machine
        # (it reads the accounts once), and a run that waited would show it.
        began = time.monotonic()
        with pytest.raises(AssertionError, match=r"^nullbroker counted otherwise:\n") as over:
            # No batch count is certain (the producer batches by time) but that 1,000 records came
            # in at least one: 0 batches is over for certain.
            broker.assert_produced("orders", 0, records=999, batches=0, timeout=600)
        assert time.monotonic() - began < 300
        assert "topic orders partition 0: expected 999 records produced, counted 1,000" in str(
            over.value
        )
        assert "topic orders partition 0: expected 0 batches produced, counted " in str(over.value)
        broker.assert_fetched("orders", records=0, bytes=0)


def test_a_failed_agreement_says_what_the_broker_saw_of_the_pushes() -> None:
    """assert_clients_agree's failure names the instances, their pushes and the errors
    PushTelemetry answered, so that a run that fails it says whether a push was refused.
    Pushing off: no push arrives at a time the test cannot know (the instances' lines are
    those of tests/clients/test_client_telemetry.py's runs)."""
    with nullbroker.start(client_metrics="off") as broker:
        produce(broker.bootstrap, "orders", {0: 10})
        with pytest.raises(AssertionError) as none:
            broker.assert_clients_agree("rdkafka", timeout=0.2)
    assert str(none.value).splitlines() == [
        "the clients' view and the broker's, after 0.2 s:",
        "no producer of client id 'rdkafka' pushed its count of records sent",
        "  PushTelemetry answered 0; errors answered (every API): none; payloads refused 0, "
        "series dropped 0",
    ]


def test_a_broker_started_without_metrics_says_where_its_accounts_are() -> None:
    with (
        nullbroker.start(metrics=False) as broker,
        pytest.raises(ServerError, match="started without --metrics"),
    ):
        broker.accounts()


def test_the_accounts_document_reads_into_typed_objects() -> None:
    broker = Broker(Config(sources=(SourceSpec("q", partitions=2, records=10, size=10),)))
    answered(dispatch_of(broker).answer(fetch_frame("q", offset=0, max_wait_ms=0), SESSION))
    broker.stats.partition_counters("q", 1).records = 4
    document = summary(broker.stats)

    accounts = Accounts.from_json(document)

    assert accounts.fetched.topic("q").partition(0) == Counts(
        records=10, bytes=document["fetched"]["topics"]["q"]["partitions"]["0"]["bytes"]
    )
    assert accounts.fetched.partition("q", 1) == Counts(records=0, bytes=0)
    assert accounts.fetched.batches is None  # Fetch's batches are not counted
    assert accounts.produced.partition("q", 1) == Counts(records=4, bytes=0, batches=0)
    assert accounts.produced.topic("never") == TopicCounts(records=0, bytes=0, batches=0)
    assert accounts.requests == {"Fetch": 1} and accounts.request_latency["Fetch"].count == 1
    assert accounts.groups.by_state["Stable"] == 0
    assert accounts.counts_since == accounts.started_at


def test_expected_counts_are_checked_per_topic_partition_or_mapping() -> None:
    traffic = Traffic(
        records=7,
        bytes=70,
        batches=2,
        topics={
            "t": TopicCounts(
                records=7,
                bytes=70,
                batches=2,
                partitions={
                    0: Counts(records=5, bytes=50, batches=1),
                    1: Counts(records=2, bytes=20, batches=1),
                },
            )
        },
    )
    assert expect_counts(traffic, "produced", "t", records=7, batches=2) == []
    assert expect_counts(traffic, "produced", "t", records={0: 5, 1: 2}) == []
    missing = expect_counts(traffic, "produced", "t", records={0: 5})
    assert [str(m) for m in missing] == [
        "topic t partition 1: expected 0 records produced, counted 2"
    ]
    assert [str(m) for m in expect_counts(traffic, "produced", "u", 3, records=1)] == [
        "topic u partition 3: expected 1 record produced, counted 0"
    ]
    with pytest.raises(TypeError, match="unknown counts"):
        expect_counts(traffic, "produced", "t", messages=1)
    with pytest.raises(TypeError, match="fetched batches are not counted"):
        expect_counts(Traffic(), "fetched", "t", batches=1)
    assert Mismatch("w", "records", "x", 1, 2).exceeds
    assert not Mismatch("w", "records", "x", 2, 1).exceeds
