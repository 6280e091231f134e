"""Transactions (KIP-98): the coordinator's view of each transactional id, and what a
partition's log keeps of the transactions written to it.

The coordinator hands out a transactional id's producer id and epochs (fencing the older
producer), learns which partitions and groups a transaction touches, and ends it: a commit
or abort marker takes one offset in every partition the transaction wrote, as in Kafka, and
the marker for a group's partition of __consumer_offsets commits (or drops) the offsets the
group's coordinator staged for it (nullbroker.state.groups.transaction_offsets). A transaction
left open past its timeout is aborted by the broker.

Where another process leads some of the partitions (`--processes`), their markers go there as
Kafka's coordinator sends them, in a WriteTxnMarkers request: the transaction is then
PrepareCommit or PrepareAbort until every leader has written its marker, and EndTxn answers
once it has.

Transactions v2 (KIP-890 part 2, Kafka 4.1's finalized transaction.version=2): a producer
adds partitions by producing to them (Produce v12+) and groups by committing to them
(TxnOffsetCommit v5+), and each EndTxn v5 bumps its epoch, the markers carrying the new one:
a zombie's batches of the old epoch are fenced at once, and the producer's sequences start
again from 0. Older clients (transactions v1) add partitions first, and keep their epoch.

A partition keeps, for Fetch, the spans of offsets written transactionally (by whom), its
markers, its aborted transactions, and the first offset of each transaction still open: the
last stable offset, up to which a read_committed consumer may read. Nothing else is stored:
the records stay synthetic, served as their producer's transactional batches, and a
read_committed consumer leaves out the aborted ones from the Fetch response's list, as it
does with Kafka's.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

import trio
from kio.schema.errors import ErrorCode

from ..cluster.nodes import OFFSETS_TOPIC
from .producers import MAX_EPOCH, ProducerRegistry

MAX_TIMEOUT_MS = 15 * 60 * 1000
"""Kafka's transaction.max.timeout.ms: a producer asking for more is refused."""


class TxnState(StrEnum):
    """A transaction's state, as DescribeTransactions names it."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"


PREPARING = frozenset((TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT))
"""Ended, its markers not yet written everywhere: the id's requests are
CONCURRENT_TRANSACTIONS meanwhile, as in Kafka (the client retries)."""


@dataclass(slots=True)
class Transaction:
    """One transactional id's producer and its current transaction."""

    transactional_id: str
    producer_id: int
    epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    """The partitions in the transaction, those of __consumer_offsets holding the groups it
    commits offsets to among them (AddOffsetsToTxn adds the partition, as in Kafka)."""
    started: float = 0.0
    """When the transaction began (time.monotonic), for its timeout."""
    started_ms: int = -1
    """When the last transaction began, in ms since the epoch (DescribeTransactions); -1
    before the first, as Kafka reports it."""
    last_epoch: int = -1
    """The epoch before the last InitProducerId bumped it (Kafka's lastProducerEpoch): the
    producer retrying that call with it is given the current epoch again."""
    bumped: bool = False
    """The last end bumped the epoch (transactions v2): the same EndTxn again with the epoch
    before is a retry, answered with the producer's new id and epoch."""
    previous_producer_id: int = -1
    """The producer id before the last end ran out of epochs and took a new one."""
    written: trio.Event | None = None
    """While PrepareCommit or PrepareAbort: set once every marker is written."""

    def handed_over(self) -> Transaction:
        """This transaction as another process's coordinator takes it (a coordinator move):
        one whose markers are still on their way is complete there, as they are sent by
        the coordinator that ended it."""
        state = self.state
        if state in PREPARING:
            state = (
                TxnState.COMPLETE_COMMIT
                if state is TxnState.PREPARE_COMMIT
                else TxnState.COMPLETE_ABORT
            )
        copy = Transaction(**{name: getattr(self, name) for name in self.__dataclass_fields__})
        copy.state, copy.written, copy.partitions = state, None, set(self.partitions)
        return copy


class Segment(NamedTuple):
    """A stretch of a partition's offsets as a Fetch serves it: records (a transactional
    producer's, or not), or a marker."""

    start: int
    end: int
    marker: Marker | None = None
    producer: tuple[int, int] | None = None
    """The transactional producer (id, epoch) that wrote these records."""


