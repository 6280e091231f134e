"""A share group's offsets where other processes lead some of its partitions (`--processes`,
`--node-map`): its coordinator asks their leaders, which hold the share partitions.

Kafka's group coordinator asks its share coordinator, the leader of the group's
`__share_group_state` partition (ReadShareGroupStateSummary, InitializeShareGroupState,
DeleteShareGroupState). Here each partition's leader holds its share state, so the coordinator
asks each leader, with the offsets API it was itself asked, over the workers' channel
(workers.inter_broker); the leader answers from the share partitions it holds, with none of
the coordinator's checks (`Session.inter_broker`). A lone broker never asks."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...broker import Broker


NO_ANSWER_MESSAGE = "The leader of the partition (node {node}) did not answer."
"""The error message of a partition whose leader's process did not answer (it went down)."""


def by_leader(broker: Broker, partitions: Iterable[tuple[str, int]]) -> dict[int, list[Any]]:
    """The partitions another process leads, by their leader's node, each as (topic, index)."""
    cluster = broker.cluster
    elsewhere: dict[int, list[Any]] = {}
    for topic, index in partitions:
        node = cluster.leader(topic, index)
        if not broker.serves_node(node):
            elsewhere.setdefault(node, []).append((topic, index))
    return elsewhere
