"""AlterClientQuotas: quotas set on users, client ids and IP addresses (`kafka-configs --alter
--entity-type users|clients|ips --add-config producer_byte_rate=...`), kept and checked as
Kafka's controller does (nullbroker.state.client_quotas); nothing is throttled."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...state.client_quotas import Operation, QuotaRefused, ordered
from ..common import NO_THROTTLE, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.ALTER_CLIENT_QUOTAS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.ALTER_CLIENT_QUOTAS, request.header.api_version)
    body = request.body
    entries = []
    for entry in body.entries:
        components = [(part.entity_type, part.entity_name) for part in entry.entity]
        error, message = ErrorCode.none, None
        try:
            broker.client_quotas.alter(
                components,
                [Operation(op.key, float(op.value), op.remove) for op in entry.ops],
                body.validate_only,
            )
        except QuotaRefused as refused:
            error, message = refused.error, refused.message
        entries.append(
            make(
                types.EntryData,
                error_code=counted(broker, error),
                error_message=message,
                entity=tuple(
                    make(types.EntityData, entity_type=kind, entity_name=name)
                    for kind, name in ordered(components)
                ),
            )
        )
    return make(types.AlterClientQuotasResponse, throttle_time=NO_THROTTLE, entries=tuple(entries))
