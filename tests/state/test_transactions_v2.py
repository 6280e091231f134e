"""Transactions v2 (KIP-890 part 2), as Kafka 4.1 serves them with transaction.version=2
finalized: Produce v12+ and TxnOffsetCommit v5+ add their partition or group to the
transaction, EndTxn v5 bumps the producer's epoch at every commit or abort (the markers
carry the new one, a retry with the epoch before is answered again), and a batch of the old
epoch is fenced. Older versions keep transactions v1. The answers asserted here are those
the shared Kafka 4.1.1 gave to the same requests; test_every_answer_is_kafkas replays the
sequence against the session's Kafka and compares.

In-process tests call a Broker with kio entities; Kafka's Java producer runs transactions v2
in tests/clients/test_java_tools.py."""

from __future__ import annotations

import datetime
import struct
from typing import Any

import pytest
import trio
from kio.schema.errors import ErrorCode
from kio.serial.errors import SerialError

from codec.crc import crc32c
from nullbroker.app.pytest_plugin import StartBroker
from nullbroker.broker import Broker
from nullbroker.settings import Config
from nullbroker.state.producers import MAX_EPOCH
from perf.kafka_broker import KafkaBroker
from tests.support.kafka_wire import FrameStream
from tests.support.kio_calls import call, record_batch, types

PRODUCE, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 0, 22, 24, 26
TXN_OFFSET_COMMIT, OFFSET_FETCH, LIST_TRANSACTIONS, CREATE_TOPICS = 28, 9, 66, 19
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS = 61, 65
FIND_COORDINATOR, GROUP_KEY, TRANSACTION_KEY, GROUP = 10, 0, 1, "tv2-group"
TOPIC = "orders"
TRANSACTIONAL_ID = "tv2"
TRANSACTIONAL = 0x10
ATTRIBUTES_OFFSET, CRC_OFFSET = 21, 17


def transactional_batch(producer_id: int, epoch: int, sequence: int, count: int = 2) -> bytes:
    """A batch of `count` records from a transactional producer, as a client writes it."""
    batch = bytearray(
        record_batch(count, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)
    )
    (attributes,) = struct.unpack_from(">h", batch, ATTRIBUTES_OFFSET)
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, attributes | TRANSACTIONAL)
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c(bytes(batch[ATTRIBUTES_OFFSET:])))
    return bytes(batch)


def init_fields(transactional_id: str, version: int = 5) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "transactional_id": transactional_id,
        "transaction_timeout": datetime.timedelta(minutes=1),
    }
    if version >= 3:
        fields |= {"producer_id": -1, "producer_epoch": -1}
    return fields


def produce_fields(
    version: int,
    producer: tuple[int, int],
    sequence: int,
    partition: int = 0,
    topic: str = TOPIC,
    transactional_id: str = TRANSACTIONAL_ID,
) -> dict[str, Any]:
    t = types(PRODUCE, version)
    batch = transactional_batch(*producer, sequence)
    return {
        "transactional_id": transactional_id,
        "acks": -1,
        "timeout": datetime.timedelta(seconds=5),
        "topic_data": (
            t.TopicProduceData(
                name=topic,
                partition_data=(t.PartitionProduceData(index=partition, records=batch),),
            ),
        ),
    }


def end_fields(
    producer: tuple[int, int], commit: bool, transactional_id: str = TRANSACTIONAL_ID
) -> dict[str, Any]:
    return {
        "transactional_id": transactional_id,
        "producer_id": producer[0],
        "producer_epoch": producer[1],
        "committed": commit,
    }


def add_fields(producer: tuple[int, int], partition: int = 0) -> dict[str, Any]:
    t = types(ADD_PARTITIONS_TO_TXN, 3)
    return {
        "v3_and_below_transactional_id": TRANSACTIONAL_ID,
        "v3_and_below_producer_id": producer[0],
        "v3_and_below_producer_epoch": producer[1],
        "v3_and_below_topics": (t.AddPartitionsToTxnTopic(name=TOPIC, partitions=(partition,)),),
    }


