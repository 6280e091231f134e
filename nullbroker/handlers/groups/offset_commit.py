"""OffsetCommit: offsets committed to a group of either protocol, or by a consumer outside
group management. Unknown topics and partitions are answered before the coordinator is
asked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...cluster.nodes import NO_LEADER_EPOCH
from ...state.groups.model import MAX_OFFSET_METADATA_BYTES
from ...state.groups.offsets import CommittedOffset
from ...state.topics import Topic
from ..common import NO_THROTTLE, coordinated_elsewhere, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.OFFSET_COMMIT


def handle(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    types = response_module(ApiKey.OFFSET_COMMIT, version)
    body = request.body
    resolved = [(asked, *_requested_topic(broker, asked)) for asked in body.topics]
    # As Kafka: unknown topics and partitions are answered without asking the coordinator,
    # so a request with nothing valid in it creates no group.
    group_error, group = ErrorCode.none, None
    if coordinated_elsewhere(broker, session, body.group_id):
        group_error = ErrorCode.not_coordinator
    elif any(
        topic is not None and has_partition(topic, partition.partition_index)
        for asked, topic, _ in resolved
        for partition in asked.partitions
    ):
        group_error, group = broker.groups.validate_commit(
            body.group_id,
            body.generation_id_or_member_epoch,
            body.member_id,
            getattr(body, "group_instance_id", None),
            version,
            partitions=[
                (topic.name, partition.partition_index)
                for asked, topic, _ in resolved
                if topic is not None
                for partition in asked.partitions
                if has_partition(topic, partition.partition_index)
            ],
        )
    topics = []
    for asked, topic, missing in resolved:
        partitions = []
        for partition in asked.partitions:
            index = partition.partition_index
            metadata = partition.committed_metadata or ""
            if topic is None:
                error = missing
            elif not has_partition(topic, index):
                error = ErrorCode.unknown_topic_or_partition
            elif group is None:
                error = group_error
            elif len(metadata) > MAX_OFFSET_METADATA_BYTES:
                error = ErrorCode.offset_metadata_too_large
            else:
                broker.groups.commit(
                    group,
                    topic.name,
                    index,
                    CommittedOffset(
                        partition.committed_offset,
                        getattr(partition, "committed_leader_epoch", NO_LEADER_EPOCH),
                        metadata,
                    ),
                )
                error = ErrorCode.none
            partitions.append(
                make(
                    types.OffsetCommitResponsePartition,
                    partition_index=index,
                    error_code=counted(broker, error),
                )
            )
        topics.append(
            make(
                types.OffsetCommitResponseTopic,
                name=getattr(asked, "name", None),
                topic_id=getattr(asked, "topic_id", None),
                partitions=tuple(partitions),
            )
        )
    return make(types.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


def _requested_topic(broker: Broker, asked: Any) -> tuple[Topic | None, ErrorCode]:
    """The topic an offsets request names (by name, or by id from OffsetCommit and
    OffsetFetch v10), and the error for it when it does not exist."""
    name = getattr(asked, "name", None)
    if name is not None:
        return broker.topics.get(name), ErrorCode.unknown_topic_or_partition
    return broker.topics.by_id(asked.topic_id), ErrorCode.unknown_topic_id


def has_partition(topic: Topic, index: int) -> bool:
    return 0 <= index < len(topic.partitions)
