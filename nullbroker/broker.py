"""The broker's state and request dispatch, free of IO: one object the connections share."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from codec import (
    API_VERSIONS_KEY,
    ApiRange,
    Request,
    decode_request,
    encode_api_versions_fallback,
    encode_response,
    peek_header,
)

from .config import Config
from .producers import ProducerRegistry
from .stats import BrokerStats
from .topics import TopicRegistry

log = logging.getLogger("nullbroker")

NODE_ID = 0


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int


@dataclass(slots=True)
class Session:
    """What a handler may need to know about the connection a request came on."""

    peer: str
    advertised: Endpoint
    """The address clients are told to reach this node at (Metadata, FindCoordinator)."""


Handler = Callable[["Broker", Request, Session], Any]
"""A request handler: returns a kio response entity, pre-encoded body bytes, or None for
no response (Produce with acks=0)."""


class Broker:
    """Topics, producers, accounts and the handler table, shared by every connection."""

    def __init__(self, config: Config) -> None:
        from .handlers import HANDLERS, served_ranges

        self.config = config
        self.node_id = NODE_ID
        self.cluster_id = config.cluster_id
        self.stats = BrokerStats()
        self.topics = TopicRegistry(
            self.stats.partition_counters, config.partitions, config.auto_create
        )
        self.producers = ProducerRegistry()
        self.handlers: dict[int, Handler] = HANDLERS
        self.served: dict[int, ApiRange] = served_ranges()
        self._api_versions = self.served[API_VERSIONS_KEY]

    def answer(self, frame: memoryview | bytes, session: Session) -> bytes | None:
        """The size-prefixed response frame to one request frame, or None (acks=0).

        Raises codec.ProtocolError for a request that must close the connection. The
        latency accounted is the broker's whole cost: decode, handle and encode.
        """
        started = time.perf_counter_ns()
        peeked = peek_header(frame)
        if peeked.api_key == API_VERSIONS_KEY and peeked.api_version > self._api_versions.max_version:
            response: bytes | None = encode_api_versions_fallback(
                peeked.correlation_id, self._api_versions
            )
            self.stats.error("unsupported_version")
        else:
            request = decode_request(frame, self.served)
            body = self.handlers[request.header.api_key](self, request, session)
            response = None if body is None else encode_response(request.header, body)
        api = self.stats.api(peeked.api_name)
        api.requests += 1
        api.latency.observe(time.perf_counter_ns() - started)
        return response
