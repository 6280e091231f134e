"""A share partition (KIP-932): one share group's view of one topic partition, the records
it has handed out and what became of them.

Records from the share-partition start offset (SPSO, `start`) up to the end offset (`end`,
one past the last record ever acquired) are in flight, each in one state:

- AVAILABLE: to be delivered (again): released, or its lock timed out.
- ACQUIRED: handed to a member, locked for it until `share.record.lock.duration.ms` passes.
- ACKNOWLEDGED: accepted; done.
- ARCHIVED: done without being accepted: rejected, or given back once too often
  (`share.delivery.count.limit`), or a gap the member named.

Below `start` every record is done; from `end` on none was delivered yet. The window is
bounded (`share.partition.max.record.locks`): with as many records in flight as that, no
record past `end` is acquired until `start` moves, so memory is bounded by the window,
never by the records served. States, delivery counts, owners and lock deadlines are kept
per offset of the window in a bytearray and lists, so acknowledging or releasing a range
is one slice assignment, not a loop in Python.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from ...stats import ShareCounters

AVAILABLE = 0
ACQUIRED = 1
ACKNOWLEDGED = 2
ARCHIVED = 4
"""The record states, with Kafka's numbers (RecordState)."""

GAP = 0
ACCEPT = 1
RELEASE = 2
REJECT = 3
RENEW = 4
"""The acknowledge types of ShareFetch and ShareAcknowledge (AcknowledgeType)."""
ACKNOWLEDGE_TYPES = frozenset((GAP, ACCEPT, RELEASE, REJECT, RENEW))

_DONE = bytes((ACKNOWLEDGED, ARCHIVED))
_RELEASED = bytes.maketrans(bytes((ACQUIRED,)), bytes((AVAILABLE,)))
"""A translation table: ACQUIRED offsets AVAILABLE again, the others as they are."""
_ONE_MORE = bytes(min(count + 1, 255) for count in range(256))
"""A translation table: each delivery count, plus one (capped at a byte's range)."""


@dataclass(frozen=True, slots=True)
class Acquired:
    """A run of offsets acquired by one ShareFetch, as its AcquiredRecords lists them."""

    first: int
    last: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class HandedOver:
    """What a share partition's next leader takes from the last (`--processes`), as Kafka's
    share coordinator keeps it for a new leader: the start, the end, and each offset's state
    and delivery count in between, none of them acquired."""

    start: int
    end: int
    states: bytes
    deliveries: bytes


@dataclass(frozen=True, slots=True)
class Limits:
    """What bounds a share partition, from the group's configs and the broker's."""

    lock_ms: int
    delivery_limit: int
    max_in_flight: int


