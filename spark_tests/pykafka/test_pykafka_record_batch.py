"""How a task turns consumed messages into an Arrow batch of Spark's Kafka schema, checked on
confluent-kafka's own Message objects (its public constructor), without a broker: offsets
with and without gaps, both timestamp types, null keys and headers; and the collector pause."""

from __future__ import annotations

import gc
from datetime import UTC, datetime

from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Message

from nullbroker.spark.consumer import cyclic_gc_paused, to_record_batch
from nullbroker.spark.options import parse_read_options
from nullbroker.spark.schema import arrow_schema

TOPIC = "events"


def message(offset: int, ms: int, kind: int = TIMESTAMP_CREATE_TIME, **fields: object) -> Message:
    fields.setdefault("key", f"k{offset}".encode())
    fields.setdefault("value", f"v{offset}".encode())
    return Message(topic=TOPIC, partition=3, offset=offset, timestamp=(kind, ms), **fields)


def batch_of(messages: list[Message], include_headers: bool = False) -> list[dict[str, object]]:
    options = parse_read_options(
        {
            "kafka.bootstrap.servers": "127.0.0.1:1",
            "subscribe": TOPIC,
            "includeHeaders": str(include_headers).lower(),
        }
    )
    schema = arrow_schema(include_headers)
    batch = to_record_batch(messages, TOPIC, 3, schema, options)
    assert batch.schema == schema
    return batch.to_pylist()


def test_contiguous_offsets_become_one_row_each_with_every_field() -> None:
    rows = batch_of([message(10 + i, 1_700_000_000_000 + i) for i in range(3)])

    assert [row["offset"] for row in rows] == [10, 11, 12]
    assert rows[1] == {
        "key": b"k11",
        "value": b"v11",
        "topic": TOPIC,
        "partition": 3,
        "offset": 11,
        "timestamp": datetime.fromtimestamp(1_700_000_000.001, UTC),
        "timestampType": 0,
    }


def test_offsets_with_gaps_keep_each_messages_own_offset() -> None:
    """Compacted topics and transaction markers leave gaps a range must not paper over."""
    rows = batch_of([message(offset, 5) for offset in (4, 7, 8, 20)])

    assert [row["offset"] for row in rows] == [4, 7, 8, 20]
    assert [row["value"] for row in rows] == [b"v4", b"v7", b"v8", b"v20"]


def test_log_append_time_is_type_one_as_in_kafkas_java_client() -> None:
    rows = batch_of([message(0, 1_000, TIMESTAMP_LOG_APPEND_TIME), message(1, 2_000)])

    assert [row["timestampType"] for row in rows] == [1, 0]
    assert [row["timestamp"] for row in rows] == [
        datetime.fromtimestamp(1, UTC),
        datetime.fromtimestamp(2, UTC),
    ]


def test_null_keys_and_values_stay_null() -> None:
    rows = batch_of([message(0, 1, key=None), message(1, 1, value=None)])

    assert (rows[0]["key"], rows[0]["value"]) == (None, b"v0")
    assert (rows[1]["key"], rows[1]["value"]) == (b"k1", None)


def test_headers_come_as_key_value_structs_when_asked_for() -> None:
    rows = batch_of(
        [message(0, 1, headers=[("trace", b"abc"), ("empty", None)]), message(1, 1)],
        include_headers=True,
    )

    assert rows[0]["headers"] == [
        {"key": "trace", "value": b"abc"},
        {"key": "empty", "value": None},
    ]
    assert rows[1]["headers"] is None


def test_the_collector_is_paused_only_inside_the_block_and_left_as_it_was() -> None:
    assert gc.isenabled()
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()

    gc.disable()
    try:
        with cyclic_gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled(), "a caller's own gc.disable() is kept"
    finally:
        gc.enable()
