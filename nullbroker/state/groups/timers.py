"""The classic coordinator's deadlines (the initial rebalance delay, join and sync timeouts,
member sessions) as one heap of keyed timers. Apart from the coordinator because it knows
nothing of groups: a key replaces its own timer, and the coordinator's run() pops what is
due."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Hashable
from itertools import count

TimerKey = Hashable


class Timers:
    """Deadlines with actions, each under a key: scheduling a key again replaces its timer."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, TimerKey]] = []
        self._current: dict[TimerKey, tuple[int, Callable[[], None]]] = {}
        self._sequence = count()

    def schedule(self, key: TimerKey, deadline: float, action: Callable[[], None]) -> None:
        number = next(self._sequence)
        self._current[key] = (number, action)
        heapq.heappush(self._heap, (deadline, number, key))

    def cancel(self, key: TimerKey) -> None:
        self._current.pop(key, None)

    def _drop_replaced(self) -> None:
        # Replaced and cancelled timers stay in the heap until they reach its top.
        while self._heap:
            _, number, key = self._heap[0]
            current = self._current.get(key)
            if current is not None and current[0] == number:
                return
            heapq.heappop(self._heap)

    def next_deadline(self) -> float:
        self._drop_replaced()
        return self._heap[0][0] if self._heap else math.inf

    def pop_due(self, now: float) -> Callable[[], None] | None:
        """The action of the earliest timer due at `now`, which is then done with."""
        if self.next_deadline() > now:
            return None
        _, _, key = heapq.heappop(self._heap)
        return self._current.pop(key)[1]