def offset_commit_fields(
    version: int,
    producer: tuple[int, int],
    group: str,
    topic: str = TOPIC,
    transactional_id: str = TRANSACTIONAL_ID,
) -> dict[str, Any]:
    t = types(TXN_OFFSET_COMMIT, version)
    partition = t.TxnOffsetCommitRequestPartition(
        partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata=None
    )
    return {
        "transactional_id": transactional_id,
        "group_id": group,
        "producer_id": producer[0],
        "producer_epoch": producer[1],
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": (t.TxnOffsetCommitRequestTopic(name=topic, partitions=(partition,)),),
    }


class Script:
    """One transactional producer's requests, answered by an in-process broker; each step
    returns what a comparison with Kafka looks at (errors, the epoch, never offsets)."""

    def __init__(self) -> None:
        self.broker = Broker(Config(partitions=2))
        self.broker.topics.get_or_auto_create(TOPIC)
        answer = call(self.broker, INIT_PRODUCER_ID, 5, **init_fields(TRANSACTIONAL_ID))
        assert answer.error_code is ErrorCode.none
        self.producer = (answer.producer_id, answer.producer_epoch)

    def produce(
        self, version: int, sequence: int, epoch: int | None = None, partition: int = 0
    ) -> tuple[ErrorCode, int]:
        producer = (self.producer[0], self.producer[1] if epoch is None else epoch)
        answer = call(
            self.broker, PRODUCE, version, **produce_fields(version, producer, sequence, partition)
        )
        result = answer.responses[0].partition_responses[0]
        return result.error_code, result.base_offset

    def end(
        self, commit: bool, version: int = 5, epoch: int | None = None
    ) -> tuple[ErrorCode, int, int]:
        producer = (self.producer[0], self.producer[1] if epoch is None else epoch)
        answer = call(self.broker, END_TXN, version, **end_fields(producer, commit))
        if version < 5:
            return answer.error_code, -1, -1
        if answer.error_code is ErrorCode.none:
            self.producer = (answer.producer_id, answer.producer_epoch)
        return answer.error_code, answer.producer_id, answer.producer_epoch

    def partition(self, index: int = 0) -> Any:
        return self.broker.topics.get(TOPIC).partitions[index]


def test_produce_v12_adds_its_partition_and_end_txn_v5_bumps_the_epoch_in_the_markers() -> None:
    script = Script()
    producer_id, epoch = script.producer
    assert script.produce(12, 0) == (ErrorCode.none, 0)
    partition = script.partition()
    assert partition.transactions.last_stable_offset(partition.log_end_offset) == 0
    assert script.end(commit=True) == (ErrorCode.none, producer_id, epoch + 1)
    # The marker at offset 2 carries the new epoch, as Kafka writes it; nothing is open.
    assert partition.transactions.markers[2] == (producer_id, epoch + 1, True)
    assert partition.transactions.last_stable_offset(partition.log_end_offset) == 3
    assert script.broker.stats.transactional_records["committed"] == 2


def test_a_retried_end_txn_v5_is_answered_again_and_any_other_epoch_is_fenced() -> None:
    script = Script()
    producer_id, epoch = script.producer
    script.produce(12, 0)
    assert script.end(commit=True) == (ErrorCode.none, producer_id, epoch + 1)
    # The same request again, with the epoch before the bump: a retry.
    assert script.end(commit=True, epoch=epoch) == (ErrorCode.none, producer_id, epoch + 1)
    assert script.end(commit=False, epoch=epoch) == (ErrorCode.invalid_txn_state, -1, -1)
    assert script.end(commit=True, epoch=epoch + 5) == (ErrorCode.producer_fenced, -1, -1)
    # A commit with nothing open is refused; an abort bumps the epoch all the same.
    assert script.end(commit=True) == (ErrorCode.invalid_txn_state, -1, -1)
    assert script.end(commit=False) == (ErrorCode.none, producer_id, epoch + 2)
    assert script.broker.stats.transactions == {"committed": 1}


