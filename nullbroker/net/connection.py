"""One client connection: read frames, answer each in order, send once per read."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import outcome
import trio

from codec import FrameReader, ProtocolError
from codec.framing import Buffer

from ..sessions import Session
from .host_loop import FIRST_RECEIVE_BYTES, RECEIVE_BYTES, SHRINK_AFTER_READS
from .read_budget import ReadBudget, Reservation
from .shared import Shared

log = logging.getLogger("nullbroker")

IOV_MAX = os.sysconf("SC_IOV_MAX")  # buffers one writev takes (1024 on Linux)
# While a request is held, what the client sends meanwhile is read (to see it close) and
# kept until the request is answered; past this much, reading stops and TCP pushes back.
HELD_READ_LIMIT = 1024 * 1024
HELD_READ_BYTES = 64 * 1024

# What a peer that vanished looks like to a system call: reset, or gone before we asked.
_PEER_GONE = frozenset({errno.ECONNRESET, errno.ENOTCONN, errno.EPIPE, errno.ETIMEDOUT})

RESET = "ConnectionReset"
_UNBOUNDED = ReadBudget(2**62)
"""The budget of a connection served outside serve_connection (tests): no bound."""
"""closed_on_error reason: the client reset the connection (RST)."""
CLOSED_MID_REQUEST = "ClosedMidRequest"
"""closed_on_error reason: the client closed the connection partway through a request."""
INTERNAL_ERROR = "InternalError"

T = TypeVar("T")


class Cancellable(Protocol):
    """What draining stops: a connection's cancel scope, or a connection without a task."""

    def cancel(self) -> None: ...


class Drain:
    """Shared between a server and its connections: tells them to stop reading.

    When draining starts, a connection waiting for bytes stops at once; one handling
    requests answers all it has read, sends, and then stops.
    """

    def __init__(self) -> None:
        self.draining = False
        self._waiting: set[Cancellable] = set()
        self.connections: trio.Nursery | None = None
        """The nursery the server runs its connections in: where a connection that the
        host loop serves between requests, without a task, takes its next step in trio."""

    def start(self) -> None:
        self.draining = True
        # A copy: cancelling a hosted connection's scope unwatches it at once.
        for scope in list(self._waiting):
            scope.cancel()

    async def wait(self, ready: Coroutine[Any, Any, T]) -> T | None:
        """Await `ready` (a wait for the client's next bytes) unless draining starts first:
        then None. Only a connection with nothing to answer waits here."""
        if self.draining:
            ready.close()
            return None
        with trio.CancelScope() as scope:
            self._waiting.add(scope)
            try:
                result = await ready
            finally:
                self._waiting.discard(scope)
        return None if scope.cancelled_caught else result

    def watch(self, scope: Cancellable) -> None:
        """Cancel `scope` when draining starts: the scope of a connection that waits for
        its client (see `wait_readable`), or a connection the host loop serves without a
        task (which cancelling closes), until `unwatch`."""
        self._waiting.add(scope)

    def unwatch(self, scope: Cancellable) -> None:
        self._waiting.discard(scope)

    async def wait_readable(self, fd: int, scope: trio.CancelScope) -> bool:
        """Wait for `fd` to be readable; False if draining starts first.

        For a connection that runs inside `scope` from start to end: entering a cancel
        scope per wait, as `wait` does, cost a third of a Produce request's CPU. Draining
        cancels `scope` only while the connection waits here, so the Cancelled that ends
        the connection can only come out of this wait. Had the socket turned readable just
        as draining started, `scope` is cancelled but the wait returned: say so, and the
        connection stops before reading, so that it never meets that cancellation again.
        """
        if self.draining:
            return False
        self.watch(scope)
        try:
            await trio.lowlevel.wait_readable(fd)
        finally:
            self.unwatch(scope)
        return not scope.cancel_called


