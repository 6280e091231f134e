"""ApiVersions v5 (Kafka 4.4, KIP-1242): the request names the cluster and node the client
means to reach (null and -1 on a bootstrap connection), for the broker to tell a client
that reached the wrong one REBOOTSTRAP_REQUIRED. The response is v4's, written by kio's v4
classes."""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.api_versions.v4.response import ApiVersionsResponse as ApiVersionsResponseV4
from kio.schema.request_header.v2.header import RequestHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32

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


ApiVersionsResponse = ApiVersionsResponseV4
"""v5's response is v4's, field for field and byte for byte (the 4.4.0 jar's schemas say so,
tests/codec/test_codec_schemas.py checks it): kio's v4 classes write it."""
