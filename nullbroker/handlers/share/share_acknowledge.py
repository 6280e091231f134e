"""ShareAcknowledge: a share group member's acknowledgements alone, in its share session
(ShareFetch carries them too): ACCEPT, RELEASE, REJECT or RENEW per offset or range, one
error per partition. Epoch -1 closes the session after them, and the records the member
still holds are released."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...state.share.sessions import FINAL_EPOCH, INITIAL_EPOCH
from ..common import NO_THROTTLE, counted
from .acknowledgements import acknowledge, close_session, continued_session, member_group

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session

FIRST_LOCK_TIMEOUT_VERSION = 2


KEY = ApiKey.SHARE_ACKNOWLEDGE


def handle(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    types = response_module(ApiKey.SHARE_ACKNOWLEDGE, version)
    body = request.body
    group_id, member_id, epoch = body.group_id or "", body.member_id or "", body.share_session_epoch
    lock_ms = 0

    def answer(error: ErrorCode, message: str | None = None, topics: tuple[Any, ...] = ()) -> Any:
        # As Kafka: a request refused whole tells no lock duration.
        lock = {}
        if version >= FIRST_LOCK_TIMEOUT_VERSION:
            told_ms = lock_ms if error is ErrorCode.none else 0
            lock["acquisition_lock_timeout"] = datetime.timedelta(milliseconds=told_ms)
        return make(
            types.ShareAcknowledgeResponse,
            throttle_time=NO_THROTTLE,
            error_code=counted(broker, error),
            error_message=message,
            responses=topics,
            node_endpoints=(),
            **lock,
        )

    group = member_group(broker, group_id, member_id)
    if isinstance(group, ErrorCode):
        return answer(group, f"Member {member_id} is not a member of share group {group_id}.")
    lock_ms = broker.share_groups.configs.limits(group_id).lock_ms
    if epoch == INITIAL_EPOCH:
        return answer(ErrorCode.invalid_share_session_epoch)
    share_session = continued_session(broker, session.node_id, group_id, member_id, epoch)
    if isinstance(share_session, ErrorCode):
        return answer(share_session)
    told = []
    for topic in body.topics:
        partitions = []
        for partition in topic.partitions:
            error = acknowledge(
                broker,
                group,
                member_id,
                topic.topic_id,
                partition.partition_index,
                partition.acknowledgement_batches,
            )
            partitions.append(
                make(
                    types.PartitionData,
                    partition_index=partition.partition_index,
                    error_code=counted(broker, error),
                    error_message=None,
                    current_leader=make(types.LeaderIdAndEpoch, leader_id=0, leader_epoch=0),
                )
            )
        told.append(
            make(
                types.ShareAcknowledgeTopicResponse,
                topic_id=topic.topic_id,
                partitions=tuple(partitions),
            )
        )
    sessions = broker.share_groups.sessions
    if epoch == FINAL_EPOCH:
        close_session(broker, group, share_session)
    else:
        sessions.advance(share_session)
    return answer(ErrorCode.none, topics=tuple(told))
