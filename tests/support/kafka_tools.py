"""Apache Kafka's own command-line tools (scripts/kafka-bin), run as a user runs them.

`make test` provisions them (scripts/ensure-kafka-tools); without Java or Maven the tests
that need them are skipped with the reason.
"""

from __future__ import annotations

import pytest

from perf.java_perf import BIN
from tests.support.module_command import run_checked

TOOL_TIMEOUT = 180.0


requires_kafka_tools = pytest.mark.kafka_tools
"""Skipped, saying why, where the tools are not provisioned; marked `java` (conftest.py)."""


def run_tool(name: str, *arguments: str, timeout: float = TOOL_TIMEOUT) -> str:
    """Run one of Kafka's tools; its stdout. Fails the test, showing stderr, unless it
    exits 0."""
    return run_checked([str(BIN / name), *arguments], timeout=timeout)
