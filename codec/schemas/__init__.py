"""Message versions Apache Kafka 4.4.0 defines that kio (0.6.5, its newest) does not, written
as kio writes its schema classes, so that kio's readers and writers and the codec's compiled
ones take them as they take kio's own.

Each module holds one API version's request and response entities, their fields as the
4.4.0 `kafka-clients` jar's `*Data.SCHEMAS` list them (`scripts/kafka-message-schemas`
prints them), their defaults and docstrings from the message JSONs the jar carries
(`common/message/*.json`). A struct the request and the response share, under one name, is
one class serving both (StreamsGroupHeartbeat v1's TaskIds and Endpoint): codec.entities'
request_module and response_module both find the module. `REQUESTS` and `RESPONSES` index
them by (API key, version), for codec.apis.request_schema and response_schema to look here
before asking kio.
"""

from __future__ import annotations

from typing import Any

from . import (
    api_versions_v5,
    delete_groups_v3,
    streams_group_describe_v1,
    streams_group_heartbeat_v1,
    txn_offset_commit_v6,
)
from . import streams_group_topology_description_update_v0 as topology_description_update_v0

REQUESTS: dict[tuple[int, int], type[Any]] = {
    (18, 5): api_versions_v5.ApiVersionsRequest,
    (28, 6): txn_offset_commit_v6.TxnOffsetCommitRequest,
    (42, 3): delete_groups_v3.DeleteGroupsRequest,
    (88, 1): streams_group_heartbeat_v1.StreamsGroupHeartbeatRequest,
    (89, 1): streams_group_describe_v1.StreamsGroupDescribeRequest,
    (93, 0): topology_description_update_v0.StreamsGroupTopologyDescriptionUpdateRequest,
}
RESPONSES: dict[tuple[int, int], type[Any]] = {
    (18, 5): api_versions_v5.ApiVersionsResponse,
    (28, 6): txn_offset_commit_v6.TxnOffsetCommitResponse,
    (42, 3): delete_groups_v3.DeleteGroupsResponse,
    (88, 1): streams_group_heartbeat_v1.StreamsGroupHeartbeatResponse,
    (89, 1): streams_group_describe_v1.StreamsGroupDescribeResponse,
    (93, 0): topology_description_update_v0.StreamsGroupTopologyDescriptionUpdateResponse,
}
