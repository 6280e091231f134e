"""Repeated warnings are summarised: the first of a kind per peer in full, then a count."""

from __future__ import annotations

import logging

import pytest

from nullbroker.log_limit import RepeatLimitedLog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def limited(clock: Clock) -> RepeatLimitedLog:
    return RepeatLimitedLog(logging.getLogger("nullbroker.test"), window_seconds=10, clock=clock)


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "nullbroker.test"]


def test_a_thousand_repeats_are_one_line_then_one_summary(
    limited: RepeatLimitedLog, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="nullbroker.test")
    for number in range(1000):
        limited.warning("127.0.0.1", "UndecodableRequest", "bad request %d", number)
    limited.flush()
    assert messages(caplog) == ["bad request 0"]
    clock.now += 10
    limited.flush()
    assert messages(caplog) == [
        "bad request 0",
        "… 999 more like this (UndecodableRequest) from 127.0.0.1 in the last 10 s",
    ]


def test_kinds_and_peers_are_limited_apart(
    limited: RepeatLimitedLog, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="nullbroker.test")
    limited.warning("10.0.0.1", "A", "a from one")
    limited.warning("10.0.0.2", "A", "a from two")
    limited.warning("10.0.0.1", "B", "b from one")
    limited.warning("10.0.0.1", "A", "a from one again")
    assert messages(caplog) == ["a from one", "a from two", "b from one"]


def test_a_kind_quiet_for_a_window_is_logged_in_full_again(
    limited: RepeatLimitedLog, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="nullbroker.test")
    limited.info("h", "reset", "first")
    clock.now += 11
    limited.flush()  # no repeats: nothing to summarise, and the kind is forgotten
    limited.info("h", "reset", "second")
    assert messages(caplog) == ["first", "second"]


def test_a_flood_that_goes_on_is_summarised_once_per_window(
    limited: RepeatLimitedLog, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="nullbroker.test")
    for _window in range(3):
        for _ in range(5):
            limited.warning("h", "k", "flood")
        clock.now += 10
        limited.flush()
    assert messages(caplog) == [
        "flood",
        "… 4 more like this (k) from h in the last 10 s",
        "… 5 more like this (k) from h in the last 10 s",
        "… 5 more like this (k) from h in the last 10 s",
    ]


def test_shutdown_summarises_what_is_pending_whatever_the_window(
    limited: RepeatLimitedLog, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="nullbroker.test")
    limited.warning("h", "k", "once")
    limited.warning("h", "k", "twice")
    clock.now += 2
    limited.flush(everything=True)
    assert messages(caplog) == ["once", "… 1 more like this (k) from h in the last 2 s"]


def test_a_window_opened_is_noted_once_and_gathering_ends_with_the_quiet_window(
    limited: RepeatLimitedLog, clock: Clock
) -> None:
    noted = []
    limited.noted = lambda: noted.append(clock.now)
    assert not limited.gathering
    limited.warning("127.0.0.1", "A", "first")
    limited.warning("127.0.0.1", "A", "repeat")
    assert noted == [1000.0] and limited.gathering
    clock.now += 10
    limited.flush()  # the summary of the repeat opens the next window
    assert limited.gathering
    clock.now += 10
    limited.flush()  # a window without repeats: the kind is forgotten
    assert not limited.gathering and noted == [1000.0]
