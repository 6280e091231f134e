"""DescribeClientQuotas: the quotas set on the entities a filter matches (exactly, the
default, or any name of each component's type; `strict`: no other components), as Kafka
answers (nullbroker.state.client_quotas)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...java_hashing import java_hash_order
from ...state.client_quotas import QuotaRefused, ordered
from ..common import NO_THROTTLE, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.DESCRIBE_CLIENT_QUOTAS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(ApiKey.DESCRIBE_CLIENT_QUOTAS, request.header.api_version)
    body = request.body
    try:
        found = broker.client_quotas.describe(
            [(c.entity_type, c.match_type, c.match) for c in body.components], body.strict
        )
    except QuotaRefused as refused:
        return make(
            types.DescribeClientQuotasResponse,
            throttle_time=NO_THROTTLE,
            error_code=counted(broker, refused.error),
            error_message=refused.message,
            entries=None,
        )
    return make(
        types.DescribeClientQuotasResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message="",
        entries=tuple(
            make(
                types.EntryData,
                entity=tuple(
                    make(types.EntityData, entity_type=kind, entity_name=name)
                    for kind, name in ordered(entity)
                ),
                values=tuple(
                    make(types.ValueData, key=key, value=quotas[key])
                    for key in java_hash_order(list(quotas))
                ),
            )
            for entity, quotas in found
        ),
    )
