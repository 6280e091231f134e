"""StreamsGroupHeartbeat: a Kafka Streams member's join (with its topology), heartbeat and leave
in one request, answered with its tasks, the group's statuses and, for members serving
interactive queries, where every task runs (nullbroker.state.streams.groups)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...state.groups.consumer import LEAVE_EPOCH, STATIC_LEAVE_EPOCH, HeartbeatError
from ...state.groups.model import Group
from ...state.streams.assignor import Tasks
from ...state.streams.groups import Answer, Heartbeat
from ...state.streams.topology import Subtopology, TopicInfo, Topology
from ...topic_names import invalid_name_reason
from ..common import NO_THROTTLE, client_host, coordinated_elsewhere, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.STREAMS_GROUP_HEARTBEAT

ACCEPTABLE_RECOVERY_LAG = 10000
"""Kafka's answer while the task assignor takes no warm-up tasks (its default)."""
TASK_OFFSET_INTERVAL_MS = 60000
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state", "__share_group_state")


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.STREAMS_GROUP_HEARTBEAT, request.header.api_version)
    body = request.body

    def refused(error: ErrorCode, message: str | None = None) -> Any:
        fields = {
            **_defaults(types),
            "error_code": counted(broker, error),
            "error_message": message,
        }
        return make(types.StreamsGroupHeartbeatResponse, **fields)

    refused_why = refusal(body)
    if refused_why is not None:
        return refused(*refused_why)
    if coordinated_elsewhere(broker, session, body.group_id):
        return refused(ErrorCode.not_coordinator)
    if body.topology is not None and body.topology.epoch < 0:
        return refused(ErrorCode.unknown_server_error)
    groups = broker.streams_groups
    if body.group_id not in groups.groups:
        other = broker.groups.find(body.group_id)
        if other is not None:
            # An empty classic group of that id gives way, its committed offsets kept (an
            # application moving to the streams protocol offline); any other is refused.
            if other.members or body.member_epoch != 0 or not isinstance(other, Group):
                return refused(
                    ErrorCode.group_id_not_found,
                    f"Group {body.group_id} is not a streams group.",
                )
            groups.adopt(body.group_id, broker.groups.take_if_empty(body.group_id) or {})
        elif broker.groups.share_group(body.group_id) is not None:
            return refused(
                ErrorCode.group_id_not_found, f"Group {body.group_id} is not a streams group."
            )
    beat = Heartbeat(
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=body.member_epoch,
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=int(body.rebalance_timeout.total_seconds() * 1000),
        topology=_topology(body.topology),
        active=_tasks(body.active_tasks),
        standby=_tasks(body.standby_tasks),
        warmup=_tasks(body.warmup_tasks),
        process_id=body.process_id,
        user_endpoint=None
        if body.user_endpoint is None
        else (body.user_endpoint.host, int(body.user_endpoint.port)),
        client_tags=None
        if body.client_tags is None
        else tuple((tag.key, tag.value) for tag in body.client_tags),
        task_offsets=_offsets(body.task_offsets),
        task_end_offsets=_offsets(body.task_end_offsets),
        shutdown_application=body.shutdown_application,
        endpoint_epoch=body.endpoint_information_epoch,
        client_id=request.header.client_id or "",
        client_host=client_host(session),
    )
    try:
        answer = groups.heartbeat(beat)
    except HeartbeatError as error:
        return refused(error.code, str(error) or None)
    return _answer(types, groups.settings(body.group_id).heartbeat_interval_ms, answer)