class Wire:
    """Any trio stream (TLS, the in-memory streams of tests): one receive_some per read."""

    # Slots, and shared empty defaults: thousands of idle connections each hold one.
    __slots__ = (
        "closed_while_held",
        "holding",
        "parked",
        "read_while_held",
        "reads",
        "release",
        "reservation",
        "reset_while_held",
        "scope",
        "stream",
    )

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.scope = trio.CancelScope()
        """The connection runs inside it; see Drain.wait_readable."""
        self.read_while_held: Sequence[bytes] = ()
        """Bytes the client sent while a request of its was held, not yet handled."""
        self.closed_while_held = False
        self.reset_while_held: OSError | None = None
        self.reservation = Reservation(_UNBOUNDED)
        """This connection's share of the broker's read budget (set by serve_connection)."""
        self.reads = 0
        """Reads that brought bytes: how the idle sweep (nullbroker.net.idle) sees activity."""
        self.holding = False
        """Whether a request of this connection is held (waiting is not being idle)."""
        self.parked: Cancellable | None = None
        """The host loop's side of the connection while it serves it without a task
        (hosted_connection); cancelling it closes the connection."""
        self.release: Callable[[], None] | None = None
        """Gives back what admitting the connection took (the server's limits), once."""

    def stop(self) -> None:
        """Close the connection from outside it (the idle sweep): cancel the task serving
        it, or close it at once when no task does."""
        if self.parked is not None:
            self.parked.cancel()
        else:
            self.scope.cancel()

    def take_read_while_held(self) -> bytes | None:
        if not self.read_while_held:
            return None
        data = b"".join(self.read_while_held)
        self.read_while_held = ()
        return data

    async def receive(self, drain: Drain) -> bytes | bytearray | memoryview | None:
        """The next bytes; None at end of stream or once draining."""
        early = self.take_read_while_held()
        if early is not None:
            return early
        if self.closed_while_held:
            return None
        data = await drain.wait(self.stream.receive_some(RECEIVE_BYTES))
        if not data:
            return None
        self.reads += 1
        return data

    async def watch_for_close(self) -> None:
        """Return once the client closes or resets the connection. Bytes it sends
        meanwhile are kept for `receive`; once HELD_READ_LIMIT of them wait, stop reading
        (and so stop watching) until the held request is answered."""
        kept = 0
        read = self.read_while_held = list(self.read_while_held)
        while kept < HELD_READ_LIMIT:
            try:
                data = await self.stream.receive_some(HELD_READ_BYTES)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                self.closed_while_held = True
                return
            read.append(bytes(data))
            kept += len(data)
        await trio.sleep_forever()

    async def send_all(self, parts: list[Buffer]) -> None:
        """Send the buffers, in order, as one byte string."""
        await self.stream.send_all(b"".join(parts))


class SocketWire(Wire):
    """A plain TCP connection, read and written with non-blocking system calls.

    trio's SocketStream yields to the scheduler two or three times per receive and per
    send, and that bookkeeping cost more CPU than answering a Produce request. Here a read
    or write that the socket can take at once costs one system call; the task waits (and
    so yields) only when the socket is not ready, and yields once per read otherwise, so a
    client that never pauses cannot starve the others.
    """

    __slots__ = ("_small_reads", "fd", "into", "view")

    def __init__(self, stream: trio.SocketStream) -> None:
        super().__init__(stream)
        self.fd = stream.socket.fileno()
        # Read into one buffer per connection: os.read would allocate RECEIVE_BYTES for
        # every read and then shrink it, which cost more than the read itself. Made at the
        # first read: the host loop reads a hosted connection into a buffer of its own.
        self.into: Sequence[bytearray] = ()
        self.view = _NO_BUFFER
        self._small_reads = 0

    def fitted(self, size: int) -> bool:
        """Fit the receive buffer to a read of `size` bytes (see `next_read_size`). A new
        buffer replaces the old, which views of earlier reads keep alive as long as they
        need it. True when `into` and `view` were replaced."""
        capacity = len(self.view)
        fitted, self._small_reads = next_read_size(capacity, size, self._small_reads)
        if fitted == capacity:
            return False
        self._resize(fitted)
        return True

    def _resize(self, capacity: int) -> None:
        self.into = [bytearray(capacity)]
        self.view = memoryview(self.into[0])

    async def receive(self, drain: Drain) -> bytes | memoryview | None:
        """The next bytes, valid until the next call; None at end of stream or once
        draining."""
        early = self.take_read_while_held()
        if early is not None:
            return early
        if self.closed_while_held:
            return None
        if not self.into:
            self._resize(FIRST_RECEIVE_BYTES)
        waited = False
        while not drain.draining:
            try:
                size = os.readv(self.fd, self.into)
            except BlockingIOError:
                if not await drain.wait_readable(self.fd, self.scope):
                    return None
                waited = True
                continue
            except OSError as error:  # reset by the peer
                raise trio.BrokenResourceError(str(error)) from error
            if not waited:
                # Bytes were there at once: yield anyway, so that other connections run.
                await trio.lowlevel.checkpoint()
            if not size:
                return None
            self.reads += 1
            data = self.view[:size]
            self.fitted(size)
            return data
        return None

    async def send_all(self, parts: list[Buffer]) -> None:
        """Send the buffers with writev: a Fetch response's record batches go from the
        templates they were rendered from to the socket without being joined first."""
        while parts:
            try:
                sent = os.writev(self.fd, parts[:IOV_MAX])
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self.fd)
                continue
            except OSError as error:  # broken pipe, reset by the peer
                raise trio.BrokenResourceError(str(error)) from error
            parts = after_sent(parts, sent)

    async def watch_for_close(self) -> None:
        kept = 0
        read = self.read_while_held = list(self.read_while_held)
        while kept < HELD_READ_LIMIT:
            await trio.lowlevel.wait_readable(self.fd)
            try:
                data = os.read(self.fd, HELD_READ_BYTES)
            except BlockingIOError:
                continue
            except OSError as error:  # reset by the peer
                self.closed_while_held = True
                self.reset_while_held = error
                return
            if not data:
                self.closed_while_held = True
                return
            read.append(data)
            kept += len(data)
        await trio.sleep_forever()


