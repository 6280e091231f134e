"""Warnings that cannot flood the log: the first of a kind from a peer is logged, repeats
are counted and summarised once per window.

A client sending the same bad request a thousand times, or a fuzzer, would otherwise write
a line per request; the broker's metrics still count every one of them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

# How long repeats of one kind from one peer are gathered before they are summarised.
WINDOW_SECONDS = 10.0


@dataclass(slots=True)
class _Repeats:
    since: float
    """When this window began: the first occurrence, or the previous summary."""
    count: int = 0
    """Occurrences since then that were not logged."""


class RepeatLimitedLog:
    """Logs the first occurrence of each (peer host, kind) in full; counts the rest.

    `flush()` writes one line per (peer host, kind) whose window has passed with repeats:
    "… 999 more like this from 127.0.0.1 in the last 10 s". A kind that stays quiet for a
    whole window is forgotten, so its next occurrence is logged in full again.
    """

    def __init__(
        self,
        logger: logging.Logger,
        window_seconds: float = WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.window_seconds = window_seconds
        self._clock = clock
        self._repeats: dict[tuple[str, str], _Repeats] = {}
        self.noted: Callable[[], None] = lambda: None
        """Called when a kind is logged in full, beginning a window: whoever flushes may
        sleep until then (`gathering`)."""

    @property
    def gathering(self) -> bool:
        """Whether a window is open for any kind: until one is, `flush` has nothing to do."""
        return bool(self._repeats)

    def log(
        self,
        level: int,
        host: str,
        kind: str,
        message: str,
        *args: object,
        exc_info: bool = False,
    ) -> None:
        """Log `message % args` unless `kind` was already logged for `host` in this window."""
        key = (host, kind)
        repeats = self._repeats.get(key)
        if repeats is not None:
            repeats.count += 1
            return
        self._repeats[key] = _Repeats(since=self._clock())
        self.logger.log(level, message, *args, exc_info=exc_info)
        self.noted()

    def warning(self, host: str, kind: str, message: str, *args: object) -> None:
        self.log(logging.WARNING, host, kind, message, *args)

    def info(self, host: str, kind: str, message: str, *args: object) -> None:
        self.log(logging.INFO, host, kind, message, *args)

    def flush(self, everything: bool = False) -> None:
        """Summarise the repeats of every window that has passed (all of them when
        `everything`, as at shutdown), and forget the kinds that had none."""
        now = self._clock()
        for key, repeats in list(self._repeats.items()):
            elapsed = now - repeats.since
            if elapsed < self.window_seconds and not everything:
                continue
            if repeats.count == 0:
                del self._repeats[key]
                continue
            host, kind = key
            self.logger.warning(
                "… %d more like this (%s) from %s in the last %.0f s",
                repeats.count,
                kind,
                host,
                elapsed,
            )
            if everything:
                del self._repeats[key]
            else:
                self._repeats[key] = _Repeats(since=now)
