"""Request handlers, grouped by API family; the table of what the broker serves."""

from __future__ import annotations

from codec import KAFKA_4_RANGES, ApiRange

from . import (
    admin,
    alter_configs,
    api_versions,
    consumer_groups,
    fetch,
    groups,
    metadata,
    offsets,
    produce,
    sasl,
    transactions,
)

HANDLERS = {
    **api_versions.HANDLERS,
    **metadata.HANDLERS,
    **produce.HANDLERS,
    **fetch.HANDLERS,
    **offsets.HANDLERS,
    **admin.HANDLERS,
    **alter_configs.HANDLERS,
    **groups.HANDLERS,
    **consumer_groups.HANDLERS,
    **sasl.HANDLERS,
    **transactions.HANDLERS,
}


def served_ranges() -> dict[int, ApiRange]:
    """The version range of every API key with a handler: what ApiVersions advertises."""
    return {key: KAFKA_4_RANGES[key] for key in sorted(HANDLERS)}
