"""The rules of the offset APIs (OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete) for
a group of either protocol, once the coordinator has found it. Apart from the classic state
machine because they hold for the new protocol's groups (KIP-848) alike and change no
member; apart from offsets.py, whose CommittedOffset the control channel carries between
processes and every group module imports, because these rules need the groups themselves."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from .model import FIRST_COMMIT_VERSION_WITH_GROUP_ID_NOT_FOUND, Group, GroupState
from .offsets import CommittedOffset

if TYPE_CHECKING:
    from .consumer import ConsumerGroup


def refusal_without_group(
    generation_id: int, api_version: int, *, transactional: bool
) -> ErrorCode | None:
    """The answer to a commit to a group that does not exist: a member's (generation 0 or
    more) is refused; None for a consumer outside group management (generation -1: assign()
    consumers, Spark), whose commit creates the group."""
    if generation_id < 0:
        return None
    if not transactional and api_version >= FIRST_COMMIT_VERSION_WITH_GROUP_ID_NOT_FOUND:
        return ErrorCode.group_id_not_found
    return ErrorCode.illegal_generation


def commit(
    group: Group | ConsumerGroup, topic: str, partition: int, committed: CommittedOffset
) -> None:
    group.offsets.setdefault(topic, {})[partition] = committed


def validate_offset_fetch(
    group: Group | ConsumerGroup | None, member_id: str | None, member_epoch: int
) -> ErrorCode:
    """May an OffsetFetch (v9+, which names its member) read the group's offsets? A member of
    the new protocol reads at its epoch; classic groups check nothing."""
    if group is None or isinstance(group, Group):
        return ErrorCode.none
    return group.validate_offset_fetch(member_id, member_epoch)


def delete_offsets(
    group: Group | ConsumerGroup | None, topics: Iterable[tuple[str, Iterable[int]]]
) -> tuple[ErrorCode, list[tuple[str, list[tuple[int, ErrorCode]]]]]:
    """OffsetDelete: the group-level error, then an error per topic partition. A group with
    members keeps offsets of topics they subscribe to."""
    if group is None or (isinstance(group, Group) and group.state is GroupState.DEAD):
        return ErrorCode.group_id_not_found, []
    if (
        isinstance(group, Group)
        and group.state is not GroupState.EMPTY
        and not group.uses_consumer_protocol()
    ):
        return ErrorCode.non_empty_group, []
    results = []
    for topic, partitions in topics:
        if group.is_subscribed_to_topic(topic):
            results.append((topic, [(p, ErrorCode.group_subscribed_to_topic) for p in partitions]))
            continue
        committed = group.offsets.get(topic, {})
        answers = []
        for partition in partitions:
            committed.pop(partition, None)
            answers.append((partition, ErrorCode.none))
        if not committed:
            group.offsets.pop(topic, None)
        results.append((topic, answers))
    return ErrorCode.none, results
