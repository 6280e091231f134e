"""Fetch: partition watermarks, and no records yet.

The null sink stores nothing, so this Fetch reports each partition's log start and end and
answers with an empty (non-null) record set. Serving synthetic records for every offset in
[log start, log end) is the read side's work (issue: synthetic source topics).

It is served now because clients key features on it: librdkafka enables RecordBatch v2
(and so idempotence and zstd) only when the broker advertises Fetch v4+.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import Request
from codec.entities import make, response_module

from .common import NO_THROTTLE, counted

if TYPE_CHECKING:
    from ..broker import Broker, Session

FETCH = 1
NO_RECORDS = b""
NO_SESSION = 0


def handle_fetch(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(FETCH, request.header.api_version)
    responses = []
    for wanted in request.body.topics:
        name = getattr(wanted, "topic", None)
        topic_id = getattr(wanted, "topic_id", None)
        topic = broker.topics.get(name) if name is not None else broker.topics.by_id(topic_id)
        missing = ErrorCode.unknown_topic_or_partition if name else ErrorCode.unknown_topic_id
        partitions = []
        for asked in wanted.partitions:
            if topic is None or not 0 <= asked.partition < len(topic.partitions):
                error, log_start, log_end = missing, -1, -1
            else:
                partition = topic.partitions[asked.partition]
                log_start, log_end = partition.log_start_offset, partition.log_end_offset
                in_range = log_start <= asked.fetch_offset <= log_end
                error = ErrorCode.none if in_range else ErrorCode.offset_out_of_range
            partitions.append(
                make(
                    types.PartitionData,
                    partition_index=asked.partition,
                    error_code=counted(broker, error),
                    high_watermark=log_end,
                    last_stable_offset=log_end,
                    log_start_offset=log_start,
                    aborted_transactions=None,
                    preferred_read_replica=-1,
                    records=NO_RECORDS,
                )
            )
        responses.append(
            make(
                types.FetchableTopicResponse,
                topic=name,
                topic_id=topic_id,
                partitions=tuple(partitions),
            )
        )
    return make(
        types.FetchResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=NO_SESSION,
        responses=tuple(responses),
    )


HANDLERS = {FETCH: handle_fetch}
