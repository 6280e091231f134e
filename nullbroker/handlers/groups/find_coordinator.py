"""FindCoordinator: which node coordinates a group or a transactional id. Apart from the group
requests because it touches no group: it names the leader of the internal topic's partition
the key falls in (transactions ask it too), and the cluster's changes use its topic rule."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from codec import ApiKey, Request
from codec.entities import make, response_module

from ...cluster.nodes import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from ..common import NO_THROTTLE, counted

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session

GROUP_KEY = 0
TRANSACTION_KEY = 1
SHARE_KEY = 2
FIRST_FIND_COORDINATOR_BATCH = 4
# Kafka's text of INVALID_REQUEST (Errors.INVALID_REQUEST), where it has no other.
INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library or "
    "the message was sent to an incompatible broker. See the broker logs for more details."
)


KEY = ApiKey.FIND_COORDINATOR


def handle(broker: Broker, request: Request, session: Session) -> Any:
    version = request.header.api_version
    types = response_module(ApiKey.FIND_COORDINATOR, version)
    key_type = getattr(request.body, "key_type", GROUP_KEY)
    refusal = _refused_key_type(key_type)
    internal = internal_topic_for(request.body)
    if refusal is None:
        # Kafka makes the internal topic on the first FindCoordinator that needs it (and
        # answers COORDINATOR_NOT_AVAILABLE until it exists); here it is made at once.
        broker.topics.internal(internal)

    def coordinator(key: str) -> dict[str, Any]:
        if refusal is not None:
            return {
                "node_id": -1,
                "host": "",
                "port": -1,
                "error_code": counted(broker, ErrorCode.invalid_request),
                "error_message": refusal,
            }
        node = broker.cluster.coordinator(key, internal)
        address = session.node(broker.cluster, node)
        return {
            "node_id": node,
            "host": address.host,
            "port": address.port,
            "error_code": ErrorCode.none,
            # Kafka's wording of no error: "" in a v4+ coordinator, the error's name before.
            "error_message": "" if version >= FIRST_FIND_COORDINATOR_BATCH else "NONE",
        }

    if version >= FIRST_FIND_COORDINATOR_BATCH:
        return make(
            types.FindCoordinatorResponse,
            throttle_time=NO_THROTTLE,
            coordinators=tuple(
                make(types.Coordinator, key=key, **coordinator(key))
                for key in request.body.coordinator_keys
            ),
        )
    return make(
        types.FindCoordinatorResponse, throttle_time=NO_THROTTLE, **coordinator(request.body.key)
    )


def _refused_key_type(key_type: int) -> str | None:
    """The message of Kafka's INVALID_REQUEST for a key type it does not serve (None for
    one it does): a share group's ("" — Kafka 4.1 without share groups enabled, as
    nullbroker, which has none) or a key type it does not know (the error's own text)."""
    if key_type in (GROUP_KEY, TRANSACTION_KEY):
        return None
    return "" if key_type == SHARE_KEY else INVALID_REQUEST_MESSAGE


def internal_topic_for(find_coordinator: Any) -> str:
    """The internal topic whose partition leaders coordinate what a FindCoordinator request
    asks for: transactional ids, or groups."""
    if getattr(find_coordinator, "key_type", GROUP_KEY) == TRANSACTION_KEY:
        return TRANSACTION_STATE_TOPIC
    return OFFSETS_TOPIC
