"""The table of Kafka APIs: keys, names, version ranges, header versions, schemas.

Version ranges are those Apache Kafka 4.4.0's broker advertises (KIP-896 removed the old
ones; versions Kafka marks unstable are left out, as Kafka leaves them out of ApiVersions),
and tests/oracle/test_api_versions_as_kafka.py compares them with a running Kafka's answer. Schema
modules are imported lazily, per (key, version) actually used: importing all of kio's
schemas costs about 27 MiB.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import IntEnum
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from .schemas import REQUESTS, RESPONSES


@dataclass(frozen=True, slots=True)
class ApiRange:
    """One API key and the versions of it that are served."""

    key: int
    name: str
    min_version: int
    max_version: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.min_version <= version <= self.max_version


class ApiKey(IntEnum):
    """The key of every API Kafka 4.4 lists in ApiVersions, named as Kafka names it, in upper
    snake case (kafka_name): those nullbroker may serve (KAFKA_4_RANGES) and those it does
    not (NOT_SERVED), one or the other.

    Code names a key `ApiKey.PRODUCE`, never a number. Looking a member up costs about
    0.17 µs more than a module global (CPython 3.11), so code that compares keys per request
    binds `int(ApiKey.X)` to a module global once, at import. tests/codec/test_api_keys.py checks
    the members against kio's schemas (Kafka's own message definitions) and the keys the C
    sources define."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_QUORUM = 55
    UPDATE_FEATURES = 57
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    STREAMS_GROUP_HEARTBEAT = 88
    STREAMS_GROUP_DESCRIBE = 89
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92
    STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE = 93
    UNREGISTER_CONTROLLER = 94


def kafka_name(key: ApiKey) -> str:
    """The API's name as Kafka spells it: `ApiKey.API_VERSIONS` is "ApiVersions"."""
    return key.name.title().replace("_", "")


def _ranges(*rows: tuple[ApiKey, int, int]) -> dict[int, ApiRange]:
    # Keyed by plain ints: a request's key is looked up here (and in the broker's subset)
    # per request, and an int finds an int key faster than an IntEnum member.
    return {int(key): ApiRange(int(key), kafka_name(key), low, high) for key, low, high in rows}


KAFKA_4_RANGES: dict[int, ApiRange] = _ranges(
    (ApiKey.PRODUCE, 3, 13),
    (ApiKey.FETCH, 4, 18),
    (ApiKey.LIST_OFFSETS, 1, 11),
    (ApiKey.METADATA, 0, 13),
    (ApiKey.OFFSET_COMMIT, 2, 10),
    (ApiKey.OFFSET_FETCH, 1, 10),
    (ApiKey.FIND_COORDINATOR, 0, 6),
    (ApiKey.JOIN_GROUP, 0, 9),
    (ApiKey.HEARTBEAT, 0, 4),
    (ApiKey.LEAVE_GROUP, 0, 5),
    (ApiKey.SYNC_GROUP, 0, 5),
    (ApiKey.DESCRIBE_GROUPS, 0, 6),
    (ApiKey.LIST_GROUPS, 0, 5),
    (ApiKey.SASL_HANDSHAKE, 0, 1),
    (ApiKey.API_VERSIONS, 0, 5),
    (ApiKey.CREATE_TOPICS, 2, 7),
    (ApiKey.DELETE_TOPICS, 1, 6),
    (ApiKey.DELETE_RECORDS, 0, 2),
    (ApiKey.INIT_PRODUCER_ID, 0, 5),
    (ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4),
    (ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5),
    (ApiKey.ADD_OFFSETS_TO_TXN, 0, 4),
    (ApiKey.END_TXN, 0, 5),
    (ApiKey.WRITE_TXN_MARKERS, 1, 2),
    (ApiKey.TXN_OFFSET_COMMIT, 0, 6),
    (ApiKey.DESCRIBE_ACLS, 1, 3),
    (ApiKey.CREATE_ACLS, 1, 3),
    (ApiKey.DELETE_ACLS, 1, 3),
    (ApiKey.DESCRIBE_CONFIGS, 1, 4),
    (ApiKey.ALTER_CONFIGS, 0, 2),
    (ApiKey.SASL_AUTHENTICATE, 0, 2),
    (ApiKey.CREATE_PARTITIONS, 0, 3),
    (ApiKey.DELETE_GROUPS, 0, 3),
    (ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1),
    (ApiKey.OFFSET_DELETE, 0, 0),
    (ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1),
    (ApiKey.ALTER_CLIENT_QUOTAS, 0, 1),
    (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0),
    (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0),
    (ApiKey.DESCRIBE_CLUSTER, 0, 2),
    (ApiKey.DESCRIBE_PRODUCERS, 0, 0),
    (ApiKey.DESCRIBE_TRANSACTIONS, 0, 0),
    (ApiKey.LIST_TRANSACTIONS, 0, 2),
    (ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1),
    (ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1),
    (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, 0),
    (ApiKey.PUSH_TELEMETRY, 0, 0),
    (ApiKey.LIST_CONFIG_RESOURCES, 0, 1),
    (ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0),
    (ApiKey.SHARE_GROUP_HEARTBEAT, 1, 1),
    (ApiKey.SHARE_GROUP_DESCRIBE, 1, 1),
    (ApiKey.SHARE_FETCH, 1, 2),
    (ApiKey.SHARE_ACKNOWLEDGE, 1, 2),
    (ApiKey.STREAMS_GROUP_HEARTBEAT, 0, 1),
    (ApiKey.STREAMS_GROUP_DESCRIBE, 0, 1),
    (ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1),
    (ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, 0),
    (ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, 0),
    (ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE, 0, 0),
)
"""Every API nullbroker may serve; the broker advertises the subset it has handlers for."""

