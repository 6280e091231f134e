from collections.abc import Callable
from typing import Any

class Reader:
    ready: int
    read_size: int
    def __init__(
        self,
        lane_api: object,
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