def test_end_txn_before_v5_keeps_the_epoch_as_transactions_v1() -> None:
    script = Script()
    producer_id, epoch = script.producer
    assert call(script.broker, ADD_PARTITIONS_TO_TXN, 3, **add_fields(script.producer))
    assert script.produce(11, 0)[0] is ErrorCode.none
    assert script.end(commit=True, version=4)[0] is ErrorCode.none
    assert script.partition().transactions.markers[2] == (producer_id, epoch, True)
    assert script.end(commit=True, version=4)[0] is ErrorCode.none  # a retry
    assert script.end(commit=False, version=4)[0] is ErrorCode.invalid_txn_state
    # A v5 commit of the same epoch is no retry: that end did not bump it.
    assert script.end(commit=True)[:1] == (ErrorCode.invalid_txn_state,)


def test_an_abort_v4_with_nothing_open_is_invalid_but_v5_bumps_the_epoch() -> None:
    script = Script()
    producer_id, epoch = script.producer
    assert script.end(commit=False, version=4)[0] is ErrorCode.invalid_txn_state
    assert script.end(commit=True) == (ErrorCode.invalid_txn_state, -1, -1)
    assert script.end(commit=False) == (ErrorCode.none, producer_id, epoch + 1)
    assert script.partition().transactions is None, "no marker for a transaction never open"


@pytest.mark.parametrize(
    ("version", "error"),
    [(11, ErrorCode.transaction_abortable), (10, ErrorCode.invalid_txn_state)],
)
def test_produce_before_v12_into_a_partition_not_added_is_refused(
    version: int, error: ErrorCode
) -> None:
    script = Script()
    assert script.produce(version, 0) == (error, -1)
    assert script.partition().log_end_offset == 0
    assert call(script.broker, ADD_PARTITIONS_TO_TXN, 3, **add_fields(script.producer))
    assert script.produce(version, 0) == (ErrorCode.none, 0)


def test_after_a_bump_the_old_epoch_is_fenced_and_sequences_start_again_at_zero() -> None:
    script = Script()
    producer_id, epoch = script.producer
    script.produce(12, 0)
    script.end(commit=True)
    assert script.produce(12, 2, epoch=epoch) == (ErrorCode.invalid_producer_epoch, -1)
    assert script.produce(12, 4) == (ErrorCode.out_of_order_sequence_number, -1)
    # The partition's producer state took the marker's epoch: its sequences start afresh,
    # and a batch of the epoch before is fenced there too, sent without transactional id.
    ((_, state),) = script.broker.producers.on_partition(TOPIC, 0)
    assert (state.epoch, state.last_sequence) == (epoch + 1, -1)
    stale = produce_fields(12, (producer_id, epoch), 2) | {"transactional_id": None}
    answer = call(script.broker, PRODUCE, 12, **stale).responses[0].partition_responses[0]
    assert answer.error_code is ErrorCode.invalid_producer_epoch
    assert script.produce(12, 0) == (ErrorCode.none, 3)
    assert script.produce(12, 0) == (ErrorCode.none, 3)  # a duplicate
    assert script.end(commit=False) == (ErrorCode.none, producer_id, epoch + 2)
    partition = script.partition()
    assert partition.transactions.aborted == [(producer_id, 3, 5)]


def test_a_produce_of_an_unknown_producer_is_an_invalid_mapping() -> None:
    script = Script()
    producer_id, epoch = script.producer
    script.producer = (producer_id + 1, epoch)
    assert script.produce(12, 0) == (ErrorCode.invalid_producer_id_mapping, -1)


@pytest.mark.parametrize(
    ("version", "error"),
    [
        (5, ErrorCode.none),
        (4, ErrorCode.transaction_abortable),
        (3, ErrorCode.invalid_txn_state),
    ],
)
def test_txn_offset_commit_v5_adds_its_group_and_commits_with_the_transaction(
    version: int, error: ErrorCode
) -> None:
    script = Script()
    group = f"tv2-group-{version}"
    answer = call(
        script.broker,
        TXN_OFFSET_COMMIT,
        version,
        **offset_commit_fields(version, script.producer, group),
    )
    assert answer.topics[0].partitions[0].error_code is error
    assert script.end(commit=True)[0] is (
        ErrorCode.none if error is ErrorCode.none else ErrorCode.invalid_txn_state
    )
    t = types(OFFSET_FETCH, 8)
    fetched = call(
        script.broker,
        OFFSET_FETCH,
        8,
        require_stable=False,
        groups=(
            t.OffsetFetchRequestGroup(
                group_id=group,
                topics=(t.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=(0,)),),
            ),
        ),
    )
    committed = fetched.groups[0].topics[0].partitions[0].committed_offset
    assert committed == (5 if error is ErrorCode.none else -1)


