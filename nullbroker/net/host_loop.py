"""An epoll loop in the main thread that hosts trio as a guest.

Plain-TCP connections are served here, by callbacks on their descriptors, without passing
through trio's scheduler: on this machine trio's wake-ups, checkpoints and per-wait epoll
registration cost more CPU than answering a Produce request. Everything else (listeners,
TLS, held requests, groups, metrics, shutdown) stays in trio, which runs in guest mode
(`trio.lowlevel.start_guest_run`): its ticks are callbacks of this loop, in this thread, so
broker state is only ever touched by one thread and callbacks here may call trio's
synchronous functions (waking a parked task, setting an Event) as a trio task would.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import select
import threading
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import outcome
import trio

T = TypeVar("T")

EventHandler = Callable[[int], None]
"""Called with the epoll event mask when its descriptor is ready."""

CURRENT: trio.lowlevel.RunVar[HostLoop | None] = trio.lowlevel.RunVar("nullbroker_host_loop")


def current() -> HostLoop | None:
    """The loop hosting the running trio run, or None under a plain `trio.run`."""
    return CURRENT.get(None)


RECEIVE_BYTES = 256 * 1024
"""The most one read of a connection takes (its receive buffer grows to this under load)."""
FIRST_RECEIVE_BYTES = 4 * 1024
"""A new or quiet connection's receive buffer: a thousand idle clients cost 4 MiB, not 256."""
SHRINK_AFTER_READS = 64
"""Reads of under a sixteenth of the buffer in a row after which it is halved."""


class ReceiveBuffer:
    """The buffer every connection the loop hosts reads into, one read at a time: a quiet
    connection then holds no buffer of its own. A read's frames are views of it, valid
    until the next read; a connection whose frames must outlive the callback that read
    them (handed to trio) takes the buffer with it (`give_away`), and the loop reads into
    a new one."""

    __slots__ = ("_into", "view")

    def __init__(self) -> None:
        self._into: dict[int, list[memoryview]] = {}
        self.view = memoryview(b"")
        self.give_away()

    def into(self, size: int) -> list[memoryview]:
        """The buffer's first `size` bytes, for os.readv: a read of at most that much."""
        into = self._into.get(size)
        if into is None:
            into = self._into[size] = [self.view[:size]]
        return into

    def give_away(self) -> None:
        # An anonymous mapping, not a bytearray (which is zeroed, so resident, at once):
        # the kernel gives it pages as reads fill them. A buffer given away for each held
        # request (a Fetch waiting at the log end, a JoinGroup) then costs the pages its
        # small reads touched, where a bytearray made 256 KiB resident for each one that
        # trio still held.
        self.view = memoryview(mmap.mmap(-1, RECEIVE_BYTES))
        self._into = {}


class HostLoop:
    """One `select.epoll` and a queue of calls; `run` drives a trio guest run to its end.

    Handlers must not raise: one that did would end the loop, and with it the broker.
    """

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._handlers: dict[int, EventHandler] = {}
        self._calls: deque[Callable[[], object]] = deque()
        # Written by trio's I/O thread (and by signal handlers) to wake a blocked poll.
        self._wakeup = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        # Held while the wakeup is written and while it is closed: a thread may still call
        # in after the run's last pass (its call is then never run), and writing to the
        # closed descriptor's number would write to whatever file took it since.
        self._wakeup_lock = threading.Lock()
        self._wakeup_open = True
        self._epoll.register(self._wakeup, select.EPOLLIN)
        self._handlers[self._wakeup] = self._drain_wakeups
        self._outcome: outcome.Outcome[Any] | None = None
        self.receive_buffer = ReceiveBuffer()

    def register(self, fd: int, events: int, handler: EventHandler) -> None:
        self._epoll.register(fd, events)
        self._handlers[fd] = handler

    def modify(self, fd: int, events: int, handler: EventHandler) -> None:
        """Wait for other events of a registered descriptor, with another handler."""
        self._epoll.modify(fd, events)
        self._handlers[fd] = handler

    def unregister(self, fd: int) -> None:
        del self._handlers[fd]
        self._epoll.unregister(fd)

    def call_soon(self, call: Callable[[], object]) -> None:
        """Run `call` on the loop's next pass; from the loop's own thread only."""
        self._calls.append(call)

    def call_soon_threadsafe(self, call: Callable[[], object]) -> None:
        """Run `call` on the loop's next pass; from any thread. After the run has ended the
        call is dropped: nothing runs calls any more."""
        self._calls.append(call)
        with self._wakeup_lock:
            if self._wakeup_open:
                os.eventfd_write(self._wakeup, 1)

    def run(self, async_fn: Callable[..., Awaitable[T]], *args: object) -> T:
        """Like `trio.run(async_fn, *args)`, with this loop as the host: returns what
        async_fn returns, raises what it raises."""

        async def hosted() -> T:
            CURRENT.set(self)
            return await async_fn(*args)

        trio.lowlevel.start_guest_run(
            hosted,
            run_sync_soon_threadsafe=self.call_soon_threadsafe,
            run_sync_soon_not_threadsafe=self.call_soon,
            done_callback=self._finish,
        )
        try:
            self._loop()
        finally:
            self._epoll.close()
            with self._wakeup_lock:
                self._wakeup_open = False
                os.close(self._wakeup)
        assert self._outcome is not None
        return self._outcome.unwrap()  # type: ignore[no-any-return]

    def _loop(self) -> None:
        calls = self._calls
        handlers = self._handlers
        poll = self._epoll.poll
        while True:
            # Only the calls queued so far: a trio tick queues the next one, and must not
            # keep descriptors waiting while trio is busy.
            for _ in range(len(calls)):
                calls.popleft()()
            if self._outcome is not None:
                return
            for fd, events in poll(0 if calls else -1):
                handler = handlers.get(fd)
                if handler is not None:  # None: unregistered by an earlier handler
                    handler(events)

    def _drain_wakeups(self, events: int) -> None:
        with contextlib.suppress(BlockingIOError):  # another pass read it first
            os.eventfd_read(self._wakeup)

    def _finish(self, result: outcome.Outcome[Any]) -> None:
        self._outcome = result
