"""Request handlers, grouped by API family, and what the broker serves: every API key with a
handler, at the versions Kafka 4.1 serves it (nullbroker.dispatch builds the table)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from codec import KAFKA_4_RANGES, ApiRange

from . import admin, alter_configs, api_versions, fetch, metadata, offsets, produce

if TYPE_CHECKING:
    from ..broker import Handler

IMPORTED_ON_FIRST_USE: dict[str, tuple[int, ...]] = {
    "groups": (8, 9, 10, 11, 12, 13, 14, 15, 16, 42, 47),
    "consumer_groups": (68, 69),
    "transactions": (24, 25, 26, 28, 61, 65, 66),
    "sasl": (17, 36),
}
"""The families only some clients use, by module, with the API keys they serve. A family's
module, and the state it imports (the group coordinators, transactions, SASL), is imported
by the family's first request, not by every broker: a producer and a consumer that reads
without a group never load them (tests/test_imports.py)."""

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
