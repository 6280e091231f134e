"""Request handlers, grouped by API family; the table of what the broker serves."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from codec import KAFKA_4_RANGES, ApiRange, Request

from . import admin, alter_configs, api_versions, fetch, metadata, offsets, produce

if TYPE_CHECKING:
    from ..broker import Broker, Handler, Session

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


def _on_first_use(family: str) -> Handler:
    def import_family(broker: Broker, request: Request, session: Session) -> Any:
        handlers: dict[int, Handler] = import_module(f"{__name__}.{family}").HANDLERS
        # Every later request of the family goes to its handler straight from the table
        # (the broker's: a worker of several processes serves a part of this one).
        table = broker.handlers
        table.update({key: handler for key, handler in handlers.items() if key in table})
        return handlers[request.header.api_key](broker, request, session)

    return import_family


HANDLERS: dict[int, Handler] = {
    **api_versions.HANDLERS,
    **metadata.HANDLERS,
    **produce.HANDLERS,
    **fetch.HANDLERS,
    **offsets.HANDLERS,
    **admin.HANDLERS,
    **alter_configs.HANDLERS,
    **{
        key: _on_first_use(family) for family, keys in IMPORTED_ON_FIRST_USE.items() for key in keys
    },
}


def served_ranges() -> dict[int, ApiRange]:
    """The version range of every API key with a handler: what ApiVersions advertises."""
    return {key: KAFKA_4_RANGES[key] for key in sorted(HANDLERS)}
