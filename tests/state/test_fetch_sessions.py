"""Fetch sessions (KIP-227) through Dispatch.answer, in-process: opening, incremental fetches
answered with what changed, forgetting and adding partitions, session errors, closing, held
incremental fetches, the cache's bound and eviction. Kafka's own answers to the same
sequences are compared in tests/oracle/test_differential_flows.py."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Sequence
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode

from codec import ApiKey
from nullbroker.broker import Broker
from nullbroker.settings import Config
from nullbroker.state.fetch_sessions import EVICTION_MS, FetchSessionCache, next_epoch
from nullbroker.stats import BrokerStats
from tests.handlers.test_fetch import MIB, PartitionAsk, fetch_request, held_until_produced
from tests.handlers.test_handlers import produce
from tests.support.kio_calls import (
    SESSION,
    answered,
    decode_response,
    dispatch_of,
    record_batch,
    request_frame,
)

CEILING_S = 10.0
VERSIONS = [12, 13, 16]

Asked = Sequence[tuple[str, Sequence[PartitionAsk]]]


class Consumer:
    """A consumer's half of a fetch session, as the Java client keeps it."""

    def __init__(self, broker: Broker, version: int) -> None:
        self.broker = broker
        self.version = version
        self.session_id = 0
        self.epoch = 0

    def request(
        self,
        asked: Asked = (),
        forgotten: Asked = (),
        *,
        session_id: int | None = None,
        epoch: int | None = None,
        **limits: int,
    ) -> bytes:
        body = fetch_request(self.version, self._keyed(asked), **limits)
        forgotten_body = fetch_request(self.version, self._keyed(forgotten))
        forget = tuple(
            self._forgotten(topic.topic_id if self.version >= 13 else topic.topic, topic)
            for topic in forgotten_body.topics
        )
        body = dataclasses.replace(
            body,
            session_id=self.session_id if session_id is None else session_id,
            session_epoch=self.epoch if epoch is None else epoch,
            forgotten_topics_data=forget,
        )
        return request_frame(ApiKey.FETCH, self.version, body)

    def _forgotten(self, key: Any, topic: Any) -> Any:
        from tests.support.kio_calls import types

        t = types(ApiKey.FETCH, self.version)
        fields = {"topic_id": key} if self.version >= 13 else {"topic": key}
        return t.ForgottenTopic(**fields, partitions=tuple(p.partition for p in topic.partitions))

    def _keyed(self, asked: Asked) -> list[tuple[Any, Sequence[PartitionAsk]]]:
        keyed: list[tuple[Any, Sequence[PartitionAsk]]] = []
        for name, partitions in asked:
            topic = self.broker.topics.get(name)
            key = topic.id if topic is not None and self.version >= 13 else name
            keyed.append((key, partitions))
        return keyed

    def fetch(self, asked: Asked = (), forgotten: Asked = (), **fields: Any) -> Any:
        """A Fetch answered at once; the session's id and epoch move on as a client's do."""
        frame = self.request(asked, forgotten, **fields)
        return self.took(answered(dispatch_of(self.broker).answer(frame, SESSION)))

    def took(self, frame: bytes) -> Any:
        _, response = decode_response(ApiKey.FETCH, self.version, frame)
        if response.error_code is ErrorCode.none:
            if response.session_id != self.session_id:
                self.session_id, self.epoch = response.session_id, 0
            self.epoch = next_epoch(self.epoch) if self.session_id else 0
        return response


def listed(response: Any) -> list[tuple[int, int, int]]:
    """(partition, high watermark, records bytes) of each partition an answer lists."""
    return [
        (data.partition_index, data.high_watermark, len(data.records or b""))
        for topic in response.responses
        for data in topic.partitions
    ]


def broker_with(*topics: tuple[str, int], **settings: Any) -> Broker:
    b = Broker(Config(**settings))
    for name, records in topics:
        produce(b, name, 0, record_batch(records))
    return b


