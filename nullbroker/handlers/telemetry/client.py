"""The client a telemetry request came from, as KIP-714's subscriptions select clients: its
client id, the software it named in ApiVersions, its address and port."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codec import Request

    from ...sessions import Session
    from ...state.client_metrics import ClientInstance, ClientMetrics

UNKNOWN = "unknown"
"""Kafka's name and version of a client that did not say (ApiVersions before v3)."""


def described(request: Request, session: Session) -> dict[str, str]:
    name, version = session.client_software or (UNKNOWN, UNKNOWN)
    host, _, port = session.peer.rpartition(":")
    return {
        "client_id": request.header.client_id or "",
        "client_software_name": name,
        "client_software_version": version,
        "client_source_address": host.strip("[]"),
        "client_source_port": port,
    }


def made_here(client_metrics: ClientMetrics, instance: ClientInstance, session: Session) -> None:
    """Tie a new `instance` to the connection whose request made it: Kafka forgets an
    instance when that connection closes."""
    if not instance.tied:
        instance.tied = True
        session.on_close[("client-metrics", instance.instance_id)] = lambda: client_metrics.forget(
            instance
        )
