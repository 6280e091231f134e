"""ApiVersions v5 (Kafka 4.4, KIP-1242): the request names the cluster and node the client
means to reach (null and -1 on a bootstrap connection), for the broker to tell a client
that reached the wrong one REBOOTSTRAP_REQUIRED. The response is v4's."""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.api_versions.v4.response import (
    ApiVersion as ApiVersionV4,
)
from kio.schema.api_versions.v4.response import (
    ApiVersionsResponse as ApiVersionsResponseV4,
)
from kio.schema.api_versions.v4.response import (
    FinalizedFeatureKey as FinalizedFeatureKeyV4,
)
from kio.schema.api_versions.v4.response import (
    SupportedFeatureKey as SupportedFeatureKeyV4,
)
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v0.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta, i64

VERSION = i16(5)


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersionsRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = VERSION
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(18)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    client_software_name: str = field(metadata={"kafka_type": "string"})
    """The name of the client."""
    client_software_version: str = field(metadata={"kafka_type": "string"})
    """The version of the client."""
    cluster_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """The cluster the client means to reach, or null (a bootstrap connection)."""
    node_id: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """The node the client means to reach, or -1 (a bootstrap connection)."""


# The response's nested entities are v4's, with v5's version: the writers key on it.


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersion:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = VERSION
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(18)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    api_key: i16 = field(metadata={"kafka_type": "int16"})
    min_version: i16 = field(metadata={"kafka_type": "int16"})
    max_version: i16 = field(metadata={"kafka_type": "int16"})


@dataclass(frozen=True, slots=True, kw_only=True)
class SupportedFeatureKey:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = VERSION
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(18)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: str = field(metadata={"kafka_type": "string"})
    min_version: i16 = field(metadata={"kafka_type": "int16"})
    max_version: i16 = field(metadata={"kafka_type": "int16"})


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalizedFeatureKey:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = VERSION
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(18)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: str = field(metadata={"kafka_type": "string"})
    max_version_level: i16 = field(metadata={"kafka_type": "int16"})
    min_version_level: i16 = field(metadata={"kafka_type": "int16"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiVersionsResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = VERSION
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(18)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    api_keys: tuple[ApiVersion, ...]
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    supported_features: tuple[SupportedFeatureKey, ...] = field(metadata={"tag": 0}, default=())
    finalized_features_epoch: i64 = field(
        metadata={"kafka_type": "int64", "tag": 1}, default=i64(-1)
    )
    finalized_features: tuple[FinalizedFeatureKey, ...] = field(metadata={"tag": 2}, default=())
    zk_migration_ready: bool = field(metadata={"kafka_type": "bool", "tag": 3}, default=False)


V4_EQUIVALENTS = {
    ApiVersion: ApiVersionV4,
    SupportedFeatureKey: SupportedFeatureKeyV4,
    FinalizedFeatureKey: FinalizedFeatureKeyV4,
    ApiVersionsResponse: ApiVersionsResponseV4,
}
"""Each response entity and v4's, whose fields it must have (tests/codec check it)."""
