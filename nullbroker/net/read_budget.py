"""The bytes of large requests being read, bounded over every connection (`--max-buffered-bytes`).

A request arrives in pieces and is buffered until it is whole. A client that announces a
100 MiB request and sends half of it would otherwise hold 50 MiB of the broker's memory for
as long as it likes, and forty such clients exhaust a laptop. As Kafka's
`queued.max.request.bytes` does, a request larger than SMALL_REQUEST_BYTES reserves its
announced size from the budget once its size prefix is read, before its body is; when the
budget has no room for it, its connection stops reading until other requests' reservations
are released (first come, first served). Nothing is allocated for a claimed size: the
reservation is a count, and the bytes are buffered as they arrive. Reservations are
all-or-nothing, so a request that has one can always be read to its end: there is no
deadlock. A request announced larger than the whole budget can never fit; its connection
is closed, as for a frame over `--max-frame-bytes` (the reader's limit is the smaller).

Requests up to SMALL_REQUEST_BYTES (a Kafka client's default max.request.size, 1 MiB, with
room for its headers) are read without asking: they keep flowing while large ones wait, so
a producer's requests are never held up behind someone else's stalled upload. Memory is
then bounded by the budget, plus, per connection, one small request and one read.
"""

from __future__ import annotations

from collections import deque

import trio

from ..settings import DEFAULT_MAX_BUFFERED_BYTES
from ..stats import BrokerStats

SMALL_REQUEST_BYTES = 1024 * 1024 + 64 * 1024


class ReadBudget:
    """The broker's budget; each connection holds a Reservation of it."""

    def __init__(
        self, limit: int = DEFAULT_MAX_BUFFERED_BYTES, stats: BrokerStats | None = None
    ) -> None:
        self.limit = limit
        self._stats = BrokerStats() if stats is None else stats
        """Where /metrics finds what is reserved and how often connections waited."""
        self._waiting: deque[tuple[int, trio.Event]] = deque()

    @property
    def reserved(self) -> int:
        return self._stats.read_budget_reserved

    @reserved.setter
    def reserved(self, value: int) -> None:
        self._stats.read_budget_reserved = value

    @property
    def waits(self) -> int:
        """Times a connection stopped reading for want of room."""
        return self._stats.read_budget_waits

    def try_reserve(self, size: int) -> bool:
        """Reserve `size` bytes now if they fit and no one waits before us."""
        if self._waiting or self.reserved + size > self.limit:
            return False
        self.reserved += size
        return True

    async def reserve(self, size: int) -> None:
        """Reserve `size` bytes, waiting (in turn) for room."""
        if self.try_reserve(size):
            return
        self._stats.read_budget_waits += 1
        granted = trio.Event()
        entry = (size, granted)
        self._waiting.append(entry)
        try:
            await granted.wait()
        except BaseException:
            if granted.is_set():  # granted as we were cancelled: give it back
                self.release(size)
            else:
                self._waiting.remove(entry)
                self._grant()  # we may have blocked those behind us
            raise

    def release(self, size: int) -> None:
        self.reserved -= size
        self._grant()

    def _grant(self) -> None:
        while self._waiting and self.reserved + self._waiting[0][0] <= self.limit:
            size, granted = self._waiting.popleft()
            self.reserved += size
            granted.set()


class Reservation:
    """One connection's share of the budget: the announced size of the large request it
    is reading, if any."""

    __slots__ = ("_budget", "reserved")

    def __init__(self, budget: ReadBudget) -> None:
        self._budget = budget
        self.reserved = 0

    @staticmethod
    def needed(pending_frame_size: int) -> int:
        """What a connection whose unfinished request announced this size must hold."""
        return pending_frame_size if pending_frame_size > SMALL_REQUEST_BYTES else 0

    def try_fit(self, needed: int) -> bool:
        """Hold `needed` bytes (0: none) if that needs no wait; False if it would."""
        if needed == self.reserved:
            return True
        self.release()
        if needed and not self._budget.try_reserve(needed):
            return False
        self.reserved = needed
        return True

    async def fit(self, needed: int) -> None:
        """Hold `needed` bytes, waiting for room if there is none."""
        if self.try_fit(needed):
            return
        await self._budget.reserve(needed)
        self.reserved = needed

    def release(self) -> None:
        if self.reserved:
            self._budget.release(self.reserved)
            self.reserved = 0
