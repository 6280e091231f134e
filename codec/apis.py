"""The table of Kafka APIs: keys, names, version ranges, header versions, schemas.

Version ranges are those an Apache Kafka 4.x broker advertises (KIP-896 removed the old
ones), capped at what kio defines. Schema modules are imported lazily, per (key, version)
actually used: importing all of kio's schemas costs about 27 MiB.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    (2, "ListOffsets", 1, 11),
    (3, "Metadata", 0, 13),
    (8, "OffsetCommit", 2, 10),
    (9, "OffsetFetch", 1, 10),
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
    (22, "InitProducerId", 0, 6),
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
    (66, "ListTransactions", 0, 1),
    (68, "ConsumerGroupHeartbeat", 0, 1),
    (69, "ConsumerGroupDescribe", 0, 1),
    (75, "DescribeTopicPartitions", 0, 0),
)
"""Every API nullbroker may serve; the broker advertises the subset it has handlers for."""

API_VERSIONS_KEY = 18


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