def test_a_require_stable_offset_fetch_waits_out_offsets_an_open_transaction_staged() -> None:
    script = Script()
    group = "tv2-stable"
    call(script.broker, TXN_OFFSET_COMMIT, 5, **offset_commit_fields(5, script.producer, group))
    t = types(OFFSET_FETCH, 8)

    def fetched(require_stable: bool) -> list[tuple[int, int, ErrorCode]]:
        asked = t.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=(0, 1))
        answer = call(
            script.broker,
            OFFSET_FETCH,
            8,
            require_stable=require_stable,
            groups=(t.OffsetFetchRequestGroup(group_id=group, topics=(asked,)),),
        )
        return [
            (partition.partition_index, partition.committed_offset, partition.error_code)
            for partition in answer.groups[0].topics[0].partitions
        ]

    none = ErrorCode.none
    assert fetched(True) == [(0, -1, ErrorCode.unstable_offset_commit), (1, -1, none)]
    assert fetched(False) == [(0, -1, none), (1, -1, none)]
    script.end(commit=True)
    assert fetched(True) == [(0, 5, none), (1, -1, none)]


def test_an_exhausted_epoch_goes_on_as_a_new_producer_id_and_a_retry_is_answered() -> None:
    script = Script()
    producer_id, _ = script.producer
    script.broker.transactions.transactions[TRANSACTIONAL_ID].epoch = MAX_EPOCH - 1
    script.producer = (producer_id, MAX_EPOCH - 1)
    script.produce(12, 0)
    error, new_id, new_epoch = script.end(commit=True)
    assert (error, new_epoch) == (ErrorCode.none, 0) and new_id != producer_id
    assert script.partition().transactions.markers[2] == (producer_id, MAX_EPOCH, True)
    script.producer = (producer_id, MAX_EPOCH - 1)
    assert script.end(commit=True) == (ErrorCode.none, new_id, 0)


def test_list_transactions_v2_keeps_the_ids_its_pattern_matches_whole() -> None:
    b = Broker(Config())
    for transactional_id in ("orders-1", "orders-2", "payments"):
        call(b, INIT_PRODUCER_ID, 5, **init_fields(transactional_id))

    def listed(pattern: str | None) -> tuple[ErrorCode, list[str]]:
        answer = call(
            b,
            LIST_TRANSACTIONS,
            2,
            state_filters=(),
            producer_id_filters=(),
            duration_filter=-1,
            transactional_id_pattern=pattern,
        )
        ids = sorted(state.transactional_id for state in answer.transaction_states)
        return answer.error_code, ids

    everything = (ErrorCode.none, ["orders-1", "orders-2", "payments"])
    assert listed(None) == listed("") == everything
    assert listed("orders") == (ErrorCode.none, [])
    assert listed("orders-.*") == (ErrorCode.none, ["orders-1", "orders-2"])
    assert listed("[unclosed") == (ErrorCode.invalid_regular_expression, [])


# Kafka as the oracle: the same requests to both brokers, the same answers.

RETRIABLE = {
    ErrorCode.concurrent_transactions,
    ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.not_coordinator,
    ErrorCode.not_leader_or_follower,
    ErrorCode.unknown_topic_or_partition,
}
"""What Kafka answers while it writes markers, loads its coordinators or elects a new
topic's leader; nullbroker never does. A step is sent again after them."""
ATTEMPTS = 100
PAUSE_SECONDS = 0.1