def _answer(types: Any, heartbeat_interval_ms: int, answer: Answer) -> Any:
    member, assignment = answer.member, answer.assignment
    if member.epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        # As Kafka answers a leave: the member and its epoch, every other field a default.
        return make(
            types.StreamsGroupHeartbeatResponse,
            **{**_defaults(types), "member_id": member.member_id, "member_epoch": member.epoch},
        )
    return make(
        types.StreamsGroupHeartbeatResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        member_id=member.member_id,
        member_epoch=member.epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=heartbeat_interval_ms),
        acceptable_recovery_lag=acceptable_recovery_lag(types, ACCEPTABLE_RECOVERY_LAG),
        task_offset_interval=datetime.timedelta(milliseconds=TASK_OFFSET_INTERVAL_MS),
        status=tuple(
            make(types.Status, status_code=status.code, status_detail=status.detail)
            for status in answer.statuses
        ),
        active_tasks=None if assignment is None else _listed(types, assignment.active),
        standby_tasks=None if assignment is None else _listed(types, assignment.standby),
        warmup_tasks=None if assignment is None else _listed(types, assignment.warmup),
        topology_description_required=False,
        endpoint_information_epoch=answer.endpoint_epoch,
        partitions_by_user_endpoint=None
        if answer.endpoints is None
        else tuple(
            make(
                types.EndpointToPartitions,
                user_endpoint=make(types.Endpoint, host=host, port=port),
                active_partitions=_by_topic(types, active),
                standby_partitions=_by_topic(types, standby),
            )
            for (host, port), active, standby in answer.endpoints
        ),
    )


def _defaults(types: Any) -> dict[str, Any]:
    """A response's fields as Kafka leaves them in an error or a leave's answer."""
    return {
        "throttle_time": NO_THROTTLE,
        "error_code": ErrorCode.none,
        "error_message": None,
        "member_id": "",
        "member_epoch": 0,
        "heartbeat_interval": datetime.timedelta(0),
        "acceptable_recovery_lag": acceptable_recovery_lag(types, -1),
        "task_offset_interval": datetime.timedelta(0),
        "status": (),
        "active_tasks": None,
        "standby_tasks": None,
        "warmup_tasks": None,
        "topology_description_required": False,
        "endpoint_information_epoch": 0,
        "partitions_by_user_endpoint": None,
    }


def acceptable_recovery_lag(types: Any, lag: int) -> int:
    """v1's acceptable recovery lag; v0's field of that place is a legacy one Kafka leaves 0."""
    return 0 if types.StreamsGroupHeartbeatResponse.__version__ == 0 else lag


def _listed(types: Any, tasks: Tasks) -> tuple[Any, ...]:
    return tuple(
        make(types.TaskIds, subtopology_id=subtopology, partitions=tuple(sorted(partitions)))
        for subtopology, partitions in sorted(tasks.items())
    )


def _by_topic(types: Any, partitions: Tasks) -> tuple[Any, ...]:
    return tuple(
        make(types.TopicPartition, topic=topic, partitions=tuple(sorted(parts)))
        for topic, parts in sorted(partitions.items())
    )


def refusal(body: Any) -> tuple[ErrorCode, str] | None:
    """Why Kafka 4.4 refuses a heartbeat before its coordinator looks at the group, in its
    words and its order (KafkaApis, then throwIfStreamsGroupHeartbeatRequestIsInvalid)."""
    if body.topology is not None:
        named = _topics_named(body.topology)
        internal = [name for name in named if name in INTERNAL_TOPICS]
        if internal:
            return ErrorCode.streams_invalid_topology, (
                f"Use of Kafka internal topics {','.join(internal)} in a Kafka Streams topology "
                "is prohibited."
            )
        invalid = [name for name in named if invalid_name_reason(name)]
        if invalid:
            return ErrorCode.streams_invalid_topology, (
                f"Topic names {','.join(invalid)} are not valid topic names."
            )
        if any(sub.source_topic_regex for sub in body.topology.subtopologies):
            return (
                ErrorCode.invalid_request,
                "Regular expressions for source topics are not supported yet.",
            )
        for sub in body.topology.subtopologies:
            for group in sub.copartition_groups:
                if any(not 0 <= i < len(sub.source_topics) for i in group.source_topics) or any(
                    not 0 <= i < len(sub.repartition_source_topics)
                    for i in group.repartition_source_topics
                ):
                    return ErrorCode.streams_invalid_topology, (
                        f"A copartition group of subtopology {sub.subtopology_id} names a "
                        "topic it does not have."
                    )
    reason = _invalid_request_reason(body)
    if reason is not None:
        return ErrorCode.invalid_request, reason
    if body.member_epoch == 0:
        for sub in body.topology.subtopologies:
            for changelog in sub.state_changelog_topics:
                if changelog.partitions != 0:
                    return ErrorCode.streams_invalid_topology, (
                        f"Changelog topic {changelog.name} must have an undefined partition "
                        f"count, but it is set to {changelog.partitions}."
                    )
    return None


