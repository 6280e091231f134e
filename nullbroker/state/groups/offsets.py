"""The offsets committed to a group, as both kinds of group keep them (classic, and the new
protocol's): by topic and partition, each with its leader epoch and metadata."""

from __future__ import annotations

from dataclasses import dataclass

from ...cluster.nodes import NO_LEADER_EPOCH


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
