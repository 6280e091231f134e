"""A plain-TCP connection served by the host loop's epoll, outside trio's scheduler.

Between requests the connection has no trio task: it is a descriptor registered with the
host loop, which reads it into the loop's one receive buffer, answers every complete
request of a read and sends the answers with one writev, as `serve_wire` does. A quiet
connection so costs its socket and a few small objects, no task and no buffer. The loop
hands the connection to a new trio task only when trio must take a step: a request that
waits (a Fetch held at the log end, a JoinGroup), a request that closes the connection, a
large request the read budget has no room for, the end of the stream, or a reset. The
task (`run_connection`, which counts and logs the failures of every connection alike)
finishes that step the trio way, then gives the connection back to the loop, or closes it.
An answer the socket cannot take at once waits on the loop too, for room in the socket.
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

from ..sessions import Session
from . import host_loop, lane_reader
from .connection import (
    IOV_MAX,
    Drain,
    SocketWire,
    Wire,
    after_sent,
    answer_frames,
    answer_until_held,
    close_connection,
    fail,
    next_read_size,
    note_unfinished_request,
    run_connection,
    serve_wire,
)
from .host_loop import FIRST_RECEIVE_BYTES
from .read_budget import Reservation
from .shared import Shared


@dataclass(slots=True)
class Handoff:
    """Where the host loop stopped, for a trio task to go on from."""

    frames: Iterator[memoryview] = field(default_factory=lambda: iter(()))
    """The read's frames not yet answered."""
    out: list[Buffer] = field(default_factory=list)
    """Answers not yet sent, to go before any other."""
    held: Awaitable[bytes | list[Buffer] | None] | None = None
    """The pending answer of a request that waits, read before `frames`."""
    failure: str | None = None
    ended: bool = False
    """The client closed its end."""


_NO_FRAMES: Iterator[memoryview] = iter(())
"""The frames of a read the Produce lane answered whole."""

_NO_TASK = trio.CancelScope()
"""The scope of every parked connection's wire: never entered, never cancelled (Wire.stop
closes a parked connection instead)."""


async def serve_hosted(wire: Wire, shared: Shared, session: Session, drain: Drain) -> bool:
    """`connection.serve_wire`, with a plain TCP connection served by the host loop
    between requests (True: it goes on without a task); any other stream, or no host
    loop, goes the trio way."""
    host = host_loop.current()
    if host is None or type(wire) is not SocketWire or drain.connections is None:
        return await serve_wire(wire, shared, session, drain)
    if drain.draining:
        return False
    return HostedConnection(host, wire, shared, session, drain).park()


