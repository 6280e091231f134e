"""Share sessions (KIP-932): what a broker remembers of a share consumer's partitions between
ShareFetch requests, as fetch sessions do for consumers (KIP-227).

A ShareFetch at epoch 0 opens a member's session (replacing one it had), holding the
partitions it names; the next requests count the epoch up by one each, add partitions and
forget others; epoch -1 closes it, after its acknowledgements, and the records the member
holds are released; so does the end of the connection that opened it. A request at another
epoch is refused INVALID_SHARE_SESSION_EPOCH, one for a session that does not exist
SHARE_SESSION_NOT_FOUND.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    return 1 if epoch == _MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class ShareSession:
    node_id: int
    group_id: str
    member_id: str
    epoch: int = 0
    """The epoch the next request must carry (advanced as each request is taken)."""
    partitions: dict[tuple[uuid.UUID, int], None] = field(default_factory=dict)
    """The partitions fetched, by (topic id, partition), in the order first named."""
    connection: Any = None
    """The client connection's Session that opened it (nullbroker.sessions): as in Kafka,
    the share session closes when that connection does."""

    @property
    def key(self) -> tuple[int, str, str]:
        return (self.node_id, self.group_id, self.member_id)


class ShareSessions:
    """Every open share session, by (node id, group id, member id): a member keeps one
    with each broker that leads a partition it reads, as with Kafka's brokers."""

    def __init__(self, slots: int = 2000) -> None:
        self.slots = slots
        """Kafka's group.share.max.share.sessions."""
        self._sessions: dict[tuple[int, str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def open(self, node_id: int, group_id: str, member_id: str) -> ShareSession | ErrorCode:
        """A new session for the member with that node (epoch 0), in place of any."""
        key = (node_id, group_id, member_id)
        if key not in self._sessions and len(self._sessions) >= self.slots:
            return ErrorCode.share_session_limit_reached
        session = self._sessions[key] = ShareSession(node_id, group_id, member_id)
        return session

    def find(
        self, node_id: int, group_id: str, member_id: str, epoch: int
    ) -> ShareSession | ErrorCode:
        """The member's session with that node at `epoch` (not 0: a request continuing
        it, or -1 to close it), or the error it is refused with."""
        session = self._sessions.get((node_id, group_id, member_id))
        if session is None:
            return ErrorCode.share_session_not_found
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            return ErrorCode.invalid_share_session_epoch
        return session

    def advance(self, session: ShareSession) -> None:
        session.epoch = next_epoch(session.epoch)

    def close(self, session: ShareSession) -> None:
        self._sessions.pop(session.key, None)

    def is_open(self, session: ShareSession) -> bool:
        """Whether `session` is open still (not closed, nor replaced by a newer one)."""
        return self._sessions.get(session.key) is session

    def of_member(self, group_id: str, member_id: str) -> list[ShareSession]:
        """The member's sessions, with every node."""
        return [
            session
            for (_, group, member), session in self._sessions.items()
            if group == group_id and member == member_id
        ]

    def close_member(self, group_id: str, member_id: str) -> None:
        for session in self.of_member(group_id, member_id):
            self.close(session)
