"""StreamsGroupTopologyDescriptionUpdate (Kafka 4.4, KIP-1331): a member sends its topology's
description (processors, stores and their links) for a broker plugin to keep. Kafka 4.4.0
takes it only with `group.streams.topology.description.plugin.class` set, and has no plugin
of its own: without one it answers UNSUPPORTED_VERSION, and its heartbeats never ask a
member for the description. nullbroker answers as such a broker (checked against 4.4.0)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ..common import NO_THROTTLE, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


KEY = ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE
NO_PLUGIN = "The broker has no streams group topology description plugin configured."


def handle(broker: Broker, request: Request, session: Session) -> Any:
    types = response_module(KEY, request.header.api_version)
    return make(
        types.StreamsGroupTopologyDescriptionUpdateResponse,
        throttle_time=NO_THROTTLE,
        error_code=counted(broker, ErrorCode.unsupported_version),
        error_message=NO_PLUGIN,
    )