class Marker(NamedTuple):
    """A commit or abort marker: a control batch of one record at its offset."""

    producer_id: int
    epoch: int
    commit: bool


@dataclass(slots=True)
class _Span:
    start: int
    end: int
    producer_id: int
    epoch: int
    aborted: bool = False


@dataclass(slots=True)
class PartitionTransactions:
    """What a partition's log knows of the transactions written to it."""

    open: dict[int, tuple[int, list[_Span]]] = field(default_factory=dict)
    """Each producer with a transaction open here: its first offset, and its spans."""
    spans: list[_Span] = field(default_factory=list)
    """Transactional records, in offset order."""
    span_starts: list[int] = field(default_factory=list)
    markers: dict[int, Marker] = field(default_factory=dict)
    marker_offsets: list[int] = field(default_factory=list)
    aborted: list[tuple[int, int, int]] = field(default_factory=list)
    """Each aborted transaction: producer id, its first offset here, its marker's offset."""

    def wrote(self, producer_id: int, epoch: int, base_offset: int, count: int) -> None:
        """A transactional batch of `count` records went in at `base_offset`."""
        span = _Span(base_offset, base_offset + count, producer_id, epoch)
        self.spans.append(span)
        self.span_starts.append(base_offset)
        opened = self.open.get(producer_id)
        if opened is None:
            self.open[producer_id] = (base_offset, [span])
        else:
            opened[1].append(span)

    def end(self, marker_offset: int, marker: Marker) -> int:
        """The producer's transaction ends here, with its marker at `marker_offset`: the
        number of records it wrote here."""
        opened = self.open.pop(marker.producer_id, None)
        self.markers[marker_offset] = marker
        self.marker_offsets.append(marker_offset)
        if opened is None:
            return 0
        if not marker.commit:
            for span in opened[1]:
                span.aborted = True
            self.aborted.append((marker.producer_id, opened[0], marker_offset))
        return sum(span.end - span.start for span in opened[1])

    def aborted_between(self, start: int, end: int) -> list[tuple[int, int]]:
        """The aborted transactions a Fetch of offsets `start` to `end` must list for a
        read_committed consumer, as Kafka lists them: (producer id, first offset) of each
        that ends at or after `start` and begins before `end`."""
        return [
            (producer_id, first)
            for producer_id, first, last in self.aborted
            if last >= start and first < end
        ]

    def aborted_spans(self, start: int, end: int) -> list[tuple[int, int]]:
        """The offsets of aborted transactions' records from `start` to `end`, as (first,
        one past the last) runs: what a read_committed share group archives unread."""
        first = max(bisect_right(self.span_starts, start) - 1, 0)
        runs = []
        for span in self.spans[first:]:
            if span.start >= end:
                break
            if span.aborted and span.end > start:
                runs.append((max(span.start, start), min(span.end, end)))
        return runs

    def last_stable_offset(self, log_end: int) -> int:
        """The first offset of the oldest transaction still open, else the log end."""
        if not self.open:
            return log_end
        return min(first for first, _ in self.open.values())

    def segments(self, start: int, end: int) -> Iterator[Segment]:
        """The offsets from `start` to `end` as a Fetch serves them, in order: records,
        each transactional producer's apart (a batch never holds two producers' records),
        and markers. A read_committed consumer drops the aborted ones itself, from the
        response's aborted transactions, as it does with Kafka's."""
        index = max(bisect_right(self.span_starts, start) - 1, 0)
        pieces: list[Segment] = []
        for span in self.spans[index:]:
            if span.start >= end:
                break
            if span.end > start:
                pieces.append(Segment(span.start, span.end, None, (span.producer_id, span.epoch)))
        markers = self.marker_offsets
        for offset in markers[bisect_right(markers, start - 1) :]:
            if offset >= end:
                break
            pieces.append(Segment(offset, offset + 1, self.markers[offset]))
        position = start
        for piece in sorted(pieces, key=lambda piece: piece.start):
            if piece.start > position:
                yield Segment(position, piece.start)
            yield piece._replace(start=max(piece.start, position), end=min(piece.end, end))
            position = min(piece.end, end)
        if position < end:
            yield Segment(position, end)


