"""One client connection: read frames, answer each in order, send once per read."""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

import trio

from codec import FrameReader, ProtocolError
from codec.framing import Buffer

from .broker import Broker, Session

log = logging.getLogger("nullbroker")

RECEIVE_BYTES = 256 * 1024
IOV_MAX = os.sysconf("SC_IOV_MAX")  # buffers one writev takes (1024 on Linux)

T = TypeVar("T")


class Drain:
    """Shared between a server and its connections: tells them to stop reading.

    When draining starts, a connection waiting for bytes stops at once; one handling
    requests answers all it has read, sends, and then stops.
    """

    def __init__(self) -> None:
        self.draining = False
        self._waiting: set[trio.CancelScope] = set()

    def start(self) -> None:
        self.draining = True
        for scope in self._waiting:
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
        self._waiting.add(scope)
        try:
            await trio.lowlevel.wait_readable(fd)
        finally:
            self._waiting.discard(scope)
        return not scope.cancel_called


class _Wire:
    """Any trio stream (TLS, the in-memory streams of tests): one receive_some per read."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.scope = trio.CancelScope()
        """The connection runs inside it; see Drain.wait_readable."""

    async def receive(self, drain: Drain) -> bytes | bytearray | memoryview | None:
        """The next bytes; None at end of stream or once draining."""
        return (await drain.wait(self.stream.receive_some(RECEIVE_BYTES))) or None

    async def send_all(self, parts: list[Buffer]) -> None:
        """Send the buffers, in order, as one byte string."""
        await self.stream.send_all(b"".join(parts))


class _SocketWire(_Wire):
    """A plain TCP connection, read and written with non-blocking system calls.

    trio's SocketStream yields to the scheduler two or three times per receive and per
    send, and that bookkeeping cost more CPU than answering a Produce request. Here a read
    or write that the socket can take at once costs one system call; the task waits (and
    so yields) only when the socket is not ready, and yields once per read otherwise, so a
    client that never pauses cannot starve the others.
    """

    def __init__(self, stream: trio.SocketStream) -> None:
        super().__init__(stream)
        self._fd = stream.socket.fileno()
        # Read into one buffer per connection: os.read would allocate RECEIVE_BYTES for
        # every read and then shrink it, which cost more than the read itself.
        self._into = [bytearray(RECEIVE_BYTES)]
        self._view = memoryview(self._into[0])

    async def receive(self, drain: Drain) -> memoryview | None:
        """The next bytes, valid until the next call; None at end of stream or once
        draining."""
        waited = False
        while not drain.draining:
            try:
                size = os.readv(self._fd, self._into)
            except BlockingIOError:
                if not await drain.wait_readable(self._fd, self.scope):
                    return None
                waited = True
                continue
            except OSError as error:  # reset by the peer
                raise trio.BrokenResourceError(str(error)) from error
            if not waited:
                # Bytes were there at once: yield anyway, so that other connections run.
                await trio.lowlevel.checkpoint()
            return self._view[:size] if size else None
        return None

    async def send_all(self, parts: list[Buffer]) -> None:
        """Send the buffers with writev: a Fetch response's record batches go from the
        templates they were rendered from to the socket without being joined first."""
        while parts:
            try:
                sent = os.writev(self._fd, parts[:IOV_MAX])
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self._fd)
                continue
            except OSError as error:  # broken pipe, reset by the peer
                raise trio.BrokenResourceError(str(error)) from error
            parts = _after(parts, sent)


def _after(parts: list[Buffer], sent: int) -> list[Buffer]:
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


def _wire(stream: trio.abc.Stream) -> _Wire:
    if type(stream) is trio.SocketStream:
        return _SocketWire(stream)
    return _Wire(stream)


async def _abandon(pending: Awaitable[object]) -> None:
    """Cancel a request held for a client that has gone. Awaited under a cancelled scope
    rather than dropped, since a coroutine never awaited is reported as a bug."""
    with trio.CancelScope() as scope:
        scope.cancel()
        await pending


async def serve_connection(
    stream: trio.abc.Stream, broker: Broker, session: Session, drain: Drain
) -> None:
    """Serve one connection until the client closes it, breaks the protocol, or the
    broker drains. Every request read is answered, in order, before the connection ends."""
    stats = broker.stats
    stats.connections += 1
    stats.connections_total += 1
    wire = _wire(stream)
    try:
        with wire.scope:
            await _serve(wire, broker, session, drain)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the client went away; nothing to answer
    finally:
        stats.connections -= 1
        await trio.aclose_forcefully(stream)


async def _serve(wire: _Wire, broker: Broker, session: Session, drain: Drain) -> None:
    """Read, answer in order, send once per read: until end of stream, a protocol error
    or draining."""
    stats = broker.stats
    reader = FrameReader(broker.config.max_frame_bytes)
    while (data := await wire.receive(drain)) is not None:
        reader.feed(data)
        out: list[Buffer] = []
        failure = None
        try:
            for frame in reader.frames():
                response = broker.answer(frame, session)
                if response is None:
                    continue
                kind = type(response)
                if kind is not bytes and kind is not list:
                    # A request that waits: what is already answered goes out first.
                    if out:
                        try:
                            await wire.send_all(out)
                        except (trio.BrokenResourceError, trio.ClosedResourceError):
                            await _abandon(response)  # type: ignore[arg-type]
                            raise
                        out = []
                    response = await response  # type: ignore[misc]
                    if response is None:
                        continue
                if type(response) is bytes:
                    out.append(response)
                else:
                    out.extend(response)  # type: ignore[arg-type]
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise  # the client went away: not a protocol error, nor a bug of ours
        except ProtocolError as error:
            failure = type(error).__name__
            log.warning("closing connection from %s: %s", session.peer, error)
        except Exception:
            # A bug of ours must cost one connection, never the broker.
            failure = "InternalError"
            log.exception("closing connection from %s: internal error", session.peer)
        if failure is not None:
            # Counted before sending: a client already gone must not hide the error.
            stats.protocol_errors[failure] += 1
        if out:
            await wire.send_all(out)
        if failure is not None:
            break
