"""ShareFetch responses written by hand around record batches that are never copied here.

A share consumer's ShareFetch is the share path's hot request, and like a Fetch response
its answer is mostly record batches the source has rendered already. kio's generated writer
would take them joined into one bytes per partition (a copy) and then copy them again into
the frame; here they are handed on in a list of buffers, as codec.fetch_response does for
Fetch, so that `codec.encode_response_parts` can put the size prefix and header in front of
them for a writev with no copy at all. Tests prove the bytes identical to kio's writer for
every version served (1 and 2, which share one layout: v2 adds request fields only).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import NamedTuple

from .framing import Buffer
from .writers import compact_length

FIRST_VERSION = 1
LAST_VERSION = 2

_NO_TAGGED_FIELDS = b"\x00"
_NULL_STRING = b"\x00"
_ZERO_UUID = bytes(16)


class SharePartitionAnswer(NamedTuple):
    """What the broker answers for one partition of a ShareFetch request."""

    partition: int
    error_code: int = 0
    acknowledge_error_code: int = 0
    current_leader: tuple[int, int] = (0, 0)
    """The partition's leader and its epoch, as the response always tells them."""
    records: Sequence[Buffer] = ()
    """The record batches, in order, each as it is (none: empty records, never null:
    librdkafka refuses a flexible response's null records)."""
    acquired: Sequence[tuple[int, int, int]] = ()
    """The acquired records: (first offset, last offset, delivery count) each."""


ShareFetchTopic = tuple[uuid.UUID | None, Sequence[SharePartitionAnswer]]
"""A topic's id (None is written as the zero UUID, as kio writes it) and its partitions."""

NodeEndpoint = tuple[int, str, int]
"""A node's id, host and port, for the leaders the refused partitions name (no rack)."""

# throttle time, the error code (the error message follows it).
_HEAD = struct.Struct(">ih")
_pack_i = struct.Struct(">i").pack
# index, error code, (error message), acknowledge error code, (its message), leader, epoch.
_pack_ih = struct.Struct(">ih").pack
_pack_hNii = struct.Struct(">hBii").pack  # ack error, its null message, leader, epoch
_pack_acquired = struct.Struct(">qqhB").pack  # first, last, delivery count, no tags


def share_fetch_response_parts(
    version: int,
    topics: Sequence[ShareFetchTopic],
    *,
    lock_ms: int,
    error_code: int = 0,
    error_message: str | None = None,
    throttle_time_ms: int = 0,
    node_endpoints: Sequence[NodeEndpoint] = (),
) -> list[Buffer]:
    """The ShareFetchResponse payload of `version` (1 or 2) as buffers to join: the record
    batches of every partition among them, not copied. Partitions' error messages are
    null, as nullbroker never tells one."""
    if not FIRST_VERSION <= version <= LAST_VERSION:
        raise ValueError(f"ShareFetch v{version} responses are not served (v1-v2)")
    parts: list[Buffer] = [
        _HEAD.pack(throttle_time_ms, error_code)
        + _nullable_string(error_message)
        + _pack_i(lock_ms)
        + compact_length(len(topics))
    ]
    add, extend = parts.append, parts.extend
    for topic_id, partitions in topics:
        add((_ZERO_UUID if topic_id is None else topic_id.bytes) + compact_length(len(partitions)))
        for answer in partitions:
            size = sum(map(len, answer.records))
            add(
                _pack_ih(answer.partition, answer.error_code)
                + _NULL_STRING
                + _pack_hNii(answer.acknowledge_error_code, 0, *answer.current_leader)
                + _NO_TAGGED_FIELDS  # the leader's
                + compact_length(size)
            )
            extend(answer.records)
            add(
                compact_length(len(answer.acquired))
                + b"".join(_pack_acquired(*run, 0) for run in answer.acquired)
                + _NO_TAGGED_FIELDS  # the partition's
            )
        add(_NO_TAGGED_FIELDS)  # the topic's
    add(
        compact_length(len(node_endpoints))
        + b"".join(
            _pack_i(node_id) + _compact_string(host) + _pack_i(port) + _NULL_STRING
            + _NO_TAGGED_FIELDS
            for node_id, host, port in node_endpoints
        )
        + _NO_TAGGED_FIELDS  # the response's
    )  # fmt: skip
    return parts


def _nullable_string(text: str | None) -> bytes:
    return _NULL_STRING if text is None else _compact_string(text)


def _compact_string(text: str) -> bytes:
    encoded = text.encode()
    return compact_length(len(encoded)) + encoded
