from collections.abc import Callable, Sequence
from typing import Any

from nullbroker.stats import BrokerStats

c_api: object
"""The lane's C interface (produce_lane.h), a capsule: the C reader's way to the lane."""

class Lane:
    def __init__(
        self,
        topics: dict[str, Any],
        topics_by_id: dict[bytes, Any],
        sequences: dict[tuple[int, str, int], Any],
        recent_type: type,
        stats: BrokerStats,
        faults: Any,
        log_growth: Any,
        crc32c: Callable[[Any], int] | None,
        cluster: Any,
        min_version: int,
        max_version: int,
        max_frame_bytes: int,
        latency_bounds: Sequence[int],
    ) -> None: ...
    def answer_prefix(self, view: memoryview, node_id: int) -> tuple[int, bytes | None]: ...
    def answer(self, frame: memoryview | bytes, node_id: int) -> bytes | None: ...