MarkerWriter = Callable[[list[tuple[str, int]], Marker, int], Awaitable[None] | None]
"""Writes a marker into partitions (topic, index) at a time (ms since the epoch): None once
written, or, where other processes lead some of them, what writes those when awaited."""


class TransactionCoordinator:
    """Every transactional id this broker coordinates, and what its transaction touched."""

    def __init__(
        self,
        producers: ProducerRegistry,
        write_markers: MarkerWriter,
        ended: Callable[[bool], None],
        offsets_partition: Callable[[str], int],
        in_background: Callable[[Callable[[], Awaitable[Any]]], None],
    ) -> None:
        self._producers = producers
        self._offsets_partition = offsets_partition
        """The partition of __consumer_offsets that holds a group id."""
        self._write_markers = write_markers
        self._in_background = in_background
        """Runs a task beside the requests (markers other processes write)."""
        self._ended = ended
        """Told of every transaction that ends: True for a commit (the accounts)."""
        self.transactions: dict[str, Transaction] = {}

    def init(
        self, transactional_id: str, timeout_ms: int, producer_id: int, epoch: int
    ) -> tuple[ErrorCode, int, int]:
        """InitProducerId for a transactional id: (error, producer id, epoch), as Kafka's
        coordinator answers it. A new producer of the id gets the next epoch, which fences
        the one before. A transaction still open is aborted first, at an epoch bumped to
        fence its producer, and the answer is CONCURRENT_TRANSACTIONS: the client retries,
        and the retry bumps the epoch again. A producer that names its id and epoch (KIP-360,
        `producer_id` >= 0) must be the id's: a retry of a call that bumped its epoch gets
        the same epoch again, an epoch older still is PRODUCER_FENCED."""
        if not 0 < timeout_ms <= MAX_TIMEOUT_MS:
            return ErrorCode.invalid_transaction_timeout, -1, -1
        known = self.transactions.get(transactional_id)
        if known is None:
            assigned_id, assigned_epoch = self._producers.init_producer()
            self.transactions[transactional_id] = Transaction(
                transactional_id, assigned_id, assigned_epoch, timeout_ms
            )
            return ErrorCode.none, assigned_id, assigned_epoch
        expected = producer_id >= 0
        if expected and not (
            producer_id == known.producer_id
            or (producer_id == known.previous_producer_id and epoch >= MAX_EPOCH - 1)
        ):
            return ErrorCode.producer_fenced, -1, -1
        if known.state in PREPARING:
            return ErrorCode.concurrent_transactions, -1, -1
        if known.state is TxnState.ONGOING:
            self._fence(known)
            return ErrorCode.concurrent_transactions, -1, -1
        previous_id, last_epoch = known.previous_producer_id, known.epoch
        if known.epoch >= MAX_EPOCH - 1 and (not expected or epoch == known.epoch):
            previous_id = known.producer_id
            assigned_id, assigned_epoch = self._producers.init_producer()
        elif not expected or epoch == known.epoch:
            assigned_id, assigned_epoch = known.producer_id, known.epoch + 1
        elif epoch == known.last_epoch:  # a retry of the call that bumped it
            assigned_id, assigned_epoch = known.producer_id, known.epoch
            last_epoch = known.last_epoch
        else:
            return ErrorCode.producer_fenced, -1, -1
        self.transactions[transactional_id] = Transaction(
            transactional_id,
            assigned_id,
            assigned_epoch,
            timeout_ms,
            previous_producer_id=previous_id,
            last_epoch=last_epoch if expected else -1,
        )
        return ErrorCode.none, assigned_id, assigned_epoch

    def _fence(self, transaction: Transaction) -> None:
        """Abort an open transaction because a new producer of its id arrived: the epoch
        goes up first, so the markers carry the new one and the old producer is fenced."""
        transaction.last_epoch = transaction.epoch
        transaction.epoch += 1
        self._end(transaction, commit=False)

    def _current(self, transactional_id: str, producer_id: int, epoch: int) -> Transaction:
        """The transaction of a request from this producer; raises TransactionError."""
        transaction = self.transactions.get(transactional_id)
        if transaction is None or transaction.producer_id != producer_id:
            raise TransactionError(ErrorCode.invalid_producer_id_mapping)
        if transaction.epoch != epoch:
            raise TransactionError(ErrorCode.producer_fenced)
        if transaction.state in PREPARING:
            raise TransactionError(ErrorCode.concurrent_transactions)
        return transaction

    def add_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: list[tuple[str, int]]
    ) -> ErrorCode:
        transaction = self._current(transactional_id, producer_id, epoch)
        self._begin(transaction)
        transaction.partitions.update(partitions)
        return ErrorCode.none

    def verify_produce(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partition: tuple[str, int],
        add: bool,
    ) -> ErrorCode:
        """A transactional batch for `partition` (KIP-890): its producer's, at its epoch,
        and in the transaction, where `add` (Produce v12+, transactions v2) puts it, as
        AddPartitionsToTxn would. TRANSACTION_ABORTABLE for a partition not added; a batch
        of another epoch is INVALID_PRODUCER_EPOCH, as Kafka answers Produce."""
        transaction = self.transactions.get(transactional_id)
        if transaction is None or transaction.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if transaction.epoch != epoch:
            return ErrorCode.invalid_producer_epoch
        if transaction.state in PREPARING:
            return ErrorCode.concurrent_transactions
        if add:
            self._begin(transaction)
            transaction.partitions.add(partition)
        elif transaction.state is not TxnState.ONGOING or partition not in transaction.partitions:
            return ErrorCode.transaction_abortable
        return ErrorCode.none

    def has_partitions(
        self, transactional_id: str, producer_id: int, epoch: int, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn's verify_only: which of `partitions` the transaction holds."""
        transaction = self._current(transactional_id, producer_id, epoch)
        ongoing = transaction.state is TxnState.ONGOING
        return {
            partition: ErrorCode.none
            if ongoing and partition in transaction.partitions
            else ErrorCode.transaction_abortable
            for partition in partitions
        }

    def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, group: str) -> None:
        """AddOffsetsToTxn: the partition of __consumer_offsets that holds `group` joins the
        transaction, as Kafka adds it."""
        transaction = self._current(transactional_id, producer_id, epoch)
        self._begin(transaction)
        transaction.partitions.add(self._group_partition(group))

    def _group_partition(self, group: str) -> tuple[str, int]:
        return OFFSETS_TOPIC, self._offsets_partition(group)

    def check_offsets(
        self, transactional_id: str, producer_id: int, epoch: int, group: str, add: bool = False
    ) -> None:
        """TxnOffsetCommit, as the group's coordinator asks the transaction's: may the
        producer commit offsets to `group` in its transaction? With `add` (v5+,
        transactions v2) the group's partition of __consumer_offsets joins the transaction,
        as AddOffsetsToTxn would add it; else a group whose partition is not in it is
        TRANSACTION_ABORTABLE. As Kafka checks the partition, not the group, any group held
        by a partition the transaction added may commit with it."""
        partition = self._group_partition(group)
        self.check_partition(transactional_id, producer_id, epoch, partition, add)

    def check_partition(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partition: tuple[str, int],
        add: bool,
    ) -> None:
        """The producer's transaction holds `partition`, added now with `add`; raises
        TransactionError."""
        transaction = self._current(transactional_id, producer_id, epoch)
        if add:
            self._begin(transaction)
            transaction.partitions.add(partition)
        if partition not in transaction.partitions or transaction.state is not TxnState.ONGOING:
            raise TransactionError(ErrorCode.transaction_abortable)

    def end(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool, bump: bool
    ) -> tuple[int, int]:
        """EndTxn: write the markers, and commit the staged offsets on a commit; the
        producer's id and epoch after it. With `bump` (EndTxn v5, transactions v2) the epoch
        goes up by one, the markers carrying the new one, and an abort with no transaction
        open bumps it too; a retry (the epoch before a bump) is answered again. Without, a
        retried EndTxn of a transaction that already ended the same way is answered again."""
        transaction = self.transactions.get(transactional_id)
        rotated_retry = (
            transaction is not None
            and transaction.bumped
            and producer_id == transaction.previous_producer_id
            and epoch == MAX_EPOCH - 1
            and transaction.epoch == 0
        )
        if transaction is None or (transaction.producer_id != producer_id and not rotated_retry):
            raise TransactionError(ErrorCode.invalid_producer_id_mapping)
        retry = bump and (rotated_retry or (transaction.bumped and transaction.epoch == epoch + 1))
        state = transaction.state
        if state in PREPARING:
            raise TransactionError(ErrorCode.concurrent_transactions)
        completed = state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        if epoch != transaction.epoch and not (retry and completed):
            raise TransactionError(ErrorCode.producer_fenced)
        ended_so = state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
        if state is TxnState.ONGOING:
            self._end(transaction, commit, bump)
        elif retry or (ended_so and not bump):
            if not ended_so:
                raise TransactionError(ErrorCode.invalid_txn_state)
        elif bump and not commit:
            # Transactions v2: an abort with nothing open still bumps the epoch (a producer
            # recovering from an abortable error starts over with it).
            self._end(transaction, commit, bump)
        else:
            raise TransactionError(ErrorCode.invalid_txn_state)
        return transaction.producer_id, transaction.epoch

    def expire(self, now: float | None = None) -> int:
        """Abort every transaction open past its timeout; how many there were."""
        now = time.monotonic() if now is None else now
        expired = [
            transaction
            for transaction in self.transactions.values()
            if transaction.state is TxnState.ONGOING
            and now - transaction.started > transaction.timeout_ms / 1000
        ]
        for transaction in expired:
            # As Kafka does: the epoch is bumped (the markers carry the new one), so the
            # producer that let it expire is fenced.
            self._end(transaction, commit=False, bump=True)
        return len(expired)

    def _begin(self, transaction: Transaction) -> None:
        if transaction.state is not TxnState.ONGOING:
            transaction.state = TxnState.ONGOING
            transaction.partitions = set()
            transaction.started = time.monotonic()
            transaction.started_ms = int(time.time() * 1000)

    def _end(self, transaction: Transaction, commit: bool, bump: bool = False) -> None:
        opened = transaction.state is TxnState.ONGOING
        exhausted = bump and transaction.epoch >= MAX_EPOCH - 1
        if bump:
            transaction.epoch += 1
        transaction.bumped = bump
        marker = Marker(transaction.producer_id, transaction.epoch, commit)
        written_ms = int(time.time() * 1000)
        partitions = sorted(transaction.partitions) if opened else []
        transaction.partitions = set()
        if exhausted:  # as Kafka: the producer goes on as a new id, from epoch 0
            transaction.previous_producer_id = transaction.producer_id
            transaction.producer_id, transaction.epoch = self._producers.init_producer()
        elsewhere = self._write_markers(partitions, marker, written_ms)
        if elsewhere is None:
            self._complete(transaction, commit, opened)
            return
        transaction.state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        written = transaction.written = trio.Event()

        async def complete() -> None:
            try:
                await elsewhere
            finally:
                if transaction.written is written:
                    self._complete(transaction, commit, opened)
                elif opened:  # handed over meanwhile: complete there, counted here
                    self._ended(commit)
                written.set()

        self._in_background(complete)

    def _complete(self, transaction: Transaction, commit: bool, opened: bool) -> None:
        transaction.state = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        transaction.written = None
        if opened:
            self._ended(commit)

    def hand_over(self, transactional_ids: list[str]) -> dict[str, Transaction]:
        """Give up transactional ids now coordinated by another process's node (`--processes`):
        their state, for the new coordinator (take_over)."""
        given = {}
        for transactional_id in transactional_ids:
            transaction = self.transactions.pop(transactional_id)
            given[transactional_id] = transaction.handed_over()
            transaction.written = None  # its markers are still sent from here
        return given

    def take_over(self, transactions: dict[str, Transaction]) -> None:
        self.transactions.update(transactions)


class TransactionError(Exception):
    """A transactional request refused with `code`."""

    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code
