"""Request handlers, one module per Kafka API in family packages, and what the broker serves:
every API key with a handler, at the versions Kafka 4.4 serves it (nullbroker.dispatch builds
the table).

An API's module is named after it as kio names it, the lower-case name of its key
(`ApiKey.JOIN_GROUP` is served by `groups/join_group.py`), and declares, beside its handler,
the key it serves:

    KEY = ApiKey.JOIN_GROUP


    def handle(broker: Broker, request: Request, session: Session) -> ...

A module of a family that serves no API (common.py, log/asked_partitions.py, ...) is named
for what its APIs share, and declares no KEY. docs/architecture.md, "Adding a Kafka API",
lists every step of serving a new one; tests/tools/test_adding_an_api.py holds them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

from codec import KAFKA_4_RANGES, ApiKey, ApiRange

from .configs import (
    alter_configs,
    describe_configs,
    incremental_alter_configs,
    list_config_resources,
)
from .discovery import api_versions, describe_cluster, describe_topic_partitions, metadata
from .log import (
    delete_records,
    fetch,
    init_producer_id,
    list_offsets,
    offset_for_leader_epoch,
    produce,
)
from .topics import create_partitions, create_topics, delete_topics

if TYPE_CHECKING:
    from codec import Request

    from ..broker import Broker, Handler
    from ..sessions import Session

LOADED_AT_START: tuple[ModuleType, ...] = (
    api_versions,
    metadata,
    describe_cluster,
    describe_topic_partitions,
    produce,
    init_producer_id,
    fetch,
    list_offsets,
    offset_for_leader_epoch,
    delete_records,
    create_topics,
    delete_topics,
    create_partitions,
    describe_configs,
    incremental_alter_configs,
    list_config_resources,
    alter_configs,
)
"""The API modules every broker imports, at start: the ones every client uses, and the
administration's, which cost little."""

IMPORTED_ON_FIRST_USE: dict[str, tuple[ApiKey, ...]] = {
    "groups": (
        ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_FETCH,
        ApiKey.FIND_COORDINATOR,
        ApiKey.JOIN_GROUP,
        ApiKey.HEARTBEAT,
        ApiKey.LEAVE_GROUP,
        ApiKey.SYNC_GROUP,
        ApiKey.DESCRIBE_GROUPS,
        ApiKey.LIST_GROUPS,
        ApiKey.DELETE_GROUPS,
        ApiKey.OFFSET_DELETE,
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
        ApiKey.CONSUMER_GROUP_DESCRIBE,
    ),
    "transactions": (
        ApiKey.ADD_PARTITIONS_TO_TXN,
        ApiKey.ADD_OFFSETS_TO_TXN,
        ApiKey.END_TXN,
        ApiKey.TXN_OFFSET_COMMIT,
        ApiKey.DESCRIBE_PRODUCERS,
        ApiKey.DESCRIBE_TRANSACTIONS,
        ApiKey.LIST_TRANSACTIONS,
        ApiKey.WRITE_TXN_MARKERS,
    ),
    "sasl": (
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    ),
    "access": (ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS),
    "quotas": (ApiKey.DESCRIBE_CLIENT_QUOTAS, ApiKey.ALTER_CLIENT_QUOTAS),
    "share": (
        ApiKey.SHARE_GROUP_HEARTBEAT,
        ApiKey.SHARE_GROUP_DESCRIBE,
        ApiKey.SHARE_FETCH,
        ApiKey.SHARE_ACKNOWLEDGE,
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
        ApiKey.ALTER_SHARE_GROUP_OFFSETS,
        ApiKey.DELETE_SHARE_GROUP_OFFSETS,
    ),
    "telemetry": (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY),
    "streams": (
        ApiKey.STREAMS_GROUP_HEARTBEAT,
        ApiKey.STREAMS_GROUP_DESCRIBE,
        ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE,
    ),
}
"""The families only some clients use, by package, with the API keys their modules serve
(listed here, since reading a module's KEY would import it). An API's module, and the state
it imports (the group coordinators, transactions, SASL), is imported by the first request of
its key, not by every broker: a producer and a consumer that reads without a group never
load them (tests/processes/test_imports.py)."""

HANDLERS: dict[int, Handler] = {int(module.KEY): module.handle for module in LOADED_AT_START}
"""The handlers every broker loads, by API key."""

SERVED_KEYS: tuple[int, ...] = tuple(
    sorted({*HANDLERS, *(key for keys in IMPORTED_ON_FIRST_USE.values() for key in keys)})
)
"""Every API key with a handler, loaded or to be loaded on first use."""


def api_module(family: str, key: int) -> str:
    """The name of the module that serves `key` in the package of `family`."""
    return f"{__name__}.{family}.{ApiKey(key).name.lower()}"


def served_ranges(keys: Iterable[int] = SERVED_KEYS) -> dict[int, ApiRange]:
    """The version range of each of `keys`: what ApiVersions advertises."""
    return {key: KAFKA_4_RANGES[key] for key in sorted(keys)}


class OnFirstUse:
    """The handler of one API key of a family only some clients use
    (IMPORTED_ON_FIRST_USE): it imports the key's module with the first request of the
    key, and from then on calls the handler the module holds. The table it stands in stays
    as it was built; a request of the family pays one call more."""

    __slots__ = ("_handler", "family", "key")

    def __init__(self, family: str, key: int) -> None:
        self.family = family
        self.key = key
        self._handler: Handler | None = None

    def __call__(self, broker: Broker, request: Request, session: Session) -> Any:
        handler = self._handler
        if handler is None:
            handler = self._handler = import_module(api_module(self.family, self.key)).handle
        return handler(broker, request, session)


def handler_table(keys: Collection[int] = SERVED_KEYS) -> dict[int, Handler]:
    """The handler of each of `keys`, by API key (a plain int: looked up with each
    request's), the families only some clients use standing in until their first request."""
    table: dict[int, Handler] = {key: h for key, h in HANDLERS.items() if key in keys}
    for family, family_keys in IMPORTED_ON_FIRST_USE.items():
        table.update({int(k): OnFirstUse(family, int(k)) for k in family_keys if k in keys})
    return table
