from collections.abc import Callable, Sequence
from typing import Any

class Lane:
    def __init__(
        self,
        topics: dict[str, Any],
        topics_by_id: dict[bytes, Any],
        sequences: dict[tuple[int, str, int], Any],
        recent_type: type,
        node_requests: dict[int, int],
        apis: dict[str, Any],
        api_stats: Callable[[str], Any],
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

class Reader:
    ready: int
    read_size: int
    def __init__(
        self,
        lane: Any,
        fd: int,
        receive_buffer: Any,
        wire: Any,
        node_id: int,
        on_readable: Callable[[int], None],
        after_read: Callable[[int, int, bytes | None, Exception | None], None],
        first_read: int,
        max_read: int,
        shrink_after: int,
    ) -> None: ...
    def __call__(self, events: int) -> None: ...
