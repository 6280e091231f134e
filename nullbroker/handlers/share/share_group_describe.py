"""ShareGroupDescribe: share groups' members, epochs and assignments, for
`kafka-share-groups --describe` and the admin client."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...state.share.groups import ASSIGNOR_NAME
from ..common import (
    GROUP_OPERATIONS,
    NO_THROTTLE,
    authorized_operations,
    coordinated_elsewhere,
    counted,
)
from ..groups.consumer_assignment import listed_by_topic_id

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.SHARE_GROUP_DESCRIBE


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.SHARE_GROUP_DESCRIBE, request.header.api_version)
    body = request.body
    # As Kafka: the operations of a group it found only.
    operations = authorized_operations(body.include_authorized_operations, GROUP_OPERATIONS)
    none_found = authorized_operations(False, GROUP_OPERATIONS)

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
                assignor_name="",
                members=(),
                authorized_operations=none_found,
            )

        if coordinated_elsewhere(broker, session, group_id):
            return refused(ErrorCode.not_coordinator)
        group = broker.share_groups.get(group_id) if group_id else None
        if group is None:
            return refused(ErrorCode.group_id_not_found, f"Group {group_id} not found.")
        return make(
            types.DescribedGroup,
            error_code=ErrorCode.none,
            error_message=None,
            group_id=group_id,
            group_state=group.state,
            group_epoch=group.epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=ASSIGNOR_NAME,
            members=tuple(
                make(
                    types.Member,
                    member_id=member.member_id,
                    rack_id=member.rack_id,
                    member_epoch=member.epoch,
                    client_id=member.client_id,
                    client_host=member.client_host,
                    subscribed_topic_names=member.subscribed,
                    assignment=make(
                        types.Assignment,
                        topic_partitions=listed_by_topic_id(
                            broker, types, member.assignment, names=True
                        ),
                    ),
                )
                for member in group.members.values()
            ),
            authorized_operations=operations,
        )

    return make(
        types.ShareGroupDescribeResponse,
        throttle_time=NO_THROTTLE,
        groups=tuple(described(group_id) for group_id in body.group_ids),
    )
