"""ApiVersions: what this broker serves, and the features Kafka 4.1 finalizes. The answer
never changes, so it is encoded once per version."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, ApiRange, Request, advertised, encode_response_body
from codec.entities import make, response_module

from ..common import NO_THROTTLE, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session

SUPPORTED_FEATURES: tuple[tuple[str, int, int], ...] = (
    ("group.version", 0, 1),
    ("kraft.version", 0, 1),
    ("metadata.version", 7, 33),
    ("share.version", 0, 2),
    ("streams.version", 0, 1),
    ("transaction.version", 0, 2),
    ("eligible.leader.replicas.version", 0, 1),
)
"""(name, min, max) of each feature, as Apache Kafka 4.4.0 lists them."""

FINALIZED_FEATURES: tuple[tuple[str, int], ...] = (
    ("group.version", 1),
    ("kraft.version", 1),
    ("share.version", 2),
    ("streams.version", 1),
    ("metadata.version", 33),
    ("transaction.version", 2),
    ("eligible.leader.replicas.version", 1),
)
"""(name, level) of each feature a new Kafka 4.4.0 cluster finalizes. Clients act on four:
transaction.version 2 makes a Java 4.x producer run transactions v2 (KIP-890: the epoch
bumps at every commit or abort, Produce v12 and TxnOffsetCommit v5 add to the transaction),
which nullbroker serves; group.version 1 is the new consumer group protocol (KIP-848);
share.version 2 is share groups (KIP-932) with ShareFetch and ShareAcknowledge v2;
streams.version 1 is Kafka Streams' own group protocol
(KIP-1071), without which a Streams app with group.protocol=streams will not start."""

FIRST_ZERO_MIN_FEATURES_VERSION = 4

FINALIZED_FEATURES_EPOCH = 1
"""Kafka's is the metadata offset of the last feature change; a client keeps the features of
the highest epoch it has seen, and ignores them at -1."""


KEY = ApiKey.API_VERSIONS


FIRST_ADDRESSED_VERSION = 5
"""ApiVersions v5 (Kafka 4.4, KIP-1242) names the cluster and node the client means to
reach: null and -1 on a connection to a bootstrap address, which could be any node."""


FIRST_NAMING_VERSION = 3
"""ApiVersions v3+ (KIP-511) names the client's software and its version."""


def handle(broker: Broker, request: Request, session: Session) -> bytes:
    version = request.header.api_version
    if version >= FIRST_NAMING_VERSION:
        body = request.body
        session.client_software = (body.client_software_name, body.client_software_version)
    if version >= FIRST_ADDRESSED_VERSION:
        error = _misdirected(broker, session, request.body)
        if error is not None:
            return _refused(version, counted(broker, error))
    return _encoded_body(version, broker.advertised)


def _misdirected(broker: Broker, session: Session, body: Any) -> ErrorCode | None:
    """As Kafka 4.4.0 answers: a cluster id without a node id, or a node id without a
    cluster id, is INVALID_REQUEST; both, and either is not this node's,
    REBOOTSTRAP_REQUIRED (the client reached another node or cluster than it meant to,
    and starts again from its bootstrap addresses). None: the request is answered."""
    cluster_id, node_id = body.cluster_id, body.node_id
    if cluster_id is None and node_id == -1:
        return None
    if cluster_id is None or node_id == -1:
        return ErrorCode.invalid_request
    if cluster_id != broker.cluster_id or node_id != session.node_id:
        return ErrorCode.rebootstrap_required
    return None


@cache
def _refused(version: int, error: ErrorCode) -> bytes:
    """An ApiVersions request refused: the error alone, no APIs and no features, as Kafka
    answers it (on a connection it keeps open)."""
    types = response_module(ApiKey.API_VERSIONS, version)
    body = make(types.ApiVersionsResponse, error_code=error, api_keys=(), throttle_time=NO_THROTTLE)
    return encode_response_body(ApiKey.API_VERSIONS, version, body)


@cache
def _encoded_body(version: int, served: tuple[ApiRange, ...]) -> bytes:
    types = response_module(ApiKey.API_VERSIONS, version)
    body = make(
        types.ApiVersionsResponse,
        error_code=ErrorCode.none,
        api_keys=tuple(
            types.ApiVersion(
                api_key=api.key, min_version=api.min_version, max_version=api.max_version
            )
            for api in map(advertised, served)
        ),
        throttle_time=NO_THROTTLE,
        **_features(types, version),
    )
    return encode_response_body(ApiKey.API_VERSIONS, version, body)


def _features(types: Any, version: int) -> dict[str, Any]:
    """The feature fields of ApiVersions v3+ (tagged fields: none before). Before v4 Kafka
    leaves out the supported features whose range starts at 0 (KAFKA-17011: older clients
    fail on a minimum of 0); its finalized features are all listed."""
    if not hasattr(types, "SupportedFeatureKey"):
        return {}
    lowest = 0 if version >= FIRST_ZERO_MIN_FEATURES_VERSION else 1
    return {
        "supported_features": tuple(
            types.SupportedFeatureKey(name=name, min_version=low, max_version=high)
            for name, low, high in SUPPORTED_FEATURES
            if low >= lowest
        ),
        "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
        "finalized_features": tuple(
            types.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
            for name, level in FINALIZED_FEATURES
        ),
        "zk_migration_ready": False,
    }
