"""What the transaction coordinator's APIs share: the node that coordinates a transactional
id (or a group id), and a refusal as the request's version knows it. The state they change
is nullbroker.state.transactions'."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from ...cluster.nodes import TRANSACTION_STATE_TOPIC
from ...state.transactions import TransactionError
from ..common import coordinated_elsewhere

if TYPE_CHECKING:
    from ...broker import Broker
    from ...sessions import Session


FIRST_PRODUCER_FENCED_VERSION = 2
"""Before these versions (KIP-588), clients know a fenced producer as INVALID_PRODUCER_EPOCH."""


def wrong_coordinator(
    broker: Broker, session: Session, key: str, internal: str = TRANSACTION_STATE_TOPIC
) -> ErrorCode | None:
    """NOT_COORDINATOR when another node coordinates the transactional id (or, with
    `internal` OFFSETS_TOPIC, the group id), as for groups."""
    if coordinated_elsewhere(broker, session, key, internal):
        return ErrorCode.not_coordinator
    return None


def coordinated_change(
    broker: Broker,
    session: Session,
    key: str,
    body: Any,
    version: int,
    change: Callable[..., object],
    *arguments: Any,
    internal: str = TRANSACTION_STATE_TOPIC,
) -> ErrorCode:
    """A transactional request's error: NOT_COORDINATOR on the wrong node (`key` decides
    the node), else what `change` (a call on the transaction coordinator, given the body's
    transactional id, producer id and epoch, then `arguments`) refused it with, else none."""
    refused = wrong_coordinator(broker, session, key, internal)
    if refused is not None:
        return refused
    try:
        change(body.transactional_id, body.producer_id, body.producer_epoch, *arguments)
    except TransactionError as error:
        return known_to_version(error.code, version)
    return ErrorCode.none


def known_to_version(error: ErrorCode, version: int) -> ErrorCode:
    if error is ErrorCode.producer_fenced and version < FIRST_PRODUCER_FENCED_VERSION:
        return ErrorCode.invalid_producer_epoch
    return error
