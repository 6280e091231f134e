"""Small pieces every handler family uses."""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from ..cluster.nodes import (
    NO_LEADER_EPOCH,
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    internal_partition_for,
)

if TYPE_CHECKING:
    from ..broker import Broker
    from ..sessions import Session
    from ..state.topics import Topic

NO_THROTTLE = datetime.timedelta(0)

# Kafka's sentinel for "authorized operations were not requested".
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

# AclOperation codes (org.apache.kafka.common.acl.AclOperation).
_READ, _WRITE, _CREATE, _DELETE, _ALTER, _DESCRIBE = 3, 4, 5, 6, 7, 8
_CLUSTER_ACTION, _DESCRIBE_CONFIGS, _ALTER_CONFIGS, _IDEMPOTENT_WRITE = 9, 10, 11, 12

# The operations each resource type has, as Kafka's AclEntry.supportedOperations lists them.
# Kafka without an authorizer (AuthHelper.authorizedOperations) allows every one of them, and
# so does nullbroker: the bit set a client is told is this table's row.
_SUPPORTED_OPERATIONS: dict[str, tuple[int, ...]] = {
    "topic": (
        _READ,
        _WRITE,
        _CREATE,
        _DESCRIBE,
        _DELETE,
        _ALTER,
        _DESCRIBE_CONFIGS,
        _ALTER_CONFIGS,
    ),
    "group": (_READ, _DESCRIBE, _DELETE, _DESCRIBE_CONFIGS, _ALTER_CONFIGS),
    "cluster": (
        _CREATE,
        _CLUSTER_ACTION,
        _DESCRIBE_CONFIGS,
        _ALTER_CONFIGS,
        _IDEMPOTENT_WRITE,
        _ALTER,
        _DESCRIBE,
    ),
}


def _bits(operations: tuple[int, ...]) -> int:
    return sum(1 << operation for operation in operations)


TOPIC_OPERATIONS = _bits(_SUPPORTED_OPERATIONS["topic"])
GROUP_OPERATIONS = _bits(_SUPPORTED_OPERATIONS["group"])
CLUSTER_OPERATIONS = _bits(_SUPPORTED_OPERATIONS["cluster"])


def authorized_operations(requested: bool, operations: int) -> int:
    return operations if requested else AUTHORIZED_OPERATIONS_OMITTED


def counted(broker: Broker, error: ErrorCode) -> ErrorCode:
    """Return `error`, having counted it in the broker's accounts if it is one."""
    if error is not ErrorCode.none:
        broker.stats.error(error.name)
    return error


class Refusal(Exception):
    """A request part refused with a Kafka error code and a message, as Kafka words it."""

    def __init__(self, error: ErrorCode, message: str | None) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def coordinated_elsewhere(
    broker: Broker, session: Session, key: str, internal: str = OFFSETS_TOPIC
) -> bool:
    """Whether another node of the cluster coordinates the group id `key` (or the
    transactional id, with `internal` TRANSACTION_STATE_TOPIC): Kafka then answers
    NOT_COORDINATOR, and the client asks FindCoordinator again."""
    cluster = broker.cluster
    if cluster.size == 1:
        return False
    if cluster.coordinator(key, internal) != session.node_id:
        return True
    # Coordinated here since a move whose state (offsets, transactions) is still on its way
    # from the process that coordinated it (`--processes`): the client asks again, as when
    # a coordinator moves in Kafka.
    partition = internal_partition_for(key, cluster.internal_partitions[internal])
    return cluster.withheld(internal, partition)


def by_topic(partitions: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    """(topic, partition) pairs as a request lists them: each topic once, with its indexes."""
    topics: dict[str, list[int]] = {}
    for topic, index in partitions:
        topics.setdefault(topic, []).append(index)
    return topics


def coordinated_here(broker: Broker, transactional_id: str) -> bool:
    """Whether this process coordinates the transactional id: a lone broker every one, a
    worker of several processes those of the nodes it serves."""
    node = broker.cluster.coordinator(transactional_id, TRANSACTION_STATE_TOPIC)
    return broker.serves_node(node)


def client_host(session: Session) -> str:
    """A member's host as Kafka reports it, as Java's InetAddress.toString() prints it."""
    return "/" + session.peer.rpartition(":")[0]


def led_elsewhere(broker: Broker, node: int, topic: Topic | None) -> frozenset[int]:
    """The partitions of `topic` that `node` does not lead, which Produce, Fetch and
    ListOffsets answer with NOT_LEADER_OR_FOLLOWER there (nullbroker.cluster.nodes)."""
    cluster = broker.cluster
    if topic is None or cluster.size == 1:  # Produce's hot path: no more than this
        return _LED_HERE
    return cluster.followed(node, topic.name, len(topic.partitions))


_LED_HERE: frozenset[int] = frozenset()


def epoch_error(asked: int, current: int) -> ErrorCode:
    """Kafka's check of a client's current_leader_epoch (Partition.checkCurrentLeaderEpoch)
    against the partition's: an older one is FENCED_LEADER_EPOCH, a newer one (the client
    heard of a leader this broker has not) UNKNOWN_LEADER_EPOCH; either makes the client
    refresh its metadata."""
    if asked in (NO_LEADER_EPOCH, current):
        return ErrorCode.none
    return ErrorCode.fenced_leader_epoch if asked < current else ErrorCode.unknown_leader_epoch