@pytest.mark.parametrize("version", VERSIONS)
def test_an_incremental_fetch_lists_only_partitions_with_records_or_news(version: int) -> None:
    b = broker_with(("a", 2), ("b", 3))
    consumer = Consumer(b, version)
    opened = consumer.fetch([("a", [(0, 0, MIB)]), ("b", [(0, 3, MIB)])])
    assert opened.session_id > 0
    assert [(p, hw) for p, hw, _ in listed(opened)] == [(0, 2), (0, 3)]
    # The consumer moves past a's records; nothing is new anywhere: an empty answer.
    quiet = consumer.fetch([("a", [(0, 2, MIB)])])
    assert (quiet.error_code, quiet.session_id, listed(quiet)) == (
        ErrorCode.none,
        opened.session_id,
        [],
    )
    # A produce to b: b alone is listed, with its records, though the request names no
    # partition at all.
    produce(b, "b", 0, record_batch(1))
    news = consumer.fetch()
    assert [(p, hw) for p, hw, size in listed(news) if size] == [(0, 4)]
    assert b.stats.fetch_requests == {"full": 1, "incremental": 2}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_session_adds_and_forgets_partitions(version: int) -> None:
    b = broker_with(("a", 2), ("b", 2))
    consumer = Consumer(b, version)
    consumer.fetch([("a", [(0, 2, MIB)])])
    added = consumer.fetch([("b", [(0, 2, MIB)])])
    assert listed(added) == [(0, 2, 0)], "a new partition is told of once"
    assert listed(consumer.fetch()) == []
    consumer.fetch(forgotten=[("b", [(0, 0, MIB)])])
    produce(b, "b", 0, record_batch(1))
    assert listed(consumer.fetch()) == [], "a forgotten partition is no longer watched"
    # Forgetting the last partition ends the session: answered without one, and gone.
    last = consumer.fetch(forgotten=[("a", [(0, 0, MIB)])])
    assert last.session_id == 0 and len(b.fetch_sessions[0]) == 0


@pytest.mark.parametrize("version", VERSIONS)
def test_session_errors_answer_no_partitions_and_keep_the_session(version: int) -> None:
    b = broker_with(("a", 2))
    consumer = Consumer(b, version)
    consumer.fetch([("a", [(0, 0, MIB)])])
    for fields, error in (
        ({"epoch": consumer.epoch + 1}, ErrorCode.invalid_fetch_session_epoch),
        ({"session_id": consumer.session_id + 1}, ErrorCode.fetch_session_id_not_found),
    ):
        refused = consumer.fetch(**fields)
        assert (refused.error_code, refused.session_id, refused.responses) == (error, 0, ())
    assert consumer.fetch().error_code is ErrorCode.none, "the session still serves"


def test_a_session_keeps_the_topic_naming_it_was_opened_with() -> None:
    b = broker_with(("a", 2))
    consumer = Consumer(b, 13)
    consumer.fetch([("a", [(0, 0, MIB)])])
    consumer.version = 12
    refused = consumer.fetch()
    assert refused.error_code is ErrorCode.fetch_session_topic_id_error


@pytest.mark.parametrize("version", VERSIONS)
def test_epoch_minus_one_closes_the_session_and_fetches_without_one(version: int) -> None:
    b = broker_with(("a", 2))
    consumer = Consumer(b, version)
    consumer.fetch([("a", [(0, 0, MIB)])])
    opened = consumer.session_id
    closing = consumer.fetch([("a", [(0, 0, MIB)])], epoch=-1)
    assert closing.session_id == 0
    ((partition, high_watermark, size),) = listed(closing)
    assert (partition, high_watermark) == (0, 2) and size > 0, "a full answer"
    gone = consumer.fetch(session_id=opened, epoch=1)
    assert gone.error_code is ErrorCode.fetch_session_id_not_found
    assert b.stats.fetch_sessions == {"opened": 1, "closed": 1}
    assert b.stats.fetch_sessions_open == 0


def test_a_partition_served_records_moves_behind_the_others() -> None:
    """So that a response size limit does not starve the partitions behind it (Kafka)."""
    b = broker_with(("a", 2), ("b", 2))
    consumer = Consumer(b, 12)
    consumer.fetch([("a", [(0, 0, MIB)]), ("b", [(0, 0, MIB)])])
    # Both still read from 0: both listed with records, a (served last time) now after b.
    again = consumer.fetch()
    assert [topic.topic for topic in again.responses] == ["a", "b"]
    produce(b, "a", 0, record_batch(1))
    produce(b, "b", 0, record_batch(1))
    later = consumer.fetch()
    assert [topic.topic for topic in later.responses] == ["a", "b"]


async def test_a_held_incremental_fetch_waits_on_every_partition_of_its_session() -> None:
    b = broker_with(("a", 2), ("b", 2))
    consumer = Consumer(b, 16)
    consumer.fetch([("a", [(0, 2, MIB)]), ("b", [(0, 2, MIB)])])
    # Names no partition: what it waits on is the session's.
    frame = await held_until_produced(b, consumer.request(max_wait_ms=60_000), "b", 3)
    response = consumer.took(frame)
    (topic,) = response.responses
    assert topic.topic_id == b.topics.get("b").id  # type: ignore[union-attr]
    assert listed(response) == [(0, 5, len(topic.partitions[0].records))]


