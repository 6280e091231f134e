"""A transaction coordinator's markers for the partitions other workers lead (`--processes`,
`--node-map`), sent as Kafka's coordinator sends them: one WriteTxnMarkers request per leader,
retried at the partition's new leader when leadership has moved (NOT_LEADER_OR_FOLLOWER, or a
leader whose worker has gone quiet), until every marker is written.

The transaction is PrepareCommit or PrepareAbort meanwhile (nullbroker.state.transactions),
and its EndTxn is answered once the last marker is in.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio
from kio.schema.errors import ErrorCode
from kio.schema.write_txn_markers.v1 import request as markers_request

from codec.entities import make

from ..handlers.common import by_topic

if TYPE_CHECKING:
    from ..broker import Broker
    from ..state.transactions import Marker

log = logging.getLogger("nullbroker")

RETRY_SECONDS = 0.05
"""The pause before markers refused as led elsewhere are sent to the leader again: a
leadership change reaches every worker within a round of the supervisor's channel."""
GIVE_UP_SECONDS = 120.0
"""How long a marker is retried before it is given up (logged): longer than any `down` or
`move` fault a test holds a leader away for."""
RETRIED = frozenset((ErrorCode.not_leader_or_follower,))
"""Refusals after which a marker goes to the partition's leader again."""
WRITTEN_OR_GONE = frozenset((ErrorCode.none, ErrorCode.unknown_topic_or_partition))
"""Answers that end a marker's way: written, or its topic deleted since."""


async def deliver_markers(
    broker: Broker,
    partitions: list[tuple[str, int]],
    marker: Marker,
    written_ms: int,
) -> None:
    """Write `marker` into `partitions`, led by other workers when the transaction ended."""
    remaining = partitions
    give_up = trio.current_time() + GIVE_UP_SECONDS
    while True:
        by_node: dict[int, list[tuple[str, int]]] = {}
        again: list[tuple[str, int]] = []
        for topic, index in remaining:
            if broker.leads_here(topic, index):  # leadership came here meanwhile
                broker.write_marker(topic, index, marker, written_ms)
                continue
            node = broker.cluster.leader(topic, index)
            if broker.serves_node(node):  # here, its state on its way: wait for it
                again.append((topic, index))
            else:
                by_node.setdefault(node, []).append((topic, index))
        async with trio.open_nursery() as nursery:
            for node, led in by_node.items():
                nursery.start_soon(_send, broker, node, led, marker, again)
        if not again:
            return
        if trio.current_time() >= give_up:
            log.warning(
                "gave up writing the %s marker of producer %d into %s after %.0f s",
                "commit" if marker.commit else "abort",
                marker.producer_id,
                ", ".join(f"{topic}-{index}" for topic, index in again),
                GIVE_UP_SECONDS,
            )
            return
        remaining = again
        await trio.sleep(RETRY_SECONDS)


async def _send(
    broker: Broker,
    node: int,
    partitions: list[tuple[str, int]],
    marker: Marker,
    again: list[tuple[str, int]],
) -> None:
    """One WriteTxnMarkers request to `node`; the partitions to try again go to `again`."""
    topics = by_topic(partitions)
    request = make(
        markers_request.WriteTxnMarkersRequest,
        markers=(
            make(
                markers_request.WritableTxnMarker,
                producer_id=marker.producer_id,
                producer_epoch=marker.epoch,
                transaction_result=marker.commit,
                topics=tuple(
                    make(
                        markers_request.WritableTxnMarkerTopic,
                        name=name,
                        partition_indexes=tuple(indexes),
                    )
                    for name, indexes in topics.items()
                ),
                coordinator_epoch=0,
            ),
        ),
    )
    response = await broker.ask_node(node, request)
    if response is None:  # its worker has gone, or is slow: ask the leader again
        again.extend(partitions)
        return
    for result in response.markers:
        for topic in result.topics:
            for partition in topic.partitions:
                error = partition.error_code
                if error in RETRIED:
                    again.append((topic.name, partition.partition_index))
                elif error not in WRITTEN_OR_GONE:
                    log.warning(
                        "node %d refused the marker of producer %d for %s-%d: %s",
                        node,
                        marker.producer_id,
                        topic.name,
                        partition.partition_index,
                        error.name,
                    )
