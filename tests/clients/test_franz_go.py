"""franz-go's own integration tests that found nullbroker answering differently from Kafka,
run alone against `nullbroker serve` to check what the broker counted while they ran (the
whole suite, tests/clients/test_franz_go_suite.py, checks only that they pass)."""

from __future__ import annotations

import os
import subprocess

import pytest

from nullbroker.app.pytest_plugin import StartBroker
from tests.clients.test_franz_go_suite import BINARY, PACKAGE_DIR
from tests.clients.test_franz_go_suite import pytestmark as suite_marks
from tests.support.broker_counts import requests_from_metrics

RUN_TIMEOUT_S = 120

pytestmark = suite_marks


def run_kgo_test(bootstrap: str, name: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "KGO_SEEDS": bootstrap, "KGO_TEST_RF": "1"}
    return subprocess.run(
        [str(BINARY), "-test.run", f"^{name}$", "-test.v"],
        env=environment,
        cwd=PACKAGE_DIR,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )


def test_issue_434_a_deleted_topics_partition_does_not_end_the_fetch_wait(
    nullbroker_factory: StartBroker,
) -> None:
    # TestIssue434 keeps fetching a deleted topic's partition (UNKNOWN_TOPIC_ID, kept as a
    # retryable error) beside a live one at its log end for 15 s, with FetchMaxWait 100 ms.
    # Kafka sets the unknown partition aside and waits: about 150 Fetch requests. Answered
    # at once, the client sent 101,721.
    broker = nullbroker_factory()
    result = run_kgo_test(broker.bootstrap, "TestIssue434")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "--- PASS: TestIssue434" in result.stdout
    fetches = requests_from_metrics(broker.scrape())["Fetch"]
    assert fetches < 1_000, f"{fetches} Fetch requests in 15 s against a 100 ms max wait"


@pytest.mark.parametrize("name", ["TestConsumeRegex", "Test848RegexBrokerResolves"])
def test_regex_subscriptions_see_consumer_offsets_as_kafkas_internal_topic(
    nullbroker_factory: StartBroker, name: str
) -> None:
    # Both ask FindCoordinator, then wait for __consumer_offsets in Metadata with
    # is_internal: franz-go's own regex skips it; Kafka's (KIP-848) matches and assigns it.
    broker = nullbroker_factory("--group-initial-rebalance-delay-ms", "0")
    result = run_kgo_test(broker.bootstrap, name)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert f"--- PASS: {name}" in result.stdout
    summary = broker.stop()
    assert "__consumer_offsets" not in summary["produced"]["topics"]
    assert "__consumer_offsets" not in summary["fetched"]["topics"]
