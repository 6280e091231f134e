"""The control channel between a cluster's supervisor and its worker processes (--processes,
--node-map).

Messages are tuples, pickled and length-prefixed, over a socketpair made before the workers
were forked, or a TCP connection from another host; they are unpickled allowing only the
broker's own types. Nothing on a request's path uses it except the rare requests that change the
cluster (nullbroker.workers.cluster_changes), so it favours plainness over speed.
"""

from __future__ import annotations

import io
import pickle
import socket
import struct
from typing import Any

import trio

_LENGTH = struct.Struct(">I")

# What a message may hold: plain containers and the broker's own accounts and state. A
# message from another host (--node-map) is unpickled with this list, so a stray client
# of the supervisor's port cannot make it build anything else.
_ALLOWED_BUILTINS = frozenset(("set", "frozenset", "bytearray", "bytes", "dict", "list"))
_ALLOWED_COLLECTIONS = frozenset(("deque", "Counter", "OrderedDict"))
_ALLOWED_MODULES = frozenset(
    (
        "nullbroker.stats",
        "nullbroker.workers.cluster_changes",
        "nullbroker.state.producers",
        # Transactions handed over: a coordinator's, and what a partition's log keeps.
        "nullbroker.state.transactions",
        # A group handed over carries its committed offsets (a classic, consumer or streams
        # group's members join again), a share group its members too.
        "nullbroker.state.groups.offsets",
        "nullbroker.state.share.groups",
        # A share partition handed over with its partition: its records' states.
        "nullbroker.state.share.partition",
    )
)


class _BrokerTypesOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (
            (module == "builtins" and name in _ALLOWED_BUILTINS)
            or (module == "collections" and name in _ALLOWED_COLLECTIONS)
            or (module in _ALLOWED_MODULES and not name.startswith("__"))
        ):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"a control message may not hold {module}.{name}")


def encode(*message: Any) -> bytes:
    """A message as sent: its length, then its pickle."""
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(payload)) + payload


def decode(payload: bytes | bytearray | memoryview) -> tuple[Any, ...]:
    return tuple(_BrokerTypesOnly(io.BytesIO(payload)).load())


def send_blocking(sock: socket.socket, *message: Any) -> None:
    """Send a message on a plain socket, before trio runs (a worker joining its cluster)."""
    sock.sendall(encode(*message))


def receive_blocking(sock: socket.socket) -> tuple[Any, ...] | None:
    """Receive a message on a plain socket; None if it closed first."""
    header = _receive_exactly(sock, _LENGTH.size)
    if header is None:
        return None
    payload = _receive_exactly(sock, _LENGTH.unpack(header)[0])
    return None if payload is None else decode(payload)


def _receive_exactly(sock: socket.socket, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


class ControlChannel:
    """Sends and receives whole messages on one stream; sending is safe from many tasks."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._stream = stream
        self._sending = trio.Lock()
        self._buffer = bytearray()

    async def send(self, *message: Any) -> None:
        data = encode(*message)
        async with self._sending:
            await self._stream.send_all(data)

    async def receive(self) -> tuple[Any, ...] | None:
        """The next message, or None once the other end has closed."""
        while True:
            if len(self._buffer) >= _LENGTH.size:
                (length,) = _LENGTH.unpack_from(self._buffer)
                end = _LENGTH.size + length
                if len(self._buffer) >= end:
                    message = decode(memoryview(self._buffer)[_LENGTH.size : end])
                    del self._buffer[:end]
                    return message
            try:
                data = await self._stream.receive_some(1 << 16)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return None
            if not data:
                return None
            self._buffer += data

    async def aclose(self) -> None:
        await self._stream.aclose()
