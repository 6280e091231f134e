"""Apache Kafka's own command-line tools (scripts/kafka-bin), run as a user runs them.

`make test` provisions them (scripts/ensure-kafka-tools); without Java or Maven the tests
that need them are skipped with the reason.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.module_command import run_checked

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "scripts" / "kafka-bin"
TOOL_TIMEOUT = 180.0


def _missing() -> str | None:
    if shutil.which("java") is None:
        return "java is not on PATH; scripts/ensure-test-tools installs it"
    if not list((ROOT / ".cache" / "kafka-tools").glob("*/complete")):
        return "Kafka's tools are not provisioned; scripts/ensure-kafka-tools (make test) does it"
    return None


requires_kafka_tools = pytest.mark.skipif(_missing() is not None, reason=str(_missing()))


def run_tool(name: str, *arguments: str, timeout: float = TOOL_TIMEOUT) -> str:
    """Run one of Kafka's tools; its stdout. Fails the test, showing stderr, unless it
    exits 0."""
    return run_checked([str(BIN / name), *arguments], timeout=timeout)
