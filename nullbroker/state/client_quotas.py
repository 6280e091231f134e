"""Client quotas (KIP-546): what AlterClientQuotas sets and DescribeClientQuotas lists, kept
as Kafka's controller keeps them and checked as it checks them, in its words. nullbroker
throttles no client: the quotas are kept for the tools that set and read them
(`kafka-configs --entity-type users|clients|ips`).

An entity is a set of (type, name) components, the name None for the type's default: a user,
a client id, both, or an IP address alone."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from ..java_hashing import java_hash_order

USER, CLIENT_ID, IP = "user", "client-id", "ip"
EXACT, DEFAULT, ANY = 0, 1, 2
CLIENT_KEYS = frozenset(
    {"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"}
)
"""The quotas of a user or client id (QuotaConfig)."""
IP_KEYS = frozenset({"connection_creation_rate"})
INTEGRAL_KEYS = frozenset({"producer_byte_rate", "consumer_byte_rate", "connection_creation_rate"})
"""Quotas Kafka keeps as whole numbers: a fractional value is refused."""

Entity = frozenset[tuple[str, str | None]]


class QuotaRefused(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def ordered(entity: Iterable[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    """An entity's components in the order Kafka's map of them iterates (by type)."""
    names = dict(entity)
    return [(kind, names[kind]) for kind in java_hash_order(list(names))]


@dataclass(frozen=True, slots=True)
class Operation:
    key: str
    value: float
    remove: bool


class ClientQuotas:
    """Every entity's quotas, by entity, in the order they were first set."""

    def __init__(self) -> None:
        self.by_entity: dict[Entity, dict[str, float]] = {}

    def alter(
        self, components: list[tuple[str, str | None]], ops: list[Operation], validate_only: bool
    ) -> None:
        """Apply one entry's operations, or raise QuotaRefused as Kafka refuses it."""
        entity = _checked_entity(components)
        keys = CLIENT_KEYS if IP not in dict(entity) else IP_KEYS
        seen: set[str] = set()
        for op in ops:
            if op.key in seen:
                described = ", ".join(f"{kind}={name}" for kind, name in ordered(entity))
                raise QuotaRefused(
                    ErrorCode.invalid_request,
                    f"Ignoring duplicate entity ClientQuotaEntity(entries={{{described}}})",
                )
            seen.add(op.key)
        for op in ops:
            if op.key not in keys:
                raise QuotaRefused(ErrorCode.invalid_request, f"Invalid configuration key {op.key}")
            if op.remove:
                continue
            if op.key in INTEGRAL_KEYS and op.value != int(op.value):
                raise QuotaRefused(
                    ErrorCode.invalid_request, f"{op.key} cannot be a fractional value."
                )
            if op.value <= 0:
                raise QuotaRefused(
                    ErrorCode.invalid_request, f"Quota {op.key} must be greater than 0"
                )
        if validate_only:
            return
        quotas = self.by_entity.setdefault(entity, {})
        for op in ops:
            if op.remove:
                quotas.pop(op.key, None)
            else:
                quotas[op.key] = op.value
        if not quotas:
            del self.by_entity[entity]

    def describe(
        self, components: list[tuple[str, int, str | None]], strict: bool
    ) -> list[tuple[Entity, dict[str, float]]]:
        """The entities the filter matches, with their quotas; raises QuotaRefused for a
        filter Kafka refuses."""
        types = [kind for kind, _, _ in components]
        for kind, match_type, match in components:
            if kind not in (USER, CLIENT_ID, IP):
                raise QuotaRefused(ErrorCode.unsupported_version, f"Unsupported entity type {kind}")
            if match_type not in (EXACT, DEFAULT, ANY):
                raise QuotaRefused(ErrorCode.invalid_request, f"Unknown match type {match_type}")
            if match_type == EXACT and match is None:
                raise QuotaRefused(
                    ErrorCode.invalid_request,
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                )
            if types.count(kind) > 1:
                raise QuotaRefused(
                    ErrorCode.invalid_request,
                    f"Entity type {kind} cannot appear more than once in the filter.",
                )
        if IP in types and len(types) > 1:
            raise QuotaRefused(
                ErrorCode.invalid_request,
                "Invalid entity filter component combination. IP filter component should not "
                "be used with user or clientId filter component.",
            )
        found = []
        for entity, quotas in self.by_entity.items():
            names = dict(entity)
            if strict and set(names) != set(types):
                continue
            if all(
                kind in names and _matches(match_type, match, names[kind])
                for kind, match_type, match in components
            ):
                found.append((entity, quotas))
        return found


def _matches(match_type: int, match: str | None, name: str | None) -> bool:
    if match_type == EXACT:
        return name == match
    if match_type == DEFAULT:
        return name is None
    return True  # ANY: a name or the default


def _checked_entity(components: list[tuple[str, str | None]]) -> Entity:
    if not components:
        raise QuotaRefused(ErrorCode.invalid_request, "Invalid empty client quota entity")
    for kind, _ in components:
        if kind not in (USER, CLIENT_ID, IP):
            raise QuotaRefused(
                ErrorCode.invalid_request, f"Unhandled client quota entity type: {kind}"
            )
    names = dict(components)
    if IP in names and len(names) > 1:
        raise QuotaRefused(
            ErrorCode.invalid_request,
            # sic: Kafka's words, the missing space too
            "Invalid quota entity combination, IP entity shouldnot be combined with User or "
            "ClientId",
        )
    address = names.get(IP)
    if address is not None:
        try:
            ipaddress.ip_address(address)
        except ValueError:
            # Kafka resolves a host name here; nullbroker looks nothing up, and takes only
            # addresses (docs/compatibility.md).
            raise QuotaRefused(
                ErrorCode.invalid_request,
                f"{address} is not a valid IP or resolvable host.",
            ) from None
    return frozenset(names.items())