class SharePartition:
    """One share group's records of one partition (see the module's docstring)."""

    __slots__ = (
        "_deadlines",
        "_deliveries",
        "_locks",
        "_owners",
        "_states",
        "counters",
        "end",
        "start",
    )

    def __init__(self, start: int, counters: ShareCounters) -> None:
        self.start = start
        """The share-partition start offset (SPSO)."""
        self.end = start
        """One past the last offset ever acquired (SPEO)."""
        self.counters = counters
        counters.start_offset = start
        self._states = bytearray()
        self._deliveries = bytearray()
        self._owners: list[str | None] = []
        self._deadlines: list[float] = []
        self._locks: list[tuple[float, int, int, str]] = []
        """(deadline, first, last, member) of each acquisition or renewal, a heap: a lock
        whose offsets were acknowledged, renewed or released since is skipped when due."""

    # What a ShareFetch asks.

    def next_offset(self, log_start: int) -> int:
        """The first offset a ShareFetch would acquire: the first AVAILABLE one in flight,
        else the end. Records below the log start are gone: they are skipped."""
        self.skip_below(log_start)
        at = self._states.find(AVAILABLE)
        return self.end if at < 0 else self.start + at

    def acquire(
        self,
        first: int,
        available_end: int,
        max_records: int,
        member: str,
        now: float,
        limits: Limits,
    ) -> list[Acquired]:
        """Acquire for `member` up to `max_records` records from `first` to
        `available_end` (exclusive: what the read covered), AVAILABLE ones in flight and new
        ones past `end` while the window has room; each delivery counted."""
        runs: list[Acquired] = []
        deadline = now + limits.lock_ms / 1000
        left = max_records
        offset = max(first, self.start)
        while left > 0 and offset < available_end:
            if offset < self.end:
                index = offset - self.start
                at = self._states.find(AVAILABLE, index, min(available_end, self.end) - self.start)
                if at < 0:
                    offset = min(available_end, self.end)
                    continue
                stop = at + 1
                limit = min(available_end, self.end) - self.start
                # A run of AVAILABLE offsets with one delivery count: one AcquiredRecords.
                count = self._deliveries[at]
                while (
                    stop < limit
                    and stop - at < left
                    and self._states[stop] == AVAILABLE
                    and self._deliveries[stop] == count
                ):
                    stop += 1
                size = stop - at
                self._take(at, stop, member, deadline)
                runs.append(Acquired(self.start + at, self.start + stop - 1, count + 1))
                self.counters.redelivered += size if count else 0
                offset = self.start + stop
            else:
                room = limits.max_in_flight - (self.end - self.start)
                size = min(left, available_end - self.end, room)
                if size <= 0:
                    break
                at = self.end - self.start
                self._states += bytes(size)
                self._deliveries += bytes(size)
                self._owners += [None] * size
                self._deadlines += [0.0] * size
                self.end += size
                self._take(at, at + size, member, deadline)
                runs.append(Acquired(self.start + at, self.end - 1, 1))
                offset = self.end
            left -= size
            self.counters.acquired += size
        if runs:
            self._lock(deadline, runs[0].first, runs[-1].last, member)
        return runs

    def _lock(self, deadline: float, first: int, last: int, member: str) -> None:
        """Remember when the lock on offsets `first` to `last` runs out. Locks whose records
        were all acknowledged stay in the heap until due; when they outnumber the records
        in flight, the heap is made again of the live ones, so that its size follows the
        window, not the requests of the last lock duration."""
        locks = self._locks
        heapq.heappush(locks, (deadline, first, last, member))
        if len(locks) > 64 and len(locks) > 2 * self.counters.in_flight:
            self._locks = [lock for lock in locks if self._holds(lock)]
            heapq.heapify(self._locks)

    def _holds(self, lock: tuple[float, int, int, str]) -> bool:
        _, first, last, member = lock
        at = max(first, self.start) - self.start
        stop = min(last + 1, self.end) - self.start
        return at < stop and member in self._owners[at:stop]

    def archive(self, first: int, end: int) -> None:
        """Archive offsets `first` to `end` (exclusive) unread (a read_committed group's view
        of an aborted transaction's records); the window grows to hold them if need be, the
        offsets before them AVAILABLE. Records acquired or done stay as they are."""
        first = max(first, self.start)
        if end <= first:
            return
        if end > self.end:
            grown = end - self.end
            self._states += bytes(grown)
            self._deliveries += bytes(grown)
            self._owners += [None] * grown
            self._deadlines += [0.0] * grown
            self.end = end
        at, stop = first - self.start, end - self.start
        archived = self._states[at:stop].count(AVAILABLE)
        self._states[at:stop] = self._states[at:stop].replace(
            bytes((AVAILABLE,)), bytes((ARCHIVED,))
        )
        self.counters.archived += archived
        self._advance()

    def _take(self, at: int, stop: int, member: str, deadline: float) -> None:
        size = stop - at
        self._states[at:stop] = bytes((ACQUIRED,)) * size
        self._deliveries[at:stop] = self._deliveries[at:stop].translate(_ONE_MORE)
        self._owners[at:stop] = [member] * size
        self._deadlines[at:stop] = [deadline] * size
        self.counters.in_flight += size

    # Acknowledgements.

    def acknowledge(
        self, member: str, first: int, last: int, types: Iterable[int], now: float, limits: Limits
    ) -> ErrorCode:
        """Acknowledge offsets `first` to `last` for `member`: one type for them all, or one
        per offset. Every offset must be acquired by the member and its lock not expired
        (INVALID_RECORD_STATE otherwise; nothing changes then)."""
        kinds = list(types)
        if last < first or not kinds or any(kind not in ACKNOWLEDGE_TYPES for kind in kinds):
            return ErrorCode.invalid_request
        if len(kinds) not in (1, last - first + 1):
            return ErrorCode.invalid_request
        self._expire(now, limits)
        if last < self.start:
            return ErrorCode.none  # as Kafka: records already done are not checked again
        if first < self.start:
            kinds = kinds if len(kinds) == 1 else kinds[self.start - first :]
            first = self.start
        if last >= self.end:
            return ErrorCode.invalid_record_state
        at, stop = first - self.start, last - self.start + 1
        size = stop - at
        # Gaps (offsets with no record, which the member names GAP) were acquired with the
        # records around them: every offset must be the member's.
        if (
            self._states[at:stop].count(ACQUIRED) != size
            or self._owners[at:stop].count(member) != size
        ):
            return ErrorCode.invalid_record_state
        if len(kinds) == 1:
            self._settle(at, stop, kinds[0], now, limits)
        else:
            run = at
            for index in range(at + 1, stop + 1):
                if index == stop or kinds[index - at] != kinds[run - at]:
                    self._settle(run, index, kinds[run - at], now, limits)
                    run = index
        self._advance()
        return ErrorCode.none

    def _settle(self, at: int, stop: int, kind: int, now: float, limits: Limits) -> None:
        size = stop - at
        counters = self.counters
        if kind == RENEW:
            deadline = now + limits.lock_ms / 1000
            self._deadlines[at:stop] = [deadline] * size
            member = self._owners[at]
            assert member is not None
            self._lock(deadline, self.start + at, self.start + stop - 1, member)
            counters.renewed += size
            return
        held = self._states[at:stop].count(ACQUIRED)
        counters.in_flight -= held
        if kind == ACCEPT:
            self._states[at:stop] = bytes((ACKNOWLEDGED,)) * size
            counters.accepted += size
        elif kind == RELEASE:
            counters.released += size
            self._give_back(at, stop, limits)
        elif kind == REJECT:
            self._states[at:stop] = bytes((ARCHIVED,)) * size
            counters.rejected += size
            counters.archived += size
        else:  # GAP: no record there
            self._states[at:stop] = bytes((ARCHIVED,)) * size
        self._owners[at:stop] = [None] * size

    def _give_back(self, at: int, stop: int, limits: Limits) -> None:
        """Offsets released or timed out: AVAILABLE again, or ARCHIVED if delivered as often
        as the limit allows."""
        for index in range(at, stop):
            if self._deliveries[index] >= limits.delivery_limit:
                self._states[index] = ARCHIVED
                self.counters.archived += 1
            else:
                self._states[index] = AVAILABLE
        self._owners[at:stop] = [None] * (stop - at)

    def release_member(self, member: str, counted: Limits | None = None) -> int:
        """Give back every record `member` holds, AVAILABLE again; how many. Its share
        session closed (epoch -1): the delivery is not counted (as Kafka: the count goes
        down by one, and a record is never archived for it). Its connection gone
        (`counted`: the group's limits): the delivery stays counted, and a record delivered
        as often as the limit allows is archived, as Kafka 4.4.0 does on a disconnect."""
        released = 0
        owners = self._owners
        for index in range(len(owners)):
            if owners[index] == member and self._states[index] == ACQUIRED:
                released += 1
                if counted is not None:
                    self._give_back(index, index + 1, counted)
                    continue
                self._states[index] = AVAILABLE
                self._deliveries[index] = max(self._deliveries[index] - 1, 0)
                owners[index] = None
        if released:
            self.counters.in_flight -= released
            self._advance()
        return released

    # Time and the window.

    def next_deadline(self) -> float | None:
        """When the earliest lock may expire, for a ShareFetch waiting for records."""
        return self._locks[0][0] if self._locks else None

    def expire(self, now: float, limits: Limits) -> int:
        """Release the records whose locks expired by `now`; how many."""
        return self._expire(now, limits)

    def _expire(self, now: float, limits: Limits) -> int:
        timed_out = 0
        locks = self._locks
        while locks and locks[0][0] <= now:
            deadline, first, last, member = heapq.heappop(locks)
            at = max(first, self.start) - self.start
            stop = min(last + 1, self.end) - self.start
            if at >= stop or not self._states[at:stop].count(ACQUIRED):
                continue  # acknowledged (or gone) before its lock ran out: the usual case
            for index in range(at, stop):
                if (
                    self._states[index] == ACQUIRED
                    and self._owners[index] == member
                    and self._deadlines[index] <= deadline
                ):
                    self._give_back(index, index + 1, limits)
                    timed_out += 1
        if timed_out:
            self.counters.lock_timeouts += timed_out
            self.counters.in_flight -= timed_out
            self._advance()
        return timed_out

    def _advance(self) -> None:
        """Move the start past the records that are done."""
        states = self._states
        done = len(states) - len(states.lstrip(_DONE))
        if done:
            del states[:done]
            del self._deliveries[:done]
            del self._owners[:done]
            del self._deadlines[:done]
            self.start += done
            self.counters.start_offset = self.start

    def skip_below(self, log_start: int) -> None:
        """Records below the log start are gone (DeleteRecords, a retained ring that
        wrapped): they leave the window, and the start moves up to the log start."""
        if log_start <= self.start:
            return
        gone = min(log_start, self.end) - self.start
        if gone > 0:
            held = self._states[:gone].count(ACQUIRED)
            self.counters.in_flight -= held
            del self._states[:gone]
            del self._deliveries[:gone]
            del self._owners[:gone]
            del self._deadlines[:gone]
        self.start = log_start
        self.end = max(self.end, log_start)
        self.counters.start_offset = self.start

    def reset(self, start: int) -> None:
        """Start again at `start`, nothing in flight (AlterShareGroupOffsets on a group
        without members)."""
        self.counters.in_flight -= self._states.count(ACQUIRED)
        self._states.clear()
        self._deliveries.clear()
        self._owners.clear()
        self._deadlines.clear()
        self._locks.clear()
        self.start = self.end = start
        self.counters.start_offset = start

    def hand_over(self) -> HandedOver:
        """The partition for its next leader: what is acquired here is AVAILABLE there (a
        lock is this leader's; the member's acknowledgement of it is refused at the next,
        and the record delivered again, as when a partition's leader changes in Kafka)."""
        self.counters.in_flight -= self._states.count(ACQUIRED)
        return HandedOver(
            self.start, self.end, self._states.translate(_RELEASED), bytes(self._deliveries)
        )

    @classmethod
    def taken_over(cls, given: HandedOver, counters: ShareCounters) -> SharePartition:
        """The partition as its last leader handed it over."""
        taken = cls(given.start, counters)
        taken.end = given.end
        taken._states = bytearray(given.states)
        taken._deliveries = bytearray(given.deliveries)
        taken._owners = [None] * len(given.states)
        taken._deadlines = [0.0] * len(given.states)
        return taken

    def done_in_flight(self) -> int:
        """Records in the window already done (acknowledged or archived), which a lag
        counts out."""
        states = self._states
        return len(states) - states.count(AVAILABLE) - states.count(ACQUIRED)

    @property
    def in_flight(self) -> int:
        """Records between the start and the end (what the window limit counts)."""
        return self.end - self.start

    def acquired_by(self, member: str) -> int:
        return sum(
            1
            for index, owner in enumerate(self._owners)
            if owner == member and self._states[index] == ACQUIRED
        )
