"""Requests one worker sends to a node another worker serves (`--processes`, `--node-map`), as
Kafka's brokers send each other: a transaction coordinator's WriteTxnMarkers to the leaders
of the partitions the transaction wrote, a partition leader's or group coordinator's
AddPartitionsToTxn to the transaction's coordinator (KIP-890), a share group's coordinator's
questions to the leaders of its share partitions.

The request is a real Kafka frame. It goes over the worker's control channel to the
supervisor, which passes it to the node's worker; that worker answers it through its
dispatch, as if a client had sent it to the node, and the response frame comes back the same
way. Only transactions and share groups' offsets (their coordinator asks the leaders that
hold the share partitions) use it, never a request's common path.
"""

from __future__ import annotations

import logging
from itertools import count
from typing import TYPE_CHECKING, Any

import trio

from codec import decode_response, encode_request

from ..sessions import Endpoint, Session
from .channel import ControlChannel

if TYPE_CHECKING:
    from ..dispatch import Dispatch

log = logging.getLogger("nullbroker")

ANSWER_TIMEOUT_SECONDS = 30.0
"""How long a worker waits for another's answer before it takes none (Kafka's
request.timeout.ms for its inter-broker requests)."""


class InterBroker:
    """A worker's requests to other workers' nodes, and its answers to theirs."""

    def __init__(self, worker: int) -> None:
        self.worker = worker
        self.channel: ControlChannel | None = None
        self._waiting: dict[int, tuple[trio.Event, list[bytes | None]]] = {}
        self._ids = count()

    async def ask(self, node: int, body: Any) -> Any:
        """Send a request entity to `node`; its response entity, or None if the node's worker
        has gone or no answer came in ANSWER_TIMEOUT_SECONDS."""
        assert self.channel is not None, "a worker asks only once its channel is open"
        ask_id = next(self._ids)
        answered = trio.Event()
        reply: list[bytes | None] = []
        self._waiting[ask_id] = (answered, reply)
        try:
            frame = encode_request(body, ask_id, f"nullbroker-worker-{self.worker}")
            await self.channel.send("ask", node, ask_id, frame)
            with trio.move_on_after(ANSWER_TIMEOUT_SECONDS):
                await answered.wait()
        finally:
            del self._waiting[ask_id]
        if not reply or reply[0] is None:
            return None
        return decode_response(reply[0], body.__api_key__, body.__version__)

    def answered(self, ask_id: int, frame: bytes | None) -> None:
        """The answer to this worker's request `ask_id` (None: its node's worker has gone)."""
        waiting = self._waiting.get(ask_id)
        if waiting is not None:
            waiting[1].append(frame)
            waiting[0].set()

    async def answer(
        self, dispatch: Dispatch, origin: int, ask_id: int, node: int, frame: bytes
    ) -> None:
        """Answer worker `origin`'s request to `node`, one of this worker's, as the node
        answers a client."""
        assert self.channel is not None
        session = Session(f"worker-{origin}:0", Endpoint("", 0), node, inter_broker=True)
        response: Any = None
        try:
            response = dispatch.answer(frame, session)
            if response is not None and not isinstance(response, bytes | list):
                response = await response
        except Exception:  # answered as a gone node's: the asking worker retries or gives up
            log.exception("worker %d: a request from worker %d failed", self.worker, origin)
            response = None
        if isinstance(response, list):
            response = b"".join(response)
        await self.channel.send("answer", origin, ask_id, response)
