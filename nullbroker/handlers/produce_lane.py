"""The Produce lane: the common Produce request answered whole in C.

A producer sends the same request over and over: a known topic, one batch per partition,
the next sequence numbers, acks. nullbroker/handlers/_produce_lane.c answers such a request from
the bytes of a read (decode, the null sink's checks, offsets, counters, sequences, the
latency histogram, the response) without running Python, which cost more than the rest
of the request's way through the broker (perf/README.md, "The request path"). It takes a
request only when handlers/produce.py would take it down its common path, decides so
before it changes anything, and otherwise leaves the request to the Python path, which
answers it as it answers everything else: an error, a fault, a first batch, a duplicate,
a transaction, --retain. Both act on one broker state.

The lane serves the plain-TCP connections the host loop reads (nullbroker/net/
hosted_connection.py, whose C reader, nullbroker/net/lane_reader.py, hands it each read
through `c_interface()`) and dispatch.py, on one node or several (it asks the cluster which
partitions a node leads, as the handler does), without SASL (whose checks are Python's);
NULLBROKER_NATIVE=off or a build without a compiler leaves it out, as the C decoders.

What the C reads and writes of the broker's objects (topics, partitions, producers'
sequences, faults, the accounts) and what the reader calls in the lane are named once, in
handlers/produce_lane.h; tests/handlers/test_lane_contract.py checks that table against the
Python objects, and that the lane accounts a request as dispatch does
(stats.BrokerStats.served).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from codec import native
from codec.crc import crc32c

from ..state.producers import RecentBatch
from ..stats import LATENCY_BOUNDS_NS

if TYPE_CHECKING:
    from codec import ApiRange

    from ..broker import Broker


class Lane(Protocol):
    def answer_prefix(self, view: memoryview, node_id: int) -> tuple[int, bytes | None]:
        """The read's leading request frames (size prefixes included) the lane answers:
        how many bytes they take, and their response frames, one after the other."""

    def answer(self, frame: memoryview | bytes, node_id: int) -> bytes | None:
        """One request frame's response frame, or None: the Python path's request."""


def c_interface() -> object:
    """The lane's C interface (handlers/produce_lane.h), a capsule: what the connection
    layer's C reader (nullbroker/net/lane_reader.py) calls the lane through, without a Python
    call per request. Only asked for where `for_broker` made a lane, so the module is built."""
    from . import _produce_lane

    return _produce_lane.c_api


C_MODULE = "nullbroker.handlers._produce_lane"


def built() -> bool:
    """Whether the lane's C module is built and switched on."""
    return native.load_module(C_MODULE) is not None


def for_broker(broker: Broker, served: ApiRange) -> Lane | None:
    """The broker's lane for the Produce versions `served`, or None where the Python path
    serves every request: C switched off or not built."""
    _produce_lane = native.load_module(C_MODULE)
    if _produce_lane is None:
        return None
    lane: Lane = _produce_lane.Lane(
        broker.topics.name_table(),
        broker.topics.id_table(),
        broker.producers.sequences_table(),
        RecentBatch,
        broker.stats,
        broker.faults,
        broker.log_growth,
        crc32c if broker.config.verify_crc else None,
        broker.cluster if broker.cluster.size > 1 else None,
        served.min_version,
        served.max_version,
        broker.config.max_request_bytes,
        LATENCY_BOUNDS_NS,
    )
    return lane