class HostedConnection:
    """The host loop's side of one connection, while it has no task: registered for
    reading, watched by the drain and the idle sweep through its wire."""

    __slots__ = (
        "_drain",
        "_fast",
        "_fd",
        "_host",
        "_read_size",
        "_session",
        "_shared",
        "_small_reads",
        "_unsent",
        "_wire",
        "reader",
    )

    def __init__(
        self,
        host: host_loop.HostLoop,
        wire: SocketWire,
        shared: Shared,
        session: Session,
        drain: Drain,
    ) -> None:
        self._host = host
        self._fd = wire.fd
        self._wire = wire
        self._shared = shared
        self._session = session
        self._drain = drain
        self.reader = FrameReader(shared.max_request_bytes)
        self._read_size = FIRST_RECEIVE_BYTES
        self._small_reads = 0
        self._unsent: list[Buffer] | None = None
        """Answers waiting for room in the socket; None: the connection reads."""
        lane = shared.produce_lane
        # The loop's handler: the C reader, which reads, answers the common Produce
        # requests and writes without Python, going the Python way for anything else;
        # or the Python way alone (no lane; SASL, whose checks of each request are Python's).
        self._fast = (
            None
            if lane is None or session.sasl is not None
            else lane_reader.reader(
                lane,
                self._fd,
                host.receive_buffer,
                wire,
                session.node_id,
                self._on_readable,
                self._after_read,
            )
        )

    def park(self) -> bool:
        """Give the connection to the host loop, until trio must take a step. True, for
        the task that parks it: the connection goes on without it."""
        self._hand_reads_to_c()
        self._host.register(self._fd, select.EPOLLIN, self._read_handler())
        self._drain.watch(self)
        wire = self._wire
        wire.parked = self
        wire.scope = _NO_TASK  # the task's own goes with it; the next task gets a new one
        return True

    def _unpark(self) -> None:
        self._host.unregister(self._fd)
        self._drain.unwatch(self)
        self._wire.parked = None

    def cancel(self) -> None:
        """Close the connection now: draining has begun, or it has been idle too long.
        A parked connection has answered all it read; answers still waiting for room in
        the socket go on in trio while draining (the trio path's would be sent), and go
        with the connection when it is idle (the trio path's send would be cancelled)."""
        unsent, self._unsent = self._unsent, None
        if unsent is not None and self._drain.draining:
            self._to_trio(outcome.Value(Handoff(out=unsent)))
            return
        self._unpark()
        close_connection(self._wire, self._shared, self._session)
        stream = self._wire.stream
        assert isinstance(stream, trio.SocketStream)
        stream.socket.close()

    def _to_trio(self, result: outcome.Outcome[Handoff]) -> None:
        """Take the step in a new task of the server's connections."""
        self._unpark()
        self._wire.scope = trio.CancelScope()  # a scope is entered once: one per task
        connections = self._drain.connections
        assert connections is not None
        connections.start_soon(
            run_connection, self._wire, self._shared, self._session, self._go_on(result)
        )

    async def _go_on(self, result: outcome.Outcome[Handoff]) -> bool:
        """Finish in trio what the loop could not, then park again (True) or end (False).
        A reset is raised, for run_connection to count."""
        handoff = result.unwrap()
        wire, shared, session, drain, reader = (
            self._wire,
            self._shared,
            self._session,
            self._drain,
            self.reader,
        )
        while not handoff.ended:
            failure = await answer_frames(
                wire, shared, session, handoff.frames, handoff.out, handoff.held, handoff.failure
            )
            if failure is not None:
                return False
            # A large request being read holds its size of the budget; without room, wait.
            await wire.reservation.fit(Reservation.needed(reader.pending_frame_size))
            # Bytes read while a request was held go first, the trio way.
            early = wire.take_read_while_held()
            if early is not None:
                reader.feed(early)
                handoff = Handoff(frames=reader.frames())
            elif wire.closed_while_held or drain.draining:
                break
            else:
                return self.park()
        note_unfinished_request(reader, shared, session, drain)
        return False

    def _on_readable(self, events: int) -> None:
        """Read and answer the Python way (a frame is unfinished, or there is no lane)."""
        buffer = self._host.receive_buffer
        try:
            size = os.readv(self._fd, buffer.into(self._read_size))
        except BlockingIOError:
            return
        except OSError as error:  # reset by the peer
            self._to_trio(_broken(error))
            return
        if not size:
            self._to_trio(outcome.Value(Handoff(ended=True)))
            return
        self._wire.reads += 1
        self._read_size, self._small_reads = next_read_size(
            self._read_size, size, self._small_reads
        )
        self._answer_read(buffer, buffer.view[:size], [])

    def _after_read(
        self, size: int, answered: int, answers: bytes | None, error: Exception | None
    ) -> None:
        """Go on from a read the C reader made (`size` bytes into the receive buffer; 0:
        the end of the stream; below 0: minus the errno of a failed read), whose first
        `answered` bytes of requests the lane answered with `answers`."""
        if size <= 0:
            if size:
                self._to_trio(_broken(OSError(-size, os.strerror(-size))))
            else:
                self._to_trio(outcome.Value(Handoff(ended=True)))
            return
        buffer = self._host.receive_buffer
        out: list[Buffer] = [] if answers is None else [answers]
        if error is not None:
            try:
                raise error
            except Exception as raised:  # logged with its traceback, as the Python way's
                failure = fail(raised, self._shared, self._session)
            self._hand_over(buffer, Handoff(out=out, failure=failure))
            return
        self._answer_read(buffer, buffer.view[answered:size], out)

    def _answer_read(
        self, buffer: host_loop.ReceiveBuffer, read: memoryview, out: list[Buffer]
    ) -> None:
        """Answer the requests of `read` after `out` (answers already made) and send them."""
        # Frames are views of the loop's receive buffer: every one is answered here, or
        # the buffer goes with them to trio, before the loop reads into it again.
        reader = self.reader
        try:
            frames = reader.frames_in(read) if read else _NO_FRAMES
            held = answer_until_held(self._shared, self._session, frames, out) if read else None
        except Exception as error:
            failure = fail(error, self._shared, self._session)
            self._hand_over(buffer, Handoff(out=out, failure=failure))
            return
        if held is not None:
            self._hand_over(buffer, Handoff(frames, out, held))
            return
        reservation = self._wire.reservation
        if (reader.buffered_bytes or reservation.reserved) and not reservation.try_fit(
            Reservation.needed(reader.pending_frame_size)
        ):
            # A large request began and the budget has no room: stop reading until it has.
            self._hand_over(buffer, Handoff(out=out))
            return
        self._hand_reads_to_c()
        if out:
            self._send(out)

    def _hand_over(self, buffer: host_loop.ReceiveBuffer, handoff: Handoff) -> None:
        # What was read may be referenced by what goes to trio: the loop reads on into
        # a new buffer.
        buffer.give_away()
        self._to_trio(outcome.Value(handoff))

    def _send(self, parts: list[Buffer]) -> None:
        """Write what the socket takes now; the rest waits on the loop for room (see
        `_on_writable`), the connection reading nothing meanwhile: TCP pushes back on its
        client, as on the trio path."""
        try:
            while parts:
                parts = after_sent(parts, os.writev(self._fd, parts[:IOV_MAX]))
        except BlockingIOError:
            # Every frame of the read is answered, and answers never view the request's
            # bytes: the loop keeps its receive buffer. A large Fetch answer fills the
            # socket some 20 times; a trio task for each wait (and the guest run's
            # wake-ups) cost more than the rest of the answer's way through the broker.
            if self._unsent is None:
                self._host.modify(self._fd, select.EPOLLOUT, self._on_writable)
            self._unsent = parts
            return
        except OSError as error:  # broken pipe, reset by the peer
            self._unsent = None
            self._to_trio(_broken(error))
            return
        if self._unsent is not None:  # the last of what waited for room has gone
            self._unsent = None
            self._host.modify(self._fd, select.EPOLLIN, self._read_handler())

    def _on_writable(self, events: int) -> None:
        unsent = self._unsent
        assert unsent is not None, "waiting for room only with answers to send"
        self._send(unsent)

    def _hand_reads_to_c(self) -> None:
        """Let the C reader take the next read if it can: nothing of a frame buffered here,
        no read budget held."""
        if self._fast is not None:
            self._fast.ready = not (self.reader.buffered_bytes or self._wire.reservation.reserved)

    def _read_handler(self) -> host_loop.EventHandler:
        """The loop's handler of the connection's reads: the C reader, or the Python way."""
        return self._on_readable if self._fast is None else self._fast


def _broken(error: OSError) -> outcome.Error:
    """What the trio path raises for a peer that reset the connection."""
    broken = trio.BrokenResourceError(str(error))
    broken.__cause__ = error
    return outcome.Error(broken)
