"""The pytest plugin (nullbroker.app.pytest_plugin), as a project that installed the package
uses it: pytester runs test files of such a project, with its command-line options and ini."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

PRODUCE = """
from confluent_kafka import Producer


def produce(bootstrap, topic, records, partition=0):
    producer = Producer({"bootstrap.servers": bootstrap})
    for number in range(records):
        producer.produce(topic, b"%d" % number, partition=partition)
    assert producer.flush(20) == 0
"""


@pytest.mark.clients
def test_the_fixture_counts_what_a_test_produces_and_says_where_it_differs(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        PRODUCE
        + """

def test_counted(nullbroker):
    produce(nullbroker.bootstrap, "orders", 1000)
    nullbroker.assert_produced("orders", records=1000)


def test_miscounted(nullbroker):
    produce(nullbroker.bootstrap, "orders", 998, partition=0)
    nullbroker.assert_produced("orders", 0, records=1000, timeout=0.2)
"""
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "E*AssertionError: nullbroker counted otherwise (waited 0.2 s):",
            "E*topic orders partition 0: expected 1,000 records produced, counted 998",
        ]
    )


@pytest.mark.clients
def test_the_session_broker_is_one_and_its_counts_start_at_zero_in_each_test(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        PRODUCE
        + """
pids = set()


def test_first(nullbroker_session):
    pids.add(nullbroker_session.pid)
    produce(nullbroker_session.bootstrap, "first", 10)
    nullbroker_session.assert_produced("first", records=10)


def test_second(nullbroker_session):
    pids.add(nullbroker_session.pid)
    assert nullbroker_session.accounts().produced.records == 0
    assert "first" in nullbroker_session.accounts().produced.topics  # the topic stays
    assert len(pids) == 1
"""
    )
    pytester.runpytest().assert_outcomes(passed=2)


def test_the_factory_starts_clusters_over_the_defaults_of_the_command_line_and_ini(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(
        """
[pytest]
nullbroker_settings =
    sources=ini:records=1
    report-interval=60
"""
    )
    pytester.makepyfile(
        """
def topics(broker):
    return sorted(broker.accounts().produced.topics)


def test_defaults(nullbroker):
    assert topics(nullbroker) == ["a", "b"]  # the command line's, over the ini's


def test_cluster(nullbroker_factory):
    cluster = nullbroker_factory(brokers=2, processes=2, sources="own:partitions=3,records=1")
    assert len(cluster.nodes) == 2
    assert topics(cluster) == ["own"]
    assert sorted(cluster.accounts().produced.topic("own").partitions) == [0, 1, 2]
"""
    )
    result = pytester.runpytest(
        "--nullbroker-setting", "sources=a:records=1",
        "--nullbroker-setting", "sources=b:records=1",
    )  # fmt: skip
    result.assert_outcomes(passed=2)


def test_a_setting_that_is_not_name_equals_value_stops_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest("--nullbroker-setting", "partitions")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--nullbroker-setting 'partitions': expected NAME=VALUE"])


def test_the_plugin_loads_no_broker_code_until_a_fixture_is_used(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
import sys


def loaded():
    return sorted(
        name for name in sys.modules
        if name.split(".")[0] in ("nullbroker", "codec", "kio", "prometheus_client")
    )


def test_before():
    assert loaded() == ["nullbroker", "nullbroker.app", "nullbroker.app.pytest_plugin"]


def test_with_a_broker(nullbroker):
    assert nullbroker.bootstrap
    assert "nullbroker.app.launcher" in loaded()
    assert not [name for name in loaded() if name.split(".")[0] in ("codec", "kio")]
"""
    )
    # pytest-trio, installed here, loads hypothesis at start: seconds this check does not need.
    result = pytester.runpytest_subprocess("-p", "no:trio")
    result.assert_outcomes(passed=2)


def test_a_conftest_gives_defaults_a_module_shares_brokers_and_the_ini_has_them_killed(
    pytester: pytest.Pytester,
) -> None:
    # What the project's own suite asks of the plugin: each test's brokers given its
    # parametrized connection loop, brokers a module's tests share, and brokers killed.
    pytester.makeini("[pytest]\nnullbroker_teardown = kill\n")
    pytester.makeconftest(
        """
import pytest


@pytest.fixture(params=["epoll", "trio"])
def nullbroker_defaults(request):
    return {"connection_loop": request.param}
"""
    )
    pytester.makepyfile(
        """
import signal

import pytest

ended = []
shared_pids = []


def environment(broker):
    with open(f"/proc/{broker.pid}/environ", "rb") as variables:
        return variables.read().split(b"\\0")


def test_defaults(nullbroker, nullbroker_defaults):
    loop = nullbroker_defaults["connection_loop"].encode()
    assert b"NULLBROKER_CONNECTION_LOOP=" + loop in environment(nullbroker)
    ended.append(nullbroker)


def test_the_brokers_were_killed():
    assert [broker.process.returncode for broker in ended] == [-signal.SIGKILL] * 2


@pytest.fixture(scope="module")
def shared(nullbroker_module_factory):
    return nullbroker_module_factory(partitions=2)


def test_first(shared):
    shared_pids.append(shared.pid)


def test_second(shared):
    assert shared_pids == [shared.pid]
"""
    )
    pytester.runpytest().assert_outcomes(passed=5)


def test_a_teardown_that_is_neither_stop_nor_kill_stops_the_run(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nnullbroker_teardown = sigterm\n")
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*nullbroker_teardown (ini) 'sigterm': expected stop or kill"])
