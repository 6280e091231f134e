"""A plain-TCP connection's reader in C: the Produce lane's way in from the socket.

The host loop (host_loop.py) calls a hosted connection's handler on each readable event.
For a connection the Produce lane may serve (handlers/produce_lane.py: C built and switched
on, no SASL), that handler is this reader, in nullbroker/net/_lane_reader.c: it reads into
the loop's one receive buffer, hands the read to the lane through the lane's C interface
(handlers/produce_lane.h, a function pointer: no Python call per request), and writes the
answers, so a producer waiting on its acks costs no Python at all. The reader owns what is
the connection layer's (the read size, the reads counted for the idle sweep, the write, the
way back to the connection's Python); the lane owns the request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from codec import native

from ..handlers.produce_lane import c_interface
from .host_loop import FIRST_RECEIVE_BYTES, RECEIVE_BYTES, SHRINK_AFTER_READS

if TYPE_CHECKING:
    from ..handlers.produce_lane import Lane
    from .host_loop import ReceiveBuffer


class Reader(Protocol):
    """A hosted connection's handler on the host loop's epoll (`reader` makes one)."""

    ready: int
    """Set by the connection: whether the next read is the reader's (nothing of a frame
    buffered, no read budget held), or the connection's own `on_readable`'s."""

    def __call__(self, events: int) -> None: ...


C_MODULE = "nullbroker.net._lane_reader"


def built() -> bool:
    """Whether the reader's C module is built and switched on."""
    return native.load_module(C_MODULE) is not None


def reader(
    lane: Lane,
    fd: int,
    receive_buffer: ReceiveBuffer,
    wire: object,
    node_id: int,
    on_readable: Callable[[int], None],
    after_read: Callable[[int, int, bytes | None, Exception | None], None],
) -> Reader | None:
    """The C reader of a plain-TCP connection the host loop serves: on each readable event it
    reads into the loop's receive buffer, answers the read's requests through the lane and
    writes the answers, without Python, when the read holds whole Produce requests the lane
    takes and the socket takes the answers at once (the common case, a wake-up per request
    for a producer waiting on its acks). Anything else goes to the connection's Python:
    `on_readable(events)` while `ready` is false, `after_read(size, answered, answers,
    error)` to take a read on from its first request the lane did not answer. None where
    the reader was not built though the lane was (each C module builds or fails alone): the
    connection's Python reads then, as it does for SASL."""
    _lane_reader = native.load_module(C_MODULE)
    if _lane_reader is None:
        return None
    made: Reader = _lane_reader.Reader(
        c_interface(),
        lane,
        fd,
        receive_buffer,
        wire,
        node_id,
        on_readable,
        after_read,
        FIRST_RECEIVE_BYTES,
        RECEIVE_BYTES,
        SHRINK_AFTER_READS,
    )
    return made
