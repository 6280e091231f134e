"""One client connection: read frames, answer each in order, send once per read."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable

import trio

from codec import FrameReader, ProtocolError

from .broker import Broker, Session

log = logging.getLogger("nullbroker")

RECEIVE_BYTES = 256 * 1024


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

    async def receive(self, stream: trio.abc.ReceiveStream) -> bytes | None:
        """The next bytes from the stream; None once draining or at end of stream."""
        if self.draining:
            return None
        with trio.CancelScope() as scope:
            self._waiting.add(scope)
            try:
                data = await stream.receive_some(RECEIVE_BYTES)
            finally:
                self._waiting.discard(scope)
        if scope.cancelled_caught or not data:
            return None
        return bytes(data)


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
    reader = FrameReader(broker.config.max_frame_bytes)
    try:
        while (data := await drain.receive(stream)) is not None:
            reader.feed(data)
            responses: list[bytes] = []
            failure = None
            try:
                for frame in reader.frames():
                    response = broker.answer(frame, session)
                    if inspect.isawaitable(response):
                        # A request that waits: what is already answered goes out first.
                        if responses:
                            try:
                                await stream.send_all(b"".join(responses))
                            except (trio.BrokenResourceError, trio.ClosedResourceError):
                                await _abandon(response)
                                raise
                            responses.clear()
                        response = await response
                    if response is not None:
                        responses.append(response)
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
            if responses:
                await stream.send_all(b"".join(responses))
            if failure is not None:
                break
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the client went away; nothing to answer
    finally:
        stats.connections -= 1
        await trio.aclose_forcefully(stream)
