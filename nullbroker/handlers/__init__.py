"""Request handlers, grouped by API family, and what the broker serves: every API key with a
handler, at the versions Kafka 4.1 serves it (nullbroker.dispatch builds the table)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from codec import KAFKA_4_RANGES, ApiKey, ApiRange

from . import admin, alter_configs, api_versions, fetch, metadata, offsets, produce

if TYPE_CHECKING:
    from ..broker import Handler

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
