from collections.abc import Callable, Sequence
from typing import Any

from nullbroker.broker import LogGrowth
from nullbroker.cluster.faults import Faults
from nullbroker.cluster.nodes import Cluster
from nullbroker.state.producers import PartitionSequences, RecentBatch
from nullbroker.state.topics import Topic
from nullbroker.stats import BrokerStats

c_api: object
"""The lane's C interface (produce_lane.h), a capsule: the C reader's way to the lane."""

class Lane:
    """Its arguments' attributes that the C reads are produce_lane.h's LANE_ATTRIBUTES."""

    def __init__(
        self,
        topics: dict[str, Topic],
        topics_by_id: dict[bytes, Topic],
        sequences: dict[tuple[int, str, int], PartitionSequences],
        recent_type: type[RecentBatch],
        stats: BrokerStats,
        faults: Faults,
        log_growth: LogGrowth,
        crc32c: Callable[[Any], int] | None,
        cluster: Cluster | None,
        min_version: int,
        max_version: int,
        max_frame_bytes: int,
        latency_bounds: Sequence[int],
    ) -> None: ...
    def answer_prefix(self, view: memoryview, node_id: int) -> tuple[int, bytes | None]: ...
    def answer(self, frame: memoryview | bytes, node_id: int) -> bytes | None: ...
