"""How the suite is spread over several processes (pytest-xdist: `make test` runs `pytest -n N
--dist loadgroup`; a plugin the root conftest.py loads).

Most of the suite waits: on JVMs starting (Kafka, Spark, Kafka's tools), on brokers and clients
in other processes, on held requests. Run one test after another and the machine idles;
run several processes at once and their waits overlap. Three rules keep that sound:

- A test file runs whole in one process, so that its module fixtures (a Prometheus, perf.compare's
  brokers, the wheel built once) start once. Each process has its own session fixtures: the
  `kafka` fixture is one Kafka JVM a process, on ports the OS picks, as every broker is.
- spark_tests/ run together in one process: they share one SparkSession and one standalone
  cluster, JVMs that take seconds to start and cores to run.
- The longest work starts first: Spark's tests, then the files marked `slow`, then the rest in
  collection order, so that no process is left with a long file while the others are idle.

xdist's own `loadgroup` names a test's group by rewriting its node id, which pytest 9 no longer
lets a plugin do (node ids are derived, not stored); this scheduler keeps loadgroup's meaning
with groups decided from the node id itself.
"""

from __future__ import annotations

from typing import Any

import pytest

GROUPS = {"spark_tests/": "spark"}
"""Node-id prefixes whose tests run together in one process, by group name."""


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its group, else its file."""
    path = nodeid.split("::", 1)[0]
    for prefix, group in GROUPS.items():
        if path.startswith(prefix):
            return group
    return path


def longest_first(item: pytest.Item) -> tuple[bool, bool]:
    return (not item.nodeid.startswith(tuple(GROUPS)), item.get_closest_marker("slow") is None)


@pytest.hookimpl(trylast=True)  # after conftest.py marks what is slow
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker; every worker sorts alike
        items.sort(key=longest_first)


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