class Remote:
    """The script's requests over TCP to a broker, each sent again while Kafka is busy."""

    def __init__(self, stream: FrameStream, transactional_id: str, topic: str) -> None:
        self.stream = stream
        self.transactional_id = transactional_id
        self.topic = topic
        self.producer = (-1, -1)

    async def request(self, key: int, version: int, error: Any, **fields: Any) -> Any:
        """The first answer whose error (`error(answer)`) is not a retriable one."""
        schema = types(key, version)
        request_type = next(
            value for name, value in vars(schema).items() if name.endswith("Request")
        )
        for _ in range(ATTEMPTS):
            answer = await self.stream.request(request_type(**fields))
            if error(answer) not in RETRIABLE:
                return answer
            await trio.sleep(PAUSE_SECONDS)
        raise AssertionError(f"still {error(answer)} after {ATTEMPTS} attempts")

    async def find_coordinator(self, key_type: int, key: str) -> None:
        """As clients do first: Kafka makes its transaction state or offsets topic then."""
        await self.request(
            FIND_COORDINATOR, 4, lambda a: a.coordinators[0].error_code,
            key_type=key_type, coordinator_keys=(key,),
        )  # fmt: skip

    async def init(self) -> tuple[str, int]:
        await self.find_coordinator(TRANSACTION_KEY, self.transactional_id)
        fields = init_fields(self.transactional_id)
        fields |= {"producer_id": self.producer[0], "producer_epoch": self.producer[1]}
        answer = await self.request(INIT_PRODUCER_ID, 5, lambda a: a.error_code, **fields)
        self.producer = (answer.producer_id, answer.producer_epoch)
        return answer.error_code.name, answer.producer_epoch

    async def produce(self, version: int, epoch: int, sequence: int, partition: int) -> str:
        producer = (self.producer[0], epoch)
        fields = produce_fields(
            version, producer, sequence, partition, self.topic, self.transactional_id
        )
        answer = await self.request(
            PRODUCE, version, lambda a: a.responses[0].partition_responses[0].error_code, **fields
        )
        return str(answer.responses[0].partition_responses[0].error_code.name)

    async def end(self, version: int, epoch: int, commit: bool) -> tuple[str, int]:
        fields = end_fields((self.producer[0], epoch), commit, self.transactional_id)
        answer = await self.request(END_TXN, version, lambda a: a.error_code, **fields)
        new_epoch = getattr(answer, "producer_epoch", -1)
        if answer.error_code is ErrorCode.none and version >= 5:
            self.producer = (answer.producer_id, new_epoch)
        await self.until_complete()
        return answer.error_code.name, new_epoch

    async def until_complete(self) -> None:
        """Kafka writes the markers after it answers EndTxn; until they are written it
        answers the next EndTxn as it answers one in the middle of a transaction."""
        describe = types(DESCRIBE_TRANSACTIONS, 0).DescribeTransactionsRequest
        for _ in range(ATTEMPTS):
            try:
                answer = await self.stream.request(
                    describe(transactional_ids=(self.transactional_id,))
                )
            except SerialError:
                return  # kio refuses the start time -1 of an id with no transaction yet
            if not answer.transaction_states[0].transaction_state.startswith("Prepare"):
                return
            await trio.sleep(PAUSE_SECONDS)

    async def commit_offsets(self, version: int, epoch: int) -> str:
        await self.find_coordinator(GROUP_KEY, GROUP)
        producer = (self.producer[0], epoch)
        fields = offset_commit_fields(version, producer, GROUP, self.topic, self.transactional_id)
        answer = await self.request(
            TXN_OFFSET_COMMIT, version, lambda a: a.topics[0].partitions[0].error_code, **fields
        )
        return str(answer.topics[0].partitions[0].error_code.name)

    async def stable_offsets(self) -> list[tuple[int, int, str]]:
        """OffsetFetch v8 with require_stable (KIP-447) of the group's partitions 0 and 1."""
        t = types(OFFSET_FETCH, 8)
        asked = t.OffsetFetchRequestTopics(name=self.topic, partition_indexes=(0, 1))
        group = t.OffsetFetchRequestGroup(group_id=GROUP, topics=(asked,))
        answer = await self.stream.request(
            t.OffsetFetchRequest(groups=(group,), require_stable=True)
        )
        return [
            (partition.partition_index, partition.committed_offset, partition.error_code.name)
            for topic in answer.groups[0].topics
            for partition in topic.partitions
        ]

    async def producers(self, partition: int) -> list[tuple[int, int, int]]:
        """DescribeProducers: each producer's epoch, last sequence and open transaction's
        first offset on the partition."""
        t = types(DESCRIBE_PRODUCERS, 0)
        asked = t.TopicRequest(name=self.topic, partition_indexes=(partition,))
        answer = await self.stream.request(t.DescribeProducersRequest(topics=(asked,)))
        (described,) = answer.topics[0].partitions
        return [
            (state.producer_epoch, state.last_sequence, state.current_txn_start_offset)
            for state in described.active_producers
        ]

    async def verify(self, version: int, epoch: int, partition: int) -> str:
        t = types(ADD_PARTITIONS_TO_TXN, version)
        transaction = t.AddPartitionsToTxnTransaction(
            transactional_id=self.transactional_id,
            producer_id=self.producer[0],
            producer_epoch=epoch,
            verify_only=True,
            topics=(t.AddPartitionsToTxnTopic(name=self.topic, partitions=(partition,)),),
        )

        def error(answer: Any) -> ErrorCode:
            (result,) = answer.results_by_transaction
            return result.topic_results[0].results_by_partition[0].partition_error_code

        answer = await self.request(
            ADD_PARTITIONS_TO_TXN, version, error, transactions=(transaction,)
        )
        return error(answer).name


