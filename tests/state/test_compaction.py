"""Log compaction of a retained partition (nullbroker.state.compaction): what the ring must
let go of is cleaned first, keeping the latest record of each key at its offset, so reading
the partition from its start gives at least the latest value of every key, in offset order,
within --retain's bytes; keys beyond what fits are dropped, counted and said once."""

from __future__ import annotations

import datetime
import io

import pytest
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import i8, i16, i32, i64

from codec.record_batch import crc_matches, iter_batches, read_batch_header
from nullbroker.state.retained import RetainedBatches
from nullbroker.stats import PartitionCounters

TIMESTAMP = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def keyed_batch(*records: tuple[bytes | None, bytes | None]) -> bytes:
    """An uncompressed batch of (key, value) records (a None value: a tombstone)."""
    batch = NewRecordBatch(
        producer_id=i64(-1),
        producer_epoch=i16(-1),
        base_sequence=i32(-1),
        records=tuple(
            Record(
                attributes=i8(0),
                timestamp=TIMESTAMP,
                offset=i64(index),
                key=key,
                value=value,
                headers=(),
            )
            for index, (key, value) in enumerate(records)
        ),
        attributes=i16(0),
    )
    buffer = io.BytesIO()
    write_new_batch(buffer, batch)
    return buffer.getvalue()


def read_all(ring: RetainedBatches) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record held, from the start, as a consumer reads."""
    parts, count, _ = ring.read(0, 1 << 30, first=True)
    found = []
    for part in parts:
        data = bytes(part)
        for header in iter_batches(data):
            assert crc_matches(data, header), "a cleaned batch must stay valid"
        position = 0
        while position < len(data):
            batch, size = read_batch(memoryview(data), position)
            position += size
            found += [(record.offset, record.key, record.value) for record in batch.records]
    assert count == len(found), "a Fetch counts the records a cleaned batch holds"
    return found


def fill(ring: RetainedBatches, rounds: int, keys: int) -> dict[bytes, tuple[int, bytes]]:
    """Write every key `rounds` times, a batch of two records at a time; the latest
    (offset, value) of each key."""
    latest: dict[bytes, tuple[int, bytes]] = {}
    offset = 0
    for round_ in range(rounds):
        for first in range(0, keys, 2):
            pair = [(b"k%d" % k, b"v%d-%d" % (k, round_)) for k in (first, first + 1)]
            ring.append(offset, 2, keyed_batch(*pair))
            for index, (key, value) in enumerate(pair):
                latest[key] = (offset + index, value)
            offset += 2
    return latest


def test_reading_from_the_start_gives_the_latest_value_of_every_key() -> None:
    one_batch = len(keyed_batch((b"k0", b"v0-0"), (b"k1", b"v1-0")))
    ring = RetainedBatches(capacity=12 * one_batch, counters=PartitionCounters())
    ring.compact("changelog-0")
    latest = fill(ring, rounds=20, keys=10)  # 100 batches through a ring of 12
    read = read_all(ring)
    offsets = [offset for offset, _, _ in read]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    newest = {key: (offset, value) for offset, key, value in read}
    assert newest == latest  # every key, at its latest offset, with its latest value
    assert ring.counters.retained_bytes <= 12 * one_batch
    assert ring.counters.compaction_dropped == 0


def test_a_tombstone_is_kept_as_the_latest_record_of_its_key() -> None:
    ring = RetainedBatches(capacity=400, counters=PartitionCounters())
    ring.compact("t-0")
    fill(ring, rounds=3, keys=4)
    ring.append(24, 1, keyed_batch((b"k1", None)))
    fill_after = [(b"k%d" % k, b"later") for k in (2, 3)]
    for index in range(10):
        ring.append(25 + 2 * index, 2, keyed_batch(*fill_after))
    newest = {key: value for _, key, value in read_all(ring)}
    assert newest[b"k1"] is None and newest[b"k0"] == b"v0-2"


def test_keys_beyond_the_ring_are_dropped_counted_and_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    one_batch = len(keyed_batch((b"k0", b"v0-0"), (b"k1", b"v1-0")))
    ring = RetainedBatches(capacity=4 * one_batch, counters=PartitionCounters())
    ring.compact("wide-0")
    fill(ring, rounds=1, keys=40)  # 40 distinct keys, room for about 8
    assert ring.counters.compaction_dropped > 0
    assert ring.counters.retained_bytes <= 4 * one_batch
    said = [r for r in caplog.records if "need more than --retain" in r.getMessage()]
    assert len(said) == 1 and "wide-0" in said[0].getMessage()


def test_a_topic_that_does_not_compact_drops_whole_batches() -> None:
    one_batch = len(keyed_batch((b"k0", b"v0-0"), (b"k1", b"v1-0")))
    ring = RetainedBatches(capacity=4 * one_batch, counters=PartitionCounters())
    fill(ring, rounds=3, keys=10)
    read = read_all(ring)
    assert [offset for offset, _, _ in read] == list(range(30 - 8, 30))  # 4 batches of 2
    assert read_batch_header(bytes(ring.read(22, 1 << 20, True)[0][0])).record_count == 2
