"""A KIP-848 member's assignment as ConsumerGroupHeartbeat and ConsumerGroupDescribe list
it: by topic id."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from codec.entities import make

from ...state.groups.consumer import Assignment

if TYPE_CHECKING:
    from ...broker import Broker


def listed_by_topic_id(
    broker: Broker, types: Any, assignment: Assignment, names: bool = False
) -> tuple[Any, ...]:
    """An assignment as the protocol lists it: by topic id (and name, to describe)."""
    listed = []
    for name, partitions in sorted(assignment.items()):
        topic = broker.topics.get(name)
        if topic is None:
            continue
        fields = {"topic_name": name} if names else {}
        listed.append(
            make(
                types.TopicPartitions,
                topic_id=topic.id,
                partitions=tuple(sorted(partitions)),
                **fields,
            )
        )
    return tuple(listed)
