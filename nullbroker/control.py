"""The control channel between a cluster's controller and its worker processes (--processes).

Messages are tuples, pickled and length-prefixed, over a socketpair made before the workers
were forked. Nothing on a request's path uses it except the rare requests that change the
cluster (nullbroker.replication), so it favours plainness over speed.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

import trio

_LENGTH = struct.Struct(">I")


class ControlChannel:
    """Sends and receives whole messages on one stream; sending is safe from many tasks."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._stream = stream
        self._sending = trio.Lock()
        self._buffer = bytearray()

    async def send(self, *message: Any) -> None:
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        async with self._sending:
            await self._stream.send_all(_LENGTH.pack(len(payload)) + payload)

    async def receive(self) -> tuple[Any, ...] | None:
        """The next message, or None once the other end has closed."""
        while True:
            if len(self._buffer) >= _LENGTH.size:
                (length,) = _LENGTH.unpack_from(self._buffer)
                end = _LENGTH.size + length
                if len(self._buffer) >= end:
                    message = pickle.loads(self._buffer[_LENGTH.size : end])
                    del self._buffer[:end]
                    return tuple(message)
            try:
                data = await self._stream.receive_some(1 << 16)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return None
            if not data:
                return None
            self._buffer += data

    async def aclose(self) -> None:
        await self._stream.aclose()
