"""PushTelemetry: a client's metrics, refused as Kafka 4.4.0 refuses them
(nullbroker.state.client_metrics: a reserved id, after a terminating push, too soon, for a
subscription that changed, an unknown compression type, over `telemetry.max.bytes`), and
otherwise decompressed, decoded and kept (nullbroker.state.pushed_metrics) where Kafka
hands them to its plugins. A payload that cannot be read is INVALID_RECORD, as Kafka
answers when it cannot inflate one or its plugin fails, and a line in the log."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...clock import now_ms
from ..common import NO_THROTTLE, counted
from .client import described, made_here

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.PUSH_TELEMETRY


def handle(broker: Broker, request: Request, session: Session) -> Any:
    started = time.thread_time_ns()
    body = request.body
    now = now_ms()
    client = described(request, session)
    client_metrics = broker.client_metrics
    error, instance = client_metrics.push(
        body.client_instance_id,
        body.subscription_id,
        body.terminating,
        body.compression_type,
        len(body.metrics),
        client,
        now,
    )
    if instance is not None:
        made_here(client_metrics, instance, session)
    if error is ErrorCode.telemetry_too_large:
        broker.warnings.warning(
            session.host,
            "telemetry too large",
            "PushTelemetry from %s (client id %r, instance %s): %d bytes, over "
            "telemetry.max.bytes (%d); answered TELEMETRY_TOO_LARGE",
            session.peer,
            client["client_id"],
            body.client_instance_id,
            len(body.metrics),
            client_metrics.max_bytes,
        )
    if error is ErrorCode.none and instance is not None and body.metrics:
        error = _kept(broker, body, instance.client, instance.interval_ms, session, now)
        instance.last_error = error
    types = response_module(KEY, request.header.api_version)
    response = make(
        types.PushTelemetryResponse, throttle_time=NO_THROTTLE, error_code=counted(broker, error)
    )
    broker.pushed_metrics.cpu_ns += time.thread_time_ns() - started
    return response


def _kept(
    broker: Broker, body: Any, client: dict[str, str], interval_ms: int, session: Session, now: int
) -> ErrorCode:
    """The push's metrics read and kept: none, or INVALID_RECORD for a payload that cannot
    be read."""
    from .payload import PayloadRefused, inflated, read_points

    pushed = broker.pushed_metrics
    try:
        resource, points, unread = read_points(
            inflated(body.compression_type, body.metrics, broker.client_metrics.max_bytes),
            pushed.max_series,
        )
    except PayloadRefused as refused:
        pushed.refused_payloads += 1
        broker.warnings.warning(
            session.host,
            "unreadable telemetry",
            "PushTelemetry from %s (client id %r, instance %s): %s; answered INVALID_RECORD",
            session.peer,
            client.get("client_id", ""),
            body.client_instance_id,
            refused,
        )
        return ErrorCode.invalid_record
    pushed.dropped_series += unread
    pushed.record(
        body.client_instance_id,
        client,
        interval_ms,
        resource,
        points,
        len(body.metrics),
        body.terminating,
        now,
        session.peer,
    )
    if not body.terminating and _CLOSED_KEY not in session.on_close:
        # Its closing push may never come (PushedMetrics.closed): the connection's close says
        # it ended. One entry a connection, made at its first push, whatever instances push.
        session.on_close[_CLOSED_KEY] = lambda: pushed.closed(session.peer)
    return ErrorCode.none


_CLOSED_KEY = ("pushed-metrics", "closed")
