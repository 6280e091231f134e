"""How the suite is spread over several processes (pytest-xdist: `make test` runs `pytest -n N
--dist loadgroup`; a plugin the root conftest.py loads).

Most of the suite waits: on JVMs starting (Kafka, Spark, Kafka's tools), on brokers and clients
in other processes, on held requests. Run one test after another and the machine idles;
run several processes at once and their waits overlap. Three rules keep that sound:

- A test file runs whole in one process, so that its module fixtures (a Prometheus, perf.compare's
  brokers, the wheel built once) start once. Each process has its own session fixtures: the
  `kafka` fixture is one Kafka JVM a process, on ports the OS picks, as every broker is.
- The tests that share a session fixture too dear to start in every process run together in
  one process: those of the SparkSession (`spark`) in one, those of the standalone cluster
  (`standalone`) in another. A test file
  that uses one of them without being named in GROUPS fails the collection in one process,
  saying so (tests/tools/test_parallel.py collects the suite
  that way), rather than starting a second JVM quietly.
- The longest work starts first: the groups, then the files marked `slow`, then the rest in
  collection order, so that no process is left with a long file while the others are idle.

xdist's own `loadgroup` names a test's group by rewriting its node id, which pytest 9 no longer
lets a plugin do (node ids are derived, not stored); this scheduler keeps loadgroup's meaning
with groups decided from the node id itself.
"""

from __future__ import annotations

from typing import Any

import pytest

SHARED = {
    "spark": "spark-session",
    "standalone": "spark-cluster",
}
"""Session fixtures started once for the group of tests that use them, by group."""

SPARK_SESSION_FILES = (
    "baseline/test_e2e_latency.py",
    "baseline/test_jobs.py",
    "baseline/test_nexmark.py",
    "baseline/test_readme_pyspark.py",
    "cluster/test_timelines.py",
    "connector/test_client_telemetry.py",
    "connector/test_kafka_connector.py",
    "pykafka/test_batch_read.py",
    "pykafka/test_pykafka_options.py",
    "pykafka/test_pykafka_streaming.py",
    "pykafka/test_pykafka_write.py",
)
GROUPS = {
    **{f"spark_tests/{name}": "spark-session" for name in SPARK_SESSION_FILES},
    "spark_tests/cluster/test_standalone_cluster.py": "spark-cluster",
}
"""Test files whose tests run together in one process, by group name."""


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its group, else its file."""
    path = nodeid.split("::", 1)[0]
    return GROUPS.get(path, path)


def longest_first(item: pytest.Item) -> tuple[bool, bool]:
    grouped = scope_of(item.nodeid) in GROUPS.values()
    return (not grouped, item.get_closest_marker("slow") is None)


def check_groups(items: list[pytest.Item]) -> None:
    """Each user of a shared fixture is in that fixture's group."""
    strays = sorted(
        {
            f"{item.path.name} uses {fixture} but is not in GROUPS as {group!r}"
            for item in items
            for fixture, group in SHARED.items()
            if fixture in getattr(item, "fixturenames", ()) and scope_of(item.nodeid) != group
        }
    )
    if strays:
        raise pytest.UsageError("tests/support/parallel.py: " + "; ".join(strays))


@pytest.hookimpl(tryfirst=True)  # the whole collection, before -k or -m leave tests out
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker; every worker sorts alike
        items.sort(key=longest_first)
    else:
        # In one process, where a refusal reads clearly (in a worker it would end the worker);
        # tests/tools/test_parallel.py collects the whole suite so.
        check_groups(items)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileAndGroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    # The workers' order (longest first) is the order of the work, not xdist's own (which
    # puts the scopes with the most tests first).
    config.option.loadscopereorder = False
    return FileAndGroupScheduling(config, log)
