"""What every connection of one broker shares: the dispatch that answers its requests, and
the connection layer's own objects, which the broker's state knows nothing of (the idle
sweep, the read budget, the SASL users, the warnings log)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .idle import IdleConnections
from .read_budget import ReadBudget

if TYPE_CHECKING:
    from ..broker import Broker
    from ..dispatch import Dispatch
    from ..handlers.produce_lane import Lane
    from ..stats import BrokerStats

log = logging.getLogger("nullbroker")


class Shared:
    """One broker's connection layer."""

    def __init__(self, dispatch: Dispatch) -> None:
        self.dispatch = dispatch
        self.broker: Broker = dispatch.broker
        config = self.broker.config
        self.answer = dispatch.answer
        """Each request frame's answer (nullbroker.dispatch.Dispatch.answer)."""
        self.warnings = self.broker.warnings
        """Where connections log what goes wrong with them, a line per kind and peer (the
        broker's log: its handlers log there too)."""
        if config.users:
            self.broker.sasl_users  # noqa: B018 -- read now: a bad file stops the start
        self.idle_connections = IdleConnections(config.idle_timeout_ms, self.stats, self.warnings)
        """Every open connection, closed after --idle-timeout-ms of silence."""
        self.read_budget = ReadBudget(config.max_buffered_bytes, self.stats)
        """What large requests being read may hold, over all connections."""
        self.max_request_bytes = config.max_request_bytes
        """A request announced larger closes its connection: it could never be read."""

    @property
    def stats(self) -> BrokerStats:
        # Looked up each time: a worker of several processes swaps its accounts while it
        # applies another worker's cluster change (nullbroker.workers.cluster_changes).
        return self.broker.stats

    @property
    def produce_lane(self) -> Lane | None:
        return self.dispatch.produce_lane
