"""The fast Produce decoder's views as kio entities, so tests compare them with kio's.

codec.decode_request answers Produce with codec.produce.ProduceRequestView, not kio's
entity; everything else about a request is checked against kio the same way.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from codec import ApiKey
from codec.entities import make, request_module
from codec.produce import ProduceRequestView

ONE_MS = datetime.timedelta(milliseconds=1)
ZERO_UUID = uuid.UUID(int=0)


def as_kio_request(version: int, view: ProduceRequestView) -> Any:
    """The kio ProduceRequest of `version` holding what `view` holds.

    Records become bytes, the timeout a timedelta, and a zero topic id None, as kio reads it.
    """
    types = request_module(ApiKey.PRODUCE, version)
    return make(
        types.ProduceRequest,
        transactional_id=view.transactional_id,
        acks=view.acks,
        timeout=view.timeout_ms * ONE_MS,
        topic_data=tuple(
            make(
                types.TopicProduceData,
                name=topic.name,
                topic_id=None if topic.topic_id == ZERO_UUID else topic.topic_id,
                partition_data=tuple(
                    types.PartitionProduceData(
                        index=partition.index,
                        records=None if partition.records is None else partition.records.tobytes(),
                    )
                    for partition in topic.partition_data
                ),
            )
            for topic in view.topic_data
        ),
    )


def as_kio_body(key: int, version: int, body: Any) -> Any:
    """A decoded request body as kio's entity: Produce views converted, the rest as is."""
    return as_kio_request(version, body) if key == ApiKey.PRODUCE else body