TELEMETRY_KEYS: frozenset[int] = frozenset(
    (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY)
)
"""Client telemetry (KIP-714): Kafka 4.4.0 lists these only when a metrics reporter of its
receives what clients push (a ClientTelemetryExporterProvider), and answers them whether it
lists them or not. nullbroker lists them unless `--client-metrics off`."""

ADVERTISED_MIN_VERSIONS: dict[int, int] = {ApiKey.PRODUCE: 0}
"""Where ApiVersions advertises below the served range, as Kafka 4 does: Produce from v0
(KAFKA-18659: librdkafka judges from Produce v0 being listed whether a broker takes gzip,
snappy and lz4 batches, librdkafka#4956), while a Produce below v3 closes the connection,
in Kafka and here."""

_SHARE_STATE = "broker to share coordinator: share partitions' state is kept in memory"
_DELEGATION_TOKENS = (
    "no delegation tokens, and not yet Kafka's refusal of them either: kio models their "
    "timestamps and periods as dates, which cannot hold the -1 Java clients send and Kafka's "
    "refusals carry (codec/schemas would need their messages)"
)

NOT_SERVED: dict[ApiKey, str] = {
    ApiKey.ALTER_REPLICA_LOG_DIRS: "no log directories, the storage is /dev/null",
    ApiKey.DESCRIBE_LOG_DIRS: "no log directories, the storage is /dev/null",
    ApiKey.CREATE_DELEGATION_TOKEN: _DELEGATION_TOKENS,
    ApiKey.RENEW_DELEGATION_TOKEN: _DELEGATION_TOKENS,
    ApiKey.EXPIRE_DELEGATION_TOKEN: _DELEGATION_TOKENS,
    ApiKey.DESCRIBE_DELEGATION_TOKEN: _DELEGATION_TOKENS,
    ApiKey.ELECT_LEADERS: "leaders come from the node map, never elected",
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: "replicas come from the node map, never moved",
    ApiKey.LIST_PARTITION_REASSIGNMENTS: "replicas come from the node map, never moved",
    ApiKey.DESCRIBE_QUORUM: "KRaft controller API, no quorum here",
    ApiKey.UPDATE_FEATURES: "the features are fixed, Kafka 4.4's",
    ApiKey.UNREGISTER_BROKER: "KRaft controller API, no quorum here",
    ApiKey.ADD_RAFT_VOTER: "KRaft controller API, no quorum here",
    ApiKey.REMOVE_RAFT_VOTER: "KRaft controller API, no quorum here",
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: _SHARE_STATE,
    ApiKey.READ_SHARE_GROUP_STATE: _SHARE_STATE,
    ApiKey.WRITE_SHARE_GROUP_STATE: _SHARE_STATE,
    ApiKey.DELETE_SHARE_GROUP_STATE: _SHARE_STATE,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: _SHARE_STATE,
    ApiKey.UNREGISTER_CONTROLLER: "KRaft controller API, no quorum here",
}
"""The APIs Kafka 4.4.0 lists in ApiVersions that nullbroker does not serve, by key, each with
why: the one list of differences tests/oracle/test_api_versions_as_kafka.py allows. A key
served is in KAFKA_4_RANGES instead (docs/architecture.md, "Adding a Kafka API")."""


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
    """The request payload class for (key, version): kio's, imported on first use, or the
    codec's own where kio has none (codec.schemas)."""
    return REQUESTS.get((key, version)) or load_request_schema(key, version)


@cache
def response_schema(key: int, version: int) -> type[Any]:
    """The response payload class for (key, version): kio's, imported on first use, or the
    codec's own where kio has none (codec.schemas)."""
    return RESPONSES.get((key, version)) or load_response_schema(key, version)


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
