"""The offset APIs' rules for groups whose members carry epochs (KIP-848's consumer groups,
KIP-1071's streams groups), as Kafka 4.4 answers them: a member commits and reads offsets at
its epoch; an older one is taken only for partitions it has held since (KIP-1251); a commit
naming no member only while the group is empty, or inside a transaction."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, TypeVar

from kio.schema.errors import ErrorCode

FIRST_COMMIT_VERSION_FOR_MEMBERS = 9
"""OffsetCommit v9 carries member epochs: a member of these protocols commits with v9+."""
FIRST_STALE_EPOCH_TXN_COMMIT_VERSION = 6
"""TxnOffsetCommit v6+ (Kafka 4.4) answers an epoch it does not take STALE_MEMBER_EPOCH, as
OffsetCommit does; older ones ILLEGAL_GENERATION (checked at v6, assumed below it)."""


class EpochMember(Protocol):
    @property
    def epoch(self) -> int: ...


M = TypeVar("M", bound=EpochMember)


def commit_error(
    members: Mapping[str, M],
    member_id: str,
    member_epoch: int,
    group_instance_id: str | None,
    *,
    transactional: bool,
    api_version: int,
    held_since: Callable[[M, int], bool],
) -> ErrorCode:
    """May an OffsetCommit, or a TxnOffsetCommit (`transactional`), commit to the group of
    `members`? `held_since(member, epoch)`: whether the member has held every partition of
    the request since `epoch`, older than its own."""
    if member_epoch < 0 and not members:
        return ErrorCode.none
    if transactional and member_epoch < 0 and not member_id and group_instance_id is None:
        return ErrorCode.none
    member = members.get(member_id)
    if member is None:
        return ErrorCode.unknown_member_id
    if not transactional and api_version < FIRST_COMMIT_VERSION_FOR_MEMBERS:
        return ErrorCode.unsupported_version
    if member_epoch == member.epoch:
        return ErrorCode.none
    if 0 <= member_epoch < member.epoch and held_since(member, member_epoch):
        return ErrorCode.none
    if transactional and api_version < FIRST_STALE_EPOCH_TXN_COMMIT_VERSION:
        return ErrorCode.illegal_generation
    return ErrorCode.stale_member_epoch


def fetch_error(members: Mapping[str, M], member_id: str | None, member_epoch: int) -> ErrorCode:
    """May an OffsetFetch (v9+) read the group's offsets? One naming no member (admin tools)
    may; a member reads at its epoch exactly."""
    if member_id is None and member_epoch < 0:
        return ErrorCode.none
    member = members.get(member_id or "")
    if member is None:
        return ErrorCode.unknown_member_id
    if member_epoch != member.epoch:
        return ErrorCode.stale_member_epoch
    return ErrorCode.none