_NO_BUFFER = memoryview(b"")


def next_read_size(capacity: int, size: int, small_reads: int) -> tuple[int, int]:
    """How much a connection's next read takes, after a read of `size` bytes that could
    take `capacity`, and its small reads in a row: a read that filled it doubles it (up to
    RECEIVE_BYTES), SHRINK_AFTER_READS reads of under a sixteenth of it in a row halve it
    (down to FIRST_RECEIVE_BYTES). A client that pipelines many requests so gets them read
    (and answered) a few at first, not all at once."""
    if size == capacity:
        return min(capacity * 2, RECEIVE_BYTES), 0
    if size < capacity >> 4 and capacity > FIRST_RECEIVE_BYTES:
        small_reads += 1
        if small_reads >= SHRINK_AFTER_READS:
            return capacity // 2, 0
    return capacity, small_reads


def after_sent(parts: list[Buffer], sent: int) -> list[Buffer]:
    """What is left of `parts` once their first `sent` bytes are gone."""
    for index, part in enumerate(parts):
        size = len(part)
        if sent < size:
            rest = parts[index:]
            if sent:
                rest[0] = memoryview(part)[sent:]
            return rest
        sent -= size
    return []


def _wire(stream: trio.abc.Stream) -> Wire:
    if type(stream) is trio.SocketStream:
        return SocketWire(stream)
    return Wire(stream)


async def _abandon(pending: Awaitable[object]) -> None:
    """Cancel a request held for a client that has gone. Awaited under a cancelled scope
    rather than dropped, since a coroutine never awaited is reported as a bug."""
    with trio.CancelScope() as scope:
        scope.cancel()
        await pending


ServeWire = Callable[["Wire", Shared, Session, Drain], Awaitable[bool]]
"""Serves one connection's wire: `serve_wire`, or the host loop's `hosted_connection.
serve_hosted`. True when the connection goes on without a task (the host loop serves it
between requests, and closes it with `close_connection`); False when it has ended."""


async def serve_connection(
    stream: trio.abc.Stream,
    shared: Shared,
    session: Session,
    drain: Drain,
    serve: ServeWire | None = None,
    release: Callable[[], None] | None = None,
) -> bool:
    """Serve one connection until the client closes it, breaks the protocol, or the
    broker drains; `release` is called once it has closed. Every request read is answered,
    in order, before the connection ends. True when the connection goes on without a task
    (see ServeWire).

    Whatever happens on it, the connection's failure stays here: counted, logged once
    (repeats summarised), and the stream closed; the broker and its other connections go on.
    """
    stats = shared.stats
    stats.connections += 1
    stats.connections_total += 1
    stats.node_connections[session.node_id] += 1
    wire = _wire(stream)
    wire.release = release
    wire.reservation = Reservation(shared.read_budget)
    shared.idle_connections.add(wire, session)
    step = (serve or serve_wire)(wire, shared, session, drain)
    return await run_connection(wire, shared, session, step)


