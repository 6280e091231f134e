"""ConsumerGroupDescribe: KIP-848 groups as the administration sees them, their members and
assignments (nullbroker.state.groups.consumer)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...state.groups.consumer import UNIFORM, ConsumerGroup
from ..common import (
    GROUP_OPERATIONS,
    NO_THROTTLE,
    authorized_operations,
    coordinated_elsewhere,
    counted,
)
from .consumer_assignment import listed_by_topic_id

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.CONSUMER_GROUP_DESCRIBE


def handle(broker: Broker, request: Request, session: Session) -> Any:
    """What `kafka-consumer-groups --describe` shows of a consumer group: its members,
    what each owns and what it is to own."""
    types = response_module(ApiKey.CONSUMER_GROUP_DESCRIBE, request.header.api_version)
    include_operations = request.body.include_authorized_operations
    described = []
    for group_id in request.body.group_ids:
        group = broker.groups.find(group_id)
        error, message = ErrorCode.none, None
        if coordinated_elsewhere(broker, session, group_id):
            error = ErrorCode.not_coordinator
        elif group is None:
            error, message = ErrorCode.group_id_not_found, f"Group {group_id} not found."
        elif not isinstance(group, ConsumerGroup):
            error = ErrorCode.group_id_not_found
            message = f"Group {group_id} is not a consumer group."
        found = group if isinstance(group, ConsumerGroup) and error is ErrorCode.none else None
        described.append(
            make(
                types.DescribedGroup,
                error_code=counted(broker, error),
                error_message=message,
                group_id=group_id,
                group_state=found.state if found is not None else "",
                group_epoch=found.epoch if found is not None else 0,
                assignment_epoch=found.assignment_epoch if found is not None else 0,
                assignor_name=UNIFORM if found is not None else "",
                members=_members(broker, types, found) if found is not None else (),
                # As Kafka: the operations of a group it found only.
                authorized_operations=authorized_operations(
                    include_operations and found is not None, GROUP_OPERATIONS
                ),
            )
        )
    return make(
        types.ConsumerGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(described)
    )


# ConsumerGroupDescribe v1's member type (KIP-1099): 0 a classic member, 1 a consumer one; every
# member of a nullbroker consumer group joined by ConsumerGroupHeartbeat.
CONSUMER_MEMBER = 1


def _members(broker: Broker, types: Any, group: ConsumerGroup) -> tuple[Any, ...]:
    return tuple(
        make(
            types.Member,
            member_id=member.member_id,
            instance_id=member.instance_id,
            rack_id=None,
            member_epoch=member.epoch,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=member.subscribed,
            subscribed_topic_regex=member.regex or "",  # Kafka's default: "" for none
            assignment=make(
                types.Assignment,
                topic_partitions=listed_by_topic_id(broker, types, member.owned, True),
            ),
            target_assignment=make(
                types.Assignment,
                topic_partitions=listed_by_topic_id(
                    broker, types, group.target.get(member.member_id, {}), True
                ),
            ),
            member_type=CONSUMER_MEMBER,
        )
        for member in group.members.values()
    )
