"""What the brokers say, asked from the driver: which partitions a subscription covers and
their earliest and latest offsets (ListOffsets), through one confluent-kafka AdminClient."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from .options import EARLIEST, LATEST, PartitionKey, Subscription

REQUEST_TIMEOUT_S = 60.0


class Cluster:
    """The driver's view of the brokers; created on first use, never pickled."""

    def __init__(self, client_config: Mapping[str, object]) -> None:
        self._admin = AdminClient(dict(client_config))

    def partitions(self, subscription: Subscription) -> list[PartitionKey]:
        """The partitions `subscription` covers now (topics with a metadata error have none)."""
        metadata = self._admin.list_topics(timeout=REQUEST_TIMEOUT_S)
        counts = {
            name: len(topic.partitions)
            for name, topic in metadata.topics.items()
            if topic.error is None
        }
        return subscription.partitions(counts)

    def earliest(self, partitions: Iterable[PartitionKey]) -> dict[PartitionKey, int]:
        return self._list_offsets(partitions, EARLIEST)

    def latest(self, partitions: Iterable[PartitionKey]) -> dict[PartitionKey, int]:
        return self._list_offsets(partitions, LATEST)

    def resolve(self, wanted: Mapping[PartitionKey, int]) -> dict[PartitionKey, int]:
        """`wanted` with EARLIEST and LATEST replaced by the partitions' current offsets."""
        resolved = dict(wanted)
        for sentinel in (EARLIEST, LATEST):
            asked = [key for key, offset in wanted.items() if offset == sentinel]
            resolved.update(self._list_offsets(asked, sentinel))
        return resolved

    def _list_offsets(
        self, partitions: Iterable[PartitionKey], which: int
    ) -> dict[PartitionKey, int]:
        spec = OffsetSpec.earliest() if which == EARLIEST else OffsetSpec.latest()
        request = {TopicPartition(topic, partition): spec for topic, partition in partitions}
        if not request:
            return {}
        futures = self._admin.list_offsets(request, request_timeout=REQUEST_TIMEOUT_S)
        offsets: dict[PartitionKey, int] = {}
        for topic_partition, future in futures.items():
            try:
                offsets[(topic_partition.topic, topic_partition.partition)] = future.result().offset
            except KafkaException as error:
                name = f"{topic_partition.topic}-{topic_partition.partition}"
                problem = f"pykafka: could not list the offsets of {name}: {error}"
                raise RuntimeError(problem) from error
        return offsets