async def run_connection(
    wire: Wire, shared: Shared, session: Session, step: Awaitable[bool]
) -> bool:
    """Run `step`, a stretch of a connection's life in a task, inside `wire.scope` (a new
    one each stretch); close the connection unless the step says it goes on without a
    task. A failure is counted and logged here."""
    goes_on = False
    stats = shared.stats
    try:
        with wire.scope:
            goes_on = await step
    except (trio.BrokenResourceError, trio.ClosedResourceError) as error:
        reset = error.__cause__
        if isinstance(reset, OSError) and reset.errno in _PEER_GONE:
            stats.protocol_errors[RESET] += 1
            shared.warnings.info(
                session.host,
                RESET,
                "connection from %s reset by the client: %s",
                session.peer,
                reset.strerror,
            )
        # Otherwise the client closed its end while we wrote: nothing to answer.
    except Exception:
        # A bug of ours, or a failure no one foresaw, costs this connection only.
        _internal_error(shared, session)
    finally:
        if not goes_on:
            close_connection(wire, shared, session)
            await trio.aclose_forcefully(wire.stream)
    return goes_on


def close_connection(wire: Wire, shared: Shared, session: Session) -> None:
    """The accounts of a connection that ends: counted, its budget and admission given
    back, no longer watched for idleness, and what the broker tied to it undone
    (`Session.on_close`). Its stream is the caller's to close."""
    shared.stats.connections -= 1
    wire.reservation.release()
    shared.idle_connections.discard(wire)
    if wire.release is not None:
        wire.release()
        wire.release = None
    closing, session.on_close = session.on_close, {}
    for undo in closing.values():
        try:
            undo()
        except Exception:  # a bug of ours: logged, and the others still undone
            _internal_error(shared, session)


def _internal_error(shared: Shared, session: Session) -> None:
    """Count and log (repeats summarised) the exception being handled: a bug of ours, or a
    failure no one foresaw, which costs its connection only."""
    shared.stats.protocol_errors[INTERNAL_ERROR] += 1
    shared.warnings.log(
        logging.ERROR,
        session.host,
        INTERNAL_ERROR,
        "closing connection from %s: internal error",
        session.peer,
        exc_info=True,
    )


async def serve_wire(wire: Wire, shared: Shared, session: Session, drain: Drain) -> bool:
    """Read, answer in order, send once per read: until end of stream, a protocol error
    or draining. False: the connection has ended."""
    reader = FrameReader(shared.max_request_bytes)
    while (data := await wire.receive(drain)) is not None:
        reader.feed(data)
        if await answer_frames(wire, shared, session, reader.frames()) is not None:
            return False
        # A large request being read holds its size of the budget; without room, wait.
        await wire.reservation.fit(Reservation.needed(reader.pending_frame_size))
    note_unfinished_request(reader, shared, session, drain)
    return False


async def answer_frames(
    wire: Wire,
    shared: Shared,
    session: Session,
    frames: Iterator[memoryview],
    out: list[Buffer] | None = None,
    held: Awaitable[bytes | list[Buffer] | None] | None = None,
    failure: str | None = None,
) -> str | None:
    """Answer `frames` in order and send the answers once, after `out` (answered already)
    and the answer to `held` (a request that waits, read before `frames`). Returns the
    failure that must close the connection, if one did; one already met (`failure`) skips
    straight to sending what was answered before it."""
    out = [] if out is None else out
    if failure is None:
        try:
            if held is None:
                held = answer_until_held(shared, session, frames, out)
            while held is not None:
                out = await _send_then_hold(wire, shared, session, held, out)
                held = answer_until_held(shared, session, frames, out)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise  # the client went away: not a protocol error, nor a bug of ours
        except Exception as error:
            failure = fail(error, shared, session)
    if out:
        await wire.send_all(out)
    return failure


