"""The table of Kafka APIs: keys, names, version ranges, header versions, schemas.

Version ranges are those Apache Kafka 4.1.1's broker advertises (KIP-896 removed the old
ones; versions Kafka marks unstable are left out, as Kafka leaves them out of ApiVersions),
and tests/test_api_versions_as_kafka.py compares them with a running Kafka's answer. Schema
modules are imported lazily, per (key, version) actually used: importing all of kio's
schemas costs about 27 MiB.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer


@dataclass(frozen=True, slots=True)
class ApiRange:
    """One API key and the versions of it that are served."""

    key: int
    name: str
    min_version: int
    max_version: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min_version <= version <= self.max_version


def _ranges(*rows: tuple[int, str, int, int]) -> dict[int, ApiRange]:
    return {key: ApiRange(key, name, low, high) for key, name, low, high in rows}


KAFKA_4_RANGES: dict[int, ApiRange] = _ranges(
    (0, "Produce", 3, 13),
    (1, "Fetch", 4, 18),
    (2, "ListOffsets", 1, 10),
    (3, "Metadata", 0, 13),
    (8, "OffsetCommit", 2, 9),
    (9, "OffsetFetch", 1, 9),
    (10, "FindCoordinator", 0, 6),
    (11, "JoinGroup", 0, 9),
    (12, "Heartbeat", 0, 4),
    (13, "LeaveGroup", 0, 5),
    (14, "SyncGroup", 0, 5),
    (15, "DescribeGroups", 0, 6),
    (16, "ListGroups", 0, 5),
    (17, "SaslHandshake", 0, 1),
    (18, "ApiVersions", 0, 4),
    (19, "CreateTopics", 2, 7),
    (20, "DeleteTopics", 1, 6),
    (21, "DeleteRecords", 0, 2),
    (22, "InitProducerId", 0, 5),
    (23, "OffsetForLeaderEpoch", 2, 4),
    (24, "AddPartitionsToTxn", 0, 5),
    (25, "AddOffsetsToTxn", 0, 4),
    (26, "EndTxn", 0, 5),
    (28, "TxnOffsetCommit", 0, 5),
    (32, "DescribeConfigs", 1, 4),
    (36, "SaslAuthenticate", 0, 2),
    (37, "CreatePartitions", 0, 3),
    (42, "DeleteGroups", 0, 2),
    (44, "IncrementalAlterConfigs", 0, 1),
    (47, "OffsetDelete", 0, 0),
    (60, "DescribeCluster", 0, 2),
    (61, "DescribeProducers", 0, 0),
    (65, "DescribeTransactions", 0, 0),
    (66, "ListTransactions", 0, 2),
    (68, "ConsumerGroupHeartbeat", 0, 1),
    (69, "ConsumerGroupDescribe", 0, 1),
    (75, "DescribeTopicPartitions", 0, 0),
)
"""Every API nullbroker may serve; the broker advertises the subset it has handlers for."""

ADVERTISED_MIN_VERSIONS: dict[int, int] = {0: 0}
"""Where ApiVersions advertises below the served range, as Kafka 4 does: Produce from v0
(KAFKA-18659: librdkafka judges from Produce v0 being listed whether a broker takes gzip,
snappy and lz4 batches, librdkafka#4956), while a Produce below v3 closes the connection,
in Kafka and here."""

NOT_SERVED: dict[int, str] = {
    27: "WriteTxnMarkers: broker to broker; nullbroker's coordinator writes its markers itself",
    29: "DescribeAcls: no authorizer (every client may do everything)",
    30: "CreateAcls: no authorizer (every client may do everything)",
    31: "DeleteAcls: no authorizer (every client may do everything)",
    33: "AlterConfigs: the legacy whole-set form; IncrementalAlterConfigs (44) is served",
    34: "AlterReplicaLogDirs: no log directories, the storage is /dev/null",
    35: "DescribeLogDirs: no log directories, the storage is /dev/null",
    38: "CreateDelegationToken: no delegation tokens",
    39: "RenewDelegationToken: no delegation tokens",
    40: "ExpireDelegationToken: no delegation tokens",
    41: "DescribeDelegationToken: no delegation tokens",
    43: "ElectLeaders: leaders come from the node map, never elected",
    45: "AlterPartitionReassignments: replicas come from the node map, never moved",
    46: "ListPartitionReassignments: replicas come from the node map, never moved",
    48: "DescribeClientQuotas: no client quotas",
    49: "AlterClientQuotas: no client quotas",
    50: "DescribeUserScramCredentials: SASL users come from the settings",
    51: "AlterUserScramCredentials: SASL users come from the settings",
    55: "DescribeQuorum: KRaft controller API, no quorum here",
    57: "UpdateFeatures: the features are fixed, Kafka 4.1's",
    64: "UnregisterBroker: KRaft controller API, no quorum here",
    74: "ListConfigResources: no client-metrics resources (KIP-714)",
    76: "ShareGroupHeartbeat: share groups (KIP-932) not served yet",
    77: "ShareGroupDescribe: share groups (KIP-932) not served yet",
    78: "ShareFetch: share groups (KIP-932) not served yet",
    79: "ShareAcknowledge: share groups (KIP-932) not served yet",
    80: "AddRaftVoter: KRaft controller API, no quorum here",
    81: "RemoveRaftVoter: KRaft controller API, no quorum here",
    83: "InitializeShareGroupState: the share coordinator's, share groups not served yet",
    84: "ReadShareGroupState: the share coordinator's, share groups not served yet",
    85: "WriteShareGroupState: the share coordinator's, share groups not served yet",
    86: "DeleteShareGroupState: the share coordinator's, share groups not served yet",
    87: "ReadShareGroupStateSummary: the share coordinator's, share groups not served yet",
    90: "DescribeShareGroupOffsets: share groups (KIP-932) not served yet",
    91: "AlterShareGroupOffsets: share groups (KIP-932) not served yet",
    92: "DeleteShareGroupOffsets: share groups (KIP-932) not served yet",
}
"""The APIs Kafka 4.1.1 lists in ApiVersions that nullbroker does not serve, each with why:
the one list of differences tests/test_api_versions_as_kafka.py allows."""

API_VERSIONS_KEY = 18


def advertised(api: ApiRange) -> ApiRange:
    """The range ApiVersions lists for a served API (ADVERTISED_MIN_VERSIONS)."""
    low = ADVERTISED_MIN_VERSIONS.get(api.key)
    return api if low is None else replace(api, min_version=low)


def api_name(key: int) -> str:
    """The Kafka name of an API key, or `Unknown(<key>)`."""
    known = KAFKA_4_RANGES.get(key)
    return known.name if known else f"Unknown({key})"


@cache
def request_schema(key: int, version: int) -> type[Any]:
    """kio's request payload class for (key, version); imported on first use."""
    return load_request_schema(key, version)


@cache
def response_schema(key: int, version: int) -> type[Any]:
    """kio's response payload class for (key, version); imported on first use."""
    return load_response_schema(key, version)


@cache
def request_reader(key: int, version: int) -> Any:
    """kio's reader for the request payload of (key, version): the reference the codec's
    decoding is tested against."""
    return entity_reader(request_schema(key, version))


@cache
def response_writer(key: int, version: int) -> Any:
    """kio's generic writer for the response payload of (key, version): the reference the
    compiled writers (writers.py) are tested against."""
    return entity_writer(response_schema(key, version))


@cache
def request_header_version(key: int, version: int) -> int:
    """1 before the API's first flexible version, 2 from it on."""
    return int(request_schema(key, version).__header_schema__.__version__)


@cache
def response_header_version(key: int, version: int) -> int:
    """0 before the API's first flexible version, 1 from it on; ApiVersions always 0."""
    return int(response_schema(key, version).__header_schema__.__version__)
