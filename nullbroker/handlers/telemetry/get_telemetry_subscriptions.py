"""GetTelemetrySubscriptions: a client's instance id (made for it on its first request) and
what it is to push, how often, compressed how, as Kafka 4.4.0 answers
(nullbroker.state.client_metrics): too soon after its last request, THROTTLING_QUOTA_EXCEEDED
with nothing else, unless its last push was refused for its subscription or compression."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...clock import now_ms
from ...state.client_metrics import ACCEPTED_COMPRESSION_TYPES
from ..common import NO_THROTTLE, counted
from .client import described, made_here

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.GET_TELEMETRY_SUBSCRIPTIONS


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(KEY, request.header.api_version)
    client_metrics = broker.client_metrics
    error, instance = client_metrics.get_subscription(
        request.body.client_instance_id, described(request, session), now_ms()
    )
    if instance is None:
        return make(
            types.GetTelemetrySubscriptionsResponse,
            throttle_time=NO_THROTTLE,
            error_code=counted(broker, error),
            client_instance_id=None,
            subscription_id=0,
            accepted_compression_types=(),
            push_interval=datetime.timedelta(0),
            telemetry_max_bytes=0,
            delta_temporality=False,
            requested_metrics=(),
        )
    made_here(client_metrics, instance, session)
    return make(
        types.GetTelemetrySubscriptionsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        client_instance_id=instance.instance_id,
        subscription_id=instance.subscription_id,
        accepted_compression_types=ACCEPTED_COMPRESSION_TYPES,
        push_interval=datetime.timedelta(milliseconds=instance.interval_ms),
        telemetry_max_bytes=client_metrics.max_bytes,
        delta_temporality=True,
        requested_metrics=instance.metrics,
    )
