"""A plain-TCP connection served by the host loop's epoll, outside trio's scheduler.

Its trio task parks while the host loop reads, answers and writes on its behalf, every
complete request of a read answered and the answers sent with one writev, as `serve_wire`
does. The task resumes only when trio must take a step: a request that waits (a Fetch
held at the log end, a JoinGroup), a request that closes the connection, the end of the
stream, or a reset. Then the trio path (`answer_frames`) finishes that read, and the
connection goes back to the host loop.
"""

from __future__ import annotations

import os
import select
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field

import outcome
import trio

from codec import FrameReader
from codec.framing import Buffer

from . import host_loop
from .broker import Broker, Session
from .connection import (
    IOV_MAX,
    Drain,
    SocketWire,
    Wire,
    after_sent,
    answer_frames,
    answer_until_held,
    fail,
    note_unfinished_request,
    serve_wire,
)
from .read_budget import Reservation


@dataclass(slots=True)
class Handoff:
    """Where the host loop stopped, for the trio task to go on from."""

    frames: Iterator[memoryview] = field(default_factory=lambda: iter(()))
    """The read's frames not yet answered."""
    out: list[Buffer] = field(default_factory=list)
    """Answers not yet sent, to go before any other."""
    held: Awaitable[bytes | list[Buffer] | None] | None = None
    failure: str | None = None
    over_budget: bool = False
    """A large request began and the read budget has no room for it: wait, then read on."""


async def serve_hosted(wire: Wire, broker: Broker, session: Session, drain: Drain) -> None:
    """`connection.serve_wire`, with a plain TCP connection's reads and writes done by the
    host loop; any other stream, or no host loop, goes the trio way."""
    host = host_loop.current()
    if host is None or type(wire) is not SocketWire:
        await serve_wire(wire, broker, session, drain)
        return
    connection = HostedConnection(host, wire, broker, session, drain)
    reader = connection.reader
    while True:
        # Bytes read while a request was held go first, the trio way.
        early = wire.take_read_while_held()
        if early is not None:
            reader.feed(early)
            handoff: Handoff | None = Handoff(frames=reader.frames())
        elif wire.closed_while_held or drain.draining:
            break
        else:
            handoff = await connection.serve_until_handoff()
            if handoff is None:
                break
        assert handoff is not None
        failure = await answer_frames(
            wire, broker, session, handoff.frames, handoff.out, handoff.held, handoff.failure
        )
        if failure is not None:
            return
        # Back to the host loop once a large request being read has its share of the budget.
        await wire.reservation.fit(Reservation.needed(reader.pending_frame_size))
    note_unfinished_request(reader, broker, session, drain)


class HostedConnection:
    """The host loop's side of one connection: registered for reading while its task
    waits in `serve_until_handoff`, for writing while an answer waits for room."""

    __slots__ = (
        "_broker",
        "_drain",
        "_fd",
        "_host",
        "_into",
        "_scope",
        "_session",
        "_task",
        "_unsent",
        "_view",
        "_wire",
        "reader",
    )

    def __init__(
        self,
        host: host_loop.HostLoop,
        wire: SocketWire,
        broker: Broker,
        session: Session,
        drain: Drain,
    ) -> None:
        self._host = host
        self._fd = wire.fd
        self._wire = wire
        self._into = wire.into
        self._view = wire.view
        self._scope = wire.scope
        self._broker = broker
        self._session = session
        self._drain = drain
        self._task: trio.lowlevel.Task | None = None
        self._unsent: list[Buffer] = []
        self.reader = FrameReader(broker.max_request_bytes)

    async def serve_until_handoff(self) -> Handoff | None:
        """Let the host loop serve the connection until trio must take a step: what it
        is, or None at the end of the stream. Raises trio.BrokenResourceError for a reset
        (caused by the OSError), and trio.Cancelled once draining starts while the
        connection waits for its client."""
        self._task = trio.lowlevel.current_task()
        self._host.register(self._fd, select.EPOLLIN, self._on_events)
        self._drain.watch(self._scope)
        return await trio.lowlevel.wait_task_rescheduled(self._abort)  # type: ignore[no-any-return]

    def _abort(self, raise_cancel: object) -> trio.lowlevel.Abort:
        # Draining (the scope is watched only while the client has all its answers) or
        # the drain's deadline: stop serving, unsent answers and all.
        self._release()
        return trio.lowlevel.Abort.SUCCEEDED

    def _release(self) -> None:
        self._host.unregister(self._fd)
        self._drain.unwatch(self._scope)
        self._unsent = []

    def _hand_back(self, result: outcome.Outcome[Handoff | None]) -> None:
        task = self._task
        assert task is not None
        self._task = None
        self._release()
        trio.lowlevel.reschedule(task, result)

    def _on_events(self, events: int) -> None:
        if self._unsent:
            self._send(self._unsent)
        else:
            self._read()

    def _read(self) -> None:
        try:
            size = os.readv(self._fd, self._into)
        except BlockingIOError:
            return
        except OSError as error:  # reset by the peer
            self._hand_back(_broken(error))
            return
        if not size:
            self._hand_back(outcome.Value(None))
            return
        self._wire.reads += 1
        # Frames are views of the receive buffer: every one is answered (or handed to
        # trio, which answers the rest) before the next read overwrites it.
        data = self._view[:size]
        if self._wire.fitted(size):  # a new buffer for the next read; `data` keeps the old
            self._into, self._view = self._wire.into, self._wire.view
        frames = self.reader.frames_in(data)
        out: list[Buffer] = []
        try:
            held = answer_until_held(self._broker, self._session, frames, out)
        except Exception as error:
            failure = fail(error, self._broker, self._session)
            self._hand_back(outcome.Value(Handoff(out=out, failure=failure)))
            return
        if held is not None:
            self._hand_back(outcome.Value(Handoff(frames, out, held)))
            return
        reader = self.reader
        reservation = self._wire.reservation
        if (reader.buffered_bytes or reservation.reserved) and not reservation.try_fit(
            Reservation.needed(reader.pending_frame_size)
        ):
            # A large request began and the budget has no room: stop reading until it has.
            self._hand_back(outcome.Value(Handoff(out=out, over_budget=True)))
            return
        if out:
            self._send(out)

    def _send(self, parts: list[Buffer]) -> None:
        """Write what the socket takes now; wait for room for the rest, reading nothing
        meanwhile, as the trio path's send_all does."""
        was_waiting = bool(self._unsent)
        try:
            while parts:
                parts = after_sent(parts, os.writev(self._fd, parts[:IOV_MAX]))
        except BlockingIOError:
            self._unsent = parts
            if not was_waiting:
                self._host.modify(self._fd, select.EPOLLOUT)
                # Answers are owed: draining must wait for them to go out.
                self._drain.unwatch(self._scope)
            return
        except OSError as error:  # broken pipe, reset by the peer
            self._hand_back(_broken(error))
            return
        self._unsent = []
        if was_waiting:
            if self._drain.draining:
                self._hand_back(outcome.Value(None))
                return
            self._host.modify(self._fd, select.EPOLLIN)
            self._drain.watch(self._scope)


def _broken(error: OSError) -> outcome.Error:
    """What the trio path raises for a peer that reset the connection."""
    broken = trio.BrokenResourceError(str(error))
    broken.__cause__ = error
    return outcome.Error(broken)
