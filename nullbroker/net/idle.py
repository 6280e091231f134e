"""Connections that stay silent are closed (`--idle-timeout-ms`, Kafka's
`connections.max.idle.ms`, default 10 minutes), so clients that vanished without a word hold
no descriptor or buffer for long.

A connection counts its reads; a sweep every quarter of the timeout closes each one that read
nothing in five sweeps in a row, so a silent connection goes after between one and one and a
quarter timeouts. A connection whose request is held (a Fetch at the log end, a JoinGroup
waiting for its group) is waiting, not idle. The request path pays one increment per read;
nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import trio

from ..log_limit import RepeatLimitedLog
from ..stats import BrokerStats

if TYPE_CHECKING:
    from ..sessions import Session


class Wire(Protocol):
    """What the sweep sees of a connection (nullbroker.net.connection.Wire)."""

    holding: bool
    """Set while a request of the connection is held: it is not idle."""
    reads: int
    """Reads that brought bytes."""

    def stop(self) -> None: ...


IDLE = "IdleTimeout"
SWEEPS_PER_TIMEOUT = 4


@dataclass(slots=True)
class _Seen:
    session: Session
    reads: int = -1
    quiet_sweeps: int = 0


class IdleConnections:
    """Every open connection, and how long each has been silent, in sweeps."""

    def __init__(self, timeout_ms: int, stats: BrokerStats, warnings: RepeatLimitedLog) -> None:
        self.timeout_ms = timeout_ms
        """0: never close a connection for being idle."""
        self._stats = stats
        self._warnings = warnings
        self._connections: dict[Wire, _Seen] = {}

    def add(self, wire: Wire, session: Session) -> None:
        self._connections[wire] = _Seen(session)

    def discard(self, wire: Wire) -> None:
        self._connections.pop(wire, None)

    async def run(self) -> None:
        """Sweep until cancelled (a timeout of 0 never sweeps)."""
        if not self.timeout_ms:
            await trio.sleep_forever()
        while True:
            await trio.sleep(self.timeout_ms / 1000 / SWEEPS_PER_TIMEOUT)
            self.sweep()

    def sweep(self) -> None:
        for wire, seen in list(self._connections.items()):
            if wire.holding or wire.reads != seen.reads:
                seen.reads = wire.reads
                seen.quiet_sweeps = 0
                continue
            seen.quiet_sweeps += 1
            if seen.quiet_sweeps > SWEEPS_PER_TIMEOUT:
                self._close(wire, seen.session)

    def _close(self, wire: Wire, session: Session) -> None:
        self.discard(wire)
        self._stats.connections_idle_closed += 1
        self._warnings.info(
            session.host,
            IDLE,
            "closing connection from %s: nothing read for %d ms (--idle-timeout-ms)",
            session.peer,
            self.timeout_ms,
        )
        wire.stop()
