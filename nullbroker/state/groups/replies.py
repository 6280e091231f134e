"""An answer a request may wait for: JoinGroup waits for its group's join phase, SyncGroup for
the leader's assignment. Apart from the group state so that the state machine hands out and
fills in replies while the handlers only await them; trio's Event is the only machinery."""

from __future__ import annotations

from typing import Generic, TypeVar

import trio

T = TypeVar("T")


class Reply(Generic[T]):
    """The answer to one request: given at once, or later by the coordinator while the
    request's connection waits for it."""

    __slots__ = ("_event", "_value")

    def __init__(self) -> None:
        self._event = trio.Event()
        self._value: T | None = None

    @classmethod
    def now(cls, value: T) -> Reply[T]:
        reply: Reply[T] = cls()
        reply.give(value)
        return reply

    @property
    def ready(self) -> bool:
        return self._event.is_set()

    @property
    def value(self) -> T:
        assert self._value is not None, "the reply has not been given yet"
        return self._value

    def give(self, value: T) -> None:
        """Answer the request; only the first answer counts."""
        if not self._event.is_set():
            self._value = value
            self._event.set()

    async def wait(self) -> T:
        await self._event.wait()
        return self.value
