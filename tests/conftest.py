"""Fixtures for the tests that run nullbroker as a process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from itertools import count
from pathlib import Path

import pytest

from tests.broker_process import BrokerProcess

StartBroker = Callable[..., BrokerProcess]


@pytest.fixture
def start_broker(tmp_path: Path) -> Iterator[StartBroker]:
    """Starts `nullbroker serve` with the given flags; every process started is killed at
    teardown, whether or not the test stopped it."""
    numbers = count()
    with ExitStack() as processes:

        def start(*flags: str, metrics: bool = True) -> BrokerProcess:
            workdir = tmp_path / f"broker-{next(numbers)}"
            workdir.mkdir()
            return processes.enter_context(BrokerProcess(workdir, *flags, metrics=metrics))

        yield start
