"""Fetch sessions (KIP-227): what a node remembers of each consumer's partitions between
Fetch requests, so that the consumer sends only what changed and hears only what changed.

As Kafka 4.1.1's FetchSessionCache: a Fetch at session epoch 0 opens a session (a random
non-zero id) holding the partitions it answered, with the high watermark and log start
offset it told of each; an incremental Fetch (the id, the next epoch) adds or updates the
partitions it names, drops its forgotten ones, and is answered only for the partitions
that have records, an error, or a high watermark or log start offset other than the
session last told. Epoch -1 closes a session. A node keeps `slots` sessions (Kafka's
max.incremental.fetch.session.cache.slots, 1000); when they are all taken, a new session
takes the place of the least recently used one if that one was idle for two minutes, or
else of the smallest one older than two minutes if it is smaller than the new one (Kafka's
eviction for consumers' sessions, in one shard where Kafka has eight of 125 slots);
otherwise the consumer gets session id 0 and sends full requests.

Sessions are per node: every connection to a node is served by the one process that
serves the node (nullbroker.workers.processes), so a node's sessions live in that process.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..stats import BrokerStats

NO_SESSION = 0
INITIAL_EPOCH = 0
"""A full Fetch asking for a new session."""
FINAL_EPOCH = -1
"""A full Fetch asking for none (closing the one it names)."""
EVICTION_MS = 120_000
"""How long a session must be idle, or have lived, before a new one may take its place
(Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS)."""
_MAX_EPOCH = 2**31 - 1

TopicKey = str | uuid.UUID | None
"""A topic as a session knows it: by name before Fetch v13, by id from v13."""


def next_epoch(epoch: int) -> int:
    """The session epoch after `epoch`, as Kafka's FetchMetadata.nextEpoch counts."""
    if epoch < 0:
        return epoch
    return 1 if epoch == _MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class CachedPartition:
    """A partition of a session: what the consumer last asked of it (read as a request's
    partition by the Fetch handler) and what it was last told."""

    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    high_watermark: int = -1
    log_start_offset: int = -1

    def ask(self, asked: Any) -> None:
        """Take a request's parameters for this partition."""
        self.fetch_offset = asked.fetch_offset
        self.partition_max_bytes = asked.partition_max_bytes
        self.current_leader_epoch = getattr(asked, "current_leader_epoch", -1)

    @classmethod
    def asked(cls, asked: Any) -> CachedPartition:
        return cls(
            asked.partition,
            asked.fetch_offset,
            asked.partition_max_bytes,
            getattr(asked, "current_leader_epoch", -1),
        )

    @classmethod
    def answered(cls, asked: Any, told: Any) -> CachedPartition:
        """A partition of a new session: as asked, and as the full Fetch told of it."""
        cached = cls.asked(asked)
        cached.high_watermark = told.high_watermark
        cached.log_start_offset = told.log_start_offset
        return cached

    def told(self, error: int, high_watermark: int, log_start_offset: int, size: int) -> bool:
        """Whether an incremental answer must list this partition (Kafka's
        CachedPartition.maybeUpdateResponseData), remembering what it tells."""
        must = (
            size > 0
            or error != 0
            or high_watermark != self.high_watermark
            or log_start_offset != self.log_start_offset
        )
        # A partition in error is remembered with no high watermark, so that it is told of
        # again once the error is gone.
        self.high_watermark = -1 if error else high_watermark
        self.log_start_offset = log_start_offset
        return must


@dataclass(slots=True)
class FetchSession:
    id: int
    epoch: int
    """The epoch the next incremental Fetch must carry."""
    by_ids: bool
    """Opened by Fetch v13+ (topics by id): later requests must name topics alike."""
    created_ms: float
    last_used_ms: float
    partitions: dict[tuple[TopicKey, int], CachedPartition] = field(default_factory=dict)
    """In the order answers list them: a partition served records moves to the end, so that
    a response size limit does not starve the partitions behind it."""
    runs: list[tuple[TopicKey, list[Any]]] | None = None
    """The partitions as runs of one topic, in order (the Fetch handler's), until they or
    their order change."""


class FetchSessionCache:
    """One node's fetch sessions, at most `slots`, by id in least recently used order."""

    def __init__(self, slots: int, stats: BrokerStats) -> None:
        self.slots = slots
        self._stats = stats
        self._sessions: dict[int, FetchSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def remove(self, session_id: int) -> None:
        if self._sessions.pop(session_id, None) is not None:
            self._stats.fetch_sessions_open -= 1
            self._stats.fetch_sessions["closed"] += 1

    def touch(self, session: FetchSession, now_ms: float) -> None:
        """Mark a session used now: the last to be evicted for idleness."""
        session.last_used_ms = now_ms
        del self._sessions[session.id]
        self._sessions[session.id] = session

    def open(
        self, partitions: dict[tuple[TopicKey, int], CachedPartition], by_ids: bool, now_ms: float
    ) -> int:
        """A new session holding `partitions`: its id, or NO_SESSION when every slot is
        taken by a session it may not evict."""
        if len(self._sessions) >= self.slots and not self._evict_for(len(partitions), now_ms):
            return NO_SESSION
        session_id = NO_SESSION
        while session_id == NO_SESSION or session_id in self._sessions:
            session_id = random.randrange(1, _MAX_EPOCH)
        session = FetchSession(
            session_id, next_epoch(INITIAL_EPOCH), by_ids, now_ms, now_ms, partitions
        )
        self._sessions[session_id] = session
        self._stats.fetch_sessions_open += 1
        self._stats.fetch_sessions["opened"] += 1
        return session_id

    def _evict_for(self, size: int, now_ms: float) -> bool:
        """Make room for a session of `size` partitions, as Kafka's tryEvict does for a
        consumer's: the least recently used session if idle long enough, else the smallest
        of those old enough if smaller. A scan, but only when every slot is taken."""
        if not self._sessions:
            return False
        oldest = next(iter(self._sessions.values()))
        if now_ms - oldest.last_used_ms > EVICTION_MS:
            return self._evict(oldest.id)
        evictable = [
            (len(session.partitions), session.id)
            for session in self._sessions.values()
            if now_ms - session.created_ms > EVICTION_MS
        ]
        if not evictable:
            return False
        smallest, session_id = min(evictable)
        # Kafka compares (size, id) with the new session's id as 0: equal sizes never evict.
        return size > smallest and self._evict(session_id)

    def _evict(self, session_id: int) -> bool:
        del self._sessions[session_id]
        self._stats.fetch_sessions_open -= 1
        self._stats.fetch_sessions["evicted"] += 1
        return True
