"""The supervisor of a cluster over processes wakes only when something asks it to: it costs
the machine nothing between requests, so that `--processes` adds no CPU of its own.

Time is trio's MockClock with autojump (and time.monotonic, which the faults keep their ends
by, follows it), so an hour passes at once and the supervisor's wake-ups are counted as the
steps its task takes, never timed.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio
import trio.testing

from nullbroker.settings import Config
from nullbroker.workers.processes import Supervisor, _Bound

HOUR = 3600.0


class StepsOf(trio.abc.Instrument):
    """Counts the steps of the tasks whose name ends with `name`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task.name.endswith(self.name):
            self.steps += 1


def supervisor(*faults: str) -> Supervisor:
    """A supervisor of three nodes with no workers: enough to keep the faults' time."""
    config = Config(brokers=3, processes="2", faults=list(faults))
    bound = _Bound({}, [], {}, {}, [], [], [])
    return Supervisor(config, [], [], {0: 0, 1: 1, 2: 0}, bound)


def queued(chief: Supervisor) -> list[tuple[Any, ...]]:
    """The messages the supervisor has queued for its workers."""
    messages = []
    while True:
        try:
            messages.append(chief._outbox.receive_nowait()[1])
        except trio.WouldBlock:
            return messages


@pytest.fixture
def clock(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> trio.abc.Clock:
    """trio's clock, autojumping, and time.monotonic following it (pytest-trio runs a test
    on the clock it is given as an argument)."""
    monkeypatch.setattr(time, "monotonic", autojump_clock.current_time)
    return autojump_clock


async def test_a_supervisor_without_faults_to_time_never_wakes(clock: trio.abc.Clock) -> None:
    chief = supervisor()
    steps = StepsOf("_bring_nodes_back")
    trio.lowlevel.add_instrument(steps)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chief._bring_nodes_back)
        await trio.sleep(HOUR)
        nursery.cancel_scope.cancel()
    # Its first step, which goes to sleep, and the cancellation's: none in the hour between.
    assert steps.steps == 2
    assert queued(chief) == []


async def test_the_supervisor_wakes_for_a_down_nodes_end_and_says_it_is_back(
    clock: trio.abc.Clock,
) -> None:
    chief = supervisor()
    steps = StepsOf("_bring_nodes_back")
    trio.lowlevel.add_instrument(steps)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chief._bring_nodes_back)
        await trio.sleep(10)
        chief.faults.add("down:node=1,for=5s")
        assert queued(chief) == [("fault", "down:node=1,for=5s")]
        await trio.sleep(4.9)
        assert queued(chief) == [] and 1 not in chief.faults.cluster.live
        await trio.sleep(0.2)
        assert queued(chief) == [("node_up", 1)]
        await trio.sleep(HOUR)
        nursery.cancel_scope.cancel()
    # Asleep, woken by the fault, at its end, and by the cancellation.
    assert steps.steps == 4
    assert queued(chief) == []


async def test_a_down_node_given_at_start_is_brought_back_at_its_time(
    clock: trio.abc.Clock,
) -> None:
    chief = supervisor("down:node=2,for=30s")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chief._bring_nodes_back)
        await trio.sleep(29)
        assert queued(chief) == []
        await trio.sleep(2)
        assert queued(chief) == [("node_up", 2)]
        nursery.cancel_scope.cancel()
