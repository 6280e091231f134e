"""Message versions Apache Kafka 4.4.0 defines that kio (0.6.5, its newest) does not, written
as kio writes its schema classes, so that kio's readers and writers and the codec's compiled
ones take them as they take kio's own.

Each module holds one API version's request and response entities, their fields as the
4.4.0 `kafka-clients` jar's `*Data.SCHEMAS` list them (`scripts/kafka-message-schemas`
prints them). `REQUESTS` and `RESPONSES` index them by (API key, version), for
codec.apis.request_schema and response_schema to look here before asking kio.
"""

from __future__ import annotations

from typing import Any

from . import api_versions_v5, delete_groups_v3, txn_offset_commit_v6

REQUESTS: dict[tuple[int, int], type[Any]] = {
    (18, 5): api_versions_v5.ApiVersionsRequest,
    (28, 6): txn_offset_commit_v6.TxnOffsetCommitRequest,
    (42, 3): delete_groups_v3.DeleteGroupsRequest,
}
RESPONSES: dict[tuple[int, int], type[Any]] = {
    (18, 5): api_versions_v5.ApiVersionsResponse,
    (28, 6): txn_offset_commit_v6.TxnOffsetCommitResponse,
    (42, 3): delete_groups_v3.DeleteGroupsResponse,
}