async def transactions_v2_script(remote: Remote) -> list[Any]:
    """Every answer of one producer's life under transactions v2, errors and epochs."""
    t = types(CREATE_TOPICS, 7)
    created = await remote.stream.request(
        t.CreateTopicsRequest(
            topics=(
                t.CreatableTopic(
                    name=remote.topic, num_partitions=2, replication_factor=1, assignments=(),
                    configs=(),
                ),
            ),
            timeout=datetime.timedelta(seconds=10),
            validate_only=False,
        )
    )  # fmt: skip
    assert created.topics[0].error_code is ErrorCode.none
    answers: list[Any] = [await remote.init()]
    answers += [
        await remote.produce(12, 0, 0, partition=0),
        await remote.produce(11, 0, 0, partition=1),
        await remote.produce(10, 0, 0, partition=1),
        await remote.verify(5, 0, partition=0),
        await remote.verify(4, 0, partition=1),
        await remote.end(5, 0, commit=True),
        await remote.end(5, 0, commit=True),
        await remote.end(5, 0, commit=False),
        await remote.end(5, 1, commit=True),
        await remote.produce(12, 0, 2, partition=0),
        await remote.produce(12, 1, 4, partition=0),
        await remote.produce(12, 1, 0, partition=0),
        await remote.commit_offsets(4, 1),
        await remote.commit_offsets(5, 1),
        await remote.stable_offsets(),
        await remote.end(5, 1, commit=False),
        await remote.stable_offsets(),
        await remote.end(4, 1, commit=False),
        await remote.end(5, 2, commit=False),
        await remote.end(5, 9, commit=True),
        await remote.init(),
        await remote.end(4, 4, commit=False),
        await remote.producers(0),
        await remote.producers(1),
    ]
    return answers


async def test_every_answer_is_kafkas(kafka: KafkaBroker, nullbroker_factory: StartBroker) -> None:
    answers = []
    for name, bootstrap in (
        ("kafka", kafka.bootstrap),
        ("nullbroker", nullbroker_factory().bootstrap),
    ):
        host, port = bootstrap.rsplit(":", 1)
        stream = FrameStream(await trio.open_tcp_stream(host, int(port)))
        suffix = f"{name}-{trio.current_time()}"
        remote = Remote(stream, f"tv2-{suffix}", f"tv2-{suffix}".replace(".", "-"))
        answers.append(await transactions_v2_script(remote))
        await stream.aclose()
    kafkas, ours = answers
    assert ours == kafkas
    assert kafkas[6] == ("none", 1), "Kafka bumps the epoch at a commit (transactions v2)"
