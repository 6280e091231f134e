"""StreamsGroupDescribe: streams groups as `kafka-streams-groups --describe` shows them: their
topology, members, what each runs and what it is to run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...java_hashing import java_hash_order
from ...state.streams.assignor import TaskAssignment, Tasks
from ...state.streams.groups import ASSIGNOR_NAME, StreamsGroup
from ...state.streams.topology import TopicInfo
from ..common import (
    GROUP_OPERATIONS,
    NO_THROTTLE,
    authorized_operations,
    coordinated_elsewhere,
    counted,
)

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.STREAMS_GROUP_DESCRIBE


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.STREAMS_GROUP_DESCRIBE, request.header.api_version)
    body = request.body
    operations = authorized_operations(body.include_authorized_operations, GROUP_OPERATIONS)
    none_found = authorized_operations(False, GROUP_OPERATIONS)
    with_description = getattr(body, "include_topology_description", False)

    def described(group_id: str) -> Any:
        def refused(error: ErrorCode, message: str | None = None) -> Any:
            return make(
                types.DescribedGroup,
                error_code=counted(broker, error),
                error_message=message,
                group_id=group_id,
                group_state="",
                group_epoch=0,
                assignment_epoch=0,
                topology=None,
                members=(),
                authorized_operations=none_found,
                topology_description=None,
                topology_description_status=NOT_REQUESTED,
                assignor_name=None,
            )

        if not group_id:
            return refused(ErrorCode.invalid_group_id)
        if coordinated_elsewhere(broker, session, group_id):
            return refused(ErrorCode.not_coordinator)
        group = broker.streams_groups.get(group_id)
        if group is None:
            if group_id and (broker.groups.find(group_id) or broker.groups.share_group(group_id)):
                return refused(
                    ErrorCode.group_id_not_found, f"Group {group_id} is not a streams group."
                )
            return refused(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
        return make(
            types.DescribedGroup,
            error_code=ErrorCode.none,
            error_message=None,
            group_id=group_id,
            group_state=group.state,
            group_epoch=group.epoch,
            assignment_epoch=group.assignment_epoch,
            topology=_topology(types, group),
            members=tuple(_member(types, group, member) for member in group.members.values()),
            authorized_operations=operations,
            topology_description=None,
            topology_description_status=NOT_STORED if with_description else NOT_REQUESTED,
            assignor_name=ASSIGNOR_NAME,
        )

    return make(
        types.StreamsGroupDescribeResponse,
        throttle_time=NO_THROTTLE,
        # As Kafka: the ids it refuses as invalid first, then the others in the order asked.
        groups=tuple(described(group_id) for group_id in body.group_ids if not group_id)
        + tuple(described(group_id) for group_id in body.group_ids if group_id),
    )


NOT_REQUESTED = 0
NOT_STORED = 1
"""StreamsGroupDescribe v1's topology description status: a broker without a topology
description plugin (Kafka's default, and nullbroker) stores none."""


def _topology(types: Any, group: StreamsGroup) -> Any:
    """The group's topology as Kafka describes it: subtopologies by id, their topics sorted
    and, once the topics make it ready, the internal topics' partition counts as decided."""
    if group.topology is None:
        return None
    configured = group.configured
    sizes = configured.internal_partitions if configured and configured.ready else {}

    def info(topic: TopicInfo) -> Any:
        configs = dict(topic.configs)
        return make(
            types.TopicInfo,
            name=topic.name,
            partitions=sizes.get(topic.name, topic.partitions),
            replication_factor=topic.replication_factor,
            topic_configs=tuple(
                make(types.KeyValue, key=key, value=configs[key])
                for key in java_hash_order(configs)
            ),
        )

    def by_name(topics: tuple[TopicInfo, ...]) -> tuple[Any, ...]:
        return tuple(info(topic) for topic in sorted(topics, key=lambda topic: topic.name))

    return make(
        types.Topology,
        epoch=group.topology.epoch,
        subtopologies=tuple(
            make(
                types.Subtopology,
                subtopology_id=sub.subtopology_id,
                source_topics=tuple(sorted(sub.source_topics)),
                repartition_sink_topics=tuple(sorted(sub.repartition_sink_topics)),
                state_changelog_topics=by_name(sub.changelog_topics),
                repartition_source_topics=by_name(sub.repartition_source_topics),
            )
            for sub in sorted(group.topology.subtopologies, key=lambda sub: sub.subtopology_id)
        ),
    )


def _member(types: Any, group: StreamsGroup, member: Any) -> Any:
    return make(
        types.Member,
        member_id=member.member_id,
        member_epoch=member.epoch,
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        topology_epoch=member.topology_epoch,
        process_id=member.process_id,
        user_endpoint=None
        if member.user_endpoint is None
        else make(types.Endpoint, host=member.user_endpoint[0], port=member.user_endpoint[1]),
        client_tags=tuple(make(types.KeyValue, key=k, value=v) for k, v in member.client_tags),
        task_offsets=_offsets(types, member.task_offsets),
        task_end_offsets=_offsets(types, member.task_end_offsets),
        assignment=_assignment(types, member.owned),
        target_assignment=_assignment(
            types, group.target.get(member.member_id) or TaskAssignment()
        ),
        is_classic=False,
    )


def _assignment(types: Any, tasks: TaskAssignment) -> Any:
    return make(
        types.Assignment,
        active_tasks=_listed(types, tasks.active),
        standby_tasks=_listed(types, tasks.standby),
        warmup_tasks=_listed(types, tasks.warmup),
    )


def _listed(types: Any, tasks: Tasks) -> tuple[Any, ...]:
    return tuple(
        make(types.TaskIds, subtopology_id=subtopology, partitions=tuple(sorted(partitions)))
        for subtopology, partitions in sorted(tasks.items())
    )


def _offsets(types: Any, offsets: tuple[tuple[str, int, int], ...]) -> tuple[Any, ...]:
    return tuple(
        make(types.TaskOffset, subtopology_id=subtopology, partition=partition, offset=offset)
        for subtopology, partition, offset in offsets
    )
