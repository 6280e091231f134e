"""A broker's processes wake only when something asks them to: a cluster's supervisor, and
each process's timers (transactions' timeouts, repeated warnings), cost the machine nothing
while there is nothing to do, so that `--processes` adds no CPU of its own (every wake-up
of a host loop's process is a round of handoffs with its trio thread).

Time is trio's MockClock with autojump (and time.monotonic, which the faults keep their ends
by, follows it), so an hour passes at once and wake-ups are counted as the steps a task
takes, never timed.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from nullbroker.settings import Config
from nullbroker.workers.processes import Supervisor, _Bound
from nullbroker.workers.server import TRANSACTION_CHECK_SECONDS, BrokerServer

HOUR = 3600.0


class StepsOf(trio.abc.Instrument):
    """Counts the steps of the tasks whose name ends with `name`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task.name.endswith(self.name):
            self.steps += 1


def counting(name: str) -> StepsOf:
    steps = StepsOf(name)
    trio.lowlevel.add_instrument(steps)
    return steps


def supervisor(*faults: str) -> Supervisor:
    """A supervisor of three nodes with no workers: enough to keep the faults' time."""
    config = Config(brokers=3, processes="2", faults=list(faults))
    bound = _Bound({}, [], {}, {}, [], [], [])
    return Supervisor(config, [], [], {0: 0, 1: 1, 2: 0}, bound)


@asynccontextmanager
async def keeping_time(chief: Supervisor) -> AsyncIterator[None]:
    """The supervisor's task that keeps the faults' time, running for the block."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(chief._bring_nodes_back)
        yield
        nursery.cancel_scope.cancel()


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
    steps = counting("_bring_nodes_back")
    async with keeping_time(chief):
        await trio.sleep(HOUR)
    # Its first step, which goes to sleep, and the cancellation's: none in the hour between.
    assert steps.steps == 2
    assert queued(chief) == []


async def test_the_supervisor_wakes_for_a_down_nodes_end_and_says_it_is_back(
    clock: trio.abc.Clock,
) -> None:
    chief = supervisor()
    steps = counting("_bring_nodes_back")
    async with keeping_time(chief):
        await trio.sleep(10)
        chief.faults.add("down:node=1,for=5s")
        assert queued(chief) == [("fault", "down:node=1,for=5s")]
        await trio.sleep(4.9)
        assert queued(chief) == [] and 1 not in chief.faults.cluster.live
        await trio.sleep(0.2)
        assert queued(chief) == [("node_up", 1)]
        await trio.sleep(HOUR)
    # Asleep, woken by the fault, at its end, and by the cancellation.
    assert steps.steps == 4
    assert queued(chief) == []


async def test_a_down_node_given_at_start_is_brought_back_at_its_time(
    clock: trio.abc.Clock,
) -> None:
    chief = supervisor("down:node=2,for=30s")
    async with keeping_time(chief):
        await trio.sleep(29)
        assert queued(chief) == []
        await trio.sleep(2)
        assert queued(chief) == [("node_up", 2)]


async def test_a_lone_broker_with_nothing_to_do_leaves_its_timers_asleep(
    clock: trio.abc.Clock,
) -> None:
    server = BrokerServer(Config(listen="127.0.0.1:0", report_interval=HOUR))
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        await trio.sleep(1)  # every task started and asleep
        transactions = counting("_abort_expired_transactions")
        warnings = counting("_summarise_repeated_warnings")
        await trio.sleep(HOUR)
        assert (transactions.steps, warnings.steps) == (0, 0)
        # A warning opens a window to summarise; a transactional producer's first request
        # makes the coordinator, whose transactions' timeouts are then checked every second.
        server.shared.warnings.warning("127.0.0.1", "Test", "a warning")
        assert server.broker.transactions is not None
        await trio.sleep(60)
        assert warnings.steps >= 1 and transactions.steps >= 60 / TRANSACTION_CHECK_SECONDS
        server.stop()
