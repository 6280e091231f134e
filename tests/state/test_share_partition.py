"""A share partition's records (nullbroker.state.share.partition): acquired for a member,
acknowledged, released, timed out, archived at the delivery limit, within a bounded window."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from nullbroker.state.share.partition import (
    ACCEPT,
    GAP,
    REJECT,
    RELEASE,
    RENEW,
    Acquired,
    Limits,
    SharePartition,
)
from nullbroker.stats import ShareCounters

LIMITS = Limits(lock_ms=1000, delivery_limit=3, max_in_flight=100)


def partition(start: int = 0) -> SharePartition:
    return SharePartition(start, ShareCounters())


def test_new_records_are_acquired_once_each_in_one_run() -> None:
    shared = partition(10)
    assert shared.acquire(10, 20, 5, "a", 0.0, LIMITS) == [Acquired(10, 14, 1)]
    assert shared.acquire(shared.next_offset(0), 20, 100, "b", 0.0, LIMITS) == [Acquired(15, 19, 1)]
    assert shared.next_offset(0) == 20
    assert shared.counters.acquired == 10
    assert shared.counters.in_flight == 10


def test_accepted_records_move_the_start_offset() -> None:
    shared = partition()
    shared.acquire(0, 10, 10, "a", 0.0, LIMITS)
    assert shared.acknowledge("a", 0, 4, [ACCEPT], 0.1, LIMITS) is ErrorCode.none
    assert shared.start == 5
    assert shared.counters.start_offset == 5
    assert shared.counters.accepted == 5
    # Accepting past a hole leaves the start at the hole.
    assert shared.acknowledge("a", 7, 9, [ACCEPT], 0.1, LIMITS) is ErrorCode.none
    assert shared.start == 5
    assert shared.done_in_flight() == 3


def test_released_records_are_delivered_again_with_their_count() -> None:
    shared = partition()
    shared.acquire(0, 4, 4, "a", 0.0, LIMITS)
    assert shared.acknowledge("a", 1, 2, [RELEASE], 0.1, LIMITS) is ErrorCode.none
    assert shared.next_offset(0) == 1
    assert shared.acquire(1, 4, 10, "b", 0.2, LIMITS) == [Acquired(1, 2, 2)]
    assert shared.counters.released == 2
    assert shared.counters.redelivered == 2


def test_per_offset_types_are_applied_per_offset() -> None:
    shared = partition()
    shared.acquire(0, 4, 4, "a", 0.0, LIMITS)
    types = [ACCEPT, RELEASE, REJECT, GAP]
    assert shared.acknowledge("a", 0, 3, types, 0.1, LIMITS) is ErrorCode.none
    counters = shared.counters
    assert (counters.accepted, counters.released, counters.rejected) == (1, 1, 1)
    assert counters.archived == 1  # the rejected one; a gap is no record
    assert shared.start == 1  # offset 1 is available again
    assert shared.next_offset(0) == 1


def test_only_the_member_holding_records_acknowledges_them() -> None:
    shared = partition()
    shared.acquire(0, 4, 4, "a", 0.0, LIMITS)
    assert shared.acknowledge("b", 0, 1, [ACCEPT], 0.1, LIMITS) is ErrorCode.invalid_record_state
    assert shared.acknowledge("a", 3, 5, [ACCEPT], 0.1, LIMITS) is ErrorCode.invalid_record_state
    assert shared.acknowledge("a", 0, 1, [ACCEPT, ACCEPT, ACCEPT], 0.1, LIMITS) is (
        ErrorCode.invalid_request
    )
    assert shared.acknowledge("a", 0, 1, [9], 0.1, LIMITS) is ErrorCode.invalid_request
    assert shared.counters.accepted == 0  # nothing changed


def test_locks_run_out_and_records_go_to_the_next_member() -> None:
    shared = partition()
    shared.acquire(0, 5, 5, "a", 0.0, LIMITS)
    assert shared.expire(0.5, LIMITS) == 0
    assert shared.expire(1.0, LIMITS) == 5
    assert shared.counters.lock_timeouts == 5
    assert shared.counters.in_flight == 0
    # Too late: the member's acknowledgement is refused, the records are another's.
    assert shared.acknowledge("a", 0, 4, [ACCEPT], 1.1, LIMITS) is ErrorCode.invalid_record_state
    assert shared.acquire(0, 5, 5, "b", 1.2, LIMITS) == [Acquired(0, 4, 2)]


def test_renewing_a_lock_keeps_the_records() -> None:
    shared = partition()
    shared.acquire(0, 2, 2, "a", 0.0, LIMITS)
    assert shared.acknowledge("a", 0, 1, [RENEW], 0.9, LIMITS) is ErrorCode.none
    assert shared.expire(1.5, LIMITS) == 0
    assert shared.acknowledge("a", 0, 1, [ACCEPT], 1.6, LIMITS) is ErrorCode.none
    assert shared.counters.renewed == 2
    assert shared.counters.lock_timeouts == 0


def test_records_are_archived_at_the_delivery_limit() -> None:
    shared = partition()
    for delivery in range(1, LIMITS.delivery_limit + 1):
        assert shared.acquire(0, 1, 1, "a", 0.0, LIMITS) == [Acquired(0, 0, delivery)]
        assert shared.acknowledge("a", 0, 0, [RELEASE], 0.0, LIMITS) is ErrorCode.none
    assert shared.counters.archived == 1
    assert shared.start == 1  # archived: done, never delivered again
    assert shared.acquire(0, 1, 1, "a", 0.0, LIMITS) == []


def test_the_window_bounds_the_records_in_flight() -> None:
    shared = partition()
    limits = Limits(lock_ms=1000, delivery_limit=5, max_in_flight=100)
    assert shared.acquire(0, 1000, 1000, "a", 0.0, limits) == [Acquired(0, 99, 1)]
    assert shared.acquire(100, 1000, 1000, "b", 0.0, limits) == []
    shared.acknowledge("a", 0, 9, [ACCEPT], 0.0, limits)
    assert shared.acquire(100, 1000, 1000, "b", 0.0, limits) == [Acquired(100, 109, 1)]


def test_a_member_disconnected_gives_back_what_it_held_counted() -> None:
    shared = partition()
    limits = Limits(lock_ms=1000, delivery_limit=2, max_in_flight=100)
    shared.acquire(0, 3, 3, "a", 0.0, limits)
    assert shared.release_member("a", counted=limits) == 3
    assert shared.counters.in_flight == 0
    # As Kafka 4.4.0 on a disconnect: that delivery counts, the next is the second...
    assert shared.acquire(0, 3, 3, "b", 0.0, limits) == [Acquired(0, 2, 2)]
    assert shared.counters.redelivered == 3
    # ...and the last the limit allows: given back so again, the records are archived.
    assert shared.release_member("b", counted=limits) == 3
    assert shared.counters.archived == 3
    assert shared.acquire(0, 3, 3, "c", 0.0, limits) == []


def test_a_closed_session_gives_back_what_it_held_uncounted() -> None:
    shared = partition()
    shared.acquire(0, 3, 3, "a", 0.0, LIMITS)
    shared.acquire(3, 6, 3, "b", 0.0, LIMITS)
    assert shared.release_member("a") == 3
    assert shared.acquired_by("b") == 3
    assert shared.next_offset(0) == 0
    assert shared.counters.in_flight == 3
    # As Kafka: that delivery is not counted, so the next is the first again.
    assert shared.acquire(0, 3, 3, "b", 0.0, LIMITS) == [Acquired(0, 2, 1)]
    assert shared.counters.redelivered == 0


def test_records_below_the_log_start_are_skipped() -> None:
    shared = partition()
    shared.acquire(0, 5, 5, "a", 0.0, LIMITS)
    assert shared.next_offset(3) == 5
    assert shared.start == 3
    assert shared.counters.in_flight == 2


def test_altering_the_start_drops_what_is_in_flight() -> None:
    shared = partition()
    shared.acquire(0, 5, 5, "a", 0.0, LIMITS)
    shared.reset(42)
    assert (shared.start, shared.next_offset(0), shared.counters.in_flight) == (42, 42, 0)


def test_archived_offsets_are_skipped_and_counted() -> None:
    shared = partition()
    shared.acquire(0, 2, 2, "a", 0.0, LIMITS)
    shared.archive(4, 7)  # an aborted transaction's records, past the end
    assert shared.end == 7
    assert shared.acquire(2, 10, 10, "a", 0.0, LIMITS) == [Acquired(2, 3, 1), Acquired(7, 9, 1)]
    assert shared.counters.archived == 3
    shared.acknowledge("a", 0, 3, [ACCEPT], 0.0, LIMITS)
    assert shared.start == 7


def test_locks_of_acknowledged_records_do_not_pile_up() -> None:
    shared = partition()
    limits = Limits(lock_ms=30_000, delivery_limit=5, max_in_flight=2000)
    for offset in range(10_000):
        shared.acquire(offset, offset + 1, 1, "a", 0.0, limits)
        shared.acknowledge("a", offset, offset, [ACCEPT], 0.0, limits)
    assert shared.start == 10_000
    assert len(shared._locks) <= 65