def answer_until_held(
    shared: Shared, session: Session, frames: Iterator[memoryview], out: list[Buffer]
) -> Awaitable[bytes | list[Buffer] | None] | None:
    """Answer `frames` in order, appending the answers to `out`, until one must wait:
    return that one's pending answer (the frames after it stay in `frames`), else None."""
    answer = shared.answer
    for frame in frames:
        try:
            response = answer(frame, session)
        except ProtocolError as error:
            # Rare (the connection closes): SASL is imported here, not by every broker.
            from ..sessions.sasl import SaslAuthenticationFailed

            if isinstance(error, SaslAuthenticationFailed):
                out.append(error.response)  # answered, then the connection closes
            raise
        if response is None:
            continue
        kind = type(response)
        if kind is bytes:
            out.append(response)  # type: ignore[arg-type]
        elif kind is list:
            out.extend(response)  # type: ignore[arg-type]
        else:
            return response  # type: ignore[return-value]
    return None


def fail(error: Exception, shared: Shared, session: Session) -> str:
    """Log and count a request that must close its connection; its kind. Called in the
    handler of `error`, so that a bug's traceback is logged."""
    if isinstance(error, ProtocolError):
        failure = type(error).__name__
        shared.warnings.warning(
            session.host, failure, "closing connection from %s: %s", session.peer, error
        )
    else:
        # A bug of ours must cost one connection, never the broker.
        failure = INTERNAL_ERROR
        shared.warnings.log(
            logging.ERROR,
            session.host,
            failure,
            "closing connection from %s: internal error",
            session.peer,
            exc_info=True,
        )
    # Counted before the answers so far are sent: a client already gone must not hide it.
    shared.stats.protocol_errors[failure] += 1
    return failure


async def _send_then_hold(
    wire: Wire,
    shared: Shared,
    session: Session,
    pending: Awaitable[bytes | list[Buffer] | None],
    out: list[Buffer],
) -> list[Buffer]:
    """Send what is already answered, then wait for the answer to a held request: the
    buffers to send after it."""
    if out:
        try:
            await wire.send_all(out)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            await _abandon(pending)
            raise
    wire.holding = True
    try:
        response = await _held(wire, shared, session, pending)
    finally:
        wire.holding = False
    if response is None:
        return []
    return [response] if type(response) is bytes else list(response)  # type: ignore[arg-type]


def note_unfinished_request(
    reader: FrameReader, shared: Shared, session: Session, drain: Drain
) -> None:
    """At the end of a connection's stream: count and log a request left half sent."""
    if reader.buffered_bytes and not drain.draining:
        shared.stats.protocol_errors[CLOSED_MID_REQUEST] += 1
        shared.warnings.info(
            session.host,
            CLOSED_MID_REQUEST,
            "connection from %s closed by the client with %d bytes of a request unread",
            session.peer,
            reader.buffered_bytes,
        )


async def _held(wire: Wire, shared: Shared, session: Session, pending: Awaitable[T]) -> T:
    """The answer to a held request (a Fetch at the log end, a JoinGroup in a rebalance),
    watching the connection meanwhile: if the client closes or resets it first, the request
    is cancelled at once, so a vanished client holds no descriptor, memory or group slot
    until the wait would have ended."""
    answer: outcome.Outcome[T] | None = None
    async with trio.open_nursery() as nursery:

        async def wait_for_answer() -> None:
            nonlocal answer
            # Not outcome.acapture: that would also capture the Cancelled of a client
            # that closed, and re-raise it outside its scope.
            try:
                answer = outcome.Value(await pending)
            except Exception as error:
                answer = outcome.Error(error)
            nursery.cancel_scope.cancel()

        async def watch() -> None:
            await wire.watch_for_close()
            nursery.cancel_scope.cancel()

        nursery.start_soon(wait_for_answer)
        nursery.start_soon(watch)
    if answer is not None:
        return answer.unwrap()
    reset = wire.reset_while_held
    if reset is not None:
        raise trio.BrokenResourceError(str(reset)) from reset
    shared.warnings.info(
        session.host,
        "ClosedWhileHeld",
        "connection from %s closed while its request was held; the request is cancelled",
        session.peer,
    )
    raise trio.ClosedResourceError("the client closed the connection")
