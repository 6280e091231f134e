"""The wall clock in Kafka's unit: milliseconds since the epoch, as record timestamps, log
append times and ListOffsets' answers carry it."""

from __future__ import annotations

import time


def now_ms() -> int:
    return int(time.time() * 1000)
