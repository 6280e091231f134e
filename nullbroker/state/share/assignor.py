"""The share groups' simple assignor: which members read which partitions.

Unlike a consumer group's, a share group's partition may go to several members (records,
not partitions, are what members hold), so every member gets work even when there are
more members than partitions. Each topic's partitions are spread over the members that
subscribe to it: with at least as many partitions as members, each partition to one
member, round robin; with more members than partitions, each member to one partition,
round robin, so that a partition is shared by at most one member more than any other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

Assignment = dict[str, frozenset[int]]
"""Partitions by topic name."""


def assign(
    subscriptions: Mapping[str, tuple[str, ...]],
    partitions_of: Callable[[str], int | None],
    current: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """Each member's partitions, by member id, from each member's subscribed topics and a
    topic's partition count (None: no such topic, which assigns nothing)."""
    del current  # the spread depends only on the members and topics (see the docstring)
    members = sorted(subscriptions)
    target: dict[str, dict[str, set[int]]] = {member: {} for member in members}
    topics = sorted({topic for subscribed in subscriptions.values() for topic in subscribed})
    for topic in topics:
        count = partitions_of(topic)
        if not count:
            continue
        readers = [member for member in members if topic in subscriptions[member]]
        spread = max(count, len(readers))
        for turn in range(spread):
            member = readers[turn % len(readers)]
            target[member].setdefault(topic, set()).add(turn % count)
    return {
        member: {topic: frozenset(parts) for topic, parts in assigned.items()}
        for member, assigned in target.items()
    }
