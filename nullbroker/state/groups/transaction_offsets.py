"""Offsets a transaction commits to a group (TxnOffsetCommit), staged with the group's
coordinator until the transaction ends, as Kafka's group coordinator keeps them: the
transaction's marker for the group's partition of __consumer_offsets commits them, or drops
them on an abort. Until then OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT
for their partitions (KIP-447)."""

from __future__ import annotations

from collections.abc import Callable

from .offsets import CommittedOffset

StagedOffsets = dict[tuple[str, int], CommittedOffset]
"""A group's offsets staged by one producer, by (topic, partition)."""


class TransactionOffsets:
    """The offsets each transactional producer has staged, by producer id and group."""

    def __init__(self) -> None:
        self._staged: dict[int, dict[str, StagedOffsets]] = {}

    def stage(self, producer_id: int, group_id: str, offsets: StagedOffsets) -> None:
        self._staged.setdefault(producer_id, {}).setdefault(group_id, {}).update(offsets)

    def staged(self, group_id: str) -> set[tuple[str, int]]:
        """The partitions of `group_id` whose offsets an open transaction has staged."""
        return {
            partition for groups in self._staged.values() for partition in groups.get(group_id, ())
        }

    def end(self, producer_id: int, holds: Callable[[str], bool]) -> dict[str, StagedOffsets]:
        """The producer's transaction ended in the partition of __consumer_offsets whose
        groups `holds` picks: its offsets staged for them, no longer staged (to commit, on a
        commit)."""
        groups = self._staged.get(producer_id)
        if groups is None:
            return {}
        ended = {group_id: groups.pop(group_id) for group_id in [*groups] if holds(group_id)}
        if not groups:
            del self._staged[producer_id]
        return ended

    def group_ids(self) -> set[str]:
        return {group_id for groups in self._staged.values() for group_id in groups}

    def take(self, group_id: str) -> dict[int, StagedOffsets]:
        """Give up what is staged for a group whose coordinator moves: by producer id."""
        taken = {}
        for producer_id, groups in list(self._staged.items()):
            offsets = groups.pop(group_id, None)
            if offsets is not None:
                taken[producer_id] = offsets
            if not groups:
                del self._staged[producer_id]
        return taken

    def put(self, group_id: str, staged: dict[int, StagedOffsets]) -> None:
        for producer_id, offsets in staged.items():
            self.stage(producer_id, group_id, offsets)
