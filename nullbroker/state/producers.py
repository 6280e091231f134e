"""Producer ids and the idempotence checks Kafka makes on each batch's sequence numbers."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

# Kafka remembers the metadata of the last five batches per producer and partition: the
# most a producer has in flight (max.in.flight.requests.per.connection <= 5 with idempotence).
RECENT_BATCHES = 5

FIRST_PRODUCER_ID = 1000
MAX_EPOCH = 32767
COORDINATOR_EPOCH = 0
"""The epoch of nullbroker's transaction coordinator, which never moves: Kafka's first (a
new cluster's __transaction_state leader) is 0 too."""


class SequenceVerdict(Enum):
    ACCEPT = "accept"
    DUPLICATE = "duplicate"
    OUT_OF_ORDER = "out of order"
    FENCED = "fenced"


class RecentBatch(NamedTuple):
    """An accepted batch's sequences, offset and timestamp. A NamedTuple: made once per
    idempotent batch, and by nullbroker/handlers/_produce_lane.c as well, as a tuple."""

    first_sequence: int
    last_sequence: int
    base_offset: int
    timestamp: int
    """The batch's max timestamp, as Kafka's BatchMetadata keeps it: a retry of the batch is
    answered with it as its log_append_time."""


@dataclass(slots=True)
class PartitionSequences:
    """One producer's sequence state on one partition."""

    epoch: int
    last_sequence: int = -1
    last_timestamp: int = -1
    """The max timestamp of the producer's last batch here, or its last marker's time
    (DescribeProducers), as Kafka's ProducerStateEntry keeps it."""
    coordinator_epoch: int = -1
    """The epoch of the transaction coordinator that wrote the producer's last marker here
    (DescribeProducers); -1 before any."""
    recent: deque[RecentBatch] = field(default_factory=lambda: deque(maxlen=RECENT_BATCHES))


@dataclass(slots=True)
class SequenceCheck:
    verdict: SequenceVerdict
    duplicate: RecentBatch | None = None
    """The batch this one repeats (DUPLICATE): its answer is that batch's."""


def _afresh(state: PartitionSequences | None, epoch: int) -> PartitionSequences:
    """A producer's state on a partition from a new epoch: no sequences yet, and the
    coordinator epoch of its last marker kept, as Kafka's ProducerStateEntry keeps it."""
    fresh = PartitionSequences(epoch)
    if state is not None:
        fresh.coordinator_epoch = state.coordinator_epoch
    return fresh


class ProducerRegistry:
    """Hands out producer ids and epochs, and checks batch sequences per partition."""

    def __init__(self, first_id: int = FIRST_PRODUCER_ID, step: int = 1) -> None:
        self._next_id = first_id
        self._step = step
        """Ids go up by `step` from `first_id`: worker k of P processes hands out
        FIRST_PRODUCER_ID + k + n*P, so no two processes give a producer the same id."""
        self._sequences: dict[tuple[int, str, int], PartitionSequences] = {}

    def init_producer(self) -> tuple[int, int]:
        """The (producer id, epoch) for an InitProducerId request without a transactional
        id (nullbroker.state.transactions keeps those): always a new id at epoch 0, as Kafka's
        coordinator gives one, even to an idempotent producer that names the id and epoch
        it had (KIP-360): the new id is as good as a bumped epoch, and needs no state."""
        return self._allocate(), 0

    def _allocate(self) -> int:
        producer_id = self._next_id
        self._next_id += self._step
        return producer_id

    def check(
        self,
        producer_id: int,
        epoch: int,
        topic: str,
        partition: int,
        first_sequence: int,
        last_sequence: int,
        first_must_be_zero: bool = False,
    ) -> SequenceCheck:
        """Judge a batch's sequence numbers against what this producer sent before.

        As Kafka's ProducerAppendInfo.checkSequence: a producer with no state on the
        partition may start at any sequence (its earlier batches may have been deleted),
        unless `first_must_be_zero` (a transactional batch of Produce v12+, transactions
        v2, which Kafka checks so); a new epoch starts at 0."""
        state = self._sequences.get((producer_id, topic, partition))
        if state is None and not first_must_be_zero:
            return SequenceCheck(SequenceVerdict.ACCEPT)
        if state is None or epoch > state.epoch:
            if first_sequence != 0:
                return SequenceCheck(SequenceVerdict.OUT_OF_ORDER)
            return SequenceCheck(SequenceVerdict.ACCEPT)
        if epoch < state.epoch:
            return SequenceCheck(SequenceVerdict.FENCED)
        for batch in state.recent:
            if batch.first_sequence == first_sequence and batch.last_sequence == last_sequence:
                return SequenceCheck(SequenceVerdict.DUPLICATE, batch)
        if first_sequence != (state.last_sequence + 1) % (2**31):
            return SequenceCheck(SequenceVerdict.OUT_OF_ORDER)
        return SequenceCheck(SequenceVerdict.ACCEPT)

    def record(
        self,
        producer_id: int,
        epoch: int,
        topic: str,
        partition: int,
        first_sequence: int,
        last_sequence: int,
        base_offset: int,
        max_timestamp: int,
    ) -> None:
        """Remember an accepted batch, so a retry of it is recognised as a duplicate."""
        key = (producer_id, topic, partition)
        state = self._sequences.get(key)
        if state is None or state.epoch != epoch:
            state = self._sequences[key] = _afresh(state, epoch)
        state.last_sequence = last_sequence
        state.last_timestamp = max_timestamp
        state.recent.append(RecentBatch(first_sequence, last_sequence, base_offset, max_timestamp))

    def marker_written(
        self, producer_id: int, epoch: int, topic: str, partition: int, timestamp_ms: int
    ) -> None:
        """A transaction's marker of `epoch` went into the partition at `timestamp_ms`. From
        a newer epoch (transactions v2 bump it at every end) the producer starts there
        afresh, as Kafka's producer state does: its sequences from 0, a batch of the epoch
        before fenced."""
        key = (producer_id, topic, partition)
        state = self._sequences.get(key)
        if state is None or state.epoch < epoch:
            state = self._sequences[key] = _afresh(state, epoch)
        state.last_timestamp = timestamp_ms
        state.coordinator_epoch = COORDINATOR_EPOCH

    def sequences_table(self) -> dict[tuple[int, str, int], PartitionSequences]:
        """The sequence state by (producer id, topic, partition), itself, not a copy: the
        Produce lane (nullbroker/handlers/produce_lane.py) checks and moves it in C."""
        return self._sequences

    def on_partition(self, topic: str, partition: int) -> list[tuple[int, PartitionSequences]]:
        """Every producer's sequence state on a partition, by producer id (DescribeProducers)."""
        return [
            (key[0], state)
            for key, state in self._sequences.items()
            if key[1] == topic and key[2] == partition
        ]

    def epoch_on(self, producer_id: int, topic: str, partition: int) -> int | None:
        """The producer's last epoch on a partition; None if it has written none there."""
        state = self._sequences.get((producer_id, topic, partition))
        return None if state is None else state.epoch

    def take_partition(self, topic: str, partition: int) -> list[tuple[int, PartitionSequences]]:
        """Every producer's sequence state on a partition, by producer id, leaving none: the
        partition's leader is moving to another process (`--processes`)."""
        keys = [key for key in self._sequences if key[1] == topic and key[2] == partition]
        return [(key[0], self._sequences.pop(key)) for key in keys]

    def put_partition(
        self, topic: str, partition: int, states: list[tuple[int, PartitionSequences]]
    ) -> None:
        """Take over what `take_partition` gave."""
        for producer_id, state in states:
            self._sequences[producer_id, topic, partition] = state

    def forget_topic(self, topic: str) -> None:
        """Drop the sequence state of a deleted topic."""
        for key in [key for key in self._sequences if key[1] == topic]:
            del self._sequences[key]
