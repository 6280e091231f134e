"""The oracle's own marker: `kafka_cluster` for the comparisons that start Kafka as three
nodes (tests/oracle/test_differential_cluster.py), which `make oracle` runs."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kafka_cluster: compares nullbroker --brokers 3 with Kafka 4.1.1 as three KRaft nodes "
        "(started once for the module)",
    )
