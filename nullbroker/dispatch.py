"""Requests answered against the broker's state: decode, dispatch to the handler of the API,
account, encode. Free of IO: the connection layer (nullbroker.net) hands each request frame
to `Dispatch.answer` and sends what it returns."""

from __future__ import annotations

import struct
import time
from collections.abc import Awaitable, Collection
from types import CoroutineType
from typing import TYPE_CHECKING, Any

import trio

from codec import (
    TELEMETRY_KEYS,
    ApiKey,
    Request,
    RequestHeader,
    decode_request,
    encode_api_versions_fallback,
    encode_response,
    encode_response_parts,
    peek_header,
)
from codec.framing import Buffer

from .broker import Broker
from .handlers import SERVED_KEYS, handler_table, served_ranges
from .handlers.produce_lane import for_broker
from .sessions import Session

if TYPE_CHECKING:
    from .handlers.produce_lane import Lane

_KEY_VERSION = struct.Struct(">hh")
PRODUCE = int(ApiKey.PRODUCE)
API_VERSIONS = int(ApiKey.API_VERSIONS)
"""The keys `Dispatch.answer` compares every request's with, bound once as plain ints: an
IntEnum member's lookup and compare cost several times an int global's."""

Answer = bytes | list[Buffer] | None | Awaitable[bytes | list[Buffer] | None]
"""A response frame (one byte string, or buffers to send one after the other), none, or
an awaitable of either."""


class Dispatch:
    """The handler table of one broker and the way of a request through it."""

    def __init__(self, broker: Broker, keys: Collection[int] = SERVED_KEYS) -> None:
        """Serve the API `keys` (a worker of several processes serves a part of them)."""
        self.broker = broker
        self.handlers = handler_table(keys)
        broker.served = served_ranges(self.handlers)
        broker.advertised = tuple(
            api
            for api in broker.served.values()
            if broker.config.client_telemetry or api.key not in TELEMETRY_KEYS
        )
        self._api_versions = broker.served[API_VERSIONS]
        self.produce_lane: Lane | None = for_broker(broker, broker.served[PRODUCE])
        """The common Produce request answered whole in C (also by the host loop's C reader,
        before any Python); None: the Python path answers every request."""

    def answer(self, frame: memoryview | bytes, session: Session) -> Answer:
        """The size-prefixed response frame to one request frame, or None (acks=0), or,
        for a request that waits (a Fetch held at the log end, a JoinGroup), an awaitable
        of either.

        Raises codec.ProtocolError for a request that must close the connection. The
        latency accounted is the broker's whole cost: decode, handle (and wait), encode.
        """
        started = time.perf_counter_ns()
        key, version = _KEY_VERSION.unpack_from(frame) if len(frame) >= 4 else (-1, -1)
        if session.sasl is not None:
            # A SASL listener lets through what its connection's state admits.
            from .handlers.sasl.gate import gate

            reply = gate(self.broker, frame, key, version, session)
            if reply is not None:
                return reply
        if key == PRODUCE and self.produce_lane is not None:
            response = self.produce_lane.answer(frame, session.node_id)
            if response is not None:  # answered whole in C, and accounted
                return response
        broker = self.broker
        broker.stats.node_requests[session.node_id] += 1
        if key == API_VERSIONS and version > self._api_versions.max_version:
            peeked = peek_header(frame)
            broker.stats.error("unsupported_version")
            response = encode_api_versions_fallback(peeked.correlation_id, self._api_versions)
            broker.stats.served(peeked.api_name, time.perf_counter_ns() - started)
            return response
        request = decode_request(frame, broker.served)
        header = request.header
        body = self.handlers[header.api_key](broker, request, session)
        if broker.faults.active:
            delay = broker.faults.latency_s(header.api_name, session.node_id)
            if delay:
                return self._answer_after(delay, request, body, started)
        if type(body) is CoroutineType:  # every handler that waits is an async def
            return self.answer_later(request, body, started)
        broker.stats.served(header.api_name, time.perf_counter_ns() - started)
        return None if body is None else _frame(header, body)

    async def _answer_after(
        self, seconds: float, request: Request, body: Any, started: int
    ) -> bytes | list[Buffer] | None:
        """The answer, `seconds` late (a latency fault), accounted as a held request.

        An answer already made is wrapped only after the delay, and a held handler's
        coroutine is closed if the delay is cancelled (the client left): either left
        unawaited, Python warns "coroutine was never awaited" when it is collected."""
        try:
            await trio.sleep(seconds)
        except BaseException:
            if type(body) is CoroutineType:
                body.close()
            raise
        pending = body if type(body) is CoroutineType else _ready(body)
        return await self.answer_later(request, pending, started)

    async def answer_later(
        self, request: Request, pending: Awaitable[Any], started: int
    ) -> bytes | list[Buffer] | None:
        """The frame of a response that comes once `pending` is done, accounted apart from
        the wait."""
        # The broker's own time is before the hold and after it; the hold itself (the
        # wait, and rebuilding the answer when woken) is accounted apart, so a Fetch held
        # for 500 ms does not read as a 500 ms request.
        held_from = time.perf_counter_ns()
        body = await pending
        held_until = time.perf_counter_ns()
        frame = None if body is None else _frame(request.header, body)
        held = held_until - held_from
        api = self.broker.stats.served(
            request.header.api_name, time.perf_counter_ns() - started - held
        )
        api.held.observe(held)
        return frame


async def _ready(body: Any) -> Any:
    return body


def _frame(header: RequestHeader, body: Any) -> bytes | list[Buffer]:
    """The response frame: one byte string, or, for a body of buffers (a Fetch response
    around its record batches), buffers the connection writes with writev, uncopied."""
    if type(body) is list:
        return encode_response_parts(header, body)
    return encode_response(header, body)
