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
before asking kio. A module is imported by the first lookup of its classes, as kio imports
its own: a broker no streams client reaches never holds the streams groups' (some 0.7 MiB).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib import import_module
from typing import Any

_MODULES: dict[tuple[int, int], tuple[str, str]] = {
    (18, 5): ("api_versions_v5", "ApiVersions"),
    (28, 6): ("txn_offset_commit_v6", "TxnOffsetCommit"),
    (42, 3): ("delete_groups_v3", "DeleteGroups"),
    (88, 1): ("streams_group_heartbeat_v1", "StreamsGroupHeartbeat"),
    (89, 1): ("streams_group_describe_v1", "StreamsGroupDescribe"),
    (93, 0): (
        "streams_group_topology_description_update_v0",
        "StreamsGroupTopologyDescriptionUpdate",
    ),
}
"""Each version's module and its entities' name before Request/Response."""


class _Schemas(Mapping[tuple[int, int], type[Any]]):
    """The request (or response) class of each version, its module imported when first
    asked for."""

    def __init__(self, kind: str) -> None:
        self._kind = kind

    def __getitem__(self, key: tuple[int, int]) -> type[Any]:
        module, name = _MODULES[key]
        found: type[Any] = getattr(import_module(f"{__name__}.{module}"), name + self._kind)
        return found

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return iter(_MODULES)

    def __len__(self) -> int:
        return len(_MODULES)


REQUESTS: Mapping[tuple[int, int], type[Any]] = _Schemas("Request")
RESPONSES: Mapping[tuple[int, int], type[Any]] = _Schemas("Response")
