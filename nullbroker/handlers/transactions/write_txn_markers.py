"""WriteTxnMarkers: a transaction coordinator's commit or abort markers, written by the
partitions' leader, as one Kafka broker asks another. nullbroker's own coordinator sends it to
the workers that lead a transaction's partitions (`--processes`: workers.transaction_markers);
a client may send it too, as to Kafka (whose authorizer would want ClusterAction)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...clock import now_ms
from ...cluster.nodes import OFFSETS_TOPIC
from ...java_hashing import java_hash_order, java_topic_partition_order
from ...state.transactions import Marker
from ..common import counted, led_elsewhere

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.WRITE_TXN_MARKERS
TRANSACTIONS_V2 = 2


def handle(broker: Broker, request: Request, session: Session) -> Any:
    """Each marker written into each partition this node leads: in a partition of
    __consumer_offsets, the end of the offsets the transaction staged for its groups."""
    types = response_module(ApiKey.WRITE_TXN_MARKERS, request.header.api_version)
    written_ms = now_ms()
    return make(
        types.WriteTxnMarkersResponse,
        markers=tuple(
            make(
                types.WritableTxnMarkerResult,
                producer_id=asked.producer_id,
                topics=_as_kafka_lists(types, _written(broker, session, asked, written_ms)),
            )
            for asked in request.body.markers
        ),
    )


def _written(
    broker: Broker, session: Session, asked: Any, written_ms: int
) -> dict[tuple[str, int], ErrorCode]:
    """One marker's result in each partition it names, in the order Kafka records them: the
    partitions it does not know, refused before the append, then the others."""
    marker = Marker(asked.producer_id, asked.producer_epoch, asked.transaction_result)
    unknown: dict[tuple[str, int], ErrorCode] = {}
    appended: dict[tuple[str, int], ErrorCode] = {}
    for asked_topic in asked.topics:
        name = asked_topic.name
        topic = broker.topics.get(name)
        followed = led_elsewhere(broker, session.node_id, topic)
        for index in asked_topic.partition_indexes:
            if topic is None or not 0 <= index < len(topic.partitions):
                unknown[name, index] = counted(broker, ErrorCode.unknown_topic_or_partition)
                continue
            if index in followed:
                error = ErrorCode.not_leader_or_follower
            elif name != OFFSETS_TOPIC and (
                fenced := _fenced(broker, marker, name, index, asked_transaction_version(asked))
            ):
                error = fenced
            else:
                broker.write_marker(name, index, marker, written_ms)
                error = ErrorCode.none
            appended[name, index] = counted(broker, error)
    return unknown | appended


def _as_kafka_lists(types: Any, errors: dict[tuple[str, int], ErrorCode]) -> tuple[Any, ...]:
    """A marker's results as Kafka's response lists them: its errors are a map of topic
    partitions, turned into a map of topics (both Java HashMaps), iterated."""
    by_topic: dict[str, list[Any]] = {}
    for topic, index in java_topic_partition_order(errors):
        by_topic.setdefault(topic, []).append(
            make(
                types.WritableTxnMarkerPartitionResult,
                partition_index=index,
                error_code=errors[topic, index],
            )
        )
    return tuple(
        make(types.WritableTxnMarkerTopicResult, name=name, partitions=tuple(by_topic[name]))
        for name in java_hash_order(by_topic)
    )


def asked_transaction_version(asked: Any) -> int:
    """The marker's transaction version (v2+; 0 before, as Kafka reads v1)."""
    return getattr(asked, "transaction_version", 0)


def _fenced(
    broker: Broker, marker: Marker, topic: str, index: int, transaction_version: int
) -> ErrorCode | None:
    """Why the producer's state on the partition refuses the marker, as Kafka answers it: an
    epoch older than the producer's last there fails the append (UNKNOWN_SERVER_ERROR, as
    Kafka 4.4 reports it); with transactions v2 a marker must carry a newer epoch than the
    producer's batches (its end bumped it), the same one is INVALID_PRODUCER_EPOCH."""
    epoch = broker.producers.epoch_on(marker.producer_id, topic, index)
    if epoch is None:
        return None
    if marker.epoch < epoch:
        return ErrorCode.unknown_server_error
    if transaction_version >= TRANSACTIONS_V2 and marker.epoch == epoch:
        return ErrorCode.invalid_producer_epoch
    return None
