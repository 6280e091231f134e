"""Request handlers, grouped by API family, and what the broker serves: every API key with a
handler, at the versions Kafka 4.1 serves it (nullbroker.dispatch builds the table)."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from importlib import import_module
from typing import TYPE_CHECKING, Any

from codec import KAFKA_4_RANGES, ApiKey, ApiRange

from . import admin, alter_configs, api_versions, fetch, metadata, offsets, produce

if TYPE_CHECKING:
    from codec import Request

    from ..broker import Broker, Handler, Session

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
    ),
    "consumer_groups": (ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE),
    "transactions": (
        ApiKey.ADD_PARTITIONS_TO_TXN,
        ApiKey.ADD_OFFSETS_TO_TXN,
        ApiKey.END_TXN,
        ApiKey.TXN_OFFSET_COMMIT,
        ApiKey.DESCRIBE_PRODUCERS,
        ApiKey.DESCRIBE_TRANSACTIONS,
        ApiKey.LIST_TRANSACTIONS,
    ),
    "sasl": (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE),
}
"""The families only some clients use, by module, with the API keys they serve. A family's
module, and the state it imports (the group coordinators, transactions, SASL), is imported
by the family's first request, not by every broker: a producer and a consumer that reads
without a group never load them (tests/processes/test_imports.py)."""

HANDLERS: dict[int, Handler] = {
    **api_versions.HANDLERS,
    **metadata.HANDLERS,
    **produce.HANDLERS,
    **fetch.HANDLERS,
    **offsets.HANDLERS,
    **admin.HANDLERS,
    **alter_configs.HANDLERS,
}
"""The handlers every broker loads, by API key."""

SERVED_KEYS: tuple[int, ...] = tuple(
    sorted({*HANDLERS, *(key for keys in IMPORTED_ON_FIRST_USE.values() for key in keys)})
)
"""Every API key with a handler, loaded or to be loaded on first use."""


def served_ranges(keys: Iterable[int] = SERVED_KEYS) -> dict[int, ApiRange]:
    """The version range of each of `keys`: what ApiVersions advertises."""
    return {key: KAFKA_4_RANGES[key] for key in sorted(keys)}


class OnFirstUse:
    """The handler of one API key of a family only some clients use
    (IMPORTED_ON_FIRST_USE): it imports the family's module with the first request of the
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
            module = import_module(f"{__name__}.{self.family}")
            handler = self._handler = module.HANDLERS[self.key]
        return handler(broker, request, session)


def handler_table(keys: Collection[int] = SERVED_KEYS) -> dict[int, Handler]:
    """The handler of each of `keys`, by API key (a plain int: looked up with each
    request's), the families only some clients use standing in until their first request."""
    table: dict[int, Handler] = {int(key): h for key, h in HANDLERS.items() if key in keys}
    for family, family_keys in IMPORTED_ON_FIRST_USE.items():
        table.update({int(k): OnFirstUse(family, int(k)) for k in family_keys if k in keys})
    return table