def _invalid_request_reason(body: Any) -> str | None:
    if not body.member_id.strip():
        return "MemberId can't be empty."
    if not body.group_id.strip():
        return "GroupId can't be empty."
    if body.instance_id is not None and not body.instance_id.strip():
        return "InstanceId can't be empty."
    if body.rack_id is not None and not body.rack_id.strip():
        return "RackId can't be empty."
    if body.member_epoch == 0:
        if int(body.rebalance_timeout.total_seconds() * 1000) == -1:
            return "RebalanceTimeoutMs must be provided in first request."
        for kind, tasks in (
            ("Active", body.active_tasks),
            ("Standby", body.standby_tasks),
            ("Warmup", body.warmup_tasks),
        ):
            if tasks is None or tasks:
                return f"{kind}Tasks must be empty when (re-)joining."
        if body.topology is None:
            return "Topology must be non-null when (re-)joining."
    elif body.member_epoch == STATIC_LEAVE_EPOCH:
        if body.instance_id is None:
            return "InstanceId can't be null."
    elif body.member_epoch < STATIC_LEAVE_EPOCH:
        return f"MemberEpoch is {body.member_epoch}, but must be greater than or equal to -2."
    kinds = (body.active_tasks, body.standby_tasks, body.warmup_tasks)
    if any(tasks is not None for tasks in kinds) and any(tasks is None for tasks in kinds):
        return "If one task-type is non-null, all must be non-null."
    if body.member_epoch != 0 and body.topology is not None:
        return "Topology can only be provided when (re-)joining."
    return None


def _topics_named(topology: Any) -> list[str]:
    """Every topic a topology names, each once, in the order it names them."""
    named: dict[str, None] = {}
    for sub in topology.subtopologies:
        named.update(dict.fromkeys(sub.source_topics))
        named.update(dict.fromkeys(sub.repartition_sink_topics))
        named.update(dict.fromkeys(info.name for info in sub.repartition_source_topics))
        named.update(dict.fromkeys(info.name for info in sub.state_changelog_topics))
    return list(named)


def _topology(sent: Any) -> Topology | None:
    if sent is None:
        return None
    subtopologies = []
    for sub in sent.subtopologies:
        repartition = [_info(info) for info in sub.repartition_source_topics]
        subtopologies.append(
            Subtopology(
                subtopology_id=sub.subtopology_id,
                source_topics=tuple(sub.source_topics),
                changelog_topics=tuple(_info(info) for info in sub.state_changelog_topics),
                repartition_sink_topics=tuple(sub.repartition_sink_topics),
                repartition_source_topics=tuple(repartition),
                copartition_groups=tuple(
                    frozenset(
                        [sub.source_topics[index] for index in group.source_topics]
                        + [repartition[index].name for index in group.repartition_source_topics]
                    )
                    for group in sub.copartition_groups
                ),
            )
        )
    return Topology(sent.epoch, tuple(subtopologies))


def _info(info: Any) -> TopicInfo:
    return TopicInfo(
        info.name,
        info.partitions,
        info.replication_factor,
        tuple((config.key, config.value) for config in info.topic_configs),
    )


def _tasks(listed: Any) -> Tasks | None:
    if listed is None:
        return None
    return {task.subtopology_id: frozenset(task.partitions) for task in listed}


def _offsets(listed: Any) -> tuple[tuple[str, int, int], ...] | None:
    if listed is None:
        return None
    return tuple((offset.subtopology_id, offset.partition, offset.offset) for offset in listed)