async def test_a_client_leaving_a_held_fetch_leaves_its_session_usable() -> None:
    b = broker_with(("a", 2))
    consumer = Consumer(b, 16)
    consumer.fetch([("a", [(0, 2, MIB)])])
    with trio.move_on_after(0.05):
        answer = dispatch_of(b).answer(consumer.request(max_wait_ms=60_000), SESSION)
        assert inspect.isawaitable(answer)
        await answer
    # The held fetch moved the session to the next epoch when it came (as in Kafka); the
    # client, never having heard, may carry on from it or open a new session.
    assert consumer.fetch(epoch=consumer.epoch + 1).error_code is ErrorCode.none
    held_full = dispatch_of(b).answer(
        consumer.request([("a", [(0, 2, MIB)])], session_id=0, epoch=0, max_wait_ms=60_000),
        SESSION,
    )
    with trio.move_on_after(0.05):
        assert inspect.isawaitable(held_full)
        await held_full
    assert len(b.fetch_sessions[0]) == 1, "a full fetch that was never answered opens none"


async def test_a_held_fetch_overtaken_by_the_next_of_its_session_is_refused() -> None:
    """Kafka takes it for a duplicate: answered INVALID_FETCH_SESSION_EPOCH with the id."""
    b = broker_with(("a", 2))
    consumer = Consumer(b, 16)
    consumer.fetch([("a", [(0, 2, MIB)])])
    first = dispatch_of(b).answer(consumer.request(max_wait_ms=200), SESSION)
    assert inspect.isawaitable(first)
    consumer.fetch(epoch=consumer.epoch + 1)
    with trio.fail_after(CEILING_S):
        _, response = decode_response(ApiKey.FETCH, 16, answered(await first))
    assert response.error_code is ErrorCode.invalid_fetch_session_epoch
    assert response.session_id == consumer.session_id


def test_a_full_cache_answers_session_id_zero() -> None:
    b = broker_with(("a", 2), fetch_session_cache_slots=2)
    ids = [Consumer(b, 16).fetch([("a", [(0, 0, MIB)])]).session_id for _ in range(3)]
    assert ids[0] > 0 and ids[1] > 0 and ids[2] == 0
    assert b.stats.fetch_sessions_open == 2


def test_no_slots_no_sessions() -> None:
    b = broker_with(("a", 2), fetch_session_cache_slots=0)
    assert Consumer(b, 16).fetch([("a", [(0, 0, MIB)])]).session_id == 0


def test_sessions_are_per_node() -> None:
    b = broker_with(("a", 2), brokers=2)
    consumer = Consumer(b, 12)
    consumer.fetch([("a", [(0, 0, MIB)])])
    elsewhere = dataclasses.replace(SESSION, node_id=1)
    frame = consumer.request()
    _, response = decode_response(
        ApiKey.FETCH, 12, answered(dispatch_of(b).answer(frame, elsewhere))
    )
    assert response.error_code is ErrorCode.fetch_session_id_not_found


def test_eviction_takes_an_idle_session_or_a_smaller_old_one() -> None:
    stats = BrokerStats()
    cache = FetchSessionCache(2, stats)
    small = cache.open({("t", 0): _cached()}, False, 0)
    big = cache.open({("t", 0): _cached(), ("t", 1): _cached()}, False, 0)
    # Both young: neither may be evicted.
    assert cache.open({("t", 0): _cached()}, False, 1000) == 0
    # Old enough, used recently: only one smaller than the newcomer goes.
    later = EVICTION_MS + 10
    cache.touch(cache.get(small), later)  # type: ignore[arg-type]
    cache.touch(cache.get(big), later)  # type: ignore[arg-type]
    assert cache.open({("t", 0): _cached()}, False, later) == 0, "equal size never evicts"
    three = {("t", index): _cached() for index in range(3)}
    newcomer = cache.open(three, False, later)
    assert newcomer and cache.get(small) is None and cache.get(big) is not None
    # Idle long enough: the least recently used goes, whatever its size.
    assert cache.open({("t", 0): _cached()}, False, later + EVICTION_MS + 1)
    assert cache.get(big) is None
    assert stats.fetch_sessions["evicted"] == 2 and stats.fetch_sessions_open == 2


def _cached() -> Any:
    from nullbroker.state.fetch_sessions import CachedPartition

    return CachedPartition(0, 0, MIB, -1)


def test_session_metrics_are_exposed() -> None:
    from nullbroker.ops.metrics import exposition, make_registry

    b = broker_with(("a", 2))
    consumer = Consumer(b, 16)
    consumer.fetch([("a", [(0, 0, MIB)])])
    consumer.fetch()
    text = exposition(make_registry(b.stats)).decode()
    assert 'nullbroker_fetch_requests_total{kind="incremental"} 1.0' in text
    assert "nullbroker_fetch_sessions 1.0" in text
