"""Markers every test gets from what it needs, so that a part of the suite can be chosen
(`pytest -m "not slow"`, `-m "not java"`; docs/development.md): `java` for what needs a
JVM (Kafka's tools, Kafka itself through the `kafka` fixture, Spark), `spark` for
spark_tests/, `slow` for the files that take a minute or more (each says so itself) and
for Spark's. A test marked `kafka_tools` is skipped, saying why, where Kafka's
command-line tools are not provisioned.

Every skip is counted and printed at the end of the run, and in a strict run (CI, or `make
test STRICT=1`) a skip the allowed table does not name fails it (tests/support/skip_gate.py). How
the suite is spread over several processes is tests/support/parallel.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent

pytest_plugins = ["tests.support.skip_gate", "tests.support.parallel"]


@pytest.hookimpl(tryfirst=True)  # tests/support/parallel.py orders the work by these marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tools_missing: str | None = None
    if any(item.get_closest_marker("kafka_tools") for item in items):
        from perf.java_perf import missing  # the perf tools' check: one definition of "provisioned"

        tools_missing = missing()
    for item in items:
        in_spark_tests = item.path.is_relative_to(ROOT / "spark_tests")
        needs_tools = item.get_closest_marker("kafka_tools") is not None
        if needs_tools and tools_missing is not None:
            item.add_marker(pytest.mark.skip(reason=tools_missing))
        if needs_tools or in_spark_tests or "kafka" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.java)
        if in_spark_tests:
            item.add_marker(pytest.mark.spark)
            item.add_marker(pytest.mark.slow)
