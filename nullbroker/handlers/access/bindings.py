"""What DescribeAcls, CreateAcls and DeleteAcls share: the ACL bindings and filters Kafka
cannot read. Kafka's request classes refuse one with an UNKNOWN element (code 0) in their
validation, and the broker closes the connection; nullbroker does as it does. Any other
code passes (ANY, MATCH, or one Kafka has no name for: checked), and is answered as a broker
without an authorizer answers everything."""

from __future__ import annotations

from collections.abc import Iterable

from codec.errors import UndecodableRequest

UNKNOWN = 0
"""The UNKNOWN code of ResourceType, PatternType, AclOperation and AclPermissionType."""


def refuse_unknown(api: str, elements: Iterable[tuple[int, int, int, int]]) -> None:
    """Close the connection, as Kafka does, for a binding or filter (resource type, pattern
    type, operation, permission type) with an UNKNOWN element."""
    for binding in elements:
        if UNKNOWN in binding:
            raise UndecodableRequest(f"{api}: an ACL with UNKNOWN elements, as Kafka refuses it")
